//! Opt-in token leasing (`tiers.<name>.lease`, docs/DESIGN.md 4c "Lease").
//!
//! An instance takes up to `tokens` from the tenant's Redis token bucket in one script call
//! ([`LEASE_LUA`]) and admits locally from that batch for at most `max_hold`. Tokens leave
//! Redis before they are used, so the fleet never admits more than the bucket allows; what it
//! costs is under-admission: at any moment at most `tokens` per instance sit in leases instead
//! of the bucket. Unused tokens go back to the bucket (never beyond its burst): with the next
//! lease call of the tenant, or by [`LeaseReturn`] after `max_hold` (within one sweep, 100 ms)
//! and at shutdown.
//!
//! A request served from the lease takes a short synchronous lock and never waits. Requests that
//! find it empty queue on the tenant's refill lock (async, held across the one lease call), so
//! one call serves the whole queue instead of every waiting request taking its own batch.
//! [`LeaseBook`] is the pure bookkeeping (clock injected); [`LeaseStore`] holds one per tenant.

use super::{count_fault, record_call, refused_wait};
use super::{PolicyExtras, QuotaOutcome, QuotaService, TenantQuota};
use crate::config::LeaseSettings;
use crate::hashing::HashMap;
use crate::limit::{Decision, Rate};
use crate::store::redis::client::{bucket_late, wait_ms, LuaScript, RedisFault};
use crate::store::redis::guarded::{Answered, Attempt, Budget, RetryOn, FAILED_CALL_RETRY_MS};
use crate::store::redis::keys::bucket_key;
use crate::store::redis::scripts::LEASE_LUA;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How often [`LeaseReturn`] gives back the tokens of expired leases.
pub const SWEEP_EVERY: Duration = Duration::from_millis(100);

/// Tenants with a lease tracked per instance at most; beyond, a tenant is decided exactly.
const MAX_TENANTS: usize = 100_000;
const SHARDS: usize = 16;

/// `lua/lease.lua`, loaded once per process.
pub(super) fn lease_script() -> &'static LuaScript {
    static SCRIPT: OnceLock<LuaScript> = OnceLock::new();
    SCRIPT.get_or_init(|| LuaScript::new(LEASE_LUA))
}

/// The reply of one `lua/lease.lua` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseReply {
    /// Tokens taken from the bucket (the waiting request's cost included).
    pub granted: u64,
    /// Whole tokens left in the bucket after the call.
    pub remaining: u64,
    /// ms until `cost` tokens are available; 0 when granted, `u64::MAX` never.
    pub retry_ms: u64,
    /// ms until the bucket is full.
    pub full_ms: u64,
}

/// What [`LeaseBook::take`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Admitted from the lease, no Redis call.
    Local(Decision),
    /// The lease is empty, expired or for another bucket: call Redis, giving back `refund`
    /// unused tokens (already removed from the book).
    Call { refund: u64 },
}

/// One tenant's lease in this instance. Times are ms on one monotonic clock, passed in.
#[derive(Debug, Clone, Default)]
pub struct LeaseBook {
    /// Leased tokens not yet used.
    tokens: u64,
    /// The lease is used only before this time.
    expires_ms: u64,
    /// The bucket the lease was taken from (a reload that resizes it ends the lease).
    rate: Option<Rate>,
    /// The bucket's remaining tokens as of the last call.
    redis_remaining: u64,
    /// When the bucket was full as of the last call.
    full_at_ms: u64,
}

impl LeaseBook {
    /// Leased tokens not yet used (what this instance can admit without Redis).
    pub fn held(&self) -> u64 {
        self.tokens
    }

    /// Admits `cost` from the lease when it is live (not expired, same bucket) and holds
    /// enough; else hands back what is left for the lease call to return.
    ///
    /// A local admission reports `remaining` = tokens left in the lease + the bucket's
    /// remaining as of the last call: what this instance can still admit if no other instance
    /// takes from the bucket, the same promise as an exact decision's `r`.
    pub fn take(&mut self, now_ms: u64, rate: &Rate, cost: u64) -> Step {
        match self.local(now_ms, rate, cost) {
            Some(d) => Step::Local(d),
            None => Step::Call {
                refund: std::mem::take(&mut self.tokens),
            },
        }
    }

    /// The local admission of [`take`](Self::take), or `None` (the book unchanged) when the
    /// lease cannot serve `cost`.
    pub fn local(&mut self, now_ms: u64, rate: &Rate, cost: u64) -> Option<Decision> {
        let live = self.rate.as_ref() == Some(rate) && now_ms < self.expires_ms;
        if !live || self.tokens < cost {
            return None;
        }
        self.tokens -= cost;
        Some(Decision {
            admitted: true,
            remaining: self.tokens + self.redis_remaining,
            retry_after_ms: 0,
            full_ms: self.full_at_ms.saturating_sub(now_ms),
        })
    }

    /// Records the reply of a lease call made for a request of `cost` at `now_ms` and returns
    /// that request's decision. Granted: the request takes `cost` and the rest is the new
    /// lease, usable for `hold_ms`. Refused: no lease is held.
    pub fn settle(
        &mut self,
        now_ms: u64,
        hold_ms: u64,
        rate: &Rate,
        cost: u64,
        reply: LeaseReply,
    ) -> Decision {
        let admitted = reply.retry_ms == 0 && reply.granted >= cost;
        self.redis_remaining = reply.remaining;
        self.full_at_ms = now_ms.saturating_add(reply.full_ms);
        if !admitted {
            self.tokens = 0;
            self.rate = None;
            return Decision {
                admitted: false,
                remaining: reply.remaining,
                retry_after_ms: reply.retry_ms,
                full_ms: reply.full_ms,
            };
        }
        self.tokens = reply.granted - cost;
        self.rate = Some(*rate);
        self.expires_ms = now_ms.saturating_add(hold_ms);
        Decision {
            admitted: true,
            remaining: self.tokens + reply.remaining,
            retry_after_ms: 0,
            full_ms: reply.full_ms,
        }
    }

    /// The unused tokens of a lease that expired by `now_ms` (removed from the book) with the
    /// bucket they belong to; `None` when nothing is to be given back.
    pub fn expired(&mut self, now_ms: u64) -> Option<(Rate, u64)> {
        if self.tokens == 0 || now_ms < self.expires_ms {
            return None;
        }
        self.release()
    }

    /// Every unused token (removed from the book), expired or not: shutdown.
    pub fn release(&mut self) -> Option<(Rate, u64)> {
        let rate = self.rate.take()?;
        let n = std::mem::take(&mut self.tokens);
        (n > 0).then_some((rate, n))
    }

    /// True when the book holds nothing and its lease is over (it can be forgotten).
    pub fn idle(&self, now_ms: u64) -> bool {
        self.tokens == 0 && now_ms >= self.expires_ms
    }
}

/// One tenant's lease: the book (short sync lock, never held across an await), the refill
/// lock (async, held by the one request or sweep that talks to Redis for this tenant) and the
/// outcome of the last lease call, which the requests that waited for it share when it failed.
#[derive(Default)]
struct TenantLease {
    book: parking_lot::Mutex<LeaseBook>,
    refill: tokio::sync::Mutex<()>,
    last_call: parking_lot::Mutex<LastCall>,
}

/// Lease calls finished for one tenant, and the fault of the last one (`None`: it answered).
#[derive(Default, Clone, Copy)]
struct LastCall {
    finished: u64,
    fault: Option<RedisFault>,
}

impl TenantLease {
    fn finished(&self, fault: Option<RedisFault>) {
        let mut last = self.last_call.lock();
        last.finished += 1;
        last.fault = fault;
    }
}

type Book = Arc<TenantLease>;

/// Every tenant's [`LeaseBook`] in this instance, at most `MAX_TENANTS`.
pub struct LeaseStore {
    shards: Vec<parking_lot::Mutex<HashMap<String, Book>>>,
    hasher: crate::hashing::RandomState,
}

impl Default for LeaseStore {
    fn default() -> Self {
        LeaseStore {
            shards: (0..SHARDS).map(|_| Default::default()).collect(),
            hasher: Default::default(),
        }
    }
}

impl LeaseStore {
    fn shard(&self, tenant: &str) -> &parking_lot::Mutex<HashMap<String, Book>> {
        &self.shards[(self.hasher.hash_one(tenant) as usize) % SHARDS]
    }

    /// The book of `tenant` (created empty); `None` when the store is full.
    fn book(&self, tenant: &str) -> Option<Book> {
        let mut shard = self.shard(tenant).lock();
        if let Some(b) = shard.get(tenant) {
            return Some(b.clone());
        }
        if shard.len() >= MAX_TENANTS / SHARDS {
            return None;
        }
        let b = Book::default();
        shard.insert(tenant.to_string(), b.clone());
        Some(b)
    }

    fn all(&self) -> Vec<(String, Book)> {
        self.shards
            .iter()
            .flat_map(|s| {
                s.lock()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Whether any tenant's lease holds tokens not given back.
    pub(super) fn holds_tokens(&self) -> bool {
        self.shards
            .iter()
            .any(|s| s.lock().values().any(|b| b.book.lock().held() > 0))
    }

    /// Forgets idle books no request is using.
    fn forget_idle(&self, now_ms: u64) {
        for s in &self.shards {
            s.lock()
                .retain(|_, b| Arc::strong_count(b) > 1 || !b.book.lock().idle(now_ms));
        }
    }
}

impl QuotaService {
    /// A leased tier's decision; `None` when the lease store is full (then decided exactly).
    pub(super) async fn decide_leased(
        &self,
        q: &TenantQuota<'_>,
        lease: LeaseSettings,
    ) -> Option<QuotaOutcome> {
        let book = self.leases.book(q.tenant)?;
        let decided = |decision| QuotaOutcome::Decided {
            decision,
            rate: q.rate,
            degraded: false,
            extras: PolicyExtras::default(),
        };
        if let Some(d) = book.book.lock().local(self.now_ms(), &q.rate, q.cost) {
            return Some(decided(d));
        }
        // The whole decision, waiting included, takes at most `redis.timeout_ms`. A request that
        // waited for another one's lease call shares that call's fault instead of making its
        // own behind it: with Redis frozen, a queue would otherwise wait one timeout each in turn.
        let arrived = Instant::now();
        let seen = book.last_call.lock().finished;
        let wait = tokio::time::timeout(self.settings.timeout, book.refill.lock()).await;
        let Ok(refill) = wait else {
            return Some(self.failed_without_call(q, RedisFault::Timeout));
        };
        let sent_ms = self.now_ms();
        // Another request may have refilled the lease while this one waited.
        if let Some(d) = book.book.lock().local(sent_ms, &q.rate, q.cost) {
            return Some(decided(d));
        }
        let last = *book.last_call.lock();
        let shared = last.fault.filter(|_| last.finished != seen);
        let left = self.settings.timeout.saturating_sub(arrived.elapsed());
        if let Some(fault) = shared.or(left.is_zero().then_some(RedisFault::Timeout)) {
            drop(refill);
            return Some(self.failed_without_call(q, fault));
        }
        let refund = match book.book.lock().take(sent_ms, &q.rate, q.cost) {
            Step::Local(d) => return Some(decided(d)),
            Step::Call { refund } => refund,
        };
        if refund == 0 {
            if let Some(d) = self.deny.check(q.tenant, &q.rate, q.cost, sent_ms) {
                return Some(decided(d));
            }
        }
        // One lease call, bounded by `redis.timeout_ms` from the request's arrival, with the
        // retry of an exact decision. Tokens handed back while the breaker refuses calls are lost
        // to this instance (the bucket refills them): under-admission, never over-admission.
        let want = lease.tokens.max(q.cost);
        let answer = self
            .guarded()
            .call(
                sent_ms,
                self.retry(
                    RetryOn::ConnectionOrNotMaster,
                    Budget::Since {
                        since: arrived,
                        left,
                    },
                ),
                |attempt| {
                    // The retry goes without the refund: the first attempt may have given it
                    // back already, and giving it twice could over-admit.
                    let refund = if attempt == Attempt::First { refund } else { 0 };
                    self.lease_script(q.tenant, &q.rate, q.cost, want, refund, lease.max_hold_ms)
                },
                |fault, elapsed| {
                    book.finished(fault);
                    record_call(fault, elapsed);
                },
            )
            .await;
        let retry_in_ms = match answer {
            Ok(Answered { value: reply, .. }) => {
                let now = self.now_ms();
                let d = book
                    .book
                    .lock()
                    .settle(now, lease.max_hold_ms, &q.rate, q.cost, reply);
                // An admission took tokens: any remembered refusal is dropped.
                let at = (sent_ms, self.now_ms());
                self.deny.remember(q.tenant, q.rate, q.cost, at, &d);
                return Some(decided(d));
            }
            Err(refused) => refused_wait(refused),
        };
        drop(refill);
        Some(self.fallback(q, retry_in_ms))
    }

    /// The failure policy's outcome for a request that made no lease call of its own: it
    /// shares the `fault` of the call it waited for, or its time ran out waiting. Counted in
    /// `tollgate_redis_errors_total`, but not in the circuit breaker, which counts calls.
    fn failed_without_call(&self, q: &TenantQuota<'_>, fault: RedisFault) -> QuotaOutcome {
        count_fault(fault);
        self.fallback(q, FAILED_CALL_RETRY_MS)
    }

    /// [`LEASE_LUA`] on the tenant's bucket key (the token bucket's, [`bucket_key`]), recording
    /// for an admin reset what this instance holds after the call, usable for `hold_ms` (the
    /// lease's `max_hold`) plus the reply's latency (0 for a give-back only).
    async fn lease_script(
        &self,
        tenant: &str,
        rate: &Rate,
        cost: u64,
        want: u64,
        refund: u64,
        hold_ms: u64,
    ) -> Result<LeaseReply, RedisFault> {
        let keys = [bucket_key(self.redis.key_prefix(), tenant)];
        // The grant may be used for max_hold after its reply arrives: up to the call's timeout
        // (and its retry's) after Redis granted it. Recorded for a reset (lua/reset.lua).
        let hold_ms = hold_ms + 2 * self.settings.timeout.as_millis() as u64;
        let args = [
            rate.limit,
            rate.per_ms,
            rate.burst,
            cost,
            want,
            refund,
            hold_ms,
        ]
        .map(|v| v.to_string());
        let holder = std::slice::from_ref(&*super::inflight::INSTANCE);
        let args = [&args[..6], holder, &args[6..]].concat();
        // A grant Redis made after this call was given up is given back (cost 1 a token).
        let late = || bucket_late(&[(&keys[0], *rate)], 1, |r| r.first().copied());
        let reply: Vec<i64> = self
            .redis
            .eval_undoable(lease_script(), &keys, &args, Some(late))
            .await?;
        let [granted, remaining, retry_ms, full_ms] = reply[..] else {
            return Err(RedisFault::Other);
        };
        Ok(LeaseReply {
            granted: granted.max(0) as u64,
            remaining: remaining.max(0) as u64,
            retry_ms: wait_ms(retry_ms),
            full_ms: full_ms.max(0) as u64,
        })
    }

    /// Gives back the unused tokens of expired leases (every lease when `all`, at shutdown)
    /// and forgets idle books. A failed give-back loses those tokens to the fleet until the
    /// bucket refills them (under-admission only).
    pub async fn return_leases(&self, all: bool) {
        for (tenant, book) in self.leases.all() {
            // A request refilling this lease gives the old tokens back itself.
            let Ok(_refill) = book.refill.try_lock() else {
                continue;
            };
            let now = self.now_ms();
            let back = {
                let mut b = book.book.lock();
                if all {
                    b.release()
                } else {
                    b.expired(now)
                }
            };
            if let Some((rate, n)) = back {
                let _ = self.lease_script(&tenant, &rate, 0, 0, n, 0).await;
            }
        }
        self.leases.forget_idle(self.now_ms());
    }
}

#[cfg(test)]
mod tests;
