//! What every section's validation shares: the error collector [`Check`] with its checks of
//! numbers, durations, addresses, failure policies, modes and rates, and [`key_path`].

use crate::config::duration::parse_duration;
use crate::config::model::{FailurePolicy, Mode, TenantOverride};
use crate::config::ConfigError;
use crate::limit::bounds::{self, RateBoundError};
use crate::limit::Rate;
use crate::tenant_id;
use std::net::SocketAddr;
use std::time::Duration;

/// Collects errors while validating.
#[derive(Default)]
pub(super) struct Check {
    /// Every error found so far, in the order found.
    pub(super) errors: Vec<ConfigError>,
    /// Durations written under their old names (`timeout_ms: 300`): `tollgate check` suggests
    /// the unit form (`timeout: 300ms`).
    pub(super) old_spellings: Vec<ConfigError>,
}

impl Check {
    /// Records a problem at `path`.
    pub(super) fn err(&mut self, path: impl Into<String>, reason: impl Into<String>) {
        self.errors.push(ConfigError::new(path, reason));
    }

    /// A strictly positive integer, or an error naming `path`.
    pub(super) fn positive(&mut self, path: &str, value: i64) -> Option<u64> {
        if value <= 0 {
            self.err(path, format!("must be greater than zero (got {value})"));
            None
        } else {
            Some(value as u64)
        }
    }

    /// An optional strictly positive integer: `default` when absent or invalid (then with an
    /// error naming `path`).
    pub(super) fn opt_positive(&mut self, path: &str, value: Option<i64>, default: u64) -> u64 {
        match value {
            None => default,
            Some(v) => self.positive(path, v).unwrap_or(default),
        }
    }

    /// [`opt_positive`](Self::opt_positive) that is also at most `max` (else an error naming
    /// `path`, and `default`).
    pub(super) fn opt_positive_at_most(
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

    /// The optional `limit`, `per` and `burst` of an override at `path` (`<path>.limit`, ...),
    /// each checked alone as the file's fields are (positive numbers, a duration), `per` in
    /// milliseconds. The period's bounds and the merged bucket are the caller's to check.
    pub(super) fn rate_fields(
        &mut self,
        path: &str,
        limit: Option<i64>,
        per: Option<&str>,
        burst: Option<i64>,
    ) -> TenantOverride {
        TenantOverride {
            tier: None,
            limit: limit.and_then(|v| self.positive(&format!("{path}.limit"), v)),
            burst: burst.and_then(|v| self.positive(&format!("{path}.burst"), v)),
            per_ms: per
                .and_then(|p| self.duration(&format!("{path}.per"), p))
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    /// A duration such as `250ms` or `1m` ([`parse_duration`]), or an error naming `path`.
    pub(super) fn duration(&mut self, path: &str, text: &str) -> Option<Duration> {
        match parse_duration(text) {
            Ok(d) => Some(d),
            Err(e) => {
                self.err(path, e);
                None
            }
        }
    }

    /// A duration setting written in the unit form (`<parent>.<name>: 300ms`) or under its old
    /// name as a whole number of units (`<parent>.<old>: 300`, `unit_ms` ms each: 1 for `_ms`,
    /// 1000 for `_s`): its value in those units (`None`: neither set, or refused), and the path
    /// further checks name. Both set, or a unit form that is not a whole number of those units,
    /// is an error. The old name stays an alias; its use is noted for `tollgate check`.
    pub(super) fn duration_in(
        &mut self,
        parent: &str,
        (name, new): (&str, Option<&str>),
        (old, old_value): (&str, Option<i64>),
        unit_ms: u64,
    ) -> (Option<i64>, String) {
        let new_path = format!("{parent}.{name}");
        let old_path = format!("{parent}.{old}");
        match (new, old_value) {
            (Some(_), Some(_)) => {
                self.err(
                    &new_path,
                    format!("set either {name} or its old spelling {old}, not both"),
                );
                (old_value, new_path)
            }
            (Some(text), None) => {
                let Some(d) = self.duration(&new_path, text) else {
                    return (None, new_path);
                };
                let ms = d.as_millis() as u64;
                if !ms.is_multiple_of(unit_ms) {
                    self.err(
                        &new_path,
                        format!("\"{text}\" is not a whole number of seconds"),
                    );
                    return (None, new_path);
                }
                (Some((ms / unit_ms) as i64), new_path)
            }
            (None, Some(v)) => {
                let unit = if unit_ms == 1 { "ms" } else { "s" };
                self.old_spellings.push(ConfigError::new(
                    &old_path,
                    format!("an old spelling, still read: write {name}: {v}{unit} (every duration takes a unit: ms, s, m, h, d)"),
                ));
                (Some(v), old_path)
            }
            (None, None) => (None, new_path),
        }
    }

    /// An `ip:port` address, or an error naming `path`.
    pub(super) fn socket_addr(&mut self, path: &str, text: &str) -> Option<SocketAddr> {
        match text.parse() {
            Ok(a) => Some(a),
            Err(_) => {
                self.err(path, format!("\"{text}\" is not an ip:port address"));
                None
            }
        }
    }

    /// A failure policy (`open`, `closed`, `local`) at `path`; `default` when absent or invalid.
    pub(super) fn policy(
        &mut self,
        path: &str,
        text: Option<&str>,
        default: FailurePolicy,
    ) -> FailurePolicy {
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
    pub(super) fn mode(&mut self, path: &str, text: Option<&str>) -> Mode {
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
    pub(super) fn rate(
        &mut self,
        path: &str,
        limit: i64,
        per: &str,
        burst: Option<i64>,
    ) -> Option<Rate> {
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

    /// An HTTP header name (any case; lower case in the result), or an error naming `path`.
    pub(super) fn header_name(&mut self, path: &str, name: &str) -> Option<http::HeaderName> {
        let lower = name.to_ascii_lowercase();
        match http::HeaderName::from_bytes(lower.as_bytes()) {
            Ok(h) => Some(h),
            Err(_) => {
                self.err(path, format!("\"{lower}\" is not a valid header name"));
                None
            }
        }
    }

    /// A tenant id (`tenant_id::validate`) found at `path`.
    pub(super) fn tenant_id(&mut self, path: &str, id: &str) {
        if let Err(e) = tenant_id::validate(id) {
            self.err(path, format!("tenant id {e}"));
        }
    }
}

/// The field path of map entry `key` under `map`: `map.key` for plain keys, else
/// `map["<escaped key>"]` so blanks and control characters stay visible.
pub(super) fn key_path(map: &str, key: &str) -> String {
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

/// Why `url` is not a usable Redis URL, or `None` when it is one: the scheme must be `redis://`
/// or `rediss://`, the redis crate must accept it, and a host and a port, when written, must not
/// be empty (`redis://h:` is a typo, not port 6379) and the port must not be 0.
pub(super) fn redis_url_problem(url: &str) -> Option<String> {
    let Some(rest) = url
        .strip_prefix("redis://")
        .or_else(|| url.strip_prefix("rediss://"))
    else {
        return Some(format!("\"{url}\" is not a redis:// or rediss:// URL"));
    };
    if redis::Client::open(url).is_err() {
        return Some(format!("\"{url}\" is not a valid Redis URL"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let port = match host_port.rsplit_once(':') {
        // An IPv6 literal's colons are inside brackets.
        Some((_, port)) if !port.contains(']') => Some(port),
        _ => None,
    };
    if host_port.is_empty() || host_port.starts_with(':') {
        Some(format!("\"{url}\" has no host"))
    } else if port == Some("") {
        Some(format!("\"{url}\" has an empty port"))
    } else if port == Some("0") {
        Some(format!("\"{url}\" has port 0"))
    } else {
        None
    }
}

#[cfg(test)]
mod redis_url_tests {
    use super::redis_url_problem;

    #[test]
    fn usable_redis_urls_pass() {
        for url in [
            "redis://127.0.0.1:6379",
            "redis://h",
            "rediss://h:6380/2",
            "redis://[::1]:6379",
            "redis://[::1]",
        ] {
            assert_eq!(redis_url_problem(url), None, "{url}");
        }
    }

    #[test]
    fn typos_in_host_or_port_are_named() {
        for (url, why) in [
            ("redis://127.0.0.1:", "has an empty port"),
            ("redis://[::1]:", "has an empty port"),
            ("redis://h:0", "has port 0"),
            ("redis://h:port", "is not a valid Redis URL"),
            ("http://h:1", "is not a redis:// or rediss:// URL"),
        ] {
            let problem = redis_url_problem(url).unwrap_or_default();
            assert!(problem.ends_with(why), "{url}: {problem}");
        }
        assert!(redis_url_problem("redis://:1").is_some());
    }
}
