//! `/v1/blocks`: blocks of an address or network, a tenant or a live key set through the admin
//! API (docs/admin-api.md#blocks), each with a reason and an optional expiry, in force on every
//! instance within `store.propagation` (see [`crate::live::blocks`]).
//!
//! A block is addressed as `/v1/blocks/{type}/{value}`: `ip/203.0.113.7`, `ip/198.51.100.0%2F24`
//! (the `/` of a CIDR network percent-encoded), `tenant/acme`, `key/key_0123456789abcdef`.
//! Malformed input (an unknown type, a malformed network, an expiry that is not 1 second to 10
//! years from now, a reason over [`MAX_REASON`] characters) is a 400 problem naming the field
//! and changes nothing.

use super::audit::Change;
use super::keys::{bad, object, string, uint, MAX_EXPIRY_S, MAX_TENANT_CHARS};
use super::reply::store_problem;
use crate::live::blocks::{canonical_network, Block, Kind, LiveBlocks, PutError, MAX_BLOCKS};
use crate::quota::QuotaService;
use crate::response::Problem;
use crate::snapshot::Snapshot;
use crate::tenant_id;
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};
use std::sync::Arc;

/// Longest reason, characters.
pub const MAX_REASON: usize = 500;

fn now_s() -> u64 {
    crate::observe::tier_fit::unix_ms() / 1000
}

/// The blocks and the store, or the 404 while `store.blocks` is off.
fn live(snap: &Snapshot) -> Result<(&Arc<LiveBlocks>, &Arc<QuotaService>), Problem> {
    match (&snap.blocks, &snap.quota) {
        (Some(b), Some(q)) => Ok((b, q)),
        _ => Err(Problem::status(
            404,
            "blocks through the admin API are off (store.blocks: true, with redis: and tiers:)",
        )),
    }
}

/// The type and canonical value of a block from the path's `{type}` and `{value}` segments.
/// Errors: 400 naming `type` or `value`.
pub fn target(kind: &str, value: &str) -> Result<(Kind, String), Problem> {
    let kind = Kind::parse(kind).ok_or_else(|| {
        bad(
            "type",
            format!("unknown block type {kind:?}; expected ip, tenant or key"),
        )
    })?;
    let value = percent_decode_str(value)
        .decode_utf8()
        .map_err(|_| bad("value", "not percent-encoded UTF-8"))?
        .into_owned();
    let value = match kind {
        Kind::Ip => canonical_network(&value)
            .map_err(|e| bad("value", e))?
            .to_string(),
        Kind::Tenant => {
            // An anonymous client's id is `ip:<address>`, as GET /v1/tenants/{id} takes it.
            match value.strip_prefix(tenant_id::ANONYMOUS_PREFIX) {
                Some(addr) => drop(
                    addr.parse::<std::net::IpAddr>()
                        .map_err(|_| bad("value", "starts with \"ip:\" but is not ip:<address>"))?,
                ),
                None => tenant_id::validate(&value).map_err(|e| bad("value", e))?,
            }
            if value.chars().count() > MAX_TENANT_CHARS {
                let why = format!("a tenant id of at most {MAX_TENANT_CHARS} characters");
                return Err(bad("value", why));
            }
            value
        }
        Kind::Key => {
            super::keys::id_from_segment(&value)
                .map_err(|_| bad("value", "not a key id (key_ and 16 hex digits)"))?;
            value
        }
    };
    Ok((kind, value))
}

/// The 400 of a `/v1/blocks/{type}/{value}` path whose type is not one of the routes' (every
/// other path under `/v1/blocks/` is `None`).
pub fn unknown_type(path: &str) -> Option<Problem> {
    let (kind, value) = path.strip_prefix("/v1/blocks/")?.split_once('/')?;
    if value.contains('/') || Kind::parse(kind).is_some() {
        return None;
    }
    target(kind, value).err()
}

/// `GET /v1/blocks?type=...`: the blocks in force, by id, optionally of one type.
pub async fn list(snap: &Snapshot, query: Option<&str>) -> Result<Value, Problem> {
    let (blocks, quota) = live(snap)?;
    let kind = match super::reply::query_param(query, "type")? {
        None => None,
        Some(t) => Some(Kind::parse(&t).ok_or_else(|| {
            bad(
                "type",
                format!("unknown block type {t:?}; expected ip, tenant or key"),
            )
        })?),
    };
    let now = now_s();
    let mut all = blocks.all(&quota.redis).await.map_err(store_problem)?;
    all.retain(|b| b.active(now) && kind.is_none_or(|k| b.kind == k));
    all.sort_by_key(Block::id);
    let views: Vec<Value> = all.iter().map(|b| b.view(now)).collect();
    Ok(json!({ "blocks": views }))
}

async fn find(snap: &Snapshot, kind: &str, value: &str) -> Result<Block, Problem> {
    let (blocks, quota) = live(snap)?;
    let (kind, value) = target(kind, value)?;
    let id = format!("{}:{value}", kind.as_str());
    let all = blocks.all(&quota.redis).await.map_err(store_problem)?;
    all.into_iter()
        .find(|b| b.id() == id && b.active(now_s()))
        .ok_or_else(|| Problem::status(404, format!("no block {id}")))
}

/// `GET /v1/blocks/{type}/{value}`.
pub async fn get(snap: &Snapshot, kind: &str, value: &str) -> Result<Value, Problem> {
    Ok(find(snap, kind, value).await?.view(now_s()))
}

/// `PUT /v1/blocks/{type}/{value}` (`{"reason": "...", "expires_in_s": 3600}`; without
/// `expires_in_s` the block lasts until removed): sets the block, replacing one of that type
/// and value. An expiry is a positive number of seconds from now, so it is never in the past.
pub async fn put(
    snap: &Snapshot,
    kind: &str,
    value: &str,
    body: &[u8],
) -> Result<(Value, Change), Problem> {
    let (blocks, quota) = live(snap)?;
    let (kind, value) = target(kind, value)?;
    let m = object(body, &["reason", "expires_in_s"], false)?;
    let reason = string(&m, "reason")?;
    if reason.is_empty() || reason.chars().count() > MAX_REASON {
        return Err(bad("reason", format!("1 to {MAX_REASON} characters")));
    }
    let now = now_s();
    let expires_at = uint(&m, "expires_in_s", (1, MAX_EXPIRY_S))?.map(|s| now + s);
    let block = Block {
        kind,
        value,
        reason,
        created_at: now,
        expires_at,
    };
    let before = match blocks.put(&quota.redis, &block, now).await {
        Ok(b) => b,
        Err(PutError::Full) => {
            let detail = format!("at most {MAX_BLOCKS} blocks are kept; remove some first");
            return Err(Problem::status(409, detail));
        }
        Err(PutError::Store(f)) => return Err(store_problem(f)),
    };
    let out = block.view(now);
    let before = before.map_or(Value::Null, |b| b.view(now));
    let change = Change::new("block_put", block.id()).states(before, out.clone());
    Ok((out, change))
}

/// `DELETE /v1/blocks/{type}/{value}`: removes the block (404 when there is none).
pub async fn remove(snap: &Snapshot, kind: &str, value: &str) -> Result<(Value, Change), Problem> {
    let (blocks, quota) = live(snap)?;
    let (kind, value) = target(kind, value)?;
    let id = format!("{}:{value}", kind.as_str());
    let removed = blocks
        .remove(&quota.redis, &id)
        .await
        .map_err(store_problem)?
        .ok_or_else(|| Problem::status(404, format!("no block {id}")))?;
    let now = now_s();
    let before = removed.view(now);
    let change = Change::new("block_remove", id).states(before.clone(), Value::Null);
    Ok((json!({ "removed": before }), change))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_name_the_bad_field() {
        assert_eq!(
            target("ip", "10.0.0.9%2F8").unwrap(),
            (Kind::Ip, "10.0.0.0/8".into())
        );
        assert_eq!(
            target("ip", "%3A%3A1").unwrap(),
            (Kind::Ip, "::1/128".into())
        );
        assert_eq!(
            target("tenant", "acme").unwrap(),
            (Kind::Tenant, "acme".into())
        );
        let field = |r: Result<(Kind, String), Problem>| r.unwrap_err().extensions["field"].clone();
        assert_eq!(field(target("cidr", "10.0.0.0")), json!("type"));
        assert_eq!(field(target("ip", "10.0.0.0%2F33")), json!("value"));
        assert_eq!(field(target("tenant", "ip:nope")), json!("value"));
        assert_eq!(field(target("tenant", &"t".repeat(65))), json!("value"));
        assert!(target("tenant", "ip:203.0.113.7").is_ok());
        assert_eq!(field(target("key", "nope")), json!("value"));
        assert_eq!(
            unknown_type("/v1/blocks/cidr/10.0.0.0").unwrap().extensions["field"],
            json!("type")
        );
        assert!(unknown_type("/v1/blocks/ip/10.0.0.0/8").is_none());
    }

    /// Every form of the document's `ip` pattern (each alternative, both prefix bounds) is
    /// accepted, so a schema-valid value is never a 400.
    #[test]
    fn the_documented_address_forms_parse() {
        for v in [
            "0.0.0.0/0",
            "255.255.255.255/32",
            "192.0.2.1",
            "10.0.0.0/8",
            "1:2:3:4:5:6:7:8",
            "1::",
            "1:2:3:4:5:6:7::",
            "1::8",
            "1:2:3:4:5:6::8",
            "1:2:3:4:5::7:8",
            "1::7:8",
            "1:2:3:4::6:7:8",
            "1:2:3::5:6:7:8",
            "1:2::4:5:6:7:8",
            "1::3:4:5:6:7:8",
            "::2:3:4:5:6:7:8",
            "::",
            "::8",
            "fFfF::/0",
            "::1/128",
            "2001:db8::/32",
            "abcd::/99",
        ] {
            let encoded = v.replace('/', "%2F");
            assert!(target("ip", &encoded).is_ok(), "{v}");
        }
    }
}
