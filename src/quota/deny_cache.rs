//! Local deny cache: remembers, per tenant, until when Redis said its bucket cannot admit a
//! request of a given cost, so a flooding tenant's repeated rejections inside its Retry-After do
//! not all cost a Redis round trip.
//!
//! Safe by construction: it only ever denies, and only until `sent + retry_after_ms`, where
//! `sent` is the local time the rejected call was *sent* (before Redis decided). Requests on
//! other instances can only take tokens, never add them, so the bucket cannot reach the cost
//! earlier than that. Two things do add tokens: an admin reset (`POST /v1/tenants/{id}/reset`)
//! and a lease giving its unused tokens back; so a denial is trusted for at most
//! [`MAX_DENY_MS`] after Redis answered, and other instances see a reset within that time.
//! The Retry-After it reports counts from `received` (after Redis decided), so a client that
//! waits it out is never too early.
//!
//! A remembered denial describes the bucket as Redis last answered *this* instance, so anything
//! this instance does to the tenant's bucket since drops it: an admission of any cost and on
//! any path (the plain token bucket, a lease, the policy script of a request with rules), a
//! debit given back, a reset. The next request asks Redis and gets the bucket's current numbers;
//! a cached refusal never reports the room or the wait of a bucket this instance has changed.
//! Other instances' admissions within [`MAX_DENY_MS`] are not seen (as for any answer, other
//! traffic on the bucket can only make the true wait longer; docs/redis.md#deny-cache).
//! Entries are keyed by tenant and only used for the same bucket size and cost, so a reload that
//! changes the tier (faster refill) never extends a denial.
//! Every time here is on the quota service's one monotonic clock (kept across reloads), never a
//! stamp read from Redis, so no entry is ever read under another clock than it was written with.

use crate::limit::{Decision, Rate};
use crate::store::memory::sharded::ShardedLru;

/// The longest a remembered denial is trusted without asking Redis again, in milliseconds:
/// at most one Redis call per second per flooding tenant and instance.
pub const MAX_DENY_MS: u64 = 1_000;

#[derive(Clone, Copy)]
struct Entry {
    rate: Rate,
    cost: u64,
    /// Local ms until which the cost is certainly unavailable (deny until then).
    until_ms: u64,
    /// Local ms by which the cost is certainly available (reported Retry-After).
    ready_ms: u64,
    /// Local ms by which the bucket is certainly full.
    full_at_ms: u64,
    remaining: u64,
}

/// Bounded per-tenant cache of known denials.
pub struct DenyCache {
    shards: ShardedLru<String, Entry>,
}

impl DenyCache {
    /// A cache of at most `capacity` tenants.
    pub fn new(capacity: usize) -> Self {
        DenyCache {
            shards: ShardedLru::new(capacity),
        }
    }

    /// Records a Redis decision for `tenant` of a call sent at `sent_ms` and answered at
    /// `received_ms` (local monotonic ms): a rejection is remembered; an admission took tokens
    /// from the bucket, so any remembered rejection is dropped.
    pub fn remember(
        &self,
        tenant: &str,
        rate: Rate,
        cost: u64,
        (sent_ms, received_ms): (u64, u64),
        d: &Decision,
    ) {
        if d.admitted {
            self.forget(tenant);
            return;
        }
        if d.never_admissible() {
            return;
        }
        let entry = Entry {
            rate,
            cost,
            until_ms: (sent_ms + d.retry_after_ms).min(received_ms + MAX_DENY_MS),
            ready_ms: received_ms + d.retry_after_ms,
            full_at_ms: received_ms + d.full_ms,
            remaining: d.remaining,
        };
        self.shards
            .shard(tenant)
            .lock()
            .push(tenant.to_string(), entry);
    }

    /// A rejection for `tenant` at `now_ms` when one is known, computed from the remembered
    /// Redis decision; `None` means "ask Redis".
    pub fn check(&self, tenant: &str, rate: &Rate, cost: u64, now_ms: u64) -> Option<Decision> {
        // An expired entry stays until the LRU bound evicts it; it never denies again.
        let e = *self.shards.shard(tenant).lock().get_mut(tenant)?;
        if e.rate != *rate || e.cost != cost || now_ms >= e.until_ms {
            return None;
        }
        Some(Decision {
            admitted: false,
            remaining: e.remaining,
            retry_after_ms: e.ready_ms.saturating_sub(now_ms),
            full_ms: e.full_at_ms.saturating_sub(now_ms),
        })
    }

    /// Forgets `tenant`'s entry (its bucket was reset, debited or given tokens back on this
    /// instance).
    pub fn forget(&self, tenant: &str) {
        if let Some(e) = self.shards.shard(tenant).lock().get_mut(tenant) {
            e.until_ms = 0;
        }
    }

    /// Forgets everything.
    pub fn clear(&self) {
        for s in self.shards.iter() {
            s.lock().clear();
        }
    }
}

#[cfg(test)]
mod tests;
