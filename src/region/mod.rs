//! Multi-region budgets (docs/DESIGN.md 4b/4c `multi_region`): each region decides against its
//! own Redis, with only its part of every tenant's limit and burst.
//!
//! - `static`: the part is `shares[region] / Σ shares` ([`split::static_share`]).
//! - `sync`: the request path records each tenant's demand (tokens asked for) in memory; a
//!   background task (`runtime::loops::RegionSync`) every `sync_interval` publishes the demands of the last
//!   interval to the `global` store, reads every region's, and sets this region's part of each
//!   tenant's budget in proportion to recent demand, with a floor ([`split::demand_share`]).
//!   A tenant nobody asked for recently uses the static split. The request path only reads the
//!   in-memory map; losing `global` keeps the last parts (logged, counted in
//!   `tollgate_region_sync_failures_total`, aged in `tollgate_region_sync_age_seconds`).
//!
//! Why demand (admitted + refused) rather than admitted usage: when every region is saturated,
//! admitted usage equals the current parts, so dividing by it would freeze whatever split there
//! is; demand lets a busier region win budget from a quieter one.

pub mod sync;

use crate::config::{MultiRegionSettings, RegionMode};
use crate::limit::share::{self as split, Share};
use crate::limit::Rate;
use once_cell::sync::Lazy;
use parking_lot::{Mutex, RwLock};
use prometheus::{register_int_counter, register_int_gauge, IntCounter, IntGauge};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use sync::{GlobalStore, Published};

/// Tenants whose demand and synced share are tracked at most; beyond it a new tenant is not
/// recorded (it keeps the static split) until others go idle.
pub const MAX_SYNCED_TENANTS: usize = 100_000;

/// `tollgate_region_sync_failures_total`: exchanges with `global` that failed.
static SYNC_FAILURES: Lazy<IntCounter> = Lazy::new(|| {
    register_int_counter!(
        "tollgate_region_sync_failures_total",
        "Multi-region sync exchanges with the global store that failed (the last shares stay)"
    )
    .expect("register tollgate_region_sync_failures_total")
});

/// `tollgate_region_sync_age_seconds`: seconds since the last successful exchange.
static SYNC_AGE: Lazy<IntGauge> = Lazy::new(|| {
    register_int_gauge!(
        "tollgate_region_sync_age_seconds",
        "Seconds since the last successful multi-region sync with the global store"
    )
    .expect("register tollgate_region_sync_age_seconds")
});

/// `tollgate_region_synced_tenants`: tenants with a demand-based share right now.
static SYNCED_TENANTS: Lazy<IntGauge> = Lazy::new(|| {
    register_int_gauge!(
        "tollgate_region_synced_tenants",
        "Tenants whose regional share currently follows demand (the others use the static split)"
    )
    .expect("register tollgate_region_synced_tenants")
});

/// This region's part of every tenant's budget.
pub struct RegionBudget {
    pub settings: MultiRegionSettings,
    static_share: Share,
    /// Sync mode: tenant → its demand-based share (absent: static split).
    shares: RwLock<HashMap<String, Share>>,
    /// Sync mode: tenant → tokens asked for here since the last exchange.
    demand: Mutex<HashMap<String, u64>>,
    global: Option<GlobalStore>,
    last_ok: Mutex<Instant>,
    failing: AtomicBool,
}

impl RegionBudget {
    /// The budget of `settings.region`; keys in `global` start with `key_prefix`.
    /// Errors: (field path, reason) for a `global.url` the client refuses.
    pub fn new(settings: &MultiRegionSettings, key_prefix: &str) -> Result<Self, (String, String)> {
        let static_share =
            split::static_share(&settings.shares, &settings.region).ok_or_else(|| {
                (
                    "multi_region.region".to_string(),
                    "not in shares".to_string(),
                )
            })?;
        let global = match (&settings.global_url, settings.mode) {
            (Some(url), RegionMode::Sync) => Some(GlobalStore::new(
                url,
                key_prefix,
                settings.sync_interval.max(Duration::from_secs(1)),
            )?),
            _ => None,
        };
        Lazy::force(&SYNC_FAILURES);
        Ok(RegionBudget {
            settings: settings.clone(),
            static_share,
            shares: RwLock::new(HashMap::new()),
            demand: Mutex::new(HashMap::new()),
            global,
            last_ok: Mutex::new(Instant::now()),
            failing: AtomicBool::new(false),
        })
    }

    /// This region's name.
    pub fn region(&self) -> &str {
        &self.settings.region
    }

    /// The share of a budget not tied to one tenant held here (limit rules whose key has no
    /// `tenant`): the static split.
    pub fn static_share(&self) -> Share {
        self.static_share
    }

    /// The current share of `tenant`'s budget held here.
    pub fn share(&self, tenant: &str) -> Share {
        self.shares
            .read()
            .get(tenant)
            .copied()
            .unwrap_or(self.static_share)
    }

    /// `rate` (the tenant's whole effective rate) cut to this region's current share.
    pub fn rate_for(&self, tenant: &str, rate: Rate) -> Rate {
        self.share(tenant).apply(rate)
    }

    /// Records that a request of `cost` tokens for `tenant` was decided here (sync mode; a no-op
    /// in static mode). In memory only.
    pub fn record(&self, tenant: &str, cost: u64) {
        if self.global.is_none() {
            return;
        }
        let mut demand = self.demand.lock();
        if let Some(d) = demand.get_mut(tenant) {
            *d = d.saturating_add(cost);
        } else if demand.len() < MAX_SYNCED_TENANTS {
            demand.insert(tenant.to_string(), cost);
        }
    }

    /// One exchange with `global` (sync mode): publish the demands recorded since the last
    /// exchange, read all regions', and set the next shares. On failure the shares stay and the
    /// demands of this interval are dropped (they are stale by the next one).
    pub async fn sync_once(&self) {
        let Some(global) = &self.global else { return };
        let mut recorded = std::mem::take(&mut *self.demand.lock());
        // Tenants to exchange: asked for here, or still holding a synced share (their demand
        // elsewhere may still be live; publishing 0 from here deletes our key).
        for t in self.shares.read().keys() {
            recorded.entry(t.clone()).or_insert(0);
        }
        let tenants: Vec<(String, u64)> = recorded.into_iter().collect();
        let regions: Vec<String> = self.settings.shares.keys().cloned().collect();
        let published: Vec<Published> = tenants
            .iter()
            .map(|(tenant, demand)| Published {
                tenant,
                demand: *demand,
            })
            .collect();
        let ttl = self.settings.sync_interval * 3;
        match global
            .exchange(self.region(), &regions, ttl, &published)
            .await
        {
            Ok(rows) => {
                let here = regions.iter().position(|r| r == self.region()).unwrap_or(0);
                let n = regions.len() as u64;
                let mut next = HashMap::with_capacity(rows.len());
                for ((tenant, _), row) in tenants.into_iter().zip(rows) {
                    let total = row.iter().fold(0u64, |a, b| a.saturating_add(*b));
                    if let Some(share) = split::demand_share(row[here], total, n) {
                        next.insert(tenant, share);
                    }
                }
                SYNCED_TENANTS.set(next.len() as i64);
                *self.shares.write() = next;
                *self.last_ok.lock() = Instant::now();
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(region = %self.region(), "multi-region sync with global works again");
                }
            }
            Err(e) => {
                SYNC_FAILURES.inc();
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        region = %self.region(),
                        error = %e,
                        "multi-region sync with global failed: keeping the last shares"
                    );
                }
            }
        }
        SYNC_AGE.set(self.last_ok.lock().elapsed().as_secs() as i64);
    }
}

#[cfg(test)]
mod tests;
