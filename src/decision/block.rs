//! Blocks set through the admin API (`store.blocks`, docs/decision-service.md#blocks) in the
//! decision service: a call is refused, before any bucket is asked, when one of its descriptors
//! carries a blocked address (entry `remote_address`, the key Envoy's `remote_address` action
//! writes), tenant (entry `tenant`) or live key id (entry `key_id`). Each is a lookup in the
//! instance's block set in memory: no Redis call.

use super::rls::{self, Code, DescriptorStatus, RateLimitResponse};
use super::Checked;
use crate::live::blocks::{Block, BlockSet};
use crate::observe::labels::Outcome;
use crate::pipeline::descriptors::Asked;
use crate::policy::descriptor::Entry;
use crate::snapshot::Snapshot;
use std::net::IpAddr;
use std::sync::Arc;

/// The entry key an address block is matched against.
pub const ADDRESS_ENTRY: &str = "remote_address";
/// The entry key a tenant block is matched against.
pub const TENANT_ENTRY: &str = "tenant";
/// The entry key a live key's block is matched against (its id, `key_...`).
pub const KEY_ID_ENTRY: &str = "key_id";

/// The block in force at `now_s` on one of `entries` (the first entry a block covers).
pub fn of_entries<'a>(set: &'a BlockSet, entries: &[Entry], now_s: u64) -> Option<&'a Arc<Block>> {
    entries.iter().find_map(|(key, value)| match key.as_str() {
        ADDRESS_ENTRY => value.parse::<IpAddr>().ok().and_then(|a| set.ip(a, now_s)),
        TENANT_ENTRY => set.tenant(value, now_s),
        KEY_ID_ENTRY => set.key(value, now_s),
        _ => None,
    })
}

/// The answer to a call a block refuses at `now_s`, or `None` when no descriptor of `asked` is
/// blocked. The call is OVER_LIMIT and nothing is debited; each blocked descriptor is
/// OVER_LIMIT with its block's remaining seconds as `duration_until_reset` (0 for a block
/// without expiry), the others OK; `Retry-After` is the longest remaining time when every
/// blocking block expires (none when one of them does not).
pub fn refused(snap: &Snapshot, asked: &[Asked], now_s: u64) -> Option<Checked> {
    let set = snap.blocks.as_ref()?.current();
    if set.is_empty() {
        return None;
    }
    let found: Vec<Option<&Arc<Block>>> = asked
        .iter()
        .map(|a| of_entries(&set, &a.entries, now_s))
        .collect();
    let first = found.iter().flatten().next()?;
    let view = first.view(now_s);
    let statuses = found
        .iter()
        .map(|b| match b {
            Some(b) => DescriptorStatus {
                code: Code::OverLimit as i32,
                duration_until_reset: Some(rls::Duration {
                    seconds: b.remaining_s(now_s).unwrap_or(0) as i64,
                    nanos: 0,
                }),
                ..Default::default()
            },
            None => DescriptorStatus {
                code: Code::Ok as i32,
                ..Default::default()
            },
        })
        .collect();
    // A block without expiry: waiting does not help, no retry time anywhere.
    let permanent = found.iter().flatten().any(|b| b.expires_at.is_none());
    let retry_after_s: Vec<Option<u64>> = found
        .iter()
        .map(|b| b.and_then(|b| b.remaining_s(now_s)).filter(|_| !permanent))
        .collect();
    let retry = retry_after_s.iter().flatten().max();
    let response_headers_to_add = retry
        .map(|s| rls::HeaderValue {
            key: "Retry-After".into(),
            value: s.to_string(),
        })
        .into_iter()
        .collect();
    Some(Checked {
        response: RateLimitResponse {
            overall_code: Code::OverLimit as i32,
            statuses,
            response_headers_to_add,
        },
        retry_after_s,
        outcome: Outcome::Rejected,
        policy: None,
        blocked: Some(view),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::blocks::Kind;

    fn block(kind: Kind, value: &str, expires_at: Option<u64>) -> Block {
        Block {
            kind,
            value: value.into(),
            reason: "abuse".into(),
            created_at: 0,
            expires_at,
        }
    }

    fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn each_entry_kind_meets_its_block_type() {
        let set = BlockSet::new([
            block(Kind::Ip, "203.0.113.0/24", Some(100)),
            block(Kind::Tenant, "acme", None),
            block(Kind::Key, "key_00000000000000aa", None),
        ]);
        let hit = |pairs: &[(&str, &str)]| of_entries(&set, &entries(pairs), 40).map(|b| b.id());
        assert_eq!(
            hit(&[("path", "/x"), ("remote_address", "203.0.113.9")]),
            Some("ip:203.0.113.0/24".into())
        );
        assert_eq!(hit(&[("tenant", "acme")]), Some("tenant:acme".into()));
        assert_eq!(
            hit(&[("key_id", "key_00000000000000aa")]),
            Some("key:key_00000000000000aa".into())
        );
        // Another entry key with a blocked value, an unparsable address, an expired block.
        assert_eq!(hit(&[("generic_key", "acme")]), None);
        assert_eq!(hit(&[("remote_address", "not-an-ip")]), None);
        assert_eq!(
            of_entries(&set, &entries(&[("remote_address", "203.0.113.9")]), 100).map(|b| b.id()),
            None
        );
    }
}
