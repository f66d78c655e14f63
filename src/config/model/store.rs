//! `store:`: the live state kept in Redis beside the buckets (API keys, limit overrides and
//! blocks set through the admin API), its per-instance cache and how fast a change reaches every instance.

use std::time::Duration;

/// The per-instance cache of the live state (`store.cache`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreCacheSettings {
    /// Most entries kept (least recently used evicted first). Default 100000.
    pub max_entries: usize,
    /// How long a found entry is served before it is read again. Default 30s.
    pub ttl: Duration,
    /// How long an unknown key is remembered as unknown. Default 2s.
    pub negative_ttl: Duration,
}

impl Default for StoreCacheSettings {
    fn default() -> Self {
        StoreCacheSettings {
            max_entries: 100_000,
            ttl: Duration::from_secs(30),
            negative_ttl: Duration::from_secs(2),
        }
    }
}

/// `store:` (docs/live-state.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// API keys issued through `/v1/keys` are accepted (default true when `store:` is present).
    pub keys: bool,
    /// Blocks set through `/v1/blocks` are enforced (default true when `store:` is present):
    /// held in memory per instance, refreshed on every change (docs/live-state.md#blocks).
    /// Off, `/v1/blocks` answers 404 and nothing is stored.
    pub blocks: bool,
    /// Limits set through `/v1/tenants/{id}/limits` replace the file's numbers (default true
    /// when `store:` is present; docs/live-state.md#live-limit-overrides).
    pub overrides: bool,
    pub cache: StoreCacheSettings,
    /// The version check's interval: a change is in force on every instance within this even
    /// when its pub/sub message is lost. Default 1s.
    pub propagation: Duration,
}
