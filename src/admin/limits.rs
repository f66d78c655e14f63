//! `/v1/tenants/{id}/limits`: a tenant's limits set live (docs/admin-api.md#live-limits), kept
//! in Redis and in force on every instance within `store.propagation` ([`crate::live::overrides`]).
//!
//! `PUT` replaces the tenant's override with the body's fields (`limit`, `per`, `burst`,
//! `quotas`, `max_in_flight`, `expires_in_s`), checked exactly like the
//! file's `tenants:` entry for the tenant (against every tier) and a tier's `quotas`; `GET`
//! answers it; `DELETE` removes it (the file's numbers apply again). A tenant id need not be in
//! the file (a tenant known from an API key or a JWT has no `tenants:` entry). Bad input is a
//! 400 problem naming the field and changes nothing.

use super::audit::Change;
use super::keys::{bad, object, uint_not_null};
use super::reply::store_problem;
use crate::config::raw::RawQuota;
use crate::config::{live_override, RawLimitOverride, RawRateOverride};
use crate::live::overrides::{Overrides, StoredOverride, StoredQuota, StoredRate};
use crate::quota::QuotaService;
use crate::response::Problem;
use crate::snapshot::Snapshot;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Furthest expiry from now, seconds (10 years).
pub const MAX_EXPIRY_S: u64 = 10 * 365 * 86_400;
/// Largest `limit` of a live override (a limit per day within every algorithm's bounds).
pub const MAX_LIMIT: i64 = 50_000_000;
/// Largest `burst` of a live override (within every algorithm's bounds, the sliding window
/// log's 10 000 entries included).
pub const MAX_BURST: i64 = 10_000;
/// Largest quota limit (2^52, as in the file).
const MAX_QUOTA: i64 = 1 << 52;
/// The `per` forms a live override takes (all within 1 day; the OpenAPI document's pattern).
pub(super) const PER_FORMS: &str =
    "a duration of 1 to 7 digits and ms, 1 to 4 digits and s, 1 to 3 digits and m, 1h to 24h, or 1d (no leading zero)";

/// Whether `per` is one of [`PER_FORMS`].
pub(super) fn per_documented(per: &str) -> bool {
    let split = per.find(|c: char| !c.is_ascii_digit()).unwrap_or(per.len());
    let (digits, unit) = per.split_at(split);
    if digits.is_empty() || digits.starts_with('0') {
        return false;
    }
    let n: u64 = digits.parse().unwrap_or(u64::MAX);
    match unit {
        "ms" => digits.len() <= 7,
        "s" => digits.len() <= 4,
        "m" => digits.len() <= 3,
        "h" => n <= 24,
        "d" => n == 1,
        _ => false,
    }
}

/// The periods of calendar quotas.
const PERIODS: &[&str] = &["hour", "day", "week", "month"];

const MEMBERS: &[&str] = &[
    "limit",
    "per",
    "burst",
    "quotas",
    "max_in_flight",
    "usage",
    "expires_in_s",
];

/// The members of a bucket's fields (`usage`, and the body of a rule key's override).
pub(super) const RATE_MEMBERS: &[&str] = &["limit", "per", "burst"];

pub(super) fn now_s() -> u64 {
    crate::observe::tier_fit::unix_ms() / 1000
}

/// The overrides and the store, or the 404 while `store.overrides` is off.
pub(super) fn store(snap: &Snapshot) -> Result<(&Overrides, &Arc<QuotaService>), Problem> {
    match (
        snap.live.as_ref().and_then(|l| l.overrides.as_ref()),
        &snap.quota,
    ) {
        (Some(o), Some(q)) => Ok((o, q)),
        _ => Err(Problem::status(
            404,
            "limits through the admin API are off (store.overrides, with redis: and tiers:)",
        )),
    }
}

/// Member `name` as a whole number (`i64`, its sign kept for the config's own message), if
/// present. Errors: 400 naming it (`null` included).
fn int(map: &Map<String, Value>, name: &str) -> Result<Option<i64>, Problem> {
    match map.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            })
            .map(Some)
            .ok_or_else(|| bad(name, "must be a whole number (at most 2^53)")),
    }
}

/// [`int`] at most `max` (the config's own check takes the lower bound).
pub(super) fn int_at_most(
    map: &Map<String, Value>,
    name: &str,
    max: i64,
) -> Result<Option<i64>, Problem> {
    match int(map, name)? {
        Some(n) if n > max => Err(bad(
            name,
            format!("at most {max} in a live override (larger numbers belong in the file)"),
        )),
        n => Ok(n),
    }
}

/// Member `name` as a string, if present. Errors: 400 naming it (`null` included).
pub(super) fn text(map: &Map<String, Value>, name: &str) -> Result<Option<String>, Problem> {
    match map.get(name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(name, "must be a string")),
    }
}

/// The bucket fields (`limit`, `per`, `burst`) of `m`, their names prefixed by `prefix`
/// (`usage.`) in errors: `per` in a documented form, numbers within a live override's bounds.
/// The config's own checks follow.
pub(super) fn rate_fields(
    m: &Map<String, Value>,
    prefix: &str,
) -> Result<RawRateOverride, Problem> {
    let named = |mut p: Problem| {
        if let Some(Value::String(f)) = p.extensions.get("field") {
            let field = format!("{prefix}{f}");
            p.detail = format!("{prefix}{}", p.detail);
            p.extensions.insert("field".into(), json!(field));
        }
        p
    };
    if let Some(per) = m.get("per").and_then(Value::as_str) {
        if !per_documented(per) {
            return Err(named(bad("per", PER_FORMS)));
        }
    }
    Ok(RawRateOverride {
        limit: int_at_most(m, "limit", MAX_LIMIT).map_err(named)?,
        per: text(m, "per").map_err(named)?,
        burst: int_at_most(m, "burst", MAX_BURST).map_err(named)?,
    })
}

/// `usage`: an object of the usage budget's bucket fields (`limit`, `per`, `burst`), at least
/// one.
fn usage(map: &Map<String, Value>) -> Result<Option<RawRateOverride>, Problem> {
    let m = match map.get("usage") {
        None => return Ok(None),
        Some(Value::Object(m)) if !m.is_empty() => m,
        Some(_) => {
            return Err(bad(
                "usage",
                "an object of the usage budget's limit, per and burst, at least one",
            ))
        }
    };
    if let Some(unknown) = m.keys().find(|k| !RATE_MEMBERS.contains(&k.as_str())) {
        return Err(bad(
            &format!("usage.{unknown}"),
            "unknown member; expected limit, per, burst",
        ));
    }
    rate_fields(m, "usage.").map(Some)
}

/// `quotas`: an object of period → limit (`{"month": 100000}`), at least one.
fn quotas(map: &Map<String, Value>) -> Result<Vec<RawQuota>, Problem> {
    let items = match map.get("quotas") {
        None => return Ok(Vec::new()),
        Some(Value::Object(m)) if !m.is_empty() => m,
        Some(_) => {
            return Err(bad(
                "quotas",
                "an object of period (hour, day, week, month) to limit, at least one",
            ))
        }
    };
    let mut out = Vec::new();
    for period in items.keys() {
        if !PERIODS.contains(&period.as_str()) {
            let path = format!("quotas.{period}");
            return Err(bad(
                &path,
                "unknown period; expected hour, day, week, month",
            ));
        }
        let path = format!("quotas.{period}");
        let limit = int(items, period)
            .map_err(|_| bad(&path, "must be a whole number"))?
            .unwrap_or(0);
        if !(1..=MAX_QUOTA).contains(&limit) {
            return Err(bad(&path, format!("a whole number from 1 to {MAX_QUOTA}")));
        }
        out.push(RawQuota {
            limit,
            period: period.clone(),
        });
    }
    Ok(out)
}

/// `PUT /v1/tenants/{id}/limits`: replaces `tenant`'s override; answers it.
pub async fn set(snap: &Snapshot, tenant: &str, body: &[u8]) -> Result<(Value, Change), Problem> {
    let (overrides, quota) = store(snap)?;
    let m = object(body, MEMBERS, false)?;
    if let Some(per) = m.get("per").and_then(Value::as_str) {
        if !per_documented(per) {
            return Err(bad("per", PER_FORMS));
        }
    }
    let raw = RawLimitOverride {
        limit: int_at_most(&m, "limit", MAX_LIMIT)?,
        per: text(&m, "per")?,
        burst: int_at_most(&m, "burst", MAX_BURST)?,
        quotas: quotas(&m)?,
        max_in_flight: int(&m, "max_in_flight")?,
        usage: usage(&m)?,
    };
    let now = now_s();
    let expires_at = uint_not_null(&m, "expires_in_s", (1, MAX_EXPIRY_S))?.map(|s| now + s);
    let nothing = raw.limit.is_none()
        && raw.per.is_none()
        && raw.burst.is_none()
        && raw.quotas.is_empty()
        && raw.max_in_flight.is_none()
        && raw.usage.is_none();
    if nothing {
        return Err(bad(
            "body",
            "sets no limit (limit, per, burst, quotas, max_in_flight, usage); DELETE removes an override",
        ));
    }
    let config = &snap.config;
    let checked = live_override(tenant, &raw, config.tenants.get(tenant), &config.tiers).map_err(
        |errors| {
            let first = &errors[0];
            let field = quota_field(&first.path, &raw.quotas);
            let detail = errors
                .iter()
                .map(|e| format!("{}: {}", e.path, e.reason))
                .collect::<Vec<_>>()
                .join("; ");
            Problem::status(400, detail).with("field", json!(field))
        },
    )?;
    let stored = StoredOverride {
        tenant: tenant.to_string(),
        rate: StoredRate::from_fields(&checked.rate, raw.per.clone()),
        quotas: checked
            .quotas
            .iter()
            .map(|q| StoredQuota {
                limit: q.limit,
                period: q.period.as_str().to_string(),
            })
            .collect(),
        max_in_flight: checked.max_in_flight,
        usage: checked
            .usage
            .as_ref()
            .map(|u| StoredRate::from_fields(u, raw.usage.as_ref().and_then(|r| r.per.clone()))),
        rule_key: None,
        expires_at,
        updated_at: now,
    };
    let before = overrides
        .get(&quota.redis, tenant)
        .await
        .map_err(store_problem)?;
    let stored_ok = overrides
        .put(&quota.redis, &stored)
        .await
        .map_err(store_problem)?;
    if !stored_ok {
        let detail = format!(
            "the store holds {} overrides already (store.cache.max_entries); remove one first",
            overrides.max_entries()
        );
        return Err(Problem::status(409, detail));
    }
    let out = json!({ "tenant": tenant, "override": stored.view() });
    let before = before.map_or(Value::Null, |b| b.view());
    let change = Change::new("limits_set", tenant).states(before, out["override"].clone());
    Ok((out, change))
}

/// `GET /v1/tenants/{id}/limits`: the tenant's override in force (`override: null` when it
/// has none or it expired: the file's numbers apply).
pub async fn get(snap: &Snapshot, tenant: &str) -> Result<Value, Problem> {
    let (overrides, quota) = store(snap)?;
    let stored = overrides
        .get(&quota.redis, tenant)
        .await
        .map_err(store_problem)?
        .filter(|o| o.in_force(now_s()));
    Ok(json!({ "tenant": tenant, "override": stored.map(|o| o.view()) }))
}

/// `DELETE /v1/tenants/{id}/limits`: removes the tenant's override (the file's numbers apply
/// again). Idempotent: `removed` says whether there was one (an expired one counts).
pub async fn clear(snap: &Snapshot, tenant: &str) -> Result<(Value, Change), Problem> {
    let (overrides, quota) = store(snap)?;
    let before = overrides
        .get(&quota.redis, tenant)
        .await
        .map_err(store_problem)?;
    let removed = overrides
        .delete(&quota.redis, tenant)
        .await
        .map_err(store_problem)?;
    let out = json!({ "tenant": tenant, "override": null, "removed": removed });
    let before = before.map_or(Value::Null, |b| b.view());
    let change = Change::new("limits_clear", tenant).states(before, Value::Null);
    Ok((out, change))
}

/// The API's name of a config error's field: `quotas[i].limit` is `quotas.<period>`.
fn quota_field(path: &str, quotas: &[RawQuota]) -> String {
    path.strip_prefix("quotas[")
        .and_then(|r| r.split_once(']'))
        .and_then(|(i, _)| i.parse::<usize>().ok())
        .and_then(|i| quotas.get(i))
        .map_or_else(|| path.to_string(), |q| format!("quotas.{}", q.period))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_forms_are_the_documented_ones() {
        for ok in ["1ms", "9999999ms", "1s", "9999s", "999m", "1h", "24h", "1d"] {
            assert!(per_documented(ok), "{ok}");
        }
        for bad in [
            "0s",
            "01s",
            "10000s",
            "25h",
            "2d",
            "1",
            "s",
            " 1s",
            "1w",
            "99999999ms",
        ] {
            assert!(!per_documented(bad), "{bad}");
        }
    }
}
