//! The validated, immutable configuration. Every value here has passed `validate`.
//!
//! One file per section of `gateway.yaml`, every item re-exported here (and from
//! `crate::config`).

pub use super::source::ConfigSource;
use std::collections::BTreeMap;
use std::net::SocketAddr;

mod admin;
mod common;
mod cost;
mod counting;
mod decision;
mod edge;
mod identity;
mod limits;
mod listen;
mod multi_region;
mod observability;
mod redis;
mod reload;
mod response;
mod routes;
mod server;
mod store;
mod tenants;
mod tiers;
mod upstreams;

pub use admin::*;
pub use common::*;
pub use cost::*;
pub use counting::*;
pub use decision::*;
pub use edge::*;
pub use identity::*;
pub use limits::*;
pub use listen::*;
pub use multi_region::*;
pub use observability::*;
pub use redis::*;
pub use reload::*;
pub use response::*;
pub use routes::*;
pub use server::*;
pub use store::*;
pub use tenants::*;
pub use tiers::*;
pub use upstreams::*;

/// A validated `gateway.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Proxy listeners (addresses, TLS and h2 need a restart to change; certificate files are
    /// re-read on reload).
    pub listen: Vec<ListenSettings>,
    /// Admin listener (`/metrics`, `/healthz`, `/readyz`); `None` disables it.
    pub admin_listen: Option<SocketAddr>,
    /// `admin.token_env`: the environment variable holding the admin API's Bearer token
    /// (`/v1/*`; read at every load, see `crate::identity::admin_token`). `None`: the API is off.
    pub admin_token_env: Option<String>,
    /// Every admin token (`admin.token_env` first, as a `write` token, then `admin.tokens`).
    pub admin_tokens: Vec<AdminTokenSettings>,
    /// The file this config was loaded from (hash, time), for `GET /v1/config`.
    pub source: ConfigSource,
    /// Durations written under their old names (`timeout_ms: 300`), each with the unit form to
    /// write instead: `tollgate check` warnings ([`crate::config::warnings`]).
    pub old_spellings: Vec<super::ConfigError>,
    pub server: ServerSettings,
    pub redis: Option<RedisSettings>,
    pub edge: Option<EdgeSettings>,
    pub identity: IdentitySettings,
    /// Tiers by name.
    pub tiers: BTreeMap<String, Tier>,
    /// Limit rules keyed by request attributes, in file order (`limits:`).
    pub limits: Vec<LimitRule>,
    /// Per-tenant overrides by tenant id.
    pub tenants: BTreeMap<String, TenantOverride>,
    /// Upstreams by name.
    pub upstreams: BTreeMap<String, UpstreamSettings>,
    /// Routes in file order (matching picks the most specific host, then longest prefix).
    pub routes: Vec<RouteSettings>,
    pub response: ResponseSettings,
    pub observability: ObservabilitySettings,
    /// `multi_region:` (none: this instance enforces whole limits).
    pub multi_region: Option<MultiRegionSettings>,
    /// `reload:` (file watch; SIGHUP always reloads).
    pub reload: ReloadSettings,
    /// `decision:`: the rate limit service for other proxies (none: off).
    pub decision: DecisionSettings,
    /// `store:`: live keys through the admin API; `None` when absent.
    pub store: Option<StoreSettings>,
}

impl Config {
    /// The prefix length IPv6 clients are aggregated to, at the edge and for anonymous tenants.
    pub fn ipv6_prefix(&self) -> u8 {
        self.edge
            .as_ref()
            .map_or(DEFAULT_IPV6_PREFIX, |e| e.ipv6_prefix)
    }
}
