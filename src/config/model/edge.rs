//! `edge:`: the per-client-IP limiter.

use super::common::Mode;
use crate::limit::algorithm::Algorithm;
use crate::limit::Rate;
use ipnet::IpNet;

/// `edge:`: the per-client-IP in-memory limiter.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeSettings {
    pub rate: Rate,
    /// `token_bucket` (default) or `gcra`.
    pub algorithm: Algorithm,
    pub trusted_proxies: Vec<IpNet>,
    /// IPv6 clients are aggregated to this prefix length (bits, 1..=128, default
    /// [`DEFAULT_IPV6_PREFIX`]).
    pub ipv6_prefix: u8,
    pub exempt: Vec<IpNet>,
    /// Bound on tracked client keys (LRU eviction beyond it).
    pub max_clients: usize,
    /// `edge.mode`: shadow counts and logs refusals without enforcing them.
    pub mode: Mode,
}

/// IPv6 prefix length (bits) that identifies one client when `edge.ipv6_prefix` is not set
/// (or there is no `edge:`): a /64 is what one site usually gets.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;
