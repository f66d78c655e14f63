//! `GET /v1/config`: the running config file as JSON with every secret redacted, its SHA-256
//! (of the file bytes as loaded) and load time (RFC 3339, UTC).
//!
//! What is shown is the file as the operator wrote it, parsed (YAML → JSON), so defaults are not
//! filled in. Redacted as `"***"`: API key digests (`sha256`), any member named like a secret
//! (`secret`, `password`, `token`, `private_key`, `api_key`), and the password of any URL with
//! credentials (`redis://user:***@host`). The names of the environment variables and files that
//! hold secrets (`*_env`, `*_file`) are shown: they are not secrets, and the values they point
//! to are never read here. The admin token itself never appears (it lives in the environment).

use crate::config::Config;
use serde_json::{json, Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The redaction marker.
pub const REDACTED: &str = "***";

/// Member names whose values are secrets.
fn secret_member(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    if n.ends_with("_env") || n.ends_with("_file") {
        return false;
    }
    [
        "sha256",
        "secret",
        "password",
        "token",
        "private_key",
        "api_key",
    ]
    .iter()
    .any(|s| n == *s || n.ends_with(&format!("_{s}")))
}

/// `text` with the password of a `scheme://user:password@host` URL replaced (also a bare
/// `scheme://:password@host` or `scheme://token@host`, whose user part may be a credential).
pub fn redact_url(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..end].rfind('@') else {
        return text.to_string();
    };
    let userinfo = &rest[..at];
    let redacted = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:{REDACTED}"),
        None => REDACTED.to_string(),
    };
    format!("{scheme}://{redacted}{}", &rest[at..])
}

/// `v` with every secret replaced by [`REDACTED`] (rules in the module docs).
pub fn redact(v: Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = if secret_member(&k) && !v.is_null() {
                        json!(REDACTED)
                    } else {
                        redact(v)
                    };
                    (k, v)
                })
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(redact).collect()),
        Value::String(s) => Value::String(redact_url(&s)),
        other => other,
    }
}

/// RFC 3339 UTC text of a Unix time in seconds.
pub fn rfc3339(unix_s: u64) -> String {
    OffsetDateTime::from_unix_timestamp(unix_s as i64)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// The body of `GET /v1/config`.
pub fn view(config: &Config) -> Value {
    let source = &config.source;
    let parsed: Value = serde_yaml::from_str::<serde_yaml::Value>(&source.text)
        .ok()
        .and_then(|y| serde_json::to_value(y).ok())
        .unwrap_or(Value::Null);
    json!({
        "sha256": source.sha256,
        "loaded_at": rfc3339(source.loaded_at_s),
        "admin_token": if config.admin_token_env.is_some() { json!(REDACTED) } else { Value::Null },
        "config": redact(parsed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_names_are_not() {
        let v = json!({
            "redis": {"url": "redis://app:hunter2@10.0.0.1:6379/0", "password_env": "REDIS_PASSWORD"},
            "identity": {"api_keys": {"keys": [{"sha256": "abc123", "tenant": "acme"}]},
                         "jwt": {"keys": [{"secret_env": "JWT_SECRET", "secret": "inline"}]}},
            "admin": {"token_env": "TOLLGATE_ADMIN_TOKEN"},
            "global": {"url": "rediss://s3cr3t@g.example:6380"},
        });
        let r = redact(v).to_string();
        for secret in ["hunter2", "abc123", "inline", "s3cr3t"] {
            assert!(!r.contains(secret), "{secret} in {r}");
        }
        for shown in [
            "REDIS_PASSWORD",
            "JWT_SECRET",
            "TOLLGATE_ADMIN_TOKEN",
            "acme",
            "redis://app:***@10.0.0.1:6379/0",
        ] {
            assert!(r.contains(shown), "{shown} missing from {r}");
        }
    }

    #[test]
    fn urls_without_credentials_unchanged() {
        assert_eq!(redact_url("redis://10.0.0.1:6379"), "redis://10.0.0.1:6379");
        assert_eq!(redact_url("http://h/a@b"), "http://h/a@b");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn load_time_is_rfc3339_utc() {
        assert_eq!(rfc3339(1_796_083_200), "2026-12-01T00:00:00Z");
    }
}
