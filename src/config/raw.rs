//! The YAML file as written by the operator: serde structs with no semantic checks.
//!
//! Unknown keys are rejected (`deny_unknown_fields`). Numbers that must be positive are read as
//! signed integers so that validation can name the field and say why a value is wrong.
//! Field names are the contract of `docs/DESIGN.md` section 4.

use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The whole `gateway.yaml` (docs/DESIGN.md section 4). Only `listen`, `upstreams` and `routes` are
/// required.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub listen: Vec<RawListen>,
    pub admin: Option<RawAdmin>,
    pub server: Option<RawServer>,
    pub redis: Option<RawRedis>,
    pub edge: Option<RawEdge>,
    pub identity: Option<RawIdentity>,
    pub tiers: Option<BTreeMap<String, RawTier>>,
    pub limits: Option<Vec<RawLimitRule>>,
    pub tenants: Option<BTreeMap<String, RawTenant>>,
    pub upstreams: BTreeMap<String, RawUpstream>,
    pub routes: Vec<RawRoute>,
    pub response: Option<RawResponse>,
    pub observability: Option<RawObservability>,
    pub multi_region: Option<RawMultiRegion>,
    pub reload: Option<RawReload>,
    pub decision: Option<RawDecision>,
    pub store: Option<RawStore>,
}

/// `decision:`: the limiter as a service for other proxies (docs/decision-service.md).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDecision {
    /// Envoy's rate limit service (`envoy.service.ratelimit.v3.RateLimitService`) over gRPC.
    pub grpc: Option<RawDecisionGrpc>,
    /// `POST /v1/check` and `POST /v1/report` for callers that are not proxies (HTTP/1.1, JSON).
    pub http: Option<RawDecisionHttp>,
}

/// `decision.http`: where the JSON decision API listens and the variable holding its token.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDecisionHttp {
    /// `"ip:port"` (restart to change).
    pub listen: String,
    /// The environment variable holding the Bearer token every call must carry (read at each
    /// load and reload; unset or empty: every call is answered 404).
    pub token_env: String,
}

/// `decision.grpc`: where the rate limit service listens (plaintext h2) and what it answers when
/// Redis cannot decide.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDecisionGrpc {
    /// `"ip:port"` (restart to change).
    pub listen: String,
    /// `rules` (default): each rule's `on_failure` decides; `unavailable`: the call is answered
    /// gRPC UNAVAILABLE, so that the caller's own failure mode (Envoy's `failure_mode_deny`)
    /// decides.
    #[schemars(extend("enum" = ["rules", "unavailable"]))]
    pub on_failure: Option<String>,
}

/// One `listen` entry: a plain `"ip:port"` string, or `{ addr, tls, h2 }` (docs/DESIGN.md 4b).
/// A map is kept as YAML and decoded into [`RawListenFull`] during validation, so that a mistake
/// inside it is reported with its index (`listen[1].tls: unknown field ...`) instead of serde's
/// "did not match any variant".
#[derive(Debug)]
pub enum RawListen {
    Addr(String),
    Full(serde_yaml::Value),
}

/// Schema: a string, or the [`RawListenFull`] map.
impl JsonSchema for RawListen {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RawListen".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let full = generator.subschema_for::<RawListenFull>();
        schemars::json_schema!({
            "description": "\"ip:port\", or { addr, tls, h2 }",
            "oneOf": [{ "type": "string" }, full]
        })
    }
}

impl<'de> Deserialize<'de> for RawListen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_yaml::Value::deserialize(d)? {
            serde_yaml::Value::String(s) => Ok(RawListen::Addr(s)),
            v @ serde_yaml::Value::Mapping(_) => Ok(RawListen::Full(v)),
            _ => Err(serde::de::Error::custom(
                "expected \"ip:port\" or { addr, tls, h2 }",
            )),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawListenFull {
    pub addr: String,
    /// Decoded into [`RawListenTls`] during validation (for error paths, see [`RawListen`]).
    #[schemars(with = "Option<RawListenTls>")]
    pub tls: Option<serde_yaml::Value>,
    pub h2: Option<bool>,
}

/// `listen[].tls`: one certificate (`cert_file` + `key_file`) or several chosen by SNI (`certs`);
/// `client_ca_file` makes client certificates mandatory (mTLS).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawListenTls {
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub certs: Option<Vec<RawCertPair>>,
    pub client_ca_file: Option<String>,
}

/// One certificate chain and its private key (PEM files).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCertPair {
    pub cert_file: String,
    pub key_file: String,
}

/// `admin`: the listener of /metrics, /healthz and /readyz.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub listen: String,
    /// A `write` token's variable (kept beside `tokens`).
    pub token_env: Option<String>,
    /// Scoped tokens: `[{ token_env: VAR, scope: read|write, name: ... }]`.
    pub tokens: Option<Vec<RawAdminToken>>,
}

/// One scoped admin token (`admin.tokens[]`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAdminToken {
    /// The environment variable holding the token.
    pub token_env: String,
    /// `read` (GET and explain only) or `write`.
    pub scope: RawAdminScope,
    /// The name the audit log shows (default: the variable's name).
    pub name: Option<String>,
}

/// An admin token's scope.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RawAdminScope {
    Read,
    Write,
}

/// `server`: process and HTTP limits (restart-only except the HTTP limits).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    #[schemars(range(min = 1))]
    pub threads: Option<i64>,
    pub work_stealing: Option<bool>,
    /// How long in-flight requests may finish after a shutdown signal (default 10s).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub grace_period: Option<String>,
    /// Old spelling of `grace_period`, in seconds.
    #[schemars(range(min = 1))]
    pub grace_period_s: Option<i64>,
    /// Pingora's final shutdown timeout (default 5s).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub graceful_shutdown_timeout: Option<String>,
    /// Old spelling of `graceful_shutdown_timeout`, in seconds.
    #[schemars(range(min = 1))]
    pub graceful_shutdown_timeout_s: Option<i64>,
    pub upgrade_sock: Option<String>,
    pub pid_file: Option<String>,
    #[schemars(range(min = 1))]
    pub max_header_bytes: Option<i64>,
    #[schemars(range(min = 1))]
    pub max_headers: Option<i64>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub header_read_timeout: Option<String>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub keepalive_timeout: Option<String>,
    #[schemars(range(min = 0, max = 65536))]
    pub body_buffer_bytes: Option<i64>,
    #[schemars(range(min = 1))]
    pub body_buffer_total_bytes: Option<i64>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub body_idle_timeout: Option<String>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub body_read_timeout: Option<String>,
    #[schemars(range(min = 1))]
    pub max_connections: Option<i64>,
    #[schemars(range(min = 0))]
    pub max_connections_per_client: Option<i64>,
    /// Keep header names' case on their way through (default false: lower case, as Envoy).
    pub preserve_header_case: Option<bool>,
}

/// `redis`: the shared store of the tenant buckets and the failure policy when it is slow or down.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRedis {
    #[schemars(extend("enum" = ["standalone", "cluster", "sentinel"]))]
    pub mode: Option<String>,
    pub url: Option<String>,
    pub urls: Option<Vec<String>>,
    pub sentinel: Option<RawSentinel>,
    pub username_env: Option<String>,
    pub password_env: Option<String>,
    pub tls: Option<RawRedisTls>,
    pub key_prefix: Option<String>,
    /// Bound on every Redis call of a decision (default 50ms, at most 60s).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub timeout: Option<String>,
    /// Old spelling of `timeout`, in milliseconds.
    #[schemars(range(min = 1, max = 60000))]
    pub timeout_ms: Option<i64>,
    pub circuit_breaker: Option<RawBreaker>,
    #[schemars(extend("enum" = ["open", "closed", "local"]))]
    pub on_failure: Option<String>,
    pub fleet_size: Option<RawFleetSize>,
    /// Fleet-wide concurrency leases (`max_in_flight`) expire this long after they were taken
    /// or last renewed (default 30s, 1s..=1h).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub lease_ttl: Option<String>,
}

/// `redis.fleet_size`: a number, or `auto`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawFleetSize {
    Number(i64),
    Word(String),
}

/// `redis.sentinel`: the monitored master's name and the sentinels' own credentials.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSentinel {
    pub master: String,
    pub username_env: Option<String>,
    pub password_env: Option<String>,
}

/// `redis.tls`: the CA that signs the Redis servers' certificates (with rediss:// URLs).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRedisTls {
    pub ca_file: Option<String>,
}

/// `redis.circuit_breaker`: opens when the failure ratio over `window_s` reaches `failure_ratio`
/// (at least `min_calls`), stays open `break_s` seconds, then lets `probes` calls through.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    #[schemars(range(min = 0.0, max = 1.0))]
    pub failure_ratio: Option<f64>,
    #[schemars(range(min = 1))]
    pub min_calls: Option<i64>,
    /// The sliding window failures are counted in (default 10s; whole seconds).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub window: Option<String>,
    /// Old spelling of `window`, in seconds.
    #[schemars(range(min = 1))]
    pub window_s: Option<i64>,
    /// How long the breaker stays open (default 5s; whole seconds).
    #[serde(rename = "break")]
    #[schemars(rename = "break", regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub break_for: Option<String>,
    /// Old spelling of `break`, in seconds.
    #[schemars(range(min = 1))]
    pub break_s: Option<i64>,
    #[schemars(range(min = 1))]
    pub probes: Option<i64>,
}

/// `edge`: the per-client-IP limiter in memory, before authentication (rate: `limit` per `per`,
/// `burst` tokens).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawEdge {
    #[schemars(range(min = 1))]
    pub limit: i64,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub per: String,
    #[schemars(range(min = 1))]
    pub burst: Option<i64>,
    pub trusted_proxies: Option<Vec<String>>,
    #[schemars(range(min = 1, max = 128))]
    pub ipv6_prefix: Option<i64>,
    pub exempt: Option<Vec<String>>,
    #[schemars(range(min = 1))]
    pub max_clients: Option<i64>,
    #[schemars(extend("enum" = ["token_bucket", "gcra"]))]
    pub algorithm: Option<String>,
    #[schemars(extend("enum" = ["enforce", "shadow"]))]
    pub mode: Option<String>,
}

/// `identity`: how a request's credentials map to a tenant and a tier (JWT, API keys, mTLS).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawIdentity {
    pub jwt: Option<RawJwt>,
    pub api_keys: Option<RawApiKeys>,
    pub default_tier: Option<String>,
    pub tenant_header: Option<String>,
    pub tier_header: Option<String>,
    pub forward_credentials: Option<bool>,
    pub mtls: Option<RawMtls>,
}

/// `identity.mtls`: the tenant of a verified client certificate.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMtls {
    #[schemars(extend("enum" = ["subject_cn"]))]
    pub tenant_from: String,
}

/// `identity.jwt`: accepted signing keys and the claims carrying tenant and tier (RFC 7519).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawJwt {
    pub issuer: Option<String>,
    pub audience: Option<String>,
    /// Clock leeway for `exp` and `nbf` (default 30s; whole seconds).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub leeway: Option<String>,
    /// Old spelling of `leeway`, in seconds.
    #[schemars(range(min = 0))]
    pub leeway_s: Option<i64>,
    pub tenant_claim: Option<String>,
    pub tier_claim: Option<String>,
    /// Keys pinned in the file; may be empty when `issuers` are configured.
    #[serde(default)]
    pub keys: Vec<RawJwtKey>,
    /// Identity providers whose keys come from their JWKS (RFC 7517), refreshed in the background.
    #[serde(default)]
    pub issuers: Vec<RawJwtIssuer>,
}

/// One identity provider: its `iss`, where its JWKS is (OIDC discovery or `jwks_url`) and the
/// claims of its tokens.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawJwtIssuer {
    /// The exact `iss` of its tokens (and of its discovery document).
    pub issuer: String,
    /// Fetch `<issuer>/.well-known/openid-configuration` and use its `jwks_uri`.
    pub discovery: Option<bool>,
    /// The JWKS URL itself (instead of discovery).
    pub jwks_url: Option<String>,
    pub audience: Option<String>,
    pub tenant_claim: Option<String>,
    pub tier_claim: Option<String>,
    pub refresh: Option<RawJwksRefresh>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub unknown_kid_refetch: Option<String>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub stale_for: Option<String>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub fetch_timeout: Option<String>,
    /// PEM CA bundle trusted for the IdP's HTTPS instead of the system roots.
    pub ca_file: Option<String>,
}

/// `refresh`: the bounds the JWKS response's `Cache-Control: max-age` is clamped to.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawJwksRefresh {
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub min: Option<String>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub max: Option<String>,
}

/// One JWT verification key: a secret (`secret_env` / `secret_file`) or a PEM public key
/// (`public_key_file`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawJwtKey {
    pub kid: Option<String>,
    #[schemars(extend("enum" = ["HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]))]
    pub algorithm: String,
    pub secret_env: Option<String>,
    pub secret_file: Option<String>,
    pub public_key_file: Option<String>,
}

/// `identity.api_keys`: API keys stored as SHA-256 digests (`tollgate hash-key`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawApiKeys {
    pub header: Option<String>,
    pub keys: Vec<RawApiKey>,
}

/// One API key: its SHA-256 hex digest, tenant and tier.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawApiKey {
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{64}$"))]
    pub sha256: String,
    pub tenant: String,
    pub tier: Option<String>,
}

/// `tiers.<name>`: a tenant's main limit (`limit` per `per`, `burst`, `algorithm`) and its calendar
/// `quotas`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTier {
    #[schemars(range(min = 1))]
    pub limit: i64,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub per: String,
    #[schemars(range(min = 1))]
    pub burst: Option<i64>,
    #[schemars(extend("enum" = ["open", "closed", "local"]))]
    pub on_failure: Option<String>,
    #[schemars(extend("enum" = ["token_bucket", "gcra", "fixed_window", "sliding_window_log", "sliding_window_counter", "leaky_bucket"]))]
    pub algorithm: Option<String>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub max_delay: Option<String>,
    pub quotas: Option<Vec<RawQuota>>,
    #[schemars(range(min = 1))]
    pub weight: Option<i64>,
    pub pool: Option<RawPool>,
    #[schemars(extend("enum" = ["enforce", "shadow"]))]
    pub mode: Option<String>,
    pub lease: Option<RawLease>,
    /// Requests of one tenant in flight at once across the whole fleet (leases in Redis).
    #[schemars(range(min = 1))]
    pub max_in_flight: Option<i64>,
    /// A second budget in units the backend reports (LLM tokens): reserved at admission,
    /// settled when the response ends (docs/DESIGN.md 4e "Usage cost").
    pub usage: Option<RawUsage>,
    /// Outcomes whose request count is given back, for every policy of the request's decision:
    /// `backend_5xx`, `upstream_unavailable`, `client_gone_before_response`.
    pub refund_on: Option<Vec<String>>,
}

/// `tiers.<name>.usage`: a token bucket of backend-reported units (docs/DESIGN.md 4d–4e).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUsage {
    /// Policy name suffix: the policy is `"<tier>.<name>"` (default `tokens`).
    #[schemars(regex(pattern = r"^[a-z0-9_-]{1,40}$"))]
    pub name: Option<String>,
    /// Units refilled per `per`.
    #[schemars(range(min = 1))]
    pub limit: i64,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub per: String,
    /// Bucket size in units (default: `limit`).
    #[schemars(range(min = 1))]
    pub burst: Option<i64>,
    /// Units debited at admission, given back or topped up when the response ends.
    pub reserve: RawReserve,
    /// Where the backend's response states the count.
    pub from: RawUsageFrom,
    /// A reported count above this is clamped to it (default: `burst`).
    #[schemars(range(min = 1))]
    pub max: Option<i64>,
    /// When the whole reserve is given back: `backend_5xx`, `upstream_unavailable`,
    /// `client_gone_before_response`.
    pub refund_on: Option<Vec<String>>,
    /// Units charged for a streamed (`text/event-stream`) response that ends, or is cut, without
    /// stating a count, or whose coded body cannot be read (default: `max`).
    #[schemars(range(min = 0))]
    pub uncounted: Option<i64>,
}

/// `tiers.<name>.usage.reserve`: a number of units, or read from the request's JSON body.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawReserve {
    Units(i64),
    FromJson(RawReserveFromJson),
}

/// `reserve: { from_json: max_tokens, default: 1000 }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawReserveFromJson {
    pub from_json: String,
    pub default: i64,
}

/// `tiers.<name>.usage.from`: exactly one of `header` or `openai: true`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUsageFrom {
    /// A response header holding the count (decimal).
    pub header: Option<String>,
    /// `usage.total_tokens` of a JSON body, or of the last SSE event that carries `usage`.
    pub openai: Option<bool>,
    /// With `openai: true`: add `stream_options.include_usage: true` to a streamed request's
    /// JSON body, so the stream states its count (default `true`).
    pub include_usage: Option<bool>,
}

/// `limits[]` (docs/DESIGN.md 4d "Rules"): a limit keyed by request attributes, applied to
/// every request its `match` selects, together with the tier's own policies.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLimitRule {
    /// Policy name in `RateLimit-Policy` and Redis keys; unique, and not the name of a tier.
    #[schemars(regex(pattern = r"^[a-z0-9_-]{1,40}$"))]
    pub name: String,
    /// Which requests the rule applies to (every given condition must hold); absent: all.
    #[serde(rename = "match")]
    pub matcher: Option<RawRuleMatch>,
    /// The parts whose values make the bucket key.
    #[schemars(
        length(min = 1),
        inner(regex(
            pattern = r"^(tenant|client_ip|route|method|host|(header|claim|query|descriptor):.+)$"
        ))
    )]
    pub key: Vec<String>,
    /// Requests admitted per `per` (refill rate); required unless `max_in_flight` is given.
    #[schemars(range(min = 1))]
    pub limit: Option<i64>,
    /// The period of `limit`; required with `limit`.
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub per: Option<String>,
    /// Bucket size (default: `limit`).
    #[schemars(range(min = 1))]
    pub burst: Option<i64>,
    /// A concurrency rule instead: requests in flight at once per key, across the fleet (leases
    /// in Redis); takes no `limit`, `per`, `burst`, `algorithm` or `by_tier`.
    #[schemars(range(min = 1))]
    pub max_in_flight: Option<i64>,
    /// The limiting algorithm, as in a tier (default `token_bucket`).
    #[schemars(extend("enum" = ["token_bucket", "gcra", "fixed_window", "sliding_window_log", "sliding_window_counter", "leaky_bucket"]))]
    pub algorithm: Option<String>,
    /// Per-tier bucket sizes, by tier name; tiers not listed use the rule's own.
    pub by_tier: Option<BTreeMap<String, RawRuleRate>>,
    /// A request lacking a key part: `skip` (default, rule not applied) or `refuse` (400).
    #[schemars(extend("enum" = ["skip", "refuse"]))]
    pub missing: Option<String>,
    /// `enforce` (default) or `shadow` (counted and logged, never refuses).
    #[schemars(extend("enum" = ["enforce", "shadow"]))]
    pub mode: Option<String>,
    /// When Redis cannot decide (default: `redis.on_failure`).
    #[schemars(extend("enum" = ["open", "closed", "local"]))]
    pub on_failure: Option<String>,
    /// A budget of units the backend reports, one per key, as `tiers.<name>.usage` (policy
    /// `<rule>.<usage name>`); not with `max_in_flight`.
    pub usage: Option<RawUsage>,
    /// Count only the requests whose response has one of these statuses (debited at admission,
    /// given back after the response otherwise); not with `max_in_flight`.
    pub count: Option<RawCount>,
    /// Outcomes whose request count is given back: `backend_5xx`, `upstream_unavailable`,
    /// `client_gone_before_response`; not with `max_in_flight`.
    pub refund_on: Option<Vec<String>>,
    /// Once the rule refuses a key, refuse it for this long (`15m`) whatever the refill; not with
    /// `max_in_flight`.
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub block_for: Option<String>,
    /// With `block_for`: each refusal during the block starts it again (default `false`).
    pub extend_on_refusal: Option<bool>,
    /// What a request costs this rule instead of the route's cost: a fixed number or read from
    /// the request, as `routes[].cost`; not with `max_in_flight`.
    pub cost: Option<RawCost>,
}

/// `routes[].cost` and `limits[].cost`: fixed tokens, or a cost read from the request.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawCost {
    /// Tokens per request.
    Fixed(#[schemars(range(min = 1))] i64),
    /// Read from each request.
    From(RawCostFrom),
}

/// A cost read from the request: exactly one of `from`, `header`, `json`, `query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCostFrom {
    /// `request_bytes`: the request body's length in bytes.
    #[schemars(extend("enum" = ["request_bytes"]))]
    pub from: Option<String>,
    /// A header holding a non-negative decimal integer.
    pub header: Option<String>,
    /// A dotted path into the JSON body (`batch.size`; `items.length` for an array's length).
    pub json: Option<String>,
    /// A query parameter holding a non-negative decimal integer.
    pub query: Option<String>,
    /// Tokens charged when the value is absent or malformed (default 1, or `min` when larger).
    #[schemars(range(min = 0))]
    pub default: Option<i64>,
    /// Least tokens charged (default 1); `0` lets a request stating `0` (or an empty body) through free.
    #[schemars(range(min = 0))]
    pub min: Option<i64>,
    /// Largest value accepted; a request stating more is refused with 413.
    #[schemars(range(min = 1))]
    pub max: Option<i64>,
}

/// `limits[].count`: the responses that count.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCount {
    /// Status codes (`401`) and classes (`"5xx"`); at least one.
    #[schemars(length(min = 1))]
    pub status: Vec<RawStatus>,
}

/// One entry of `count.status`: a code or a class.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawStatus {
    /// A status code, 100 to 599.
    Code(i64),
    /// A class: `1xx` to `5xx`.
    Class(#[schemars(regex(pattern = r"^[1-5]xx$"))] String),
}

/// `limits[].match`: conditions on the request, all of which must hold.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRuleMatch {
    /// Path prefixes, matched on segment boundaries as `routes[].path_prefix` is.
    pub routes: Option<Vec<String>>,
    /// HTTP methods (any case; stored upper case).
    pub methods: Option<Vec<String>>,
    /// Hosts, written as `routes[].host` is (`api.example.com`, `*.example.com`, `*`).
    pub hosts: Option<Vec<String>>,
    /// Header name (any case) → the exact value it must have.
    pub headers: Option<BTreeMap<String, String>>,
    /// A decision-service rule: the `domain` of a rate limit service call
    /// (docs/decision-service.md); such a rule applies to no proxied request.
    pub domain: Option<String>,
    /// With `domain`: the descriptor's entry keys, in order; an entry is a key (any value) or a
    /// one-entry map `{ key: value }` (that value only).
    pub descriptors: Option<Vec<RawDescriptorEntry>>,
}

/// `limits[].match.descriptors[]`: an entry key, or `{ key: value }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawDescriptorEntry {
    Key(String),
    KeyValue(BTreeMap<String, String>),
}

/// `limits[].by_tier.<tier>`: the rule's bucket for requests of that tier.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRuleRate {
    /// Requests admitted per `per`.
    #[schemars(range(min = 1))]
    pub limit: i64,
    /// The period of `limit`.
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub per: String,
    /// Bucket size (default: `limit`).
    #[schemars(range(min = 1))]
    pub burst: Option<i64>,
}

/// `tiers.<name>.lease` (docs/DESIGN.md 4c "Lease"): an instance takes up to `tokens` from the
/// tenant's bucket in one call and admits from them locally for at most `max_hold`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLease {
    #[schemars(range(min = 1))]
    pub tokens: i64,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub max_hold: String,
}

/// A calendar quota (UTC windows), debited with the main limit in the same atomic step.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQuota {
    #[schemars(range(min = 1))]
    pub limit: i64,
    #[schemars(extend("enum" = ["hour", "day", "week", "month"]))]
    pub period: String,
}

/// `tiers.<name>.pool`: a burst pool shared by the tier's tenants, asked only when a tenant's own
/// bucket refuses.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    #[schemars(range(min = 1))]
    pub limit: i64,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub per: String,
    #[schemars(range(min = 1))]
    pub burst: Option<i64>,
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_share: Option<f64>,
}

/// `tenants.<id>`: a tenant's tier and optional overrides of its rate.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTenant {
    pub tier: Option<String>,
    #[schemars(range(min = 1))]
    pub limit: Option<i64>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub per: Option<String>,
    #[schemars(range(min = 1))]
    pub burst: Option<i64>,
}

/// `upstreams.<name>`: backends and the concurrency limits that protect them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    pub backends: Vec<String>,
    #[schemars(range(min = 1))]
    pub max_concurrency: Option<i64>,
    #[schemars(range(min = 1))]
    pub max_concurrency_per_tenant: Option<i64>,
    pub queue: Option<RawQueue>,
    /// `Retry-After` of this upstream's 503s (default 1s; whole seconds).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub retry_after: Option<String>,
    /// Old spelling of `retry_after`, in seconds.
    #[schemars(range(min = 1))]
    pub retry_after_s: Option<i64>,
    /// TCP (and TLS) connect timeout to a backend (default 1s).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub connect_timeout: Option<String>,
    /// Old spelling of `connect_timeout`, in milliseconds.
    #[schemars(range(min = 1))]
    pub connect_timeout_ms: Option<i64>,
    /// Timeout of each read from a backend (default 30s).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub read_timeout: Option<String>,
    /// Old spelling of `read_timeout`, in milliseconds.
    #[schemars(range(min = 1))]
    pub read_timeout_ms: Option<i64>,
    pub health_check: Option<RawHealthCheck>,
    pub tls: Option<RawUpstreamTls>,
    /// HTTP/2 to the backends: h2c (prior knowledge) to plain ones, ALPN `h2` with `tls`.
    pub h2: Option<bool>,
    /// Streams per pooled HTTP/2 connection (needs `h2: true`; default 100).
    #[schemars(range(min = 1, max = 1000))]
    pub h2_max_streams: Option<i64>,
}

/// `upstreams.<name>.tls`: HTTPS to the backends.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamTls {
    pub sni: Option<String>,
    pub ca_file: Option<String>,
    pub verify: Option<bool>,
}

/// `upstreams.<name>.queue`: where requests wait for a slot when the upstream is full (`timeout`
/// at most; one of `timeout` and its old spelling `timeout_ms` is required).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQueue {
    #[schemars(range(min = 1))]
    pub max: i64,
    /// How long a request may wait for a slot (e.g. `300ms`).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub timeout: Option<String>,
    /// Old spelling of `timeout`, in milliseconds.
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<i64>,
    pub fair: Option<bool>,
    #[schemars(range(min = 1))]
    pub max_per_tenant: Option<i64>,
}

/// `upstreams.<name>.health_check`: an HTTP GET of `path` every `interval`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHealthCheck {
    pub path: Option<String>,
    /// How often (default 5s; whole seconds).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub interval: Option<String>,
    /// Old spelling of `interval`, in seconds.
    #[schemars(range(min = 1))]
    pub interval_s: Option<i64>,
}

/// `routes[]`: host and path prefix (matched on the normalised path) to an upstream, with the
/// route's auth mode and cost in tokens.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    /// The route's label in metrics, logs, explain and problem bodies (unique; letters, digits,
    /// `.`, `_`, `-`; at most 64). Without one the label is `routes[<index>]`, which changes when
    /// routes are reordered.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9._-]+$"))]
    pub name: Option<String>,
    pub host: Option<String>,
    pub path_prefix: Option<String>,
    pub upstream: String,
    #[schemars(extend("enum" = ["required", "optional", "none"]))]
    pub auth: Option<String>,
    /// Tokens one request costs: a fixed number (default 1), or read from the request
    /// (`{ from: request_bytes }`, `{ header: X-Units, default: 1, max: 1000 }`).
    pub cost: Option<RawCost>,
    #[schemars(range(min = 1))]
    pub max_body_bytes: Option<i64>,
    #[schemars(extend("enum" = ["enforce", "shadow"]))]
    pub mode: Option<String>,
}

/// `response`: the status of a rate-limit rejection and which RateLimit headers to send.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawResponse {
    #[schemars(range(min = 400, max = 599))]
    pub status: Option<i64>,
    /// One header family (`ietf`, `legacy`, `both`, `none`), or a list of them that may add
    /// `openai` (OpenAI's `x-ratelimit-*-tokens` and `retry-after-ms` for a usage budget).
    pub headers: Option<RawHeaderModes>,
}

/// `response.headers`: `ietf`, or a list such as `[ietf, openai]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawHeaderModes {
    /// `ietf`, `legacy`, `both` or `none`.
    One(String),
    /// One of those and `openai`.
    List(Vec<String>),
}

/// `reload`: reload when the config file changes, as on SIGHUP (docs/DESIGN.md 4e, file watch).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawReload {
    /// Reload when the file's content changes (an edit, a rename over it, a ConfigMap symlink swap).
    pub watch: Option<bool>,
    /// How long the changed content must stay the same before it is loaded (default 500ms).
    pub debounce: Option<String>,
}

/// `store`: the live state in Redis (API keys, limit overrides and blocks set through the
/// admin API).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    /// Accept API keys issued through the admin API (default true).
    pub keys: Option<bool>,
    /// Refuse blocked addresses, networks, tenants and keys set through `/v1/blocks`
    /// (default true; false: `/v1/blocks` answers 404).
    pub blocks: Option<bool>,
    /// Accept limit overrides set through the admin API (default true).
    pub overrides: Option<bool>,
    /// The per-instance cache.
    pub cache: Option<RawStoreCache>,
    /// A change is in force on every instance within this (default 1s).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub propagation: Option<String>,
}

/// `store.cache`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawStoreCache {
    #[schemars(range(min = 1))]
    pub max_entries: Option<i64>,
    /// How long a found key is served before it is read again (default 30s).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub ttl: Option<String>,
    /// How long an unknown key is remembered as unknown (default 2s).
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub negative_ttl: Option<String>,
}

/// `observability`: access log, log format and the bound on per-tenant metric series.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawObservability {
    pub access_log: Option<bool>,
    #[schemars(extend("enum" = ["text", "json"]))]
    pub log_format: Option<String>,
    #[schemars(range(min = 0))]
    pub tenant_metrics: Option<i64>,
    #[schemars(range(min = 4096))]
    pub log_buffer_bytes: Option<i64>,
    pub tracing: Option<RawTracing>,
}

/// `observability.tracing`: OpenTelemetry traces over OTLP.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTracing {
    pub otlp: RawOtlp,
    #[schemars(range(min = 0.0, max = 1.0))]
    pub sampling: Option<f64>,
    pub propagate: Option<bool>,
    pub stages: Option<bool>,
    pub tenant: Option<bool>,
    #[schemars(range(min = 1))]
    pub queue_size: Option<i64>,
    /// Resource attributes, e.g. `service.name`, `service.instance.id`, `deployment.environment`.
    pub resource: Option<BTreeMap<String, String>>,
}

/// `observability.tracing.otlp`: the collector.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOtlp {
    pub endpoint: String,
    #[schemars(extend("enum" = ["grpc", "http/protobuf"]))]
    pub protocol: Option<String>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub timeout: Option<String>,
}

/// `multi_region`: this region's share of every limit (static) or a demand-driven split (sync).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMultiRegion {
    pub region: String,
    pub shares: BTreeMap<String, i64>,
    #[schemars(extend("enum" = ["static", "sync"]))]
    pub mode: Option<String>,
    pub global: Option<RawGlobal>,
    #[schemars(regex(pattern = r"^[0-9]+(ms|s|m|h|d)$"))]
    pub sync_interval: Option<String>,
}

/// `multi_region.global`: the Redis where regions exchange usage (sync mode).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGlobal {
    pub url: String,
}
