//! `/v1/rules/{rule}/keys/{key}/limits`: the bucket of one key of a limit rule set live
//! (docs/admin-api.md#one-key-of-a-limit-rule), kept with the tenants' overrides
//! ([`crate::live::overrides`]) and in force on every instance within `store.propagation`, on
//! the proxy's path and in the decision service alike.
//!
//! `{key}` is the key's value, one per part of the rule's `key:` in order, separated by `,`
//! (a `,` or `%` inside a value is percent-encoded: `%2C`, `%25`). `PUT` replaces the key's
//! override with the body's `limit`, `per`, `burst` (and `expires_in_s`), checked as the rule's
//! own buckets are in the file; `GET` answers it; `DELETE` removes it. Unknown rule: 404 naming
//! `rule`; a key no request of the rule can have (the wrong shape): 404 naming `key`; a key
//! longer than [`MAX_KEY_CHARS`]: 400 naming `key`. Bad input changes nothing.

use super::audit::Change;
use super::keys::{bad, object, uint_not_null};
use super::limits::{now_s, rate_fields, store, MAX_EXPIRY_S};
use super::reply::store_problem;
use crate::config::{live_rule_override, KeyPart, LimitRule};
use crate::live::overrides::{RuleKey, StoredOverride, StoredRate};
use crate::response::Problem;
use crate::snapshot::Snapshot;
use crate::store::redis::keys::rule_key_text;
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};

/// Most characters of a key's values together (percent-decoded).
pub const MAX_KEY_CHARS: usize = 1024;

const MEMBERS: &[&str] = &["limit", "per", "burst", "expires_in_s"];

/// A rule and one of its keys, as the path names them.
pub struct Target<'a> {
    pub rule: &'a LimitRule,
    pub key: RuleKey,
}

/// The rule named by path segment `rule` and its key from path segment `key` (still
/// percent-encoded). Errors: 404 naming `rule` when no rule has that name; 404 naming `key`
/// when no request of the rule can have the key (not one value per part, an empty one, a value
/// not valid for its part): it names no bucket; 400 naming `key` when it is longer than
/// [`MAX_KEY_CHARS`] or not percent-encoded UTF-8.
pub fn target<'a>(snap: &'a Snapshot, rule: &str, key: &str) -> Result<Target<'a>, Problem> {
    let name = percent_decode_str(rule).decode_utf8_lossy();
    let Some(rule) = snap.config.limits.iter().find(|r| r.name == name) else {
        let detail = format!("rule: no limit rule named \"{name}\" (limits[].name)");
        return Err(Problem::status(404, detail).with("field", json!("rule")));
    };
    let mut values = Vec::with_capacity(rule.key.len());
    for piece in key.split(',') {
        let v = percent_decode_str(piece)
            .decode_utf8()
            .map_err(|_| bad("key", "not percent-encoded UTF-8"))?;
        values.push(v.into_owned());
    }
    if values.iter().map(|v| v.chars().count()).sum::<usize>() > MAX_KEY_CHARS {
        return Err(bad(
            "key",
            format!("longer than {MAX_KEY_CHARS} characters"),
        ));
    }
    let parts: Vec<String> = rule.key.iter().map(KeyPart::spec).collect();
    if values.len() != parts.len() {
        let detail = format!(
            "rule \"{}\" is keyed by {} ({} part(s)): give one value per part, separated by \",\"",
            rule.name,
            parts.join(", "),
            parts.len()
        );
        return Err(no_such_key(detail));
    }
    for (part, value) in rule.key.iter().zip(&values) {
        if let Err(why) = shape(part, value) {
            return Err(no_such_key(format!("{}: {why}", part.spec())));
        }
    }
    let pairs: Vec<(String, &[u8])> = parts
        .iter()
        .cloned()
        .zip(values.iter().map(|v| v.as_bytes()))
        .collect();
    let pairs: Vec<(&str, &[u8])> = pairs.iter().map(|(p, v)| (p.as_str(), *v)).collect();
    let text = rule_key_text(&pairs);
    Ok(Target {
        rule,
        key: RuleKey {
            rule: rule.name.clone(),
            values,
            text,
        },
    })
}

/// The 404 of a key no request of the rule can have, naming `key`.
fn no_such_key(why: String) -> Problem {
    Problem::status(404, format!("key: no such key of the rule: {why}")).with("field", json!("key"))
}

/// Whether `value` can be a request's value of `part`: never empty; a client address is an IP
/// address; a method is upper-case letters; a tenant is a valid tenant id.
fn shape(part: &KeyPart, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("an empty value (no request has one)".into());
    }
    match part {
        KeyPart::ClientIp if value.parse::<std::net::IpAddr>().is_err() => {
            Err(format!("\"{value}\" is not an IP address"))
        }
        KeyPart::Method if !value.bytes().all(|b| b.is_ascii_uppercase()) => {
            Err(format!("\"{value}\" is not a method (GET, POST, ...)"))
        }
        KeyPart::Tenant => crate::tenant_id::validate(value).map_err(|e| e.to_string()),
        _ => Ok(()),
    }
}

/// The JSON answered for `key`'s override (`null`: none).
fn answer(key: &RuleKey, o: Option<&StoredOverride>) -> Value {
    json!({
        "rule": key.rule,
        "key": key.values,
        "override": o.map(StoredOverride::view),
    })
}

/// `PUT /v1/rules/{rule}/keys/{key}/limits`: replaces the key's override; answers it.
pub async fn set(
    snap: &Snapshot,
    rule: &str,
    key: &str,
    body: &[u8],
) -> Result<(Value, Change), Problem> {
    let (overrides, quota) = store(snap)?;
    let t = target(snap, rule, key)?;
    let m = object(body, MEMBERS, false)?;
    let raw = rate_fields(&m, "")?;
    let now = now_s();
    let expires_at = uint_not_null(&m, "expires_in_s", (1, MAX_EXPIRY_S))?.map(|s| now + s);
    if raw.limit.is_none() && raw.per.is_none() && raw.burst.is_none() {
        return Err(bad(
            "body",
            "sets no limit (limit, per, burst); DELETE removes an override",
        ));
    }
    let checked = live_rule_override(t.rule, &raw).map_err(|errors| {
        let detail = errors
            .iter()
            .map(|e| format!("{}: {}", e.path, e.reason))
            .collect::<Vec<_>>()
            .join("; ");
        Problem::status(400, detail).with("field", json!(errors[0].path))
    })?;
    let rate = StoredRate::from_fields(&checked, raw.per.clone());
    let stored = StoredOverride {
        tenant: String::new(),
        rule_key: Some(t.key.clone()),
        rate,
        quotas: Vec::new(),
        max_in_flight: None,
        usage: None,
        expires_at,
        updated_at: now,
    };
    let redis = &quota.redis;
    let before = overrides
        .get_rule_key(redis, &t.key.rule, &t.key.text)
        .await
        .map_err(store_problem)?;
    if !overrides.put(redis, &stored).await.map_err(store_problem)? {
        let detail = format!(
            "the store holds {} overrides already (store.cache.max_entries); remove one first",
            overrides.max_entries()
        );
        return Err(Problem::status(409, detail));
    }
    let out = answer(&t.key, Some(&stored));
    let before = before.map_or(Value::Null, |b| b.view());
    let target = format!("{}/{}", t.key.rule, t.key.values.join(","));
    let change = Change::new("rule_limits_set", target).states(before, out["override"].clone());
    Ok((out, change))
}

/// `GET /v1/rules/{rule}/keys/{key}/limits`: the key's override in force (`override: null`
/// when it has none or it expired: the rule's own numbers apply).
pub async fn get(snap: &Snapshot, rule: &str, key: &str) -> Result<Value, Problem> {
    let (overrides, quota) = store(snap)?;
    let t = target(snap, rule, key)?;
    let stored = overrides
        .get_rule_key(&quota.redis, &t.key.rule, &t.key.text)
        .await
        .map_err(store_problem)?
        .filter(|o| o.in_force(now_s()));
    Ok(answer(&t.key, stored.as_ref()))
}

/// `DELETE /v1/rules/{rule}/keys/{key}/limits`: removes the key's override (the rule's own
/// numbers apply again). Idempotent: `removed` says whether there was one.
pub async fn clear(snap: &Snapshot, rule: &str, key: &str) -> Result<(Value, Change), Problem> {
    let (overrides, quota) = store(snap)?;
    let t = target(snap, rule, key)?;
    let redis = &quota.redis;
    let before = overrides
        .get_rule_key(redis, &t.key.rule, &t.key.text)
        .await
        .map_err(store_problem)?;
    let removed = overrides
        .delete_rule_key(redis, &t.key.rule, &t.key.text)
        .await
        .map_err(store_problem)?;
    let mut out = answer(&t.key, None);
    out["removed"] = json!(removed);
    let before = before.map_or(Value::Null, |b| b.view());
    let target = format!("{}/{}", t.key.rule, t.key.values.join(","));
    let change = Change::new("rule_limits_clear", target).states(before, Value::Null);
    Ok((out, change))
}
