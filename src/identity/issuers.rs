//! The live key set of each `identity.jwt.issuers[]` entry, shared by the request path (reads,
//! refetch requests) and its refresh loop in `runtime/` (fetches, installs). No I/O here.
//!
//! An [`IssuerKeys`] outlives reloads while its settings are unchanged, so a reload neither
//! drops the keys nor refetches them.

use super::jwks::JwksKey;
use crate::config::JwtIssuerSettings;
use arc_swap::ArcSwapOption;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};

/// One fetched key set.
#[derive(Debug)]
pub struct KeySet {
    pub keys: Vec<JwksKey>,
    /// When it was fetched (the start of its `stale_for`).
    pub fetched_at: Instant,
}

/// Counters of one issuer kept on the request path, read by the metrics exporter.
#[derive(Debug, Default)]
pub struct RefetchCounts {
    /// Unknown-kid refetches triggered.
    pub triggered: AtomicU64,
    /// Unknown-kid refetches refused by `unknown_kid_refetch`.
    pub throttled: AtomicU64,
}

/// The key set of one issuer and the coordination of its fetches.
#[derive(Debug)]
pub struct IssuerKeys {
    pub settings: JwtIssuerSettings,
    set: ArcSwapOption<KeySet>,
    /// Origin of `last_refetch_ms`.
    epoch: Instant,
    /// Milliseconds since `epoch` of the last unknown-kid refetch; `u64::MAX` for never.
    last_refetch_ms: AtomicU64,
    /// A fetch is running or asked for: requests that need it wait for its end.
    in_flight: AtomicBool,
    /// Wakes the refresh loop for an unknown-kid refetch.
    pub wake: Notify,
    /// Bumped at the end of every fetch (success or failure).
    fetched: watch::Sender<u64>,
    pub refetches: RefetchCounts,
}

impl IssuerKeys {
    /// State without a key set; the first fetch counts as in flight from the start, so the
    /// first requests wait for it (up to the fetch timeout) rather than fail at once.
    pub fn new(settings: JwtIssuerSettings) -> Arc<IssuerKeys> {
        Arc::new(IssuerKeys {
            settings,
            set: ArcSwapOption::empty(),
            epoch: Instant::now(),
            last_refetch_ms: AtomicU64::new(u64::MAX),
            in_flight: AtomicBool::new(true),
            wake: Notify::new(),
            fetched: watch::channel(0).0,
            refetches: RefetchCounts::default(),
        })
    }

    /// The key set in force at `now`: the last good one while younger than `stale_for`.
    pub fn current(&self, now: Instant) -> Option<Arc<KeySet>> {
        self.set
            .load_full()
            .filter(|s| now.saturating_duration_since(s.fetched_at) < self.settings.stale_for)
    }

    /// The last good set whatever its age (metrics, readiness detail).
    pub fn last(&self) -> Option<Arc<KeySet>> {
        self.set.load_full()
    }

    /// Asks for a refetch because a token named a `kid` the set lacks. Returns whether a fetch
    /// is (now) in flight, i.e. whether waiting ([`wait_fetch`](Self::wait_fetch)) can help:
    /// a running fetch is joined (coalesced); otherwise one is started at most once per
    /// `unknown_kid_refetch` (counted as triggered or throttled).
    pub fn want_refetch(&self, now: Instant) -> bool {
        if self.in_flight.load(Ordering::Acquire) {
            return true;
        }
        let now_ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        let every = self.settings.unknown_kid_refetch.as_millis() as u64;
        let last = self.last_refetch_ms.load(Ordering::Acquire);
        if last != u64::MAX && now_ms < last.saturating_add(every) {
            self.refetches.throttled.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if self
            .last_refetch_ms
            .compare_exchange(last, now_ms, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Another request won the slot just now: join its fetch.
            return self.in_flight.load(Ordering::Acquire);
        }
        self.refetches.triggered.fetch_add(1, Ordering::Relaxed);
        self.in_flight.store(true, Ordering::Release);
        self.wake.notify_one();
        true
    }

    /// Waits until the fetch in flight (if any) ends, at most `limit`.
    pub async fn wait_fetch(&self, limit: Duration) {
        let mut rx = self.fetched.subscribe();
        if !self.in_flight.load(Ordering::Acquire) {
            return;
        }
        let _ = tokio::time::timeout(limit, rx.changed()).await;
    }

    /// The refresh loop starts a fetch.
    pub fn fetch_started(&self) {
        self.in_flight.store(true, Ordering::Release);
    }

    /// The refresh loop ends a fetch: `Some(keys)` installs a new set, `None` keeps the last
    /// good one. Wakes every waiting request.
    pub fn fetch_ended(&self, keys: Option<Vec<JwksKey>>, now: Instant) {
        if let Some(keys) = keys {
            self.set.store(Some(Arc::new(KeySet {
                keys,
                fetched_at: now,
            })));
        }
        self.in_flight.store(false, Ordering::Release);
        self.fetched.send_modify(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests;
