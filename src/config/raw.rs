//! The YAML file as written by the operator: serde structs with no semantic checks.
//!
//! Unknown keys are rejected (`deny_unknown_fields`). Numbers that must be positive are read as
//! signed integers so that validation can name the field and say why a value is wrong.
//! Field names are the contract of `docs/DESIGN.md` section 4.

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub listen: Vec<RawListen>,
    pub admin: Option<RawAdmin>,
    pub server: Option<RawServer>,
    pub redis: Option<RawRedis>,
    pub edge: Option<RawEdge>,
    pub identity: Option<RawIdentity>,
    pub tiers: Option<BTreeMap<String, RawTier>>,
    pub tenants: Option<BTreeMap<String, RawTenant>>,
    pub upstreams: BTreeMap<String, RawUpstream>,
    pub routes: Vec<RawRoute>,
    pub response: Option<RawResponse>,
    pub observability: Option<RawObservability>,
    pub multi_region: Option<RawMultiRegion>,
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListenFull {
    pub addr: String,
    /// Decoded into [`RawListenTls`] during validation (for error paths, see [`RawListen`]).
    pub tls: Option<serde_yaml::Value>,
    pub h2: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListenTls {
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub certs: Option<Vec<RawCertPair>>,
    pub client_ca_file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCertPair {
    pub cert_file: String,
    pub key_file: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub listen: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub threads: Option<i64>,
    pub work_stealing: Option<bool>,
    pub grace_period_s: Option<i64>,
    pub graceful_shutdown_timeout_s: Option<i64>,
    pub upgrade_sock: Option<String>,
    pub pid_file: Option<String>,
    pub max_header_bytes: Option<i64>,
    pub max_headers: Option<i64>,
    pub header_read_timeout: Option<String>,
    pub keepalive_timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRedis {
    pub mode: Option<String>,
    pub url: Option<String>,
    pub urls: Option<Vec<String>>,
    pub sentinel: Option<RawSentinel>,
    pub username_env: Option<String>,
    pub password_env: Option<String>,
    pub tls: Option<RawRedisTls>,
    pub key_prefix: Option<String>,
    pub timeout_ms: Option<i64>,
    pub circuit_breaker: Option<RawBreaker>,
    pub on_failure: Option<String>,
    pub fleet_size: Option<RawFleetSize>,
}

/// `redis.fleet_size`: a number, or `auto`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawFleetSize {
    Number(i64),
    Word(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSentinel {
    pub master: String,
    pub username_env: Option<String>,
    pub password_env: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRedisTls {
    pub ca_file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    pub failure_ratio: Option<f64>,
    pub min_calls: Option<i64>,
    pub window_s: Option<i64>,
    pub break_s: Option<i64>,
    pub probes: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEdge {
    pub limit: i64,
    pub per: String,
    pub burst: Option<i64>,
    pub trusted_proxies: Option<Vec<String>>,
    pub ipv6_prefix: Option<i64>,
    pub exempt: Option<Vec<String>>,
    pub max_clients: Option<i64>,
    pub algorithm: Option<String>,
}

#[derive(Debug, Deserialize)]
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMtls {
    pub tenant_from: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJwt {
    pub issuer: Option<String>,
    pub audience: Option<String>,
    pub leeway_s: Option<i64>,
    pub tenant_claim: Option<String>,
    pub tier_claim: Option<String>,
    pub keys: Vec<RawJwtKey>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJwtKey {
    pub kid: Option<String>,
    pub algorithm: String,
    pub secret_env: Option<String>,
    pub secret_file: Option<String>,
    pub public_key_file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawApiKeys {
    pub header: Option<String>,
    pub keys: Vec<RawApiKey>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawApiKey {
    pub sha256: String,
    pub tenant: String,
    pub tier: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTier {
    pub limit: i64,
    pub per: String,
    pub burst: Option<i64>,
    pub on_failure: Option<String>,
    pub algorithm: Option<String>,
    pub max_delay: Option<String>,
    pub quotas: Option<Vec<RawQuota>>,
    pub weight: Option<i64>,
    pub pool: Option<RawPool>,
    pub lease: Option<RawLease>,
}

/// `tiers.<name>.lease` (docs/DESIGN.md 4c "Lease").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLease {
    pub tokens: i64,
    pub max_hold: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuota {
    pub limit: i64,
    pub period: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    pub limit: i64,
    pub per: String,
    pub burst: Option<i64>,
    pub max_share: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTenant {
    pub tier: Option<String>,
    pub limit: Option<i64>,
    pub per: Option<String>,
    pub burst: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    pub backends: Vec<String>,
    pub max_concurrency: Option<i64>,
    pub max_concurrency_per_tenant: Option<i64>,
    pub queue: Option<RawQueue>,
    pub retry_after_s: Option<i64>,
    pub connect_timeout_ms: Option<i64>,
    pub read_timeout_ms: Option<i64>,
    pub health_check: Option<RawHealthCheck>,
    pub tls: Option<RawUpstreamTls>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamTls {
    pub sni: Option<String>,
    pub ca_file: Option<String>,
    pub verify: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQueue {
    pub max: i64,
    pub timeout_ms: i64,
    pub fair: Option<bool>,
    pub max_per_tenant: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHealthCheck {
    pub path: Option<String>,
    pub interval_s: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    pub host: Option<String>,
    pub path_prefix: Option<String>,
    pub upstream: String,
    pub auth: Option<String>,
    pub cost: Option<i64>,
    pub max_body_bytes: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawResponse {
    pub status: Option<i64>,
    pub headers: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawObservability {
    pub access_log: Option<bool>,
    pub log_format: Option<String>,
    pub tenant_metrics: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMultiRegion {
    pub region: String,
    pub shares: BTreeMap<String, i64>,
    pub mode: Option<String>,
    pub global: Option<RawGlobal>,
    pub sync_interval: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGlobal {
    pub url: String,
}
