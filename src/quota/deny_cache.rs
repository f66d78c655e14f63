//! Local deny cache: remembers, per tenant, a refusal Redis gave while the tenant's bucket held
//! less than one whole token, so a flooding tenant's repeated rejections do not all cost a Redis
//! round trip.
//!
//! Only an empty bucket is remembered (`remaining` 0: less than one token). Every request
//! costs at least one token on every path that debits the bucket (the plain token bucket, a
//! lease, the policy script of a request with rules), so until the next whole token is due no
//! instance can admit anything from it: the bucket evolves only by its refill, and its numbers
//! at any later moment follow from Redis's answer and the time elapsed. A refusal that left
//! room for a cheaper request (`remaining` ≥ 1) is never remembered: another instance could
//! admit that request and change the bucket unseen.
//!
//! An entry denies only until a lower bound of when the next token is due, counted from when
//! the refused call was *sent* (before Redis decided); its `Retry-After` and `RateLimit` reset
//! count down from when the answer was *received* (after Redis decided), so they are never
//! shorter than the truth and a client that waits them out is never too early. Three things
//! add tokens unseen: an admin reset (`POST /v1/tenants/{id}/reset`), a lease or a refund
//! giving tokens back, and another instance deciding under a reloaded, faster tier; so an entry
//! is trusted for at most [`MAX_DENY_MS`] after Redis answered.
//!
//! Anything this instance does to the tenant's bucket drops the entry: an admission of any
//! cost on any path, a debit given back, a reset, and a Redis answer showing room. Entries are
//! keyed by tenant and only used for the same bucket size and cost, so a reload that changes
//! the tier (faster refill) never extends a denial.
//! Every time here is on the quota service's one monotonic clock (kept across reloads), never a
//! stamp read from Redis, so no entry is ever read under another clock than it was written with.

use crate::limit::{Decision, Rate};
use crate::store::memory::sharded::ShardedLru;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The longest a remembered denial is trusted without asking Redis again, in milliseconds:
/// at most one Redis call per second per flooding tenant and instance.
pub const MAX_DENY_MS: u64 = 1_000;

#[derive(Clone, Copy)]
struct Entry {
    rate: Rate,
    cost: u64,
    /// Local ms until which the bucket certainly holds less than one token (deny until then).
    until_ms: u64,
    /// Local ms by which the cost is certainly available (reported Retry-After).
    ready_ms: u64,
    /// Local ms by which the bucket is certainly full.
    full_at_ms: u64,
}

/// Bounded per-tenant cache of known denials.
pub struct DenyCache {
    shards: ShardedLru<String, Entry>,
    /// How many entries may deny (`until_ms` set), never fewer: one expired in place stays
    /// counted until it is forgotten, overwritten or evicted. At 0 nothing is
    /// denied, so a lookup or a forget needs neither a hash nor a lock (the common case: no
    /// tenant flooding).
    live: AtomicUsize,
}

impl DenyCache {
    /// A cache of at most `capacity` tenants.
    pub fn new(capacity: usize) -> Self {
        DenyCache {
            shards: ShardedLru::new(capacity),
            live: AtomicUsize::new(0),
        }
    }

    /// Records a Redis decision for `tenant` of a call sent at `sent_ms` and answered at
    /// `received_ms` (local monotonic ms): a refusal of an empty bucket (less than one token
    /// left) is remembered; an admission took tokens and a refusal with room left shows tokens
    /// the remembered refusal did not know of, so both drop it.
    pub fn remember(
        &self,
        tenant: &str,
        rate: Rate,
        cost: u64,
        (sent_ms, received_ms): (u64, u64),
        d: &Decision,
    ) {
        if d.admitted || d.remaining > 0 {
            self.forget(tenant);
            return;
        }
        if d.never_admissible() {
            return;
        }
        let entry = Entry {
            rate,
            cost,
            until_ms: (sent_ms + next_token_bound_ms(&rate, cost, d.retry_after_ms))
                .min(received_ms + MAX_DENY_MS),
            ready_ms: received_ms + d.retry_after_ms,
            full_at_ms: received_ms + d.full_ms,
        };
        let mut shard = self.shards.shard(tenant).lock();
        let (was_live, evicted) = match shard.get_mut(tenant) {
            Some(e) => (std::mem::replace(e, entry).until_ms != 0, None),
            None => (false, shard.push(tenant.to_string(), entry)),
        };
        // Counted under the shard's lock: an entry is counted while it may deny.
        let gone =
            usize::from(was_live) + usize::from(evicted.is_some_and(|(_, e)| e.until_ms != 0));
        let added = usize::from(entry.until_ms != 0);
        if added > gone {
            self.live.fetch_add(added - gone, Ordering::Relaxed);
        } else if gone > added {
            self.live.fetch_sub(gone - added, Ordering::Relaxed);
        }
    }

    /// True when some entry may deny (else nothing needs looking up). A decision racing with
    /// one being remembered may miss it: that request asks Redis, as it would a moment before.
    fn any_live(&self) -> bool {
        self.live.load(Ordering::Relaxed) != 0
    }

    /// A rejection for `tenant` at `now_ms` when one is known, re-derived from the remembered
    /// Redis decision and the time since: `remaining` 0 (exact: no token is due yet), the wait
    /// and the time until full counted down from when Redis answered (never shorter than the
    /// truth). `None` means "ask Redis".
    pub fn check(&self, tenant: &str, rate: &Rate, cost: u64, now_ms: u64) -> Option<Decision> {
        if !self.any_live() {
            return None;
        }
        // An expired entry stays until the LRU bound evicts it; it never denies again.
        let e = *self.shards.shard(tenant).lock().get_mut(tenant)?;
        if e.rate != *rate || e.cost != cost || now_ms >= e.until_ms {
            return None;
        }
        Some(Decision {
            admitted: false,
            remaining: 0,
            retry_after_ms: e.ready_ms.saturating_sub(now_ms),
            full_ms: e.full_at_ms.saturating_sub(now_ms),
        })
    }

    /// Forgets `tenant`'s entry (its bucket was reset, debited or given tokens back on this
    /// instance).
    pub fn forget(&self, tenant: &str) {
        if !self.any_live() {
            return;
        }
        if let Some(e) = self.shards.shard(tenant).lock().get_mut(tenant) {
            if std::mem::take(&mut e.until_ms) != 0 {
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Forgets everything.
    pub fn clear(&self) {
        for s in self.shards.iter() {
            let mut shard = s.lock();
            let live = shard.values().filter(|e| e.until_ms != 0).count();
            shard.clear();
            self.live.fetch_sub(live, Ordering::Relaxed);
        }
    }
}

/// A lower bound of the milliseconds from Redis's decision until the bucket holds one whole
/// token, from the wait `retry_ms` Redis reported for `cost` tokens. Redis's wait is the ceiling
/// of `(cost × per_ms − level) / limit`; one token is due `(cost − 1) × per_ms / limit` ms
/// earlier. Less 1 ms for the ceiling and 1 ms for the two clocks' millisecond ticks (the local
/// clock and Redis TIME each truncate), so Redis would still refuse any request at the bound.
fn next_token_bound_ms(rate: &Rate, cost: u64, retry_ms: u64) -> u64 {
    let earlier = (u128::from(cost.saturating_sub(1)) * u128::from(rate.per_ms))
        .div_ceil(rate.limit.max(1).into());
    let bound = u128::from(retry_ms).saturating_sub(earlier + 2);
    u64::try_from(bound).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
