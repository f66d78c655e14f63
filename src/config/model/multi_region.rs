//! `multi_region:`: this region's part of every limit.

use std::collections::BTreeMap;
use std::time::Duration;

/// `multi_region.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionMode {
    /// Every limit and burst is cut to `shares[region] / Σ shares`.
    Static,
    /// Each active tenant's budget is re-divided every `sync_interval` by recent demand.
    Sync,
}

/// `multi_region:`: this region's part of every tenant's budget (docs/DESIGN.md 4b/4c).
#[derive(Debug, Clone, PartialEq)]
pub struct MultiRegionSettings {
    /// This instance's region (a key of `shares`).
    pub region: String,
    /// Weight of every region (all > 0), by name.
    pub shares: BTreeMap<String, u64>,
    pub mode: RegionMode,
    /// Sync mode: the Redis where regions exchange usage (`redis://` or `rediss://`).
    pub global_url: Option<String>,
    /// Sync mode: time between two exchanges (default 1 s).
    pub sync_interval: Duration,
}
