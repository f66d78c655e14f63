//! The validated, immutable configuration. Every value here has passed `validate`.

pub use super::source::ConfigSource;
use crate::limit::algorithm::Algorithm;
use crate::limit::calendar::CalendarQuota;
use crate::limit::Rate;
use ipnet::IpNet;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

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
    /// The file this config was loaded from (hash, time), for `GET /v1/config`.
    pub source: ConfigSource,
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
    /// `multi_region:` (none: this instance enforces whole limits).
    pub multi_region: Option<MultiRegionSettings>,
}

/// One entry of `listen:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenSettings {
    pub addr: SocketAddr,
    /// TLS termination; `None` = plain TCP.
    pub tls: Option<ListenTls>,
    /// HTTP/2: via ALPN on TLS listeners, prior-knowledge h2c on plain ones.
    pub h2: bool,
}

impl ListenSettings {
    /// A plain HTTP/1.1 listener on `addr`.
    pub fn plain(addr: SocketAddr) -> Self {
        ListenSettings {
            addr,
            tls: None,
            h2: false,
        }
    }

    /// True when both open the same kind of socket (address, TLS or not, h2, client CA): what
    /// a reload cannot change. Certificate files are not part of it.
    pub fn same_socket(&self, other: &ListenSettings) -> bool {
        let ca = |l: &ListenSettings| l.tls.as_ref().map(|t| t.client_ca_file.clone());
        self.addr == other.addr && self.h2 == other.h2 && ca(self) == ca(other)
    }
}

/// `listen[i].tls`: server certificates (the first is the default when SNI matches none) and
/// optional client certificate verification.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenTls {
    /// `cert_file`/`key_file` first (when given), then `certs:` in order.
    pub certs: Vec<CertFiles>,
    /// PEM CA bundle; when set, every client must present a certificate it signed (mTLS).
    pub client_ca_file: Option<String>,
}

/// A PEM certificate chain (leaf first) and its PEM private key.
#[derive(Debug, Clone, PartialEq)]
pub struct CertFiles {
    pub cert_file: String,
    pub key_file: String,
}

/// `upstreams.<name>.tls`: HTTPS to the backends.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTls {
    /// Server name sent (SNI) and verified; default: the host of the first backend as written.
    pub sni: String,
    /// PEM CA bundle to verify the backends with; `None` = the system trust store.
    pub ca_file: Option<String>,
    /// Verify the backend certificate (chain and name). Default true.
    pub verify: bool,
}

/// `identity.mtls`: where the tenant of a verified client certificate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MtlsTenantFrom {
    /// The certificate subject's common name (CN).
    SubjectCn,
}

/// Default of `server.work_stealing`, picked by measurement (README "Performance work").
pub const DEFAULT_WORK_STEALING: bool = true;

/// Process-level settings (`server:`); changing them needs a restart.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    /// Worker threads of the proxy service.
    pub threads: usize,
    /// Tokio runtime of the worker threads (Pingora `ServerConf.work_stealing`): `true` is one
    /// work-stealing runtime for all threads, `false` one single-threaded runtime per thread
    /// (no cross-thread task migration). Default [`DEFAULT_WORK_STEALING`]; restart only.
    pub work_stealing: bool,
    /// Seconds to keep serving in-flight requests after SIGTERM.
    pub grace_period_s: u64,
    /// Seconds allowed for runtimes to stop after the grace period.
    pub graceful_shutdown_timeout_s: u64,
    /// Unix socket path used to hand listeners to a new binary (`--upgrade`).
    pub upgrade_sock: String,
    /// Pid file path.
    pub pid_file: String,
    /// HTTP/1 limits enforced before a request reaches the stages (`crate::http`).
    pub http: HttpLimits,
}

/// `server.max_header_bytes` and friends (docs/DESIGN.md 4b); defaults in the style of nginx.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpLimits {
    /// Bytes of the whole request head (request line and header fields); 431 beyond
    /// (414 when the request line alone is longer). Default 65536, at most 524288.
    pub max_header_bytes: usize,
    /// Number of header fields; 431 beyond. Default 100, at most 256 (Pingora's own cap).
    pub max_headers: usize,
    /// Time allowed to receive a whole request head: from accept on a new connection, from the
    /// first byte on a reused one. Beyond it: 408 (when bytes arrived) and the connection closes.
    /// Default 10 s.
    pub header_read_timeout: Duration,
    /// How long an idle keep-alive connection waits for its next request. Default 60 s.
    pub keepalive_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_header_bytes: 65_536,
            max_headers: 100,
            header_read_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(60),
        }
    }
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

/// Whether a limit is enforced or only watched (`mode`, docs/DESIGN.md 4c "Shadow").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Refusals are answered (default).
    #[default]
    Enforce,
    /// The decision is taken, debited, counted (`outcome="shadow_limited"`) and logged, its
    /// headers are sent, and the request goes on as if admitted.
    Shadow,
}

impl Mode {
    /// `enforce` or `shadow`, as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Shadow => "shadow",
        }
    }

    /// True for [`Mode::Shadow`].
    pub fn is_shadow(self) -> bool {
        self == Mode::Shadow
    }
}

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

impl Config {
    /// The prefix length IPv6 clients are aggregated to, at the edge and for anonymous tenants.
    pub fn ipv6_prefix(&self) -> u8 {
        self.edge
            .as_ref()
            .map_or(DEFAULT_IPV6_PREFIX, |e| e.ipv6_prefix)
    }
}

/// `identity:`.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentitySettings {
    pub jwt: Option<JwtSettings>,
    pub api_keys: Option<ApiKeySettings>,
    pub default_tier: Option<String>,
    /// Header that carries the tenant id to the backend (a valid name, lower case).
    pub tenant_header: http::HeaderName,
    /// Header that carries the tier name to the backend (a valid name, lower case).
    pub tier_header: http::HeaderName,
    /// Pass the credential that identified the request (`Authorization` / API key header) on to
    /// the backend. Default false: the backend gets the tenant and tier headers instead.
    pub forward_credentials: bool,
    /// `identity.mtls`: a verified client certificate identifies the tenant.
    pub mtls: Option<MtlsTenantFrom>,
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
    /// At least one key; kids are unique.
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
    /// Header the key is read from (a valid name, lower case).
    pub header: http::HeaderName,
    /// At least one key; digests are unique.
    pub keys: Vec<ApiKeyEntry>,
}

/// One API key, stored only as the SHA-256 digest of the key.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyEntry {
    /// SHA-256 of the key (written in YAML as 64 hex digits).
    pub sha256: [u8; 32],
    pub tenant: String,
    pub tier: Option<String>,
}

/// A tier: the size of every tenant bucket in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tier {
    pub name: String,
    pub rate: Rate,
    pub on_failure: FailurePolicy,
    /// Algorithm, shaping and calendar quotas (docs/DESIGN.md 4c "Policies").
    pub policy: TierPolicy,
    /// Share at fair upstream queues (`weight`, 1..=1000, default 1).
    pub weight: u32,
    /// Burst pool shared by the tier's tenants (`pool`), consulted when a tenant's bucket refuses.
    pub pool: Option<PoolSettings>,
    /// `tiers.<name>.mode`: shadow counts and logs refusals without enforcing them. Not part of
    /// any bucket key or script argument, so a reload switches it without touching state.
    pub mode: Mode,
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

/// How a tier decides: its main limit's algorithm and the calendar quotas decided with it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TierPolicy {
    pub algorithm: Algorithm,
    /// `leaky_bucket` only: longest delay until a request's slot, ms (0 = refuse instead).
    pub max_delay_ms: u64,
    /// Calendar quotas, in file order, at most one per period.
    pub quotas: Vec<CalendarQuota>,
    /// Opt-in token leasing (`lease`; token_bucket tiers without quotas only).
    pub lease: Option<LeaseSettings>,
}

/// `tiers.<name>.lease`: an instance takes up to `tokens` from the tenant's bucket in one
/// script call and admits locally from them for at most `max_hold_ms` (docs/DESIGN.md 4c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSettings {
    /// Tokens taken per lease call (1..=the tier's burst).
    pub tokens: u64,
    /// How long a lease may be used, ms (1 ms..=1 min); unused tokens then go back.
    pub max_hold_ms: u64,
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
    /// HTTPS to the backends; `None` = plain HTTP.
    pub tls: Option<UpstreamTls>,
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
    /// Largest request body in bytes (413 beyond); `None` = unlimited.
    pub max_body_bytes: Option<u64>,
    /// `routes[].mode`: shadow makes every limit layer shadow for this route (edge, tenant,
    /// upstream slot); identity failures stay enforced.
    pub mode: Mode,
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

/// `multi_region.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionMode {
    /// Every limit and burst is cut to `shares[region] / Σ shares`.
    Static,
    /// Each active tenant's budget is re-divided every `sync_interval` by recent demand.
    Sync,
}

/// `multi_region:`: this region's part of every tenant's budget (docs/DESIGN.md 4b/4c).
#[derive(Debug, Clone, PartialEq)]
pub struct MultiRegionSettings {
    /// This instance's region (a key of `shares`).
    pub region: String,
    /// Weight of every region (all > 0), by name.
    pub shares: BTreeMap<String, u64>,
    pub mode: RegionMode,
    /// Sync mode: the Redis where regions exchange usage (`redis://` or `rediss://`).
    pub global_url: Option<String>,
    /// Sync mode: time between two exchanges (default 1 s).
    pub sync_interval: Duration,
}
