//! Tenant stage: the tenant's tier-sized token bucket, decided in Redis by one atomic Lua script,
//! behind a circuit breaker, with the tier's declared failure policy (docs/DESIGN.md sections 2–3).
//!
//! Tiers with another algorithm than the token bucket, or with calendar quotas, take the policy
//! path ([`policies`], [`policy_script`]): the same breaker and failure policies, one script call
//! deciding the main limit and every quota together (docs/DESIGN.md 4c).

pub mod block;
pub mod carry;
pub mod coalesce;
pub mod deny_cache;
pub mod inflight;
pub mod lease;
pub mod peek;
pub mod policies;
pub mod policy_carry;
pub mod policy_script;
pub mod pool_store;
pub mod rules;
pub mod usage;

use crate::config::{FailurePolicy, RedisSettings, TierPolicy};
use crate::limit::algorithm::Algorithm;
use crate::limit::{Decision, Rate};
use crate::observe::metrics::METRICS;
use crate::observe::tier_fit::TierFit;
use crate::store::memory::algo_store::AlgoStore;
use crate::store::memory::bucket_store::BucketStore;
use crate::store::redis::breaker::{Breaker, BreakerState};
use crate::store::redis::client::{RedisFault, RedisStore};
use crate::store::redis::guarded::{Answered, Attempt, Budget, Guarded, Refused, Retry, RetryOn};
use crate::store::redis::late::{self, LateOutcome};
use crate::store::redis::membership::Fleet;
use deny_cache::DenyCache;
pub use policies::{PolicyExtras, Reservation};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Local fallback buckets tracked at most (tenants), LRU beyond.
const LOCAL_FALLBACK_TENANTS: usize = 100_000;

/// One tenant decision request.
#[derive(Debug, Clone)]
pub struct TenantQuota<'a> {
    pub tenant: &'a str,
    /// Policy name shown in headers (the tier).
    pub policy: &'a str,
    /// The tenant's effective bucket size.
    pub rate: Rate,
    /// Tokens this request costs.
    pub cost: u64,
    pub on_failure: FailurePolicy,
    /// The tier's algorithm, shaping and calendar quotas.
    pub tier_policy: &'a TierPolicy,
}

/// What the tenant stage decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaOutcome {
    /// A bucket decided: Redis (`degraded: false`) or the local fallback (`degraded: true`).
    /// `rate` is the bucket that decided (the tenant's, or its local share when degraded).
    Decided {
        decision: Decision,
        rate: Rate,
        degraded: bool,
        /// Quotas and shaping (empty for a plain token bucket tier).
        extras: PolicyExtras,
    },
    /// Redis unavailable, policy `open`: admit without quota headers.
    FailedOpen,
    /// Redis unavailable, policy `closed`: 503 with this Retry-After (seconds, ≥ 1).
    FailedClosed { retry_after_s: u64 },
}

impl QuotaOutcome {
    /// Records this outcome in the tier fit of `tenant`, decided by `tier` (a failure-policy
    /// outcome decides nothing about the tier and is not recorded).
    pub fn record_fit(&self, fit: &TierFit, tenant: &str, tier: &str, now_ms: u64) {
        let QuotaOutcome::Decided {
            decision, extras, ..
        } = self
        else {
            return;
        };
        let admitted = decision.admitted && extras.quotas.iter().all(|q| q.admitted);
        let empty = decision.remaining == 0 || extras.quotas.iter().any(|q| q.remaining == 0);
        fit.record(tenant, tier, admitted, empty, now_ms);
    }
}

/// The tenant stage's shared state: Redis, breaker, local fallback. Lives across reloads while
/// the `redis:` section is unchanged; a changed section gets a successor that keeps the state
/// still valid for it ([`succeed`](Self::succeed)).
pub struct QuotaService {
    pub settings: RedisSettings,
    pub(crate) redis: RedisStore,
    breaker: Arc<Breaker>,
    local: Arc<BucketStore<String>>,
    /// What the local buckets spent, carried into Redis when the breaker closes.
    carry: Arc<carry::LocalCarry>,
    /// What the local fallback admitted for policy tiers, carried the same way.
    policy_carry: Arc<policy_carry::PolicyCarry>,
    /// The breaker said degraded at its last permit or outcome (for the end of an outage).
    was_degraded: AtomicBool,
    /// Local fallback state of the other algorithms (tagged per algorithm).
    local_policies: Arc<AlgoStore<String>>,
    deny: Arc<DenyCache>,
    /// Exact token-bucket calls of one tenant in flight together become one call.
    coalesce: coalesce::Coalescer<coalesce::BucketKey, Decision>,
    /// Identical policy-script calls (same KEYS and ARGV) in flight together become one call.
    policy_coalesce:
        coalesce::Coalescer<std::sync::Arc<policy_script::CallKey>, policy_script::BatchDecision>,
    fleet: Arc<Fleet>,
    /// Leased tokens of `lease` tiers (times on `epoch`).
    leases: Arc<lease::LeaseStore>,
    /// Fleet-wide concurrency leases held by this instance (`max_in_flight`).
    inflight: Arc<inflight::InflightBook>,
    epoch: Instant,
}

/// Counts one failed Redis decision in `tollgate_redis_errors_total{kind}`.
fn count_fault(fault: RedisFault) {
    METRICS
        .redis_errors
        .with_label_values(&[fault.as_str()])
        .inc();
}

/// Counts one handed-off call in `tollgate_redis_late_replies_total{outcome}`.
fn count_late(outcome: LateOutcome) {
    METRICS
        .redis_late_replies
        .with_label_values(&[outcome.as_str()])
        .inc();
}

/// The failure policy's wait for a guarded call without an answer; a failed call (not a breaker
/// refusal) is counted by [`count_fault`].
fn refused_wait(refused: Refused) -> u64 {
    if let Some(fault) = refused.fault {
        count_fault(fault);
    }
    refused.retry_in_ms
}

/// Records one permitted Redis decision's duration and result (`tollgate_redis_duration_seconds`).
fn record_call(fault: Option<RedisFault>, elapsed: Duration) {
    METRICS.redis_call(fault.is_none(), elapsed.as_secs_f64());
}

impl QuotaService {
    /// Prepares the service (no connection is made until the first decision).
    /// Errors: (field path, reason), e.g. an unset `redis.password_env` variable.
    pub fn new(settings: &RedisSettings) -> Result<Self, (String, String)> {
        late::set_report(count_late);
        Ok(QuotaService {
            settings: settings.clone(),
            redis: RedisStore::new(settings)?,
            breaker: Arc::new(Breaker::new(settings.breaker.clone())),
            local: Arc::new(BucketStore::new(LOCAL_FALLBACK_TENANTS)),
            carry: Arc::new(carry::LocalCarry::new(LOCAL_FALLBACK_TENANTS)),
            policy_carry: Arc::new(policy_carry::PolicyCarry::new(LOCAL_FALLBACK_TENANTS)),
            was_degraded: AtomicBool::new(false),
            local_policies: Arc::new(AlgoStore::new(LOCAL_FALLBACK_TENANTS)),
            deny: Arc::new(DenyCache::new(LOCAL_FALLBACK_TENANTS)),
            coalesce: coalesce::Coalescer::new(settings.timeout),
            policy_coalesce: coalesce::Coalescer::new(settings.timeout),
            fleet: Arc::new(Fleet::new(settings.fleet_size)),
            leases: Default::default(),
            inflight: Default::default(),
            epoch: Instant::now(),
        })
    }

    /// The service for a changed `redis:` section (a reload), with a new Redis client. It keeps
    /// from `previous` the local fallback buckets (what this instance admitted while degraded
    /// does not depend on these settings: a reload must not hand out a fresh local burst), the
    /// deny cache while the buckets are the same (same URL and key prefix), and the breaker
    /// while it guards the same Redis with the same settings. A new breaker starts closed, and
    /// the breaker metrics say so.
    pub fn succeed(
        settings: &RedisSettings,
        previous: &QuotaService,
    ) -> Result<Self, (String, String)> {
        let old = &previous.settings;
        let same_redis = old.mode == settings.mode && old.urls == settings.urls;
        let same_buckets = same_redis && old.key_prefix == settings.key_prefix;
        let same_breaker = same_redis && old.breaker == settings.breaker;
        let breaker = if same_breaker {
            previous.breaker.clone()
        } else {
            Arc::new(Breaker::new(settings.breaker.clone()))
        };
        let service = QuotaService {
            settings: settings.clone(),
            redis: RedisStore::new(settings)?,
            breaker,
            local: previous.local.clone(),
            carry: previous.carry.clone(),
            policy_carry: previous.policy_carry.clone(),
            was_degraded: AtomicBool::new(previous.was_degraded.load(Ordering::Relaxed)),
            local_policies: previous.local_policies.clone(),
            deny: if same_buckets {
                previous.deny.clone()
            } else {
                Arc::new(DenyCache::new(LOCAL_FALLBACK_TENANTS))
            },
            coalesce: coalesce::Coalescer::new(settings.timeout),
            policy_coalesce: coalesce::Coalescer::new(settings.timeout),
            // The live fleet stays what was last seen while the store is the same.
            fleet: if same_redis && settings.fleet_auto && old.fleet_auto {
                previous.fleet.clone()
            } else {
                Arc::new(Fleet::new(settings.fleet_size))
            },
            // Leases stay while they are tokens of the same buckets.
            leases: if same_buckets {
                previous.leases.clone()
            } else {
                Default::default()
            },
            // Concurrency leases in flight are renewed by the newest service while the
            // buckets are the same (a changed store: the old service's leases expire there).
            inflight: if same_buckets {
                previous.inflight.clone()
            } else {
                Default::default()
            },
            // The local buckets, deny entries and leases hold times on this clock.
            epoch: previous.epoch,
        };
        if !same_breaker {
            METRICS.breaker_state.set(BreakerState::Closed.gauge());
            METRICS.degraded.set(0);
        }
        Ok(service)
    }

    /// Connects to Redis ahead of the first request: `PING` until one answers, for at most
    /// `within`. Without it the first decisions pay the connection set-up (TCP, AUTH, HELLO)
    /// inside `redis.timeout_ms` and, on a busy host, fall to the failure policy. Whether Redis
    /// answered; a Redis that does not is left to the breaker and the failure policy as usual.
    pub async fn warm_up(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.redis.ping(Duration::from_secs(1)).await {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One fleet membership heartbeat when `redis.fleet_size` is `auto` (else nothing).
    pub async fn heartbeat(&self) {
        if self.settings.fleet_auto {
            self.fleet.heartbeat(&self.redis).await;
        }
    }

    /// Instances the `local` fallback divides each limit by: the live fleet last seen
    /// (`fleet_size: auto`) or the configured `fleet_size`.
    pub fn fleet_size(&self) -> u64 {
        if self.settings.fleet_auto {
            self.fleet.size()
        } else {
            self.settings.fleet_size
        }
    }

    /// Forgets what this instance remembers of `tenant`'s refusals (the deny cache), so a
    /// reset bucket is asked again at once (admin API `POST /v1/tenants/{id}/reset`).
    pub fn forget(&self, tenant: &str) {
        self.deny.forget(tenant);
    }

    /// Whether `self` carries on the leases of `other` (the same token leases and concurrency
    /// leases: same store and key prefix, see [`succeed`](Self::succeed)).
    pub fn keeps_leases_of(&self, other: &QuotaService) -> bool {
        Arc::ptr_eq(&self.leases, &other.leases) && Arc::ptr_eq(&self.inflight, &other.inflight)
    }

    /// Whether this instance holds a lease through this service: leased tokens not given back,
    /// a concurrency lease of a request still running, or one asked for without an answer.
    pub fn holds_leases(&self) -> bool {
        self.leases.holds_tokens() || !self.inflight.is_empty()
    }

    /// Current breaker state.
    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.state()
    }

    /// Whether tenant decisions are degraded now: the breaker is not closed, or the last Redis
    /// call failed (that request fell to the failure policy). `/healthz` and
    /// `tollgate_limiter_degraded` say this.
    pub fn degraded(&self) -> bool {
        self.breaker.degraded()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The breaker on this service's clock and [`transition`](Self::transition)s, for every
    /// decision that asks Redis.
    fn guarded(&self) -> Guarded<'_, impl Fn() -> u64 + '_, impl Fn(Option<BreakerState>) + '_> {
        Guarded::new(&self.breaker, || self.now_ms(), |t| self.transition(t))
    }

    /// One retry on a fault of `on`, within `redis.timeout_ms` from where `budget` starts.
    fn retry(&self, on: RetryOn, budget: Budget) -> Retry {
        Retry {
            on,
            timeout: self.settings.timeout,
            budget,
        }
    }

    /// One guarded Redis call made now, retried once on a connection error within
    /// `redis.timeout_ms` (concurrency leases). On failure: the failure policy's wait, and
    /// whether the call may still run in Redis: it was sent and got no answer (a timeout, or a
    /// connection lost while waiting), rather than held back by the breaker or refused by Redis.
    async fn ask_sent<T, F, Fut>(&self, call: F) -> Result<T, (u64, bool)>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, RedisFault>>,
    {
        let retry = self.retry(RetryOn::Connection, Budget::FromCall);
        match self
            .guarded()
            .call(self.now_ms(), retry, call, record_call)
            .await
        {
            Ok(Answered { value, .. }) => Ok(value),
            Err(refused) => {
                let sent = matches!(
                    refused.fault,
                    Some(RedisFault::Timeout | RedisFault::Connection)
                );
                Err((refused_wait(refused), sent))
            }
        }
    }

    fn transition(&self, to: Option<BreakerState>) {
        // Every permit and outcome: the gauge follows the first failed call, not only the
        // breaker's transitions (two relaxed loads; a store only on a change).
        let degraded = self.breaker.degraded();
        if METRICS.degraded.get() != degraded as i64 {
            METRICS.degraded.set(degraded as i64);
        }
        // Redis decides again (a call succeeded with the breaker closed, after failed calls or
        // an open breaker): what the local buckets admitted meanwhile is charged to Redis by
        // each tenant's next decision there (`carry`), so Redis does not hand out a fresh
        // burst on top of it.
        if self.was_degraded.load(Ordering::Relaxed) != degraded
            && self.was_degraded.swap(degraded, Ordering::Relaxed)
            && !degraded
        {
            self.carry.close(&self.local, self.now_ms());
            self.policy_carry.close(self.now_ms());
        }
        let Some(to) = to else { return };
        METRICS.breaker_state.set(to.gauge());
        METRICS
            .breaker_transitions
            .with_label_values(&[to.as_str()])
            .inc();
        match to {
            BreakerState::Open => tracing::warn!(
                breaker = "open",
                "redis circuit breaker opened: tenant decisions use the failure policy"
            ),
            BreakerState::HalfOpen => {
                tracing::info!(breaker = "half_open", "redis breaker probing")
            }
            BreakerState::Closed => {
                self.local.clear();
                self.local_policies.clear();
                tracing::info!(
                    breaker = "closed",
                    "redis circuit breaker closed: decisions back in redis"
                );
            }
        }
    }

    /// Decides one request. Never fails: Redis faults become the declared policy's outcome.
    pub async fn decide(&self, q: &TenantQuota<'_>) -> QuotaOutcome {
        self.carry_local_spending(q).await;
        if let Some(l) = q.tier_policy.lease {
            if let Some(outcome) = self.decide_leased(q, l).await {
                return outcome;
            }
        }
        if q.tier_policy.algorithm != Algorithm::TokenBucket || !q.tier_policy.quotas.is_empty() {
            return self.decide_policies(q).await;
        }
        let sent_ms = self.now_ms();
        if let Some(decision) = self.deny.check(q.tenant, &q.rate, q.cost, sent_ms) {
            return QuotaOutcome::Decided {
                decision,
                rate: q.rate,
                degraded: false,
                extras: PolicyExtras::default(),
            };
        }
        // One decision in Redis, bounded by `redis.timeout_ms` in total from the call: the wait
        // behind a coalesced call in flight, this request's own call and its retry together. A
        // request that only shared another request's call is not one more breaker outcome.
        let call = |n| self.redis.token_bucket_batch(q.tenant, &q.rate, q.cost, n);
        let answer = self
            .guarded()
            .call(
                sent_ms,
                self.retry(RetryOn::ConnectionOrNotMaster, Budget::FromCall),
                |_| {
                    let key = coalesce::BucketKey {
                        tenant: q.tenant.to_string(),
                        rate: q.rate,
                        cost: q.cost,
                    };
                    self.coalesce.decide(key, call)
                },
                record_call,
            )
            .await;
        match answer {
            Ok(Answered {
                value: decision,
                done_ms,
            }) => {
                self.deny
                    .remember(q.tenant, q.rate, q.cost, (sent_ms, done_ms), &decision);
                QuotaOutcome::Decided {
                    decision,
                    rate: q.rate,
                    degraded: false,
                    extras: PolicyExtras::default(),
                }
            }
            Err(refused) => self.fallback(q, refused_wait(refused)),
        }
    }

    /// After an outage decided by the `local` policy, the tenant's first decision back in Redis
    /// first takes from its Redis bucket what its local bucket lacked when the breaker closed
    /// (less its refill since), down to empty at most: `lua/lease.lua` with cost 0 and no
    /// holder. Skipped while degraded (kept for later); a carry whose call fails is dropped.
    async fn carry_local_spending(&self, q: &TenantQuota<'_>) {
        // Nothing pending (the usual case): neither the breaker nor the clock is read.
        if !self.carry.pending() || self.breaker.degraded() {
            return;
        }
        let Some((full, tokens)) = self.carry.take(q.tenant, self.now_ms()) else {
            return;
        };
        let keys = [crate::store::redis::keys::bucket_key(
            self.redis.key_prefix(),
            q.tenant,
        )];
        let args = [full.limit, full.per_ms, full.burst, 0, tokens, 0];
        let reply = self
            .redis
            .eval::<Vec<i64>, u64>(lease::lease_script(), &keys, &args)
            .await;
        match reply {
            Ok(r) => {
                tracing::debug!(tenant = q.tenant, tokens, taken = ?r.first(), "local spending carried into redis")
            }
            Err(fault) => count_fault(fault),
        }
    }

    fn fallback(&self, q: &TenantQuota<'_>, retry_in_ms: u64) -> QuotaOutcome {
        match q.on_failure {
            FailurePolicy::Open => QuotaOutcome::FailedOpen,
            FailurePolicy::Closed => QuotaOutcome::FailedClosed {
                retry_after_s: retry_in_ms.div_ceil(1000).max(1),
            },
            FailurePolicy::Local => {
                let rate = q.rate.divided(self.fleet_size());
                let decision =
                    self.local
                        .check(&q.tenant.to_string(), self.now_ms(), &rate, q.cost);
                let admitted = if decision.admitted { q.cost } else { 0 };
                self.carry.note(q.tenant, q.rate, rate, admitted);
                QuotaOutcome::Decided {
                    decision,
                    rate,
                    degraded: true,
                    extras: PolicyExtras::default(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
