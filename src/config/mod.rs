//! Configuration: `gateway.yaml` → raw serde structs ([`raw`]) → validated [`Config`].
//!
//! Loading never panics: every problem is a [`ConfigError`] naming the field path
//! (`routes[1].upstream`) and the reason; YAML syntax errors carry line and column.

pub mod duration;
pub mod model;
pub mod raw;
mod region;
pub mod source;
mod validate;
pub mod warnings;

pub use model::*;

use std::fmt;
use std::path::Path;

/// One configuration problem: where (`field path`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted field path, e.g. `tiers.free.limit` or `routes[1].upstream`; empty for the file.
    pub path: String,
    /// Human-readable reason.
    pub reason: String,
}

impl ConfigError {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

/// Parses and validates YAML text. Errors: YAML syntax (with line and column), unknown keys,
/// wrong types, and every semantic problem found by validation.
pub fn parse(text: &str) -> Result<Config, Vec<ConfigError>> {
    let raw: raw::RawConfig = serde_yaml::from_str(text).map_err(|e| vec![yaml_error(e)])?;
    validate::validate(raw)
}

/// Reads and validates the file at `path`, recording its SHA-256 and the load time in
/// [`Config::source`].
pub fn load(path: &Path) -> Result<Config, Vec<ConfigError>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![ConfigError::new(
            "",
            format!("cannot read {}: {e}", path.display()),
        )]
    })?;
    let mut config = parse(&text)?;
    config.source = ConfigSource::of(&text);
    Ok(config)
}

fn yaml_error(e: serde_yaml::Error) -> ConfigError {
    // serde_yaml prefixes the field path ("routes[0]: unknown field ...") and appends the location.
    let text = e.to_string();
    let (path, reason) = match text.split_once(": ") {
        Some((path, reason)) if !path.is_empty() && !path.contains(' ') => (path, reason),
        _ => ("", text.as_str()),
    };
    let join = |field: &str| match path {
        "" => field.to_string(),
        p => format!("{p}.{field}"),
    };
    // A missing or unknown field is reported at its own path: `routes[0].upstream: is required`,
    // `edge.brust: unknown field ...`.
    if let Some((field, rest)) = reason
        .strip_prefix("missing field `")
        .and_then(|r| r.split_once('`'))
    {
        return ConfigError::new(join(field), format!("is required{rest}"));
    }
    if let Some((field, _)) = reason
        .strip_prefix("unknown field `")
        .and_then(|r| r.split_once('`'))
    {
        return ConfigError::new(join(field), reason);
    }
    match path {
        "" if reason.contains("expected struct RawConfig") => ConfigError::new(
            "",
            format!("invalid YAML: the document must be a mapping of sections (listen, upstreams, routes, ...): {reason}"),
        ),
        "" => {
            let at = match e.location() {
                _ if text.contains(" line ") => String::new(),
                Some(l) => format!(" at line {} column {}", l.line(), l.column()),
                None => " (in the document as a whole)".to_string(),
            };
            ConfigError::new("", format!("invalid YAML: {text}{at}"))
        }
        p => ConfigError::new(p, reason),
    }
}

/// Test helper: every error [`parse`] reports for `yaml` as `path: reason` text (empty when
/// the file is valid).
#[cfg(test)]
pub(crate) fn parse_errors(yaml: &str) -> Vec<String> {
    parse(yaml)
        .err()
        .unwrap_or_default()
        .iter()
        .map(|e| e.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
listen: ["127.0.0.1:8080"]
upstreams:
  orders: { backends: ["127.0.0.1:9001"] }
routes:
  - { path_prefix: "/", upstream: orders }
"#;

    fn errors(yaml: &str) -> Vec<String> {
        parse_errors(yaml)
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let c = parse(BASE).unwrap();
        assert_eq!(c.server.threads, 2);
        assert_eq!(c.server.grace_period_s, 10);
        assert_eq!(c.response.status, 429);
        assert_eq!(c.routes[0].cost, 1);
        assert_eq!(c.routes[0].auth, AuthMode::Optional);
        assert!(c.tiers.is_empty() && c.redis.is_none() && c.edge.is_none());
    }

    #[test]
    fn fairness_fields_are_checked_by_path() {
        let yaml = BASE.replace(
            "orders: { backends: [\"127.0.0.1:9001\"] }",
            "orders: { backends: [\"127.0.0.1:9001\"], max_concurrency_per_tenant: 2, \
             queue: { max: 4, timeout_ms: 10, fair: true, max_per_tenant: 5 } }",
        ) + "redis: { url: \"redis://127.0.0.1:6379\" }\ntiers:\n  pro: { limit: 1, per: 1s, weight: 0, pool: { limit: 5, per: 1s, max_share: 1.5 } }\n  team: { limit: 1, per: 1s, pool: { limit: 0, per: 1s } }\n";
        let e = errors(&yaml);
        for want in [
            "tiers.pro.weight: must be between 1 and 1000 (got 0)",
            "upstreams.orders.queue: needs max_concurrency",
            "upstreams.orders.queue.max_per_tenant: must not exceed queue.max (4), got 5",
            "upstreams.orders.max_concurrency_per_tenant: needs max_concurrency",
            "tiers.pro.pool.max_share: must be greater than 0 and at most 1 (got 1.5)",
            "tiers.team.pool.limit: must be greater than zero (got 0)",
        ] {
            assert!(e.contains(&want.to_string()), "{want} not in {e:?}");
        }
        let ok = BASE.replace(
            "orders: { backends: [\"127.0.0.1:9001\"] }",
            "orders: { backends: [\"127.0.0.1:9001\"], max_concurrency: 4, \
             max_concurrency_per_tenant: 2, queue: { max: 4, timeout_ms: 10, fair: true } }",
        );
        let c = parse(&ok).expect("valid");
        let u = &c.upstreams["orders"];
        assert_eq!(u.max_concurrency_per_tenant, Some(2));
        let q = u.queue.as_ref().unwrap();
        assert!(q.fair);
        assert_eq!(q.max_per_tenant, 4, "defaults to queue.max");
    }

    #[test]
    fn unknown_upstream_names_the_route() {
        let e = errors(&BASE.replace("upstream: orders", "upstream: ordrs"));
        assert_eq!(e, [r#"routes[0].upstream: no upstream named "ordrs""#]);
    }

    #[test]
    fn unknown_key_is_an_error_with_its_path() {
        let e = errors(&format!(
            "{BASE}\nedge: {{ limit: 1, per: 1s, brust: 3 }}\n"
        ));
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("brust"), "{e:?}");
        assert!(e[0].starts_with("edge"), "{e:?}");
    }

    #[test]
    fn non_positive_numbers_and_bad_durations_are_each_reported() {
        let yaml = format!(
            "{BASE}\nredis: {{ url: \"redis://127.0.0.1:6379\", timeout_ms: 0 }}\ntiers:\n  free: {{ limit: -5, per: 5x }}\n"
        );
        let e = errors(&yaml);
        assert!(
            e.contains(&"redis.timeout_ms: must be greater than zero (got 0)".to_string()),
            "{e:?}"
        );
        assert!(
            e.contains(&"tiers.free.limit: must be greater than zero (got -5)".to_string()),
            "{e:?}"
        );
        assert!(
            e.iter().any(|m| m.starts_with("tiers.free.per: \"5x\"")),
            "{e:?}"
        );
    }

    #[test]
    fn tenant_override_is_checked_merged_into_every_tier() {
        let yaml = format!(
            "{BASE}\nredis: {{ url: \"redis://h:1\" }}\ntiers:\n  fast: {{ limit: 10, per: 1s }}\n  slow: {{ limit: 1, per: 1d }}\ntenants:\n  t1: {{ tier: fast, burst: 100000000 }}\n"
        );
        // 1e8 tokens × 1 s is in range, but a tier claim can put t1 in `slow`: 1e8 × 1 d is not.
        let e = errors(&yaml);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("tenants.t1.burst: burst × per is too large")
                && e[0].contains("tier \"slow\""),
            "{e:?}"
        );
        assert!(parse(&yaml.replace("100000000", "50000000")).is_ok());
        // A `per` override that makes a tier's own burst too large blames `per`.
        let per = yaml
            .replace("tier: fast, burst: 100000000", "per: 1d")
            .replace(
                "fast: { limit: 10, per: 1s }",
                "fast: { limit: 10, per: 1s, burst: 100000000 }",
            );
        let e = errors(&per);
        assert!(
            e.len() == 1 && e[0].starts_with("tenants.t1.per: "),
            "{e:?}"
        );
    }

    #[test]
    fn missing_fields_are_reported_at_their_path() {
        assert_eq!(
            errors("upstreams: {}\nroutes: []\n"),
            ["listen: is required"]
        );
        let e = errors(&BASE.replace("upstream: orders }", "}"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("routes[0].upstream: is required"), "{e:?}");
    }

    #[test]
    fn yaml_syntax_error_has_line_and_column() {
        let e = errors("listen: [\n  - oops: :\n");
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("line"), "{e:?}");
    }

    #[test]
    fn tiers_need_redis_and_references_must_exist() {
        let yaml = format!(
            "{BASE}\ntiers:\n  free: {{ limit: 5, per: 1m }}\nidentity: {{ default_tier: gold }}\n"
        );
        let e = errors(&yaml);
        assert!(
            e.contains(&"redis: is required when tiers are configured".to_string()),
            "{e:?}"
        );
        assert!(
            e.contains(&r#"identity.default_tier: no tier named "gold""#.to_string()),
            "{e:?}"
        );
    }

    #[test]
    fn duplicate_yaml_keys_are_rejected() {
        let yaml = format!(
            "{BASE}\ntiers:\n  free: {{ limit: 5, per: 1m }}\n  free: {{ limit: 6, per: 1m }}\n"
        );
        assert!(!errors(&yaml).is_empty());
    }

    #[test]
    fn route_cost_above_every_burst_is_rejected() {
        let yaml = format!(
            "{BASE}\nredis: {{ url: \"redis://h:1\" }}\ntiers:\n  a: {{ limit: 5, per: 1m, burst: 10 }}\n  b: {{ limit: 5, per: 1m, burst: 20 }}\n"
        );
        assert!(parse(&yaml.replace("upstream: orders }", "upstream: orders, cost: 20 }")).is_ok());
        assert_eq!(
            errors(&yaml.replace("upstream: orders }", "upstream: orders, cost: 21 }")),
            ["routes[0].cost: 21 exceeds the burst of every tier (largest 20): such requests could never be admitted"]
        );
    }

    #[test]
    fn per_longer_than_a_day_is_rejected() {
        let yaml = format!(
            "{BASE}\nredis: {{ url: \"redis://h:1\" }}\ntiers:\n  t: {{ limit: 5, per: 2d }}\n"
        );
        assert_eq!(errors(&yaml), ["tiers.t.per: must be at most 1d"]);
    }

    #[test]
    fn route_prefix_must_be_a_normalised_path() {
        let prefix = |p: &str| BASE.replace("path_prefix: \"/\"", &format!("path_prefix: \"{p}\""));
        assert_eq!(
            errors(&prefix("/a/../%61dmin//x")),
            ["routes[0].path_prefix: \"/a/../%61dmin//x\" is not a normalised path (requests are routed on normalised paths); write \"/admin/x\""]
        );
        assert_eq!(
            errors(&prefix("/a%2Fb")),
            ["routes[0].path_prefix: the path contains an encoded slash (%2F)"]
        );
        assert!(parse(&prefix("/a/b/")).is_ok());
        assert!(parse(&prefix("/a%3Fb")).is_ok());
    }

    #[test]
    fn http_limits_defaults_and_field_paths() {
        let c = parse(BASE).unwrap();
        assert_eq!(c.server.http, HttpLimits::default());
        assert_eq!(c.server.http.max_header_bytes, 65_536);
        assert_eq!(c.server.http.max_headers, 100);
        assert_eq!(c.server.http.header_read_timeout.as_secs(), 10);
        assert_eq!(c.server.http.keepalive_timeout.as_secs(), 60);
        assert_eq!(c.routes[0].max_body_bytes, None);
        let yaml = format!(
            "{}server: {{ max_header_bytes: 600000, max_headers: 300, header_read_timeout: 0s, keepalive_timeout: soon }}\n",
            BASE.replace("upstream: orders }", "upstream: orders, max_body_bytes: 0 }")
        );
        let e = errors(&yaml);
        for want in [
            "server.max_header_bytes: must be at most 524288 (got 600000)",
            "server.max_headers: must be at most 256 (got 300)",
            "server.header_read_timeout: \"0s\" must be greater than zero",
            "routes[0].max_body_bytes: must be greater than zero (got 0)",
        ] {
            assert!(e.contains(&want.to_string()), "{want} not in {e:?}");
        }
        assert!(
            e.iter()
                .any(|m| m.starts_with("server.keepalive_timeout: ")),
            "{e:?}"
        );
        let ok = format!(
            "{}server: {{ max_header_bytes: 1024, max_headers: 5, header_read_timeout: 1500ms, keepalive_timeout: 5s }}\n",
            BASE.replace("upstream: orders }", "upstream: orders, max_body_bytes: 10 }")
        );
        let c = parse(&ok).unwrap();
        assert_eq!(c.server.http.max_headers, 5);
        assert_eq!(c.server.http.header_read_timeout.as_millis(), 1500);
        assert_eq!(c.routes[0].max_body_bytes, Some(10));
    }
}
