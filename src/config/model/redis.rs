//! `redis:`: where the shared store is and how it is guarded.

use super::common::FailurePolicy;
use std::time::Duration;

/// How tollgate finds its Redis (`redis.mode`).
#[derive(Debug, Clone, PartialEq)]
pub enum RedisTopology {
    /// One Redis at `redis.url`.
    Standalone,
    /// Redis Cluster; `redis.urls` are the seed nodes.
    Cluster,
    /// Redis behind Sentinel; `redis.urls` are the sentinels, `master` the monitored name.
    Sentinel {
        master: String,
        /// Environment variables holding the sentinels' own ACL credentials (if any).
        username_env: Option<String>,
        password_env: Option<String>,
    },
}

impl RedisTopology {
    /// The name as written in `redis.mode`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RedisTopology::Standalone => "standalone",
            RedisTopology::Cluster => "cluster",
            RedisTopology::Sentinel { .. } => "sentinel",
        }
    }
}

/// `redis:`: the shared store of tenant buckets.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisSettings {
    pub mode: RedisTopology,
    /// Standalone: the one URL. Cluster / sentinel: the first of `urls` (a label for logs).
    pub url: String,
    /// Cluster seeds or sentinel addresses (standalone: `[url]`).
    pub urls: Vec<String>,
    /// Environment variable holding the ACL username of the data nodes (none: default user).
    pub username_env: Option<String>,
    /// Environment variable holding the password of the data nodes.
    pub password_env: Option<String>,
    /// PEM CA bundle trusted for `rediss://` (none: the system roots).
    pub tls_ca_file: Option<String>,
    pub key_prefix: String,
    /// Bound on every Redis call, connection establishment included.
    pub timeout: Duration,
    pub breaker: BreakerSettings,
    pub on_failure: FailurePolicy,
    /// Number of gateway instances sharing the limits (sizes the local fallback). With
    /// `fleet_auto` it is only the size assumed until the first heartbeat answers (1).
    pub fleet_size: u64,
    /// `fleet_size: auto`: learn the live fleet size from heartbeats in Redis.
    pub fleet_auto: bool,
    /// `lease_ttl`: how long a fleet-wide concurrency lease lives unless renewed (default 30 s).
    pub lease_ttl: Duration,
}

/// Circuit breaker around Redis.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerSettings {
    /// Opens when failures / calls in the window exceed this ratio (0 < r ≤ 1).
    pub failure_ratio: f64,
    /// Minimum calls in the window before the ratio is considered.
    pub min_calls: u64,
    /// Sliding window length.
    pub window: Duration,
    /// How long the breaker stays open before half-open probes.
    pub break_duration: Duration,
    /// Number of successful probes needed to close again.
    pub probes: u64,
}
