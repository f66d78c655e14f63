//! `/v1/tenants/{id}/limits`: a tenant's limits set live (docs/admin-api.md#live-limits), kept
//! in Redis and in force on every instance within `store.propagation` ([`crate::live::overrides`]).
//!
//! `PUT` replaces the tenant's override with the body's fields (`limit`, `per`, `burst`,
//! `quotas`, `max_in_flight`, and `expires_in_s` or `expires_at`), checked exactly like the
//! file's `tenants:` entry for the tenant (against every tier) and a tier's `quotas`; `GET`
//! answers it; `DELETE` removes it (the file's numbers apply again). A tenant id need not be in
//! the file (a tenant known from an API key or a JWT has no `tenants:` entry). Bad input is a
//! 400 problem naming the field and changes nothing.

use super::audit::Change;
use super::keys::{bad, object, uint};
use super::reply::store_problem;
use crate::config::raw::RawQuota;
use crate::config::{live_override, RawLimitOverride};
use crate::live::overrides::{Overrides, StoredOverride, StoredQuota};
use crate::quota::QuotaService;
use crate::response::Problem;
use crate::snapshot::Snapshot;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Furthest expiry from now, seconds (10 years).
pub const MAX_EXPIRY_S: u64 = 10 * 365 * 86_400;
/// Most quotas in one override (one per period).
const MAX_QUOTAS: usize = 4;

const MEMBERS: &[&str] = &[
    "limit",
    "per",
    "burst",
    "quotas",
    "max_in_flight",
    "expires_in_s",
    "expires_at",
];

fn now_s() -> u64 {
    crate::observe::tier_fit::unix_ms() / 1000
}

/// The overrides and the store, or the 404 while `store.overrides` is off.
fn store(snap: &Snapshot) -> Result<(&Overrides, &Arc<QuotaService>), Problem> {
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

/// Member `name` as a whole number (`i64`, its sign kept for the config's own message).
fn int(map: &Map<String, Value>, name: &str) -> Result<Option<i64>, Problem> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
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

/// Member `name` as a string, if present.
fn text(map: &Map<String, Value>, name: &str) -> Result<Option<String>, Problem> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(name, "must be a string")),
    }
}

/// `quotas`: a list of `{limit, period}`.
fn quotas(map: &Map<String, Value>) -> Result<Vec<RawQuota>, Problem> {
    let items = match map.get("quotas") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(bad("quotas", "must be a list of {limit, period}")),
    };
    if items.len() > MAX_QUOTAS {
        return Err(bad(
            "quotas",
            format!("at most {MAX_QUOTAS} (one per period)"),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let path = format!("quotas[{i}]");
            let Value::Object(m) = q else {
                return Err(bad(&path, "must be {limit, period}"));
            };
            if let Some(k) = m
                .keys()
                .find(|k| !["limit", "period"].contains(&k.as_str()))
            {
                return Err(bad(
                    &format!("{path}.{k}"),
                    "unknown member; expected limit, period",
                ));
            }
            let limit = int(m, "limit")
                .map_err(|_| bad(&format!("{path}.limit"), "must be a whole number"))?
                .ok_or_else(|| bad(&format!("{path}.limit"), "required"))?;
            let period = text(m, "period")
                .map_err(|_| bad(&format!("{path}.period"), "must be a string"))?
                .ok_or_else(|| bad(&format!("{path}.period"), "required"))?;
            Ok(RawQuota { limit, period })
        })
        .collect()
}

/// The expiry (Unix seconds) of `expires_in_s` or `expires_at` (RFC 3339), in the future and
/// at most [`MAX_EXPIRY_S`] away.
fn expiry(map: &Map<String, Value>, now: u64) -> Result<Option<u64>, Problem> {
    let in_s = uint(map, "expires_in_s", (1, MAX_EXPIRY_S))?;
    let at = text(map, "expires_at")?;
    match (in_s, at) {
        (Some(_), Some(_)) => Err(bad(
            "expires_at",
            "give expires_in_s or expires_at, not both",
        )),
        (Some(s), None) => Ok(Some(now + s)),
        (None, Some(t)) => {
            use time::format_description::well_known::Rfc3339;
            let at = time::OffsetDateTime::parse(&t, &Rfc3339)
                .map_err(|_| bad("expires_at", "an RFC 3339 time (2030-01-31T00:00:00Z)"))?
                .unix_timestamp();
            if at <= now as i64 {
                return Err(bad("expires_at", "is in the past"));
            }
            if at as u64 > now + MAX_EXPIRY_S {
                return Err(bad("expires_at", "more than 10 years away"));
            }
            Ok(Some(at as u64))
        }
        (None, None) => Ok(None),
    }
}

/// `PUT /v1/tenants/{id}/limits`: replaces `tenant`'s override; answers it.
pub async fn set(snap: &Snapshot, tenant: &str, body: &[u8]) -> Result<(Value, Change), Problem> {
    let (overrides, quota) = store(snap)?;
    let m = object(body, MEMBERS, false)?;
    let raw = RawLimitOverride {
        limit: int(&m, "limit")?,
        per: text(&m, "per")?,
        burst: int(&m, "burst")?,
        quotas: quotas(&m)?,
        max_in_flight: int(&m, "max_in_flight")?,
    };
    let now = now_s();
    let expires_at = expiry(&m, now)?;
    let nothing = raw.limit.is_none()
        && raw.per.is_none()
        && raw.burst.is_none()
        && raw.quotas.is_empty()
        && raw.max_in_flight.is_none();
    if nothing {
        return Err(bad(
            "body",
            "sets no limit (limit, per, burst, quotas, max_in_flight); DELETE removes an override",
        ));
    }
    let config = &snap.config;
    let checked = live_override(tenant, &raw, config.tenants.get(tenant), &config.tiers).map_err(
        |errors| {
            let first = &errors[0];
            let detail = errors
                .iter()
                .map(|e| format!("{}: {}", e.path, e.reason))
                .collect::<Vec<_>>()
                .join("; ");
            Problem::status(400, detail).with("field", json!(first.path))
        },
    )?;
    let stored = StoredOverride {
        tenant: tenant.to_string(),
        limit: checked.rate.limit,
        per: raw.per.clone(),
        per_ms: checked.rate.per_ms,
        burst: checked.rate.burst,
        quotas: checked
            .quotas
            .iter()
            .map(|q| StoredQuota {
                limit: q.limit,
                period: q.period.as_str().to_string(),
            })
            .collect(),
        max_in_flight: checked.max_in_flight,
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
    let out = stored.view();
    let before = before.map_or(Value::Null, |b| b.view());
    let change = Change::new("limits_set", tenant).states(before, out.clone());
    Ok((out, change))
}

/// `GET /v1/tenants/{id}/limits`: the tenant's override in force. Errors: 404 when it has
/// none (or it expired).
pub async fn get(snap: &Snapshot, tenant: &str) -> Result<Value, Problem> {
    let (overrides, quota) = store(snap)?;
    match overrides
        .get(&quota.redis, tenant)
        .await
        .map_err(store_problem)?
    {
        Some(o) if o.in_force(now_s()) => Ok(o.view()),
        Some(_) => Err(Problem::status(
            404,
            format!("the override of tenant {tenant:?} expired; the file's limits apply"),
        )),
        None => Err(Problem::status(
            404,
            format!("tenant {tenant:?} has no live override; the file's limits apply"),
        )),
    }
}

/// `DELETE /v1/tenants/{id}/limits`: removes the tenant's override (the file's numbers apply
/// again). Idempotent: `removed` says whether there was one.
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
    let out = json!({ "tenant": tenant, "removed": removed });
    let before = before.map_or(Value::Null, |b| b.view());
    let change = Change::new("limits_clear", tenant).states(before, Value::Null);
    Ok((out, change))
}
