//! What the `local` fallback spent, carried into Redis when Redis decides again
//! (docs/redis.md#when-redis-is-slow-or-down-failure-policy).
//!
//! While Redis is down a tenant's tokens are spent from this instance's local bucket, and its
//! Redis bucket refills untouched. Without a carry, the tenant would find a full Redis bucket
//! when the breaker closes, on top of what it spent locally just before: one extra burst at that
//! end of the outage. So when the breaker closes, each local bucket's **deficit** (its burst less
//! what it holds then) is noted, the local buckets are dropped, and the tenant's next decision
//! first takes that many tokens (less what the local bucket would have refilled since) from its
//! Redis bucket, down to empty at most: Redis then holds at most what the fleet's local buckets
//! held together, and the tenant goes on at its rate instead of getting a fresh burst.
//!
//! Pure bookkeeping on the caller's monotonic clock (ms); the caller sends the carry
//! (`lua/lease.lua` with cost 0: take up to that many tokens, never below empty).

use crate::limit::Rate;
use crate::store::memory::bucket_store::BucketStore;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A tenant decided locally: its Redis bucket's size, its local share of it, and the tokens
/// the local bucket admitted since the last carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Noted {
    full: Rate,
    local: Rate,
    admitted: u64,
}

/// A deficit waiting for the tenant's next decision in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    full: Rate,
    local: Rate,
    /// Tokens the local bucket lacked when the breaker closed.
    tokens: u64,
    /// When the breaker closed (ms).
    at_ms: u64,
}

impl Pending {
    /// The deficit left at `now_ms`: what the local bucket would not yet have refilled.
    fn left(&self, now_ms: u64) -> u64 {
        let elapsed = now_ms.saturating_sub(self.at_ms) as u128;
        let refilled = elapsed * self.local.limit as u128 / self.local.per_ms.max(1) as u128;
        (self.tokens as u128).saturating_sub(refilled) as u64
    }

    /// When nothing is left to carry (ms).
    fn done_ms(&self) -> u64 {
        let ms = (self.tokens as u128 * self.local.per_ms as u128)
            .div_ceil(self.local.limit.max(1) as u128);
        self.at_ms.saturating_add(ms.min(u64::MAX as u128) as u64)
    }
}

/// The carry of one quota service: tenants decided locally, and the deficits to carry.
pub struct LocalCarry {
    /// Bounded like the local buckets; a tenant beyond is not carried (one burst at most).
    max: usize,
    noted: Mutex<HashMap<String, Noted>>,
    pending: Mutex<HashMap<String, Pending>>,
    /// Some deficit is pending (one relaxed load on the healthy path).
    active: AtomicBool,
    /// When every pending deficit has refilled (ms): nothing is carried after it.
    until_ms: AtomicU64,
}

impl LocalCarry {
    /// Tracks at most `max` tenants.
    pub fn new(max: usize) -> Self {
        LocalCarry {
            max,
            noted: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            active: AtomicBool::new(false),
            until_ms: AtomicU64::new(0),
        }
    }

    /// Notes that `tenant` was decided by its local bucket of size `local`, a share of its
    /// Redis bucket of size `full`, admitting `admitted` tokens (0 for a refusal).
    pub fn note(&self, tenant: &str, full: Rate, local: Rate, admitted: u64) {
        let mut noted = self.noted.lock();
        if let Some(v) = noted.get_mut(tenant) {
            v.full = full;
            v.local = local;
            v.admitted = v.admitted.saturating_add(admitted);
        } else if noted.len() < self.max {
            let n = Noted {
                full,
                local,
                admitted,
            };
            noted.insert(tenant.to_string(), n);
        }
    }

    /// Redis decides again at `now_ms` (the breaker closed, or a call succeeded after failed
    /// ones with the breaker closed): each noted tenant's deficit in `local` (the local buckets)
    /// becomes pending, at most what they admitted since the last carry (a bucket kept across
    /// short failures is not charged twice). Deficits pending from an earlier close are
    /// replaced for the tenants noted again, kept for the others.
    pub fn close(&self, local: &BucketStore<String>, now_ms: u64) {
        let noted = std::mem::take(&mut *self.noted.lock());
        if noted.is_empty() {
            return;
        }
        let mut pending = self.pending.lock();
        pending.retain(|_, p| p.left(now_ms) > 0);
        for (tenant, n) in noted {
            let held = local.peek(&tenant, now_ms, &n.local, 0).remaining;
            let tokens = n.local.burst.saturating_sub(held).min(n.admitted);
            if tokens == 0 {
                pending.remove(&tenant);
                continue;
            }
            let p = Pending {
                full: n.full,
                local: n.local,
                tokens,
                at_ms: now_ms,
            };
            pending.insert(tenant, p);
        }
        let until = pending.values().map(Pending::done_ms).max().unwrap_or(0);
        self.until_ms.store(until, Ordering::Relaxed);
        self.active.store(!pending.is_empty(), Ordering::Relaxed);
    }

    /// True when some deficit may be pending ([`LocalCarry::take`] may return one).
    pub fn pending(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// The deficit of `tenant` to carry now, once: the Redis bucket's size and the tokens to
    /// take from it. `None` when nothing is pending for it (the usual case: one relaxed load).
    pub fn take(&self, tenant: &str, now_ms: u64) -> Option<(Rate, u64)> {
        if !self.active.load(Ordering::Relaxed) {
            return None;
        }
        let mut pending = self.pending.lock();
        let p = pending.remove(tenant);
        if pending.is_empty() || now_ms >= self.until_ms.load(Ordering::Relaxed) {
            pending.clear();
            self.active.store(false, Ordering::Relaxed);
        }
        let p = p?;
        let left = p.left(now_ms);
        (left > 0).then_some((p.full, left))
    }

    /// Tenants noted and deficits pending (tests, metrics).
    pub fn len(&self) -> (usize, usize) {
        (self.noted.lock().len(), self.pending.lock().len())
    }
}

#[cfg(test)]
mod tests;
