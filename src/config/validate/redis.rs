//! `redis:`: where the shared store is (standalone, cluster or sentinel), its credentials, TLS,
//! timeouts, circuit breaker and failure policy.

use super::common::{redis_url_problem, Check};
use crate::config::model::{BreakerSettings, FailurePolicy, RedisSettings, RedisTopology};
use crate::config::raw::{RawFleetSize, RawRedis};
use std::time::Duration;

/// Largest `redis.timeout_ms` (default 50): every Redis call on the request path is bounded by
/// it, so it bounds how long a request can wait on a frozen Redis.
pub const MAX_REDIS_TIMEOUT_MS: u64 = 60_000;

/// `redis:` → settings; errors name `redis.<field>`.
pub(super) fn settings(c: &mut Check, r: &RawRedis) -> RedisSettings {
    let (mode, url, urls) = redis_topology(c, r);
    let tls_ca_file = r.tls.as_ref().and_then(|t| t.ca_file.clone());
    if let Some(ca) = &tls_ca_file {
        if !urls.iter().all(|u| u.starts_with("rediss://")) {
            c.err("redis.tls", "needs rediss:// URLs");
        }
        if let Err(e) = std::fs::metadata(ca) {
            c.err("redis.tls.ca_file", crate::config::unreadable(ca, &e));
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
    let (window, window_path) = c.duration_in(
        "redis.circuit_breaker",
        ("window", b.and_then(|b| b.window.as_deref())),
        ("window_s", b.and_then(|b| b.window_s)),
        1000,
    );
    let (break_for, break_path) = c.duration_in(
        "redis.circuit_breaker",
        ("break", b.and_then(|b| b.break_for.as_deref())),
        ("break_s", b.and_then(|b| b.break_s)),
        1000,
    );
    let breaker = BreakerSettings {
        failure_ratio,
        min_calls: c.opt_positive(
            "redis.circuit_breaker.min_calls",
            b.and_then(|b| b.min_calls),
            20,
        ),
        window: Duration::from_secs(c.opt_positive(&window_path, window, 10)),
        break_duration: Duration::from_secs(c.opt_positive(&break_path, break_for, 5)),
        probes: c.opt_positive("redis.circuit_breaker.probes", b.and_then(|b| b.probes), 3),
    };
    let key_prefix = r.key_prefix.clone().unwrap_or_else(|| "tollgate".into());
    if key_prefix.is_empty() || key_prefix.contains(['{', '}']) {
        c.err(
            "redis.key_prefix",
            "must be non-empty and contain no braces",
        );
    }
    let (timeout, timeout_path) = c.duration_in(
        "redis",
        ("timeout", r.timeout.as_deref()),
        ("timeout_ms", r.timeout_ms),
        1,
    );
    RedisSettings {
        mode,
        url,
        urls,
        username_env: env_name(c, "redis.username_env", &r.username_env),
        password_env: env_name(c, "redis.password_env", &r.password_env),
        tls_ca_file,
        key_prefix,
        timeout: Duration::from_millis(c.opt_positive_at_most(
            &timeout_path,
            timeout,
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
        lease_ttl: lease_ttl(c, r.lease_ttl.as_deref()),
    }
}

/// Shortest and longest `redis.lease_ttl`.
const LEASE_TTL_BOUNDS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(3600));

/// `redis.lease_ttl`: a duration from 1s to 1h, default 30s.
fn lease_ttl(c: &mut Check, text: Option<&str>) -> Duration {
    let Some(text) = text else {
        return Duration::from_secs(30);
    };
    match c.duration("redis.lease_ttl", text) {
        Some(d) if (LEASE_TTL_BOUNDS.0..=LEASE_TTL_BOUNDS.1).contains(&d) => d,
        Some(_) => {
            c.err("redis.lease_ttl", "must be between 1s and 1h");
            Duration::from_secs(30)
        }
        None => Duration::from_secs(30),
    }
}

/// A `redis://` or `rediss://` URL at `path`, without credentials in it.
fn redis_url(c: &mut Check, path: &str, url: &str) {
    if let Some(problem) = redis_url_problem(url) {
        c.err(path, problem);
    } else if url.contains('@') {
        c.err(
            path,
            "must not carry credentials; use redis.username_env / redis.password_env",
        );
    }
}

/// The optional environment variable name at `path` (non-empty, without `=` or NUL).
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
