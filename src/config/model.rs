//! The validated, immutable configuration. Every value here has passed `validate`.

use crate::limit::Rate;
use ipnet::IpNet;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// A validated `gateway.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Proxy listen addresses (needs restart to change).
    pub listen: Vec<SocketAddr>,
    /// Admin listener (`/metrics`, `/healthz`, `/readyz`); `None` disables it.
    pub admin_listen: Option<SocketAddr>,
    pub server: ServerSettings,
    pub redis: Option<RedisSettings>,
    pub edge: Option<EdgeSettings>,
    pub identity: IdentitySettings,
    /// Tiers by name.
    pub tiers: BTreeMap<String, Tier>,
    /// Per-tenant overrides by tenant id.
    pub tenants: BTreeMap<String, TenantOverride>,
    /// Upstreams by name.
    pub upstreams: BTreeMap<String, UpstreamSettings>,
    /// Routes in file order (matching picks the most specific host, then longest prefix).
    pub routes: Vec<RouteSettings>,
    pub response: ResponseSettings,
    pub observability: ObservabilitySettings,
}

/// Process-level settings (`server:`); changing them needs a restart.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    /// Worker threads of the proxy service.
    pub threads: usize,
    /// Seconds to keep serving in-flight requests after SIGTERM.
    pub grace_period_s: u64,
    /// Seconds allowed for runtimes to stop after the grace period.
    pub graceful_shutdown_timeout_s: u64,
    /// Unix socket path used to hand listeners to a new binary (`--upgrade`).
    pub upgrade_sock: String,
    /// Pid file path.
    pub pid_file: String,
}

/// What the tenant stage does when Redis cannot decide (docs/DESIGN.md section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Admit, with no quota headers.
    Open,
    /// 503 `temporary-reduced-capacity` with Retry-After.
    Closed,
    /// Decide with an in-memory bucket sized `1 / fleet_size` of the tier.
    Local,
}

impl FailurePolicy {
    /// The name as written in YAML and used as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Open => "open",
            FailurePolicy::Closed => "closed",
            FailurePolicy::Local => "local",
        }
    }
}

/// `redis:`: the shared store of tenant buckets.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisSettings {
    pub url: String,
    pub key_prefix: String,
    /// Bound on every Redis call, connection establishment included.
    pub timeout: Duration,
    pub breaker: BreakerSettings,
    pub on_failure: FailurePolicy,
    /// Number of gateway instances sharing the limits (sizes the local fallback).
    pub fleet_size: u64,
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

/// `edge:`: the per-client-IP in-memory limiter.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeSettings {
    pub rate: Rate,
    pub trusted_proxies: Vec<IpNet>,
    /// IPv6 clients are aggregated to this prefix length (bits).
    pub ipv6_prefix: u8,
    pub exempt: Vec<IpNet>,
    /// Bound on tracked client keys (LRU eviction beyond it).
    pub max_clients: usize,
}

/// `identity:`.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentitySettings {
    pub jwt: Option<JwtSettings>,
    pub api_keys: Option<ApiKeySettings>,
    pub default_tier: Option<String>,
    /// Header that carries the tenant id to the backend.
    pub tenant_header: String,
    /// Header that carries the tier name to the backend.
    pub tier_header: String,
    /// Pass the credential that identified the request (`Authorization` / API key header) on to
    /// the backend. Default false: the backend gets the tenant and tier headers instead.
    pub forward_credentials: bool,
}

/// `identity.jwt`.
#[derive(Debug, Clone, PartialEq)]
pub struct JwtSettings {
    pub issuer: Option<String>,
    pub audience: Option<String>,
    /// Clock leeway for `exp` and `nbf`, seconds.
    pub leeway_s: u64,
    pub tenant_claim: String,
    pub tier_claim: Option<String>,
    pub keys: Vec<JwtKeySettings>,
}

/// Where a JWT verification key comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySource {
    /// HMAC secret read from this environment variable.
    SecretEnv(String),
    /// HMAC secret read from this file (trailing newline trimmed).
    SecretFile(String),
    /// PEM public key file (RSA, EC or Ed25519).
    PublicKeyFile(String),
}

/// One configured JWT key, pinned to one algorithm.
#[derive(Debug, Clone, PartialEq)]
pub struct JwtKeySettings {
    pub kid: Option<String>,
    pub algorithm: jsonwebtoken::Algorithm,
    pub source: KeySource,
}

/// `identity.api_keys`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeySettings {
    /// Header name, lower case.
    pub header: String,
    pub keys: Vec<ApiKeyEntry>,
}

/// One API key, stored only as the SHA-256 digest of the key.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyEntry {
    /// Lower-case hex SHA-256 of the key.
    pub sha256: String,
    pub tenant: String,
    pub tier: Option<String>,
}

/// A tier: the size of every tenant bucket in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tier {
    pub name: String,
    pub rate: Rate,
    pub on_failure: FailurePolicy,
    /// Share at fair upstream queues (`weight`, 1..=1000, default 1).
    pub weight: u32,
    /// Burst pool shared by the tier's tenants (`pool`), consulted when a tenant's bucket refuses.
    pub pool: Option<PoolSettings>,
}

/// `tiers.<name>.pool`: a token bucket shared by all tenants of a tier.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSettings {
    /// The pool bucket (`limit`, `per`, `burst`; burst defaults to limit).
    pub rate: Rate,
    /// Fraction of the pool one tenant may drain (0 < s ≤ 1, default 0.5): the tenant's share
    /// bucket is `max_share` × the pool's limit and burst.
    pub max_share: f64,
}

/// Per-tenant override of tier and bucket size.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantOverride {
    pub tier: Option<String>,
    pub limit: Option<u64>,
    pub per_ms: Option<u64>,
    pub burst: Option<u64>,
}

impl TenantOverride {
    /// `base` (a tier's rate) with this override's fields applied field by field: the tenant's
    /// effective rate. Validation checks it for every tier; the snapshot uses it per request.
    pub fn merged(&self, base: Rate) -> Rate {
        Rate {
            limit: self.limit.unwrap_or(base.limit),
            per_ms: self.per_ms.unwrap_or(base.per_ms),
            burst: self.burst.unwrap_or(base.burst),
        }
    }
}

/// `upstreams.<name>`.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamSettings {
    pub name: String,
    /// Backend addresses, resolved at load time.
    pub backends: Vec<SocketAddr>,
    /// Max requests in flight to this upstream per instance; `None` = unlimited.
    pub max_concurrency: Option<u32>,
    /// Max requests in flight to this upstream per tenant per instance; `None` = no cap.
    pub max_concurrency_per_tenant: Option<u32>,
    pub queue: Option<QueueSettings>,
    /// Retry-After (seconds) on a concurrency rejection.
    pub retry_after_s: u64,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub health_check: Option<HealthCheckSettings>,
}

/// Bounded wait for a concurrency slot.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSettings {
    /// Waiters in total.
    pub max: u32,
    pub timeout: Duration,
    /// Weighted fair queuing across tenants (`fair: true`) instead of arrival order.
    pub fair: bool,
    /// Waiters of one tenant (`max_per_tenant`, default `max`).
    pub max_per_tenant: u32,
}

/// Active HTTP health check of each backend.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheckSettings {
    pub path: String,
    pub interval: Duration,
}

/// How a route matches the host.
#[derive(Debug, Clone, PartialEq)]
pub enum HostMatch {
    Any,
    /// Exact host, lower case, without port.
    Exact(String),
    /// `*.example.com` stored as `.example.com`.
    Suffix(String),
}

/// Route authentication mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Identity required: anonymous requests are 401.
    Required,
    /// Identity used when present, anonymous otherwise.
    Optional,
    /// Credentials are ignored; every request is anonymous.
    None,
}

/// One entry of `routes:`.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSettings {
    /// Stable label for metrics and logs: `routes[<index>]`.
    pub id: String,
    pub host: HostMatch,
    pub path_prefix: String,
    pub upstream: String,
    pub auth: AuthMode,
    /// Tokens one request costs.
    pub cost: u64,
}

/// Which rate-limit header families to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderMode {
    Ietf,
    Legacy,
    Both,
    None,
}

/// `response:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseSettings {
    /// Status of a tenant-quota or edge rejection (default 429).
    pub status: u16,
    pub headers: HeaderMode,
}

/// `observability:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservabilitySettings {
    pub access_log: bool,
    pub json_logs: bool,
    /// Opt-in bound on per-tenant metric series (0 = off).
    pub tenant_metrics: usize,
}
