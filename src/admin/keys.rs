//! `/v1/keys`: API keys issued through the admin API (docs/admin-api.md#api-keys): create
//! (the secret answered once), list by tenant (paged by name), get, revoke, rotate with a grace
//! period for the old secret. Only each secret's SHA-256 is stored (in Redis, see
//! [`crate::live`]). Malformed input is a 400 problem naming the field; a tier that is not
//! configured is 404 and a name the tenant has already is 409 (both naming the field, as the
//! admin API answers for state it cannot know from the request alone). Neither changes anything.

use super::audit::Change;
use super::reply::store_problem;
use crate::identity::api_key::hash_key;
use crate::live::keys::{new_id, new_secret, LiveKey};
use crate::live::LiveKeys;
use crate::quota::QuotaService;
use crate::response::Problem;
use crate::snapshot::Snapshot;
use crate::tenant_id;
use serde_json::{json, Value};
use std::sync::Arc;

/// Longest key name, characters.
pub const MAX_NAME: usize = 64;
/// Furthest expiry from now, seconds (10 years).
pub const MAX_EXPIRY_S: u64 = 10 * 365 * 86_400;
/// Longest tenant id of a key, characters.
pub const MAX_TENANT_CHARS: usize = 64;
/// Longest grace period of a rotation, seconds (30 days).
pub const MAX_GRACE_S: u64 = 30 * 86_400;
/// Default and largest page of `GET /v1/keys`.
pub const DEFAULT_PAGE: usize = 100;
pub const MAX_PAGE: usize = 1000;

pub(super) fn bad(field: &str, why: impl std::fmt::Display) -> Problem {
    Problem::status(400, format!("{field}: {why}")).with("field", json!(field))
}

fn now_s() -> u64 {
    crate::observe::tier_fit::unix_ms() / 1000
}

/// The live keys and the store, or the 404 while `store.keys` is off.
fn live(snap: &Snapshot) -> Result<(&Arc<LiveKeys>, &Arc<QuotaService>), Problem> {
    match (&snap.live, &snap.quota) {
        (Some(l), Some(q)) if l.settings.keys => Ok((l, q)),
        _ => Err(Problem::status(
            404,
            "API keys through the admin API are off (store.keys, with redis: and tiers:)",
        )),
    }
}

/// A key id from a path segment. Errors: 404 for anything that is not a key id.
pub fn id_from_segment(segment: &str) -> Result<String, Problem> {
    let ok = segment.len() == 20
        && segment.starts_with("key_")
        && segment[4..].bytes().all(|b| b.is_ascii_hexdigit());
    if ok {
        Ok(segment.to_string())
    } else {
        Err(Problem::status(404, "no such key"))
    }
}

/// A JSON object body with only `allowed` members (an empty body is `{}` when `empty_ok`).
/// Errors: 400 naming the body or the first unknown member.
pub(super) fn object(
    body: &[u8],
    allowed: &[&str],
    empty_ok: bool,
) -> Result<serde_json::Map<String, Value>, Problem> {
    if empty_ok && body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Default::default());
    }
    let v: Value =
        serde_json::from_slice(body).map_err(|e| bad("body", format!("not JSON: {e}")))?;
    let Value::Object(map) = v else {
        return Err(bad("body", "not a JSON object"));
    };
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(
            unknown,
            format!("unknown member; expected {}", allowed.join(", ")),
        ));
    }
    Ok(map)
}

/// Member `name` as a string. Errors: 400 naming it when missing (and `required`) or not one.
pub(super) fn string(map: &serde_json::Map<String, Value>, name: &str) -> Result<String, Problem> {
    match map.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(bad(name, "must be a string")),
        None => Err(bad(name, "required")),
    }
}

/// [`uint`] for a member the document does not make nullable: `null` is a 400 naming it.
pub(super) fn uint_not_null(
    map: &serde_json::Map<String, Value>,
    name: &str,
    bounds: (u64, u64),
) -> Result<Option<u64>, Problem> {
    if map.get(name).is_some_and(Value::is_null) {
        return Err(bad(name, "must be a whole number"));
    }
    uint(map, name, bounds)
}

/// Member `name` as a whole number from `min` to `max`, if present (`null`: absent). Errors:
/// 400 naming it.
pub(super) fn uint(
    map: &serde_json::Map<String, Value>,
    name: &str,
    (min, max): (u64, u64),
) -> Result<Option<u64>, Problem> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        // JSON Schema counts 3.0 as an integer.
        Some(v) => match v.as_u64().or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1e19)
                .map(|f| f as u64)
        }) {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(bad(name, format!("a whole number from {min} to {max}"))),
        },
    }
}

/// The members of `POST /v1/keys`.
struct CreateBody {
    tenant: String,
    tier: String,
    name: String,
}

fn name_ok(name: &str) -> Result<(), Problem> {
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if name.is_empty() || name.len() > MAX_NAME || !chars_ok {
        return Err(bad(
            "name",
            format!("1 to {MAX_NAME} characters of A-Z a-z 0-9 . _ -"),
        ));
    }
    Ok(())
}

/// A tenant id of a key: valid by [`tenant_id::validate`], at most [`MAX_TENANT_CHARS`]
/// characters, not an anonymous `ip:` id.
fn tenant_ok(tenant: &str) -> Result<(), Problem> {
    tenant_id::validate(tenant).map_err(|e| bad("tenant", e))?;
    if tenant.chars().count() > MAX_TENANT_CHARS {
        return Err(bad(
            "tenant",
            format!("at most {MAX_TENANT_CHARS} characters"),
        ));
    }
    if tenant.starts_with(tenant_id::ANONYMOUS_PREFIX) {
        return Err(bad("tenant", "ip:... ids are anonymous clients'"));
    }
    Ok(())
}

/// `POST /v1/keys`: a new key; the answer holds its secret, shown this once.
pub async fn create(snap: &Snapshot, body: &[u8]) -> Result<(Value, Change), Problem> {
    let (live, quota) = live(snap)?;
    let m = object(body, &["tenant", "tier", "name", "expires_in_s"], false)?;
    let b = CreateBody {
        tenant: string(&m, "tenant")?,
        tier: string(&m, "tier")?,
        name: string(&m, "name")?,
    };
    tenant_ok(&b.tenant)?;
    name_ok(&b.name)?;
    let now = now_s();
    let expires_at = uint_not_null(&m, "expires_in_s", (1, MAX_EXPIRY_S))?.map(|s| now + s);
    if !snap.config.tiers.contains_key(&b.tier) {
        let known: Vec<&str> = snap.config.tiers.keys().map(String::as_str).collect();
        let detail = format!(
            "tier: no tier {:?} in tiers: ({})",
            b.tier,
            known.join(", ")
        );
        return Err(Problem::status(404, detail).with("field", json!("tier")));
    }
    let secret = new_secret();
    let key = LiveKey {
        id: new_id(),
        tenant: b.tenant,
        tier: b.tier,
        name: b.name,
        created_at: now,
        expires_at,
        revoked_at: None,
        digest: hash_key(&secret),
        previous_digest: None,
        previous_until: None,
        rotated_at: None,
    };
    if !live
        .create(&quota.redis, &key)
        .await
        .map_err(store_problem)?
    {
        let detail = format!(
            "name: tenant {:?} has a key named {:?} already",
            key.tenant, key.name
        );
        return Err(Problem::status(409, detail).with("field", json!("name")));
    }
    let mut out = key.view();
    out["secret"] = json!(secret);
    let change = Change::new("key_create", &key.id).states(Value::Null, out.clone());
    Ok((out, change))
}

/// The value of query parameter `name`, percent-decoded.
fn param(query: Option<&str>, name: &str) -> Result<Option<String>, Problem> {
    super::reply::query_param(query, name)
}

/// `GET /v1/keys?tenant=...&limit=...&after=...`: a tenant's keys (not revoked) by name, a
/// page at a time; `next` is the `after` of the next page (`null` on the last).
pub async fn list(snap: &Snapshot, query: Option<&str>) -> Result<Value, Problem> {
    let (live, quota) = live(snap)?;
    let tenant = param(query, "tenant")?.ok_or_else(|| bad("tenant", "required"))?;
    tenant_ok(&tenant)?;
    let limit = match param(query, "limit")? {
        None => DEFAULT_PAGE,
        Some(t) => match t.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
            _ => return Err(bad("limit", format!("a whole number from 1 to {MAX_PAGE}"))),
        },
    };
    let after = param(query, "after")?;
    let mut keys = live
        .of_tenant(&quota.redis, &tenant)
        .await
        .map_err(store_problem)?;
    keys.sort_by(|a, b| a.name.cmp(&b.name));
    let rest: Vec<&LiveKey> = keys
        .iter()
        .filter(|k| after.as_deref().is_none_or(|a| k.name.as_str() > a))
        .collect();
    let page: Vec<Value> = rest.iter().take(limit).map(|k| shown(snap, k)).collect();
    let next = (rest.len() > limit).then(|| rest[limit - 1].name.clone());
    Ok(json!({ "tenant": tenant, "keys": page, "next": next }))
}

async fn find(snap: &Snapshot, id: &str) -> Result<LiveKey, Problem> {
    let (live, quota) = live(snap)?;
    let id = id_from_segment(id)?;
    live.get(&quota.redis, &id)
        .await
        .map_err(store_problem)?
        .ok_or_else(|| Problem::status(404, "no such key"))
}

/// `GET /v1/keys/{id}`.
pub async fn get(snap: &Snapshot, id: &str) -> Result<Value, Problem> {
    Ok(shown(snap, &find(snap, id).await?))
}

/// The view of `key`, with `shadowed_by_file: true` when a key of `identity.api_keys` has its
/// current digest: the file's entry wins, so this key's secret identifies the file's tenant.
fn shown(snap: &Snapshot, key: &LiveKey) -> Value {
    let mut out = key.view();
    let mut digest = [0u8; 32];
    let in_file = hex::decode_to_slice(&key.digest, &mut digest).is_ok()
        && snap
            .config
            .identity
            .api_keys
            .as_ref()
            .is_some_and(|k| k.keys.iter().any(|e| e.sha256 == digest));
    if in_file {
        out["shadowed_by_file"] = json!(true);
    }
    out
}

/// `DELETE /v1/keys/{id}`: revokes the key (every secret of it, a rotated-out one included).
/// Idempotent: revoking a revoked key answers it as it is.
pub async fn revoke(snap: &Snapshot, id: &str) -> Result<(Value, Change), Problem> {
    let (live, quota) = live(snap)?;
    let before = find(snap, id).await?;
    if before.revoked_at.is_some() {
        let v = before.view();
        return Ok((
            v.clone(),
            Change::new("key_revoke", &before.id).states(v.clone(), v),
        ));
    }
    let mut key = before.clone();
    key.revoked_at = Some(now_s());
    live.revoke(&quota.redis, &key)
        .await
        .map_err(store_problem)?;
    let out = key.view();
    let change = Change::new("key_revoke", &key.id).states(before.view(), out.clone());
    Ok((out, change))
}

/// `POST /v1/keys/{id}/rotate` (`{"grace_s": 3600}`, default 0): a new secret, answered
/// once; the old one keeps working for the grace period.
pub async fn rotate(snap: &Snapshot, id: &str, body: &[u8]) -> Result<(Value, Change), Problem> {
    let (live, quota) = live(snap)?;
    let m = object(body, &["grace_s"], true)?;
    let grace = uint_not_null(&m, "grace_s", (0, MAX_GRACE_S))?.unwrap_or(0) * 1000;
    let before = find(snap, id).await?;
    if before.revoked_at.is_some() {
        return Err(Problem::status(409, "the key is revoked; create a new one"));
    }
    let now = now_s();
    let secret = new_secret();
    let mut key = before.clone();
    let replaced = key.digest.clone();
    let dropped = key.previous_digest.clone();
    key.digest = hash_key(&secret);
    key.previous_digest = (grace > 0).then(|| replaced.clone());
    key.previous_until = (grace > 0).then(|| now + grace.div_ceil(1000));
    key.rotated_at = Some(now);
    live.rotate(&quota.redis, &key, &replaced, dropped.as_deref(), grace)
        .await
        .map_err(store_problem)?;
    let mut out = key.view();
    out["secret"] = json!(secret);
    let change = Change::new("key_rotate", &key.id).states(before.view(), out.clone());
    Ok((out, change))
}
