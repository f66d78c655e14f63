//! `store:`: live keys, the per-instance cache and the propagation bound.

use super::common::Check;
use crate::config::raw::RawStore;
use crate::config::{StoreCacheSettings, StoreSettings};
use std::time::Duration;

/// Most `store.cache.max_entries`.
const MAX_ENTRIES: i64 = 10_000_000;

/// `store:`; `None` when absent. `store:` needs `redis:` and a tier (`has_quota`).
pub(super) fn settings(
    c: &mut Check,
    raw: Option<&RawStore>,
    has_quota: bool,
) -> Option<StoreSettings> {
    let raw = raw?;
    if !has_quota {
        c.err("store", "needs redis: and at least one tier under tiers:");
    }
    let mut cache = StoreCacheSettings::default();
    if let Some(rc) = &raw.cache {
        if let Some(n) = rc.max_entries {
            if (1..=MAX_ENTRIES).contains(&n) {
                cache.max_entries = n as usize;
            } else {
                c.err(
                    "store.cache.max_entries",
                    format!("must be 1 to {MAX_ENTRIES}"),
                );
            }
        }
        let day = Duration::from_secs(86_400);
        if let Some(d) = bounded(c, "store.cache.ttl", rc.ttl.as_deref(), day) {
            cache.ttl = d;
        }
        if let Some(d) = bounded(
            c,
            "store.cache.negative_ttl",
            rc.negative_ttl.as_deref(),
            day,
        ) {
            cache.negative_ttl = d;
        }
    }
    let hour = Duration::from_secs(3600);
    let propagation = bounded(c, "store.propagation", raw.propagation.as_deref(), hour)
        .unwrap_or(Duration::from_secs(1));
    Some(StoreSettings {
        keys: raw.keys.unwrap_or(true),
        blocks: raw.blocks.unwrap_or(true),
        overrides: raw.overrides.unwrap_or(true),
        cache,
        propagation,
    })
}

/// A duration between 1ms and `max`, or `None` (absent or refused).
fn bounded(c: &mut Check, path: &str, text: Option<&str>, max: Duration) -> Option<Duration> {
    let d = c.duration(path, text?)?;
    if d.is_zero() || d > max {
        c.err(path, format!("must be between 1ms and {}s", max.as_secs()));
        return None;
    }
    Some(d)
}
