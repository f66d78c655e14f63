//! Validation of the raw YAML into a [`Config`]: every problem found, each with its field path.

use super::duration::parse_duration;
use super::model::*;
use super::raw::*;
use super::ConfigError;
use crate::limit::algorithm::Algorithm;
use crate::limit::bounds::{self, RateBoundError};
use crate::limit::Rate;
use crate::tenant_id;
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

mod host;
mod lease;
mod policy;
mod tls;

/// Collects errors while validating.
#[derive(Default)]
struct Check {
    errors: Vec<ConfigError>,
}

impl Check {
    fn err(&mut self, path: impl Into<String>, reason: impl Into<String>) {
        self.errors.push(ConfigError::new(path, reason));
    }

    /// A strictly positive integer, or an error naming `path`.
    fn positive(&mut self, path: &str, value: i64) -> Option<u64> {
        if value <= 0 {
            self.err(path, format!("must be greater than zero (got {value})"));
            None
        } else {
            Some(value as u64)
        }
    }

    fn opt_positive(&mut self, path: &str, value: Option<i64>, default: u64) -> u64 {
        match value {
            None => default,
            Some(v) => self.positive(path, v).unwrap_or(default),
        }
    }

    /// [`opt_positive`](Self::opt_positive) that is also at most `max` (else an error naming
    /// `path`, and `default`).
    fn opt_positive_at_most(
        &mut self,
        path: &str,
        value: Option<i64>,
        default: u64,
        max: u64,
    ) -> u64 {
        let v = self.opt_positive(path, value, default);
        if v > max {
            self.err(path, format!("must be at most {max} (got {v})"));
            return default;
        }
        v
    }

    fn duration(&mut self, path: &str, text: &str) -> Option<Duration> {
        match parse_duration(text) {
            Ok(d) => Some(d),
            Err(e) => {
                self.err(path, e);
                None
            }
        }
    }

    fn socket_addr(&mut self, path: &str, text: &str) -> Option<SocketAddr> {
        match text.parse() {
            Ok(a) => Some(a),
            Err(_) => {
                self.err(path, format!("\"{text}\" is not an ip:port address"));
                None
            }
        }
    }

    fn cidrs(&mut self, path: &str, list: &[String]) -> Vec<IpNet> {
        let mut out = Vec::new();
        for (i, text) in list.iter().enumerate() {
            let parsed = text
                .parse::<IpNet>()
                .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from));
            match parsed {
                Ok(net) => out.push(mapped_to_ipv4(net.trunc())),
                Err(_) => self.err(format!("{path}[{i}]"), format!("\"{text}\" is not a CIDR")),
            }
        }
        out
    }

    fn policy(&mut self, path: &str, text: Option<&str>, default: FailurePolicy) -> FailurePolicy {
        match text {
            None => default,
            Some("open") => FailurePolicy::Open,
            Some("closed") => FailurePolicy::Closed,
            Some("local") => FailurePolicy::Local,
            Some(other) => {
                self.err(
                    path,
                    format!("\"{other}\" is not a failure policy (open, closed, local)"),
                );
                default
            }
        }
    }

    /// `mode` at `path`: `enforce` (default) or `shadow`.
    fn mode(&mut self, path: &str, text: Option<&str>) -> Mode {
        match text {
            None | Some("enforce") => Mode::Enforce,
            Some("shadow") => Mode::Shadow,
            Some(other) => {
                self.err(path, format!("\"{other}\" is not a mode (enforce, shadow)"));
                Mode::Enforce
            }
        }
    }

    /// `limit` per `per` with `burst` (default = limit), checked by [`bounds::check`].
    fn rate(&mut self, path: &str, limit: i64, per: &str, burst: Option<i64>) -> Option<Rate> {
        let limit = self.positive(&format!("{path}.limit"), limit);
        let per = self.duration(&format!("{path}.per"), per);
        let burst = match burst {
            None => limit,
            Some(b) => self.positive(&format!("{path}.burst"), b),
        };
        let (limit, per, burst) = (limit?, per?, burst?);
        let rate = Rate::new(
            limit,
            u64::try_from(per.as_millis()).unwrap_or(u64::MAX),
            burst,
        );
        match bounds::check(&rate) {
            Ok(()) => Some(rate),
            Err(e) => {
                let field = match e {
                    RateBoundError::Zero | RateBoundError::PerTooLong => "per",
                    RateBoundError::BurstTooLarge => "burst",
                    RateBoundError::LimitTooLarge => "limit",
                };
                self.err(format!("{path}.{field}"), e.to_string());
                None
            }
        }
    }

    /// A tenant id (`tenant_id::validate`) found at `path`.
    fn tenant_id(&mut self, path: &str, id: &str) {
        if let Err(e) = tenant_id::validate(id) {
            self.err(path, format!("tenant id {e}"));
        }
    }

    /// The effective rate of tenant `id` (its override merged into every tier, since a tier
    /// claim or an API key's tier can put a tenant in any tier) passes [`bounds::check`]; a
    /// failure is reported once, at the override's field that takes the blame.
    fn merged_rates(&mut self, path: &str, o: &TenantOverride, tiers: &BTreeMap<String, Tier>) {
        for tier in tiers.values() {
            let merged = o.merged(tier.rate);
            let Err(e) = bounds::check(&merged) else {
                continue;
            };
            let field = match e {
                RateBoundError::BurstTooLarge if o.burst.is_some() => "burst",
                RateBoundError::LimitTooLarge if o.limit.is_some() => "limit",
                _ if o.per_ms.is_some() => "per",
                _ if o.burst.is_some() => "burst",
                _ => "limit",
            };
            self.err(
                format!("{path}.{field}"),
                format!(
                    "{e}: the effective rate in tier \"{}\" is limit {} per {} ms, burst {}",
                    tier.name, merged.limit, merged.per_ms, merged.burst
                ),
            );
            return;
        }
    }
}

/// The field path of map entry `key` under `map`: `map.key` for plain keys, else
/// `map["<escaped key>"]` so blanks and control characters stay visible.
fn key_path(map: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:@".contains(c));
    if plain {
        format!("{map}.{key}")
    } else {
        format!("{map}[{key:?}]")
    }
}

/// Longest tier name accepted.
pub const MAX_TIER_NAME: usize = 64;

/// A tier name is 1 to [`MAX_TIER_NAME`] ASCII letters, digits, `-` and `_` (no `.`, which
/// would make `a.day` and the `day` quota of tier `a` the same policy name): it is sent in
/// `RateLimit-Policy` / `RateLimit` sf-string items (`"<tier>"`, quota policies `"<tier>.<period>"`),
/// the `X-Tollgate-Tier` header, metric labels and Redis keys, and must be valid in all of them.
pub fn tier_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-".contains(c);
    if name.is_empty() || name.len() > MAX_TIER_NAME || !name.chars().all(allowed) {
        return Err(format!(
            "a tier name is 1 to {MAX_TIER_NAME} letters, digits, '-' and '_' \
             (it is sent in RateLimit headers and X-Tollgate-Tier)"
        ));
    }
    Ok(())
}

/// Validates a parsed file. Returns every error found, each naming its field path.
pub fn validate(raw: RawConfig) -> Result<Config, Vec<ConfigError>> {
    let mut c = Check::default();

    if raw.listen.is_empty() {
        c.err("listen", "needs at least one address");
    }
    let listen = tls::listen_settings(&mut c, &raw.listen);
    let admin_listen = raw
        .admin
        .as_ref()
        .and_then(|a| c.socket_addr("admin.listen", &a.listen));
    let admin_token_env = raw.admin.as_ref().and_then(|a| a.token_env.clone());
    if let Some(name) = &admin_token_env {
        if let Err(why) = env_var_name(name) {
            c.err("admin.token_env", why);
        }
    }

    let server = server_settings(&mut c, raw.server.as_ref());
    let redis = raw.redis.as_ref().map(|r| redis_settings(&mut c, r));
    let edge = raw.edge.as_ref().and_then(|e| edge_settings(&mut c, e));
    let default_policy = redis
        .as_ref()
        .map(|r| r.on_failure)
        .unwrap_or(FailurePolicy::Local);

    let mut tiers = BTreeMap::new();
    for (name, t) in raw.tiers.iter().flatten() {
        if let Err(why) = tier_name(name) {
            c.err(key_path("tiers", name), why);
        }
        let path = format!("tiers.{name}");
        let on_failure = c.policy(
            &format!("{path}.on_failure"),
            t.on_failure.as_deref(),
            default_policy,
        );
        let rate = c.rate(&path, t.limit, &t.per, t.burst);
        let tier_policy = policy::tier_policy(&mut c, &path, t, rate.as_ref());
        // The burst pool lends token-bucket tokens when the tenant's own bucket refuses; it
        // cannot stand in for another algorithm's refusal or debit a calendar quota.
        if t.pool.is_some()
            && (tier_policy.algorithm != Algorithm::TokenBucket || !tier_policy.quotas.is_empty())
        {
            c.err(
                format!("{path}.pool"),
                "a burst pool needs algorithm token_bucket and no quotas in its tier",
            );
        }
        if let Some(rate) = rate {
            tiers.insert(
                name.clone(),
                Tier {
                    name: name.clone(),
                    rate,
                    on_failure,
                    policy: tier_policy,
                    weight: tier_weight(&mut c, &path, t.weight),
                    pool: t
                        .pool
                        .as_ref()
                        .and_then(|p| pool_settings(&mut c, &path, p)),
                    mode: c.mode(&format!("{path}.mode"), t.mode.as_deref()),
                },
            );
        }
    }
    let tier_names: BTreeSet<&String> = raw.tiers.iter().flatten().map(|(n, _)| n).collect();
    if !tier_names.is_empty() && raw.redis.is_none() {
        c.err("redis", "is required when tiers are configured");
    }
    let mut tier_ref = |c: &mut Check, path: &str, name: &str| {
        if !tier_names.contains(&name.to_string()) {
            c.err(path, format!("no tier named \"{name}\""));
        }
    };

    let identity = identity_settings(&mut c, raw.identity.as_ref(), &mut tier_ref);

    let mut tenants = BTreeMap::new();
    for (id, t) in raw.tenants.iter().flatten() {
        let path = key_path("tenants", id);
        c.tenant_id(&path, id);
        if let Some(tier) = &t.tier {
            tier_ref(&mut c, &format!("{path}.tier"), tier);
        }
        let limit = t
            .limit
            .and_then(|v| c.positive(&format!("{path}.limit"), v));
        let burst = t
            .burst
            .and_then(|v| c.positive(&format!("{path}.burst"), v));
        let per_ms = t
            .per
            .as_deref()
            .and_then(|p| c.duration(&format!("{path}.per"), p))
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let o = TenantOverride {
            tier: t.tier.clone(),
            limit,
            per_ms,
            burst,
        };
        if let Some(Err(e)) = per_ms.map(bounds::check_per) {
            c.err(format!("{path}.per"), e.to_string());
        } else {
            c.merged_rates(&path, &o, &tiers);
            // The algorithm's own bounds, in every tier the tenant may land in; the first
            // failing tier is reported.
            for tier in tiers.values() {
                let before = c.errors.len();
                let p = &tier.policy;
                policy::check_bounds(
                    &mut c,
                    &path,
                    p.algorithm,
                    &o.merged(tier.rate),
                    p.max_delay_ms,
                );
                if c.errors.len() > before {
                    break;
                }
            }
        }
        tenants.insert(id.clone(), o);
    }

    if raw.upstreams.is_empty() {
        c.err("upstreams", "needs at least one upstream");
    }
    let mut upstreams = BTreeMap::new();
    for (name, u) in &raw.upstreams {
        if let Some(settings) = upstream_settings(&mut c, name, u) {
            upstreams.insert(name.clone(), settings);
        }
    }

    if raw.routes.is_empty() {
        c.err("routes", "needs at least one route");
    }
    let mut routes = Vec::new();
    let mut seen_routes = BTreeSet::new();
    for (i, r) in raw.routes.iter().enumerate() {
        let path = format!("routes[{i}]");
        if let Some(route) = route_settings(&mut c, &path, r, &raw.upstreams) {
            let key = (format!("{:?}", route.host), route.path_prefix.clone());
            if !seen_routes.insert(key) {
                c.err(
                    &path,
                    "duplicate route: the same host and path_prefix appear earlier",
                );
            }
            routes.push(route);
        }
    }

    if let Some(largest) = tiers.values().map(|t| t.rate.burst).max() {
        for r in routes.iter().filter(|r| r.cost > largest) {
            c.err(
                format!("{}.cost", r.id),
                format!(
                    "{} exceeds the burst of every tier (largest {largest}): such requests could never be admitted",
                    r.cost
                ),
            );
        }
    }
    tls::check_mtls_listener(&mut c, &identity, &listen);
    let has_identity =
        identity.jwt.is_some() || identity.api_keys.is_some() || identity.mtls.is_some();
    for r in routes.iter().filter(|r| r.auth == AuthMode::Required) {
        if !has_identity {
            c.err(
                format!("{}.auth", r.id),
                "is \"required\" but identity configures none of jwt, api_keys, mtls",
            );
        }
    }

    let response = response_settings(&mut c, raw.response.as_ref());
    let observability = observability_settings(&mut c, raw.observability.as_ref());
    let multi_region = raw
        .multi_region
        .as_ref()
        .and_then(|m| match super::region::settings(m) {
            Ok(s) => Some(s),
            Err(e) => {
                c.errors.extend(e);
                None
            }
        });

    if let Some(m) = &multi_region {
        c.errors
            .extend(super::region::check_costs(m, &tiers, &routes));
    }

    if c.errors.is_empty() {
        Ok(Config {
            listen,
            admin_listen,
            admin_token_env,
            source: Default::default(),
            server,
            redis,
            edge,
            identity,
            tiers,
            tenants,
            upstreams,
            routes,
            response,
            observability,
            multi_region,
        })
    } else {
        Err(c.errors)
    }
}

/// An environment variable name as POSIX shells accept it: `[A-Za-z_][A-Za-z0-9_]*`.
fn env_var_name(name: &str) -> Result<(), &'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => Err("must name an environment variable, not be empty"),
        Some(c) if c.is_ascii_digit() => {
            Err("an environment variable name cannot start with a digit")
        }
        _ if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => Ok(()),
        _ => Err("an environment variable name has only letters, digits and '_'"),
    }
}

fn server_settings(c: &mut Check, raw: Option<&RawServer>) -> ServerSettings {
    let threads = raw.and_then(|s| s.threads);
    let grace = raw.and_then(|s| s.grace_period_s);
    let shutdown = raw.and_then(|s| s.graceful_shutdown_timeout_s);
    ServerSettings {
        threads: c.opt_positive("server.threads", threads, 2) as usize,
        work_stealing: raw
            .and_then(|s| s.work_stealing)
            .unwrap_or(DEFAULT_WORK_STEALING),
        grace_period_s: c.opt_positive("server.grace_period_s", grace, 10),
        graceful_shutdown_timeout_s: c.opt_positive(
            "server.graceful_shutdown_timeout_s",
            shutdown,
            5,
        ),
        upgrade_sock: raw
            .and_then(|s| s.upgrade_sock.clone())
            .unwrap_or_else(|| "/tmp/tollgate_upgrade.sock".into()),
        pid_file: raw
            .and_then(|s| s.pid_file.clone())
            .unwrap_or_else(|| "/tmp/tollgate.pid".into()),
        http: http_limits(c, raw),
    }
}

/// `server.max_header_bytes`, `max_headers`, `header_read_timeout`, `keepalive_timeout`.
fn http_limits(c: &mut Check, raw: Option<&RawServer>) -> HttpLimits {
    let d = HttpLimits::default();
    let mut bounded = |path: &str, value: Option<i64>, default: usize, max: usize| -> usize {
        c.opt_positive_at_most(path, value, default as u64, max as u64) as usize
    };
    let max_header_bytes = bounded(
        "server.max_header_bytes",
        raw.and_then(|s| s.max_header_bytes),
        d.max_header_bytes,
        524_288,
    );
    let max_headers = bounded(
        "server.max_headers",
        raw.and_then(|s| s.max_headers),
        d.max_headers,
        256,
    );
    // `parse_duration` refuses zero and negative values with the field path.
    let mut timeout = |path: &str, text: Option<&String>, default: Duration| {
        text.and_then(|t| c.duration(path, t)).unwrap_or(default)
    };
    HttpLimits {
        max_header_bytes,
        max_headers,
        header_read_timeout: timeout(
            "server.header_read_timeout",
            raw.and_then(|s| s.header_read_timeout.as_ref()),
            d.header_read_timeout,
        ),
        keepalive_timeout: timeout(
            "server.keepalive_timeout",
            raw.and_then(|s| s.keepalive_timeout.as_ref()),
            d.keepalive_timeout,
        ),
    }
}

fn redis_url(c: &mut Check, path: &str, url: &str) {
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        c.err(
            path,
            format!("\"{url}\" is not a redis:// or rediss:// URL"),
        );
    } else if url.contains('@') {
        c.err(
            path,
            "must not carry credentials; use redis.username_env / redis.password_env",
        );
    }
}

fn env_name(c: &mut Check, path: &str, name: &Option<String>) -> Option<String> {
    let name = name.clone()?;
    if name.is_empty() || name.contains(['=', '\0']) {
        c.err(
            path,
            format!("\"{name}\" is not an environment variable name"),
        );
    }
    Some(name)
}

/// `redis.mode`, `url` / `urls`, `sentinel`: where the store is. Returns (mode, url, urls).
fn redis_topology(c: &mut Check, r: &RawRedis) -> (RedisTopology, String, Vec<String>) {
    let mode = match r.mode.as_deref() {
        None | Some("standalone") => RedisTopology::Standalone,
        Some("cluster") => RedisTopology::Cluster,
        Some("sentinel") => match &r.sentinel {
            Some(s) => {
                if s.master.is_empty() {
                    c.err("redis.sentinel.master", "must not be empty");
                }
                RedisTopology::Sentinel {
                    master: s.master.clone(),
                    username_env: env_name(c, "redis.sentinel.username_env", &s.username_env),
                    password_env: env_name(c, "redis.sentinel.password_env", &s.password_env),
                }
            }
            None => {
                c.err(
                    "redis.sentinel",
                    "is required with mode: sentinel (master name)",
                );
                RedisTopology::Standalone
            }
        },
        Some(other) => {
            c.err(
                "redis.mode",
                format!("\"{other}\" is not a Redis mode (standalone, cluster, sentinel)"),
            );
            RedisTopology::Standalone
        }
    };
    if r.sentinel.is_some() && !matches!(mode, RedisTopology::Sentinel { .. }) {
        c.err("redis.sentinel", "is only valid with mode: sentinel");
    }
    let urls = match (&mode, &r.url, &r.urls) {
        (RedisTopology::Standalone, Some(url), None) => {
            redis_url(c, "redis.url", url);
            vec![url.clone()]
        }
        (RedisTopology::Standalone, None, _) => {
            c.err("redis.url", "is required with mode: standalone");
            Vec::new()
        }
        (RedisTopology::Standalone, Some(_), Some(_)) => {
            c.err(
                "redis.urls",
                "is for cluster and sentinel modes; standalone takes url",
            );
            Vec::new()
        }
        (_, Some(_), _) => {
            c.err(
                "redis.url",
                format!("is for standalone; mode: {} takes urls", mode.as_str()),
            );
            Vec::new()
        }
        (_, None, None) => {
            c.err(
                "redis.urls",
                format!("is required with mode: {}", mode.as_str()),
            );
            Vec::new()
        }
        (_, None, Some(urls)) => {
            if urls.is_empty() {
                c.err("redis.urls", "needs at least one URL");
            }
            for (i, url) in urls.iter().enumerate() {
                redis_url(c, &format!("redis.urls[{i}]"), url);
            }
            urls.clone()
        }
    };
    let url = urls.first().cloned().unwrap_or_default();
    (mode, url, urls)
}

fn redis_settings(c: &mut Check, r: &RawRedis) -> RedisSettings {
    let (mode, url, urls) = redis_topology(c, r);
    let tls_ca_file = r.tls.as_ref().and_then(|t| t.ca_file.clone());
    if let Some(ca) = &tls_ca_file {
        if !urls.iter().all(|u| u.starts_with("rediss://")) {
            c.err("redis.tls", "needs rediss:// URLs");
        }
        if std::fs::metadata(ca).is_err() {
            c.err("redis.tls.ca_file", format!("cannot read \"{ca}\""));
        }
    }
    let (fleet_size, fleet_auto) = match &r.fleet_size {
        None => (1, false),
        Some(RawFleetSize::Number(n)) => (c.positive("redis.fleet_size", *n).unwrap_or(1), false),
        Some(RawFleetSize::Word(w)) if w == "auto" => (1, true),
        Some(RawFleetSize::Word(w)) => {
            c.err(
                "redis.fleet_size",
                format!("\"{w}\" is neither a positive number nor auto"),
            );
            (1, false)
        }
    };
    let b = r.circuit_breaker.as_ref();
    let failure_ratio = b.and_then(|b| b.failure_ratio).unwrap_or(0.5);
    if !(failure_ratio > 0.0 && failure_ratio <= 1.0) {
        c.err(
            "redis.circuit_breaker.failure_ratio",
            format!("must be in (0, 1] (got {failure_ratio})"),
        );
    }
    let breaker = BreakerSettings {
        failure_ratio,
        min_calls: c.opt_positive(
            "redis.circuit_breaker.min_calls",
            b.and_then(|b| b.min_calls),
            20,
        ),
        window: Duration::from_secs(c.opt_positive(
            "redis.circuit_breaker.window_s",
            b.and_then(|b| b.window_s),
            10,
        )),
        break_duration: Duration::from_secs(c.opt_positive(
            "redis.circuit_breaker.break_s",
            b.and_then(|b| b.break_s),
            5,
        )),
        probes: c.opt_positive("redis.circuit_breaker.probes", b.and_then(|b| b.probes), 3),
    };
    let key_prefix = r.key_prefix.clone().unwrap_or_else(|| "tollgate".into());
    if key_prefix.is_empty() || key_prefix.contains(['{', '}']) {
        c.err(
            "redis.key_prefix",
            "must be non-empty and contain no braces",
        );
    }
    RedisSettings {
        mode,
        url,
        urls,
        username_env: env_name(c, "redis.username_env", &r.username_env),
        password_env: env_name(c, "redis.password_env", &r.password_env),
        tls_ca_file,
        key_prefix,
        timeout: Duration::from_millis(c.opt_positive_at_most(
            "redis.timeout_ms",
            r.timeout_ms,
            50,
            MAX_REDIS_TIMEOUT_MS,
        )),
        breaker,
        on_failure: c.policy(
            "redis.on_failure",
            r.on_failure.as_deref(),
            FailurePolicy::Local,
        ),
        fleet_size,
        fleet_auto,
    }
}

/// Largest `redis.timeout_ms` (default 50): every Redis call on the request path is bounded by
/// it, so it bounds how long a request can wait on a frozen Redis.
pub const MAX_REDIS_TIMEOUT_MS: u64 = 60_000;

/// An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) as the IPv4 network it maps
/// (`10.0.0.0/8`): addresses are normalised to IPv4 before they are matched
/// ([`crate::http::client_ip::normalize`]), so the mapped form would never match. Other
/// networks are returned as they are.
fn mapped_to_ipv4(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.network().to_ipv4_mapped() {
            Some(v4) => ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96)
                .map(IpNet::V4)
                .unwrap_or(net),
            None => net,
        },
        other => other,
    }
}

fn edge_settings(c: &mut Check, e: &RawEdge) -> Option<EdgeSettings> {
    let rate = c.rate("edge", e.limit, &e.per, e.burst);
    let trusted = c.cidrs(
        "edge.trusted_proxies",
        e.trusted_proxies.as_deref().unwrap_or(&[]),
    );
    let exempt = c.cidrs("edge.exempt", e.exempt.as_deref().unwrap_or(&[]));
    let ipv6_prefix = e.ipv6_prefix.unwrap_or(DEFAULT_IPV6_PREFIX.into());
    if !(1..=128).contains(&ipv6_prefix) {
        c.err(
            "edge.ipv6_prefix",
            format!("must be 1..=128 (got {ipv6_prefix})"),
        );
    }
    let max_clients = c.opt_positive("edge.max_clients", e.max_clients, 100_000) as usize;
    let algorithm = policy::edge_algorithm(c, e.algorithm.as_deref(), rate.as_ref());
    Some(EdgeSettings {
        rate: rate?,
        algorithm,
        trusted_proxies: trusted,
        ipv6_prefix: ipv6_prefix.clamp(1, 128) as u8,
        exempt,
        max_clients,
        mode: c.mode("edge.mode", e.mode.as_deref()),
    })
}

fn identity_settings(
    c: &mut Check,
    raw: Option<&RawIdentity>,
    tier_ref: &mut impl FnMut(&mut Check, &str, &str),
) -> IdentitySettings {
    let header = |c: &mut Check, path: &str, v: Option<&String>, default: &'static str| {
        let name = v.map(|s| s.to_ascii_lowercase());
        match name
            .as_deref()
            .map(|n| http::HeaderName::from_bytes(n.as_bytes()))
        {
            None => http::HeaderName::from_static(default),
            Some(Ok(h)) => h,
            Some(Err(_)) => {
                let name = name.unwrap_or_default();
                c.err(path, format!("\"{name}\" is not a valid header name"));
                http::HeaderName::from_static(default)
            }
        }
    };
    let tenant_header = header(
        c,
        "identity.tenant_header",
        raw.and_then(|r| r.tenant_header.as_ref()),
        "x-tollgate-tenant",
    );
    let tier_header = header(
        c,
        "identity.tier_header",
        raw.and_then(|r| r.tier_header.as_ref()),
        "x-tollgate-tier",
    );
    let Some(raw) = raw else {
        return IdentitySettings {
            jwt: None,
            api_keys: None,
            default_tier: None,
            tenant_header,
            tier_header,
            forward_credentials: false,
            mtls: None,
        };
    };
    if let Some(t) = &raw.default_tier {
        tier_ref(c, "identity.default_tier", t);
    }
    let jwt = raw.jwt.as_ref().map(|j| jwt_settings(c, j));
    let api_keys = raw.api_keys.as_ref().map(|a| {
        let mut seen = BTreeSet::new();
        let mut keys = Vec::new();
        for (i, k) in a.keys.iter().enumerate() {
            let path = format!("identity.api_keys.keys[{i}]");
            let mut digest = [0u8; 32];
            if k.sha256.len() != 64 || hex::decode_to_slice(&k.sha256, &mut digest).is_err() {
                c.err(
                    format!("{path}.sha256"),
                    "must be 64 hex digits (the SHA-256 of the key; see `tollgate hash-key`)",
                );
            } else if !seen.insert(digest) {
                c.err(format!("{path}.sha256"), "duplicate key digest");
            }
            c.tenant_id(&format!("{path}.tenant"), &k.tenant);
            if let Some(t) = &k.tier {
                tier_ref(c, &format!("{path}.tier"), t);
            }
            keys.push(ApiKeyEntry {
                sha256: digest,
                tenant: k.tenant.clone(),
                tier: k.tier.clone(),
            });
        }
        ApiKeySettings {
            header: header(
                c,
                "identity.api_keys.header",
                a.header.as_ref(),
                "x-api-key",
            ),
            keys,
        }
    });
    IdentitySettings {
        jwt,
        api_keys,
        default_tier: raw.default_tier.clone(),
        tenant_header,
        tier_header,
        forward_credentials: raw.forward_credentials.unwrap_or(false),
        mtls: raw.mtls.as_ref().and_then(|m| tls::mtls(c, m)),
    }
}

fn jwt_settings(c: &mut Check, j: &RawJwt) -> JwtSettings {
    use jsonwebtoken::Algorithm as A;
    let mut keys = Vec::new();
    let mut kids = BTreeSet::new();
    if j.keys.is_empty() {
        c.err("identity.jwt.keys", "needs at least one key");
    }
    for (i, k) in j.keys.iter().enumerate() {
        let path = format!("identity.jwt.keys[{i}]");
        if let Some(kid) = &k.kid {
            if !kids.insert(kid.clone()) {
                c.err(format!("{path}.kid"), format!("duplicate kid \"{kid}\""));
            }
        }
        let alg = match k.algorithm.as_str() {
            "HS256" => A::HS256,
            "HS384" => A::HS384,
            "HS512" => A::HS512,
            "RS256" => A::RS256,
            "RS384" => A::RS384,
            "RS512" => A::RS512,
            "PS256" => A::PS256,
            "PS384" => A::PS384,
            "PS512" => A::PS512,
            "ES256" => A::ES256,
            "ES384" => A::ES384,
            "EdDSA" => A::EdDSA,
            other => {
                c.err(
                    format!("{path}.algorithm"),
                    format!("\"{other}\" is not supported (HS256/384/512, RS256/384/512, PS256/384/512, ES256/384, EdDSA)"),
                );
                continue;
            }
        };
        let hmac = matches!(alg, A::HS256 | A::HS384 | A::HS512);
        let source = match (&k.secret_env, &k.secret_file, &k.public_key_file) {
            (Some(env), None, None) if hmac => KeySource::SecretEnv(env.clone()),
            (None, Some(file), None) if hmac => KeySource::SecretFile(file.clone()),
            (None, None, Some(file)) if !hmac => KeySource::PublicKeyFile(file.clone()),
            _ if hmac => {
                c.err(
                    &path,
                    "an HS* key needs exactly one of secret_env or secret_file",
                );
                continue;
            }
            _ => {
                c.err(
                    &path,
                    "an RS/PS/ES/EdDSA key needs public_key_file (and nothing else)",
                );
                continue;
            }
        };
        keys.push(JwtKeySettings {
            kid: k.kid.clone(),
            algorithm: alg,
            source,
        });
    }
    let leeway_s = match j.leeway_s {
        Some(v) if v < 0 => {
            c.err(
                "identity.jwt.leeway_s",
                format!("must not be negative (got {v})"),
            );
            0
        }
        Some(v) => v as u64,
        None => 30,
    };
    JwtSettings {
        issuer: j.issuer.clone(),
        audience: j.audience.clone(),
        leeway_s,
        tenant_claim: j.tenant_claim.clone().unwrap_or_else(|| "sub".into()),
        tier_claim: j.tier_claim.clone(),
        keys,
    }
}

/// Largest accepted tier `weight`: a share ratio beyond 1000:1 is a misconfiguration.
const MAX_WEIGHT: i64 = 1000;

/// `tiers.<name>.weight`: 1..=1000, default 1.
fn tier_weight(c: &mut Check, path: &str, weight: Option<i64>) -> u32 {
    match weight {
        None => 1,
        Some(w) if (1..=MAX_WEIGHT).contains(&w) => w as u32,
        Some(w) => {
            c.err(
                format!("{path}.weight"),
                format!("must be between 1 and {MAX_WEIGHT} (got {w})"),
            );
            1
        }
    }
}

/// `tiers.<name>.pool`: a valid bucket and `0 < max_share <= 1` (default 0.5).
fn pool_settings(c: &mut Check, tier_path: &str, p: &RawPool) -> Option<PoolSettings> {
    let path = format!("{tier_path}.pool");
    let rate = c.rate(&path, p.limit, &p.per, p.burst);
    let max_share = p.max_share.unwrap_or(0.5);
    if !(max_share > 0.0 && max_share <= 1.0) {
        c.err(
            format!("{path}.max_share"),
            format!("must be greater than 0 and at most 1 (got {max_share})"),
        );
        return None;
    }
    Some(PoolSettings {
        rate: rate?,
        max_share,
    })
}

fn upstream_settings(c: &mut Check, name: &str, u: &RawUpstream) -> Option<UpstreamSettings> {
    let path = format!("upstreams.{name}");
    if u.backends.is_empty() {
        c.err(format!("{path}.backends"), "needs at least one backend");
    }
    let mut backends = Vec::new();
    for (i, b) in u.backends.iter().enumerate() {
        // Resolved once here (blocking DNS is fine: config loading is off the request path).
        match b.to_socket_addrs().map(|mut a| a.next()) {
            Ok(Some(addr)) => {
                if backends.contains(&addr) {
                    c.err(
                        format!("{path}.backends[{i}]"),
                        format!("duplicate backend \"{b}\""),
                    );
                }
                backends.push(addr)
            }
            _ => c.err(
                format!("{path}.backends[{i}]"),
                format!("\"{b}\" is not a resolvable host:port"),
            ),
        }
    }
    let max_concurrency = u
        .max_concurrency
        .and_then(|v| c.positive(&format!("{path}.max_concurrency"), v))
        .map(|v| v.min(u32::MAX as u64) as u32);
    let queue = u.queue.as_ref().and_then(|q| {
        if max_concurrency.is_none() {
            c.err(format!("{path}.queue"), "needs max_concurrency");
        }
        let max = c.positive(&format!("{path}.queue.max"), q.max)?;
        let timeout = c.positive(&format!("{path}.queue.timeout_ms"), q.timeout_ms)?;
        let max = max.min(u32::MAX as u64) as u32;
        let per_tenant = c.opt_positive(
            &format!("{path}.queue.max_per_tenant"),
            q.max_per_tenant,
            u64::from(max),
        );
        if per_tenant > u64::from(max) {
            c.err(
                format!("{path}.queue.max_per_tenant"),
                format!("must not exceed queue.max ({max}), got {per_tenant}"),
            );
        }
        Some(QueueSettings {
            max,
            timeout: Duration::from_millis(timeout),
            fair: q.fair.unwrap_or(false),
            max_per_tenant: per_tenant.min(u64::from(max)) as u32,
        })
    });
    let max_concurrency_per_tenant = u
        .max_concurrency_per_tenant
        .and_then(|v| c.positive(&format!("{path}.max_concurrency_per_tenant"), v))
        .map(|v| v.min(u32::MAX as u64) as u32);
    if max_concurrency_per_tenant.is_some() && max_concurrency.is_none() {
        c.err(
            format!("{path}.max_concurrency_per_tenant"),
            "needs max_concurrency",
        );
    }
    let health_check = u.health_check.as_ref().map(|h| {
        let p = h.path.clone().unwrap_or_else(|| "/healthz".into());
        if !p.starts_with('/') {
            c.err(format!("{path}.health_check.path"), "must start with /");
        }
        HealthCheckSettings {
            path: p,
            interval: Duration::from_secs(c.opt_positive(
                &format!("{path}.health_check.interval_s"),
                h.interval_s,
                5,
            )),
        }
    });
    Some(UpstreamSettings {
        name: name.to_string(),
        backends,
        max_concurrency,
        max_concurrency_per_tenant,
        queue,
        retry_after_s: c.opt_positive(&format!("{path}.retry_after_s"), u.retry_after_s, 1),
        connect_timeout: Duration::from_millis(c.opt_positive(
            &format!("{path}.connect_timeout_ms"),
            u.connect_timeout_ms,
            1_000,
        )),
        read_timeout: Duration::from_millis(c.opt_positive(
            &format!("{path}.read_timeout_ms"),
            u.read_timeout_ms,
            30_000,
        )),
        health_check,
        tls: u
            .tls
            .as_ref()
            .map(|t| tls::upstream_tls(c, &path, t, &u.backends)),
    })
}

fn route_settings(
    c: &mut Check,
    path: &str,
    r: &RawRoute,
    upstreams: &BTreeMap<String, RawUpstream>,
) -> Option<RouteSettings> {
    if !upstreams.contains_key(&r.upstream) {
        c.err(
            format!("{path}.upstream"),
            format!("no upstream named \"{}\"", r.upstream),
        );
    }
    let host = match r.host.as_deref().map(host::route_host) {
        None => HostMatch::Any,
        Some(Ok(m)) => m,
        Some(Err(why)) => {
            let h = r.host.as_deref().unwrap_or_default();
            c.err(
                format!("{path}.host"),
                format!("\"{h}\" never matches a request: {why}"),
            );
            // The config is refused; as written, so it is not reported as a duplicate of `*`.
            HostMatch::Exact(h.to_string())
        }
    };
    let path_prefix = r.path_prefix.clone().unwrap_or_else(|| "/".into());
    if !path_prefix.starts_with('/') {
        c.err(format!("{path}.path_prefix"), "must start with /");
    } else {
        // Requests are routed on normalised paths: a prefix in any other spelling never matches.
        match crate::http::target::normalise_target(path_prefix.as_bytes()) {
            Ok(_) if path_prefix.contains(';') => c.err(
                format!("{path}.path_prefix"),
                "contains ';': routes match the path without its ; parameters, so this never matches",
            ),
            Ok(t) if t.path == path_prefix && t.query.is_none() => {}
            Ok(t) => c.err(
                format!("{path}.path_prefix"),
                format!(
                    "\"{path_prefix}\" is not a normalised path (requests are routed on normalised paths); write \"{}\"",
                    t.path
                ),
            ),
            Err(e) => c.err(format!("{path}.path_prefix"), e.detail()),
        }
    }
    let auth = match r.auth.as_deref() {
        None | Some("optional") => AuthMode::Optional,
        Some("required") => AuthMode::Required,
        Some("none") => AuthMode::None,
        Some(other) => {
            c.err(
                format!("{path}.auth"),
                format!("\"{other}\" is not an auth mode (required, optional, none)"),
            );
            AuthMode::Optional
        }
    };
    Some(RouteSettings {
        id: path.to_string(),
        host,
        path_prefix,
        upstream: r.upstream.clone(),
        auth,
        cost: c.opt_positive(&format!("{path}.cost"), r.cost, 1),
        max_body_bytes: r
            .max_body_bytes
            .and_then(|v| c.positive(&format!("{path}.max_body_bytes"), v)),
        mode: c.mode(&format!("{path}.mode"), r.mode.as_deref()),
    })
}

fn response_settings(c: &mut Check, raw: Option<&RawResponse>) -> ResponseSettings {
    let status = raw.and_then(|r| r.status).unwrap_or(429);
    if !(400..=599).contains(&status) {
        c.err(
            "response.status",
            format!("must be a 4xx or 5xx status (got {status})"),
        );
    }
    let headers = match raw.and_then(|r| r.headers.as_deref()) {
        None | Some("ietf") => HeaderMode::Ietf,
        Some("legacy") => HeaderMode::Legacy,
        Some("both") => HeaderMode::Both,
        Some("none") => HeaderMode::None,
        Some(other) => {
            c.err(
                "response.headers",
                format!("\"{other}\" is not a header mode (ietf, legacy, both, none)"),
            );
            HeaderMode::Ietf
        }
    };
    ResponseSettings {
        status: status.clamp(400, 599) as u16,
        headers,
    }
}

fn observability_settings(c: &mut Check, raw: Option<&RawObservability>) -> ObservabilitySettings {
    let json_logs = match raw.and_then(|r| r.log_format.as_deref()) {
        None | Some("text") => false,
        Some("json") => true,
        Some(other) => {
            c.err(
                "observability.log_format",
                format!("\"{other}\" is not a log format (text, json)"),
            );
            false
        }
    };
    let tenant_metrics = match raw.and_then(|r| r.tenant_metrics) {
        None => 0,
        Some(v) if v < 0 => {
            c.err("observability.tenant_metrics", "must not be negative");
            0
        }
        Some(v) => v as usize,
    };
    ObservabilitySettings {
        access_log: raw.and_then(|r| r.access_log).unwrap_or(true),
        json_logs,
        tenant_metrics,
    }
}
