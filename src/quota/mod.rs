//! Tenant stage: the tenant's tier-sized token bucket, decided in Redis by one atomic Lua script,
//! behind a circuit breaker, with the tier's declared failure policy (docs/DESIGN.md sections 2–3).

pub mod breaker;
pub mod deny_cache;
pub mod pool_store;
pub mod redis_store;

use crate::config::{FailurePolicy, RedisSettings};
use crate::edge::BucketStore;
use crate::limit::{Decision, Rate};
use crate::metrics::METRICS;
use breaker::{Breaker, BreakerState, Permit};
use deny_cache::DenyCache;
use redis_store::{RedisFault, RedisStore};
use std::sync::Arc;
use std::time::Instant;

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
}

/// What the tenant stage decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaOutcome {
    /// A bucket decided: Redis (`degraded: false`) or the local fallback (`degraded: true`).
    /// `rate` is the bucket that decided (the tenant's, or its local share when degraded).
    Decided {
        decision: Decision,
        rate: Rate,
        degraded: bool,
    },
    /// Redis unavailable, policy `open`: admit without quota headers.
    FailedOpen,
    /// Redis unavailable, policy `closed`: 503 with this Retry-After (seconds, ≥ 1).
    FailedClosed { retry_after_s: u64 },
}

/// The tenant stage's shared state: Redis, breaker, local fallback. Lives across reloads while
/// the `redis:` section is unchanged; a changed section gets a successor that keeps the state
/// still valid for it ([`succeed`](Self::succeed)).
pub struct QuotaService {
    pub settings: RedisSettings,
    pub(crate) redis: RedisStore,
    breaker: Arc<Breaker>,
    local: Arc<BucketStore<String>>,
    deny: Arc<DenyCache>,
    epoch: Instant,
}

impl QuotaService {
    /// Prepares the service (no connection is made until the first decision).
    pub fn new(settings: &RedisSettings) -> Result<Self, String> {
        Ok(QuotaService {
            settings: settings.clone(),
            redis: RedisStore::new(settings)?,
            breaker: Arc::new(Breaker::new(settings.breaker.clone())),
            local: Arc::new(BucketStore::new(LOCAL_FALLBACK_TENANTS)),
            deny: Arc::new(DenyCache::new(LOCAL_FALLBACK_TENANTS)),
            epoch: Instant::now(),
        })
    }

    /// The service for a changed `redis:` section (a reload), with a new Redis client. It keeps
    /// from `previous` the local fallback buckets (what this instance admitted while degraded
    /// does not depend on these settings: a reload must not hand out a fresh local burst), the
    /// deny cache while the buckets are the same (same URL and key prefix), and the breaker
    /// while it guards the same Redis with the same settings. A new breaker starts closed, and
    /// the breaker metrics say so.
    pub fn succeed(settings: &RedisSettings, previous: &QuotaService) -> Result<Self, String> {
        let old = &previous.settings;
        let same_buckets = old.url == settings.url && old.key_prefix == settings.key_prefix;
        let same_breaker = old.url == settings.url && old.breaker == settings.breaker;
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
            deny: if same_buckets {
                previous.deny.clone()
            } else {
                Arc::new(DenyCache::new(LOCAL_FALLBACK_TENANTS))
            },
            // The local buckets and deny entries hold times on this clock.
            epoch: previous.epoch,
        };
        if !same_breaker {
            METRICS.breaker_state.set(BreakerState::Closed.gauge());
            METRICS.degraded.set(0);
        }
        Ok(service)
    }

    /// Current breaker state.
    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.state()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn transition(&self, to: Option<BreakerState>) {
        let Some(to) = to else { return };
        METRICS.breaker_state.set(to.gauge());
        METRICS.degraded.set((to != BreakerState::Closed) as i64);
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
                tracing::info!(
                    breaker = "closed",
                    "redis circuit breaker closed: decisions back in redis"
                );
            }
        }
    }

    /// Decides one request. Never fails: Redis faults become the declared policy's outcome.
    pub async fn decide(&self, q: &TenantQuota<'_>) -> QuotaOutcome {
        let sent_ms = self.now_ms();
        if let Some(decision) = self.deny.check(q.tenant, &q.rate, q.cost, sent_ms) {
            return QuotaOutcome::Decided {
                decision,
                rate: q.rate,
                degraded: false,
            };
        }
        let (permit, t) = self.breaker.permit(sent_ms);
        self.transition(t);
        let retry_in_ms = match permit {
            Permit::Rejected { retry_in_ms } => retry_in_ms,
            Permit::Call { probe } => {
                let started = Instant::now();
                let result = self.call_redis(q, started).await;
                let elapsed = started.elapsed().as_secs_f64();
                let ok = result.is_ok();
                METRICS
                    .redis_duration
                    .with_label_values(&[if ok { "ok" } else { "error" }])
                    .observe(elapsed);
                let t = self.breaker.record(self.now_ms(), ok, probe);
                self.transition(t);
                match result {
                    Ok(decision) => {
                        self.deny.remember(
                            q.tenant,
                            q.rate,
                            q.cost,
                            (sent_ms, self.now_ms()),
                            &decision,
                        );
                        return QuotaOutcome::Decided {
                            decision,
                            rate: q.rate,
                            degraded: false,
                        };
                    }
                    Err(fault) => {
                        METRICS
                            .redis_errors
                            .with_label_values(&[fault.as_str()])
                            .inc();
                        1000
                    }
                }
            }
        };
        self.fallback(q, retry_in_ms)
    }

    /// One decision in Redis, bounded by `redis.timeout_ms` in total from `started`.
    ///
    /// A connection error is retried once within what is left of that budget. After a Redis
    /// restart or an outage, the first call fails at once without reaching Redis: the
    /// connection is dead, or still holds the failure of the last reconnect attempt, and only
    /// that failed call makes the connection manager start a new connection. Without the retry
    /// every Redis restart costs one failed request, and the first half-open probe after an
    /// outage always fails and re-opens the breaker for another `break_s`. (A connection that
    /// drops after Redis ran the script but before the reply arrived makes the retry charge the
    /// request twice: an over-count of one token, never an under-count.)
    async fn call_redis(
        &self,
        q: &TenantQuota<'_>,
        started: Instant,
    ) -> Result<Decision, RedisFault> {
        match self.redis.token_bucket(q.tenant, &q.rate, q.cost).await {
            Err(RedisFault::Connection) => {
                let left = self.settings.timeout.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return Err(RedisFault::Connection);
                }
                let retry = self.redis.token_bucket(q.tenant, &q.rate, q.cost);
                match tokio::time::timeout(left, retry).await {
                    Ok(result) => result,
                    Err(_) => Err(RedisFault::Timeout),
                }
            }
            other => other,
        }
    }

    fn fallback(&self, q: &TenantQuota<'_>, retry_in_ms: u64) -> QuotaOutcome {
        match q.on_failure {
            FailurePolicy::Open => QuotaOutcome::FailedOpen,
            FailurePolicy::Closed => QuotaOutcome::FailedClosed {
                retry_after_s: retry_in_ms.div_ceil(1000).max(1),
            },
            FailurePolicy::Local => {
                let rate = q.rate.divided(self.settings.fleet_size);
                let decision =
                    self.local
                        .check(&q.tenant.to_string(), self.now_ms(), &rate, q.cost);
                QuotaOutcome::Decided {
                    decision,
                    rate,
                    degraded: true,
                }
            }
        }
    }
}
