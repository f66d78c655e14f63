//! Fleet-wide concurrency per tenant (`tiers.<name>.max_in_flight`, docs/DESIGN.md 4e
//! "Fleet-wide concurrency"): one lease per request in a sorted set under the tenant's hash tag,
//! member = a lease id unique to this instance, score = its expiry on Redis `TIME`.
//!
//! A lease is taken (expired ones pruned) in one script call before the request's rate
//! decision, and given back when its [`InflightLease`] is dropped: when the request ends, on
//! every path (done, backend error, client abort, h2 stream reset, WebSocket close, a refusal
//! at a later stage), since the proxy's per-request state owns it. One background loop renews
//! every lease of the instance every `redis.lease_ttl` / 3, one call per tenant. An instance
//! that dies (SIGKILL) leaks its leases for at most `lease_ttl`; a clock step on a gateway
//! changes nothing, as expiry is on Redis's clock.
//!
//! When Redis cannot take the lease the tier's failure policy applies: `open` admits without
//! a lease, `closed` refuses (503), `local` counts the tenant's requests in this instance's
//! memory, at most `ceil(max / fleet size)`.
//!
//! A call that got no answer (a timeout) may still run in Redis once it answers again, and
//! take a lease nobody holds. Its id is kept as *unanswered*, and the renewal loop gives it
//! back (`ZREM` by id: idempotent, a no-op when the lease was never taken) on every tick until
//! Redis answers: sent on the same connection after the acquire, the release runs after it.
//! What remains: an acquire Redis runs only after that release (sent on a connection that was
//! replaced meanwhile) holds its lease until it expires, `lease_ttl` after it was taken.

use super::QuotaService;
use crate::config::FailurePolicy;
use crate::hashing::HashMap;
use crate::observe::metrics::METRICS;
use crate::store::redis::client::{LuaScript, RedisFault};
use crate::store::redis::keys::inflight_key;
use crate::store::redis::scripts::{
    INFLIGHT_ACQUIRE_LUA, INFLIGHT_COUNT_LUA, INFLIGHT_RELEASE_LUA, INFLIGHT_RENEW_LUA,
};
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

static ACQUIRE: Lazy<LuaScript> = Lazy::new(|| LuaScript::new(INFLIGHT_ACQUIRE_LUA));
static RELEASE: Lazy<LuaScript> = Lazy::new(|| LuaScript::new(INFLIGHT_RELEASE_LUA));
static RENEW: Lazy<LuaScript> = Lazy::new(|| LuaScript::new(INFLIGHT_RENEW_LUA));
static COUNT: Lazy<LuaScript> = Lazy::new(|| LuaScript::new(INFLIGHT_COUNT_LUA));

/// The leases this instance holds, for renewal, and its local fallback counts. Shared by a
/// service and its successors while the buckets are the same.
#[derive(Default)]
pub struct InflightBook {
    next: AtomicU64,
    /// Lease ids held in Redis, by key.
    held: Mutex<HashMap<String, BTreeSet<String>>>,
    /// Requests in flight per key in the `local` fallback.
    local: Mutex<HashMap<String, u64>>,
    /// When the leases were last renewed.
    renewed: Mutex<Option<Instant>>,
    /// Lease ids asked for in calls that got no answer, by key, each with when it was asked:
    /// given back by [`QuotaService::release_unanswered`].
    unanswered: Mutex<HashMap<String, Vec<(String, Instant)>>>,
}

impl InflightBook {
    /// Whether no lease is held in Redis and none was asked for without an answer.
    pub(super) fn is_empty(&self) -> bool {
        self.held.lock().is_empty() && self.unanswered.lock().is_empty()
    }
}

/// How often [`QuotaService::renew_inflight_when_due`] is asked.
pub const RENEW_TICK: Duration = Duration::from_millis(250);

/// This process's part of every lease id: its pid and a hash under the process's random hasher
/// keys ([`crate::hashing::RandomState`]) of the start time, so two instances never share one.
pub(super) static INSTANCE: Lazy<String> = Lazy::new(|| {
    let started = std::time::SystemTime::now();
    let h = crate::hashing::RandomState::new().hash_one(started);
    format!("{:x}-{h:016x}", std::process::id())
});

/// A held lease; dropping it gives it back.
pub struct InflightLease {
    service: Arc<QuotaService>,
    key: String,
    id: String,
    /// Counted in the local fallback, not in Redis.
    local: bool,
}

impl Drop for InflightLease {
    fn drop(&mut self) {
        let book = &self.service.inflight;
        if self.local {
            let mut local = book.local.lock();
            if let Some(n) = local.get_mut(&self.key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    local.remove(&self.key);
                }
            }
            return;
        }
        {
            let mut held = book.held.lock();
            if let Some(ids) = held.get_mut(&self.key) {
                ids.remove(&self.id);
                if ids.is_empty() {
                    held.remove(&self.key);
                }
            }
        }
        METRICS.inflight_leases.dec();
        let (service, key, id) = (self.service.clone(), self.key.clone(), self.id.clone());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        crate::pending::spawn(&runtime, async move {
            let keys = [key];
            if let Err(e) = service.redis.eval::<i64, _>(&RELEASE, &keys, &[id]).await {
                tracing::warn!(
                    fault = e.as_str(),
                    "lease not given back; it expires by itself"
                );
            }
        });
    }
}

/// What asking for a lease gave.
pub enum InflightOutcome {
    /// Held until dropped.
    Held(InflightLease),
    /// `max` leases are held already (`degraded`: counted by the local fallback).
    Refused { max: u64, degraded: bool },
    /// Redis could not decide, policy `open`: no lease.
    FailedOpen,
    /// Redis could not decide, policy `closed`: 503 with this Retry-After (s).
    FailedClosed { retry_after_s: u64 },
}

impl QuotaService {
    /// Takes one of `tenant`'s `max` fleet-wide leases. Never fails: a Redis fault follows
    /// `on_failure`.
    pub async fn acquire_inflight(
        self: &Arc<Self>,
        tenant: &str,
        max: u64,
        on_failure: FailurePolicy,
    ) -> InflightOutcome {
        let key = inflight_key(self.redis.key_prefix(), tenant);
        self.acquire_inflight_at(key, max, on_failure).await
    }

    /// Takes one of `max` leases in the lease set `key` (a tier's, or a concurrency rule's).
    /// Never fails: a Redis fault follows `on_failure`.
    pub async fn acquire_inflight_at(
        self: &Arc<Self>,
        key: String,
        max: u64,
        on_failure: FailurePolicy,
    ) -> InflightOutcome {
        let n = self.inflight.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}:{n}", *INSTANCE);
        let ttl_ms = self.settings.lease_ttl.as_millis() as u64;
        let args = [id.clone(), max.to_string(), ttl_ms.to_string()];
        let keys = [key.clone()];
        let call = |_| self.redis.eval::<Vec<i64>, _>(&ACQUIRE, &keys, &args);
        let reply = match self.ask_sent(call).await {
            Ok(reply) => reply,
            Err((retry_in_ms, false)) => {
                return self.inflight_fallback(key, max, on_failure, retry_in_ms)
            }
            Err((retry_in_ms, true)) => {
                // The call may still run in Redis: its lease is given back once Redis answers.
                let mut unanswered = self.inflight.unanswered.lock();
                let ids = unanswered.entry(key.clone()).or_default();
                ids.push((id, Instant::now()));
                drop(unanswered);
                return self.inflight_fallback(key, max, on_failure, retry_in_ms);
            }
        };
        let [taken, _, expired] = reply[..] else {
            return self.inflight_fallback(key, max, on_failure, 1000);
        };
        count("expired", expired.max(0) as u64);
        if taken != 1 {
            count("refused", 1);
            return InflightOutcome::Refused {
                max,
                degraded: false,
            };
        }
        count("acquired", 1);
        METRICS.inflight_leases.inc();
        self.inflight
            .held
            .lock()
            .entry(key.clone())
            .or_default()
            .insert(id.clone());
        InflightOutcome::Held(InflightLease {
            service: self.clone(),
            key,
            id,
            local: false,
        })
    }

    fn inflight_fallback(
        self: &Arc<Self>,
        key: String,
        max: u64,
        on_failure: FailurePolicy,
        retry_in_ms: u64,
    ) -> InflightOutcome {
        match on_failure {
            FailurePolicy::Open => InflightOutcome::FailedOpen,
            FailurePolicy::Closed => InflightOutcome::FailedClosed {
                retry_after_s: retry_in_ms.div_ceil(1000).max(1),
            },
            FailurePolicy::Local => {
                let cap = max.div_ceil(self.fleet_size().max(1));
                let mut local = self.inflight.local.lock();
                let n = local.entry(key.clone()).or_insert(0);
                if *n >= cap {
                    return InflightOutcome::Refused {
                        max: cap,
                        degraded: true,
                    };
                }
                *n += 1;
                InflightOutcome::Held(InflightLease {
                    service: self.clone(),
                    key,
                    id: String::new(),
                    local: true,
                })
            }
        }
    }

    /// Gives back the leases asked for in calls that got no answer (see the module doc): one
    /// release call per key (at most 500 ids each); what Redis does not answer is tried again on
    /// the next tick, and forgotten `lease_ttl` after it was asked (it has expired by then).
    /// Counted as the `orphan_released` event when a lease was found held.
    pub async fn release_unanswered(&self) {
        let due: Vec<(String, Vec<String>)> = {
            let mut unanswered = self.inflight.unanswered.lock();
            if unanswered.is_empty() {
                return;
            }
            let ttl = self.settings.lease_ttl;
            unanswered.retain(|_, ids| {
                ids.retain(|(_, asked)| asked.elapsed() < ttl);
                !ids.is_empty()
            });
            let first = |ids: &Vec<(String, Instant)>| {
                ids.iter().take(500).map(|(id, _)| id.clone()).collect()
            };
            unanswered
                .iter()
                .map(|(k, ids)| (k.clone(), first(ids)))
                .collect()
        };
        for (key, ids) in due {
            let keys = [key.clone()];
            match self.redis.eval::<i64, _>(&RELEASE, &keys, &ids).await {
                Ok(n) => {
                    count("orphan_released", n.max(0) as u64);
                    let mut unanswered = self.inflight.unanswered.lock();
                    if let Some(left) = unanswered.get_mut(&key) {
                        left.retain(|(id, _)| !ids.contains(id));
                        if left.is_empty() {
                            unanswered.remove(&key);
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(fault = e.as_str(), "unanswered leases not given back yet")
                }
            }
        }
    }

    /// Gives back unanswered leases ([`release_unanswered`](Self::release_unanswered)), and
    /// renews the leases ([`renew_inflight`](Self::renew_inflight)) when a third of
    /// `redis.lease_ttl` has passed since the last renewal.
    pub async fn renew_inflight_when_due(&self) {
        self.release_unanswered().await;
        let due = {
            let mut last = self.inflight.renewed.lock();
            let now = Instant::now();
            let due = last.is_none_or(|t| now.duration_since(t) >= self.settings.lease_ttl / 3);
            if due {
                *last = Some(now);
            }
            due
        };
        if due {
            self.renew_inflight().await;
        }
    }

    /// Renews every lease this instance holds in Redis: one call per tenant. Leases that
    /// expired meanwhile are forgotten (their requests go on without one). Errors are logged:
    /// a lease not renewed expires, it is never held longer.
    pub async fn renew_inflight(&self) {
        let held: Vec<(String, Vec<String>)> = self
            .inflight
            .held
            .lock()
            .iter()
            .map(|(k, ids)| (k.clone(), ids.iter().cloned().collect()))
            .collect();
        let ttl_ms = self.settings.lease_ttl.as_millis() as u64;
        for (key, ids) in held {
            let mut args = vec![ttl_ms.to_string()];
            args.extend(ids.iter().cloned());
            let keys = [key.clone()];
            match self.redis.eval::<Vec<i64>, _>(&RENEW, &keys, &args).await {
                Ok(v) if v.len() == 2 => {
                    count("renewed", v[0].max(0) as u64);
                    count("expired", v[1].max(0) as u64);
                }
                Ok(_) => tracing::warn!("lease renewal: unexpected reply"),
                Err(e) => tracing::warn!(fault = e.as_str(), "leases not renewed"),
            }
        }
    }

    /// Leases of `tenant` held now across the fleet (admin API), read without changing
    /// anything.
    pub async fn inflight_of(&self, tenant: &str) -> Result<u64, RedisFault> {
        self.inflight_at(&inflight_key(self.redis.key_prefix(), tenant))
            .await
    }

    /// Leases held now in the lease set `key` (admin API), read without changing anything.
    pub async fn inflight_at(&self, key: &str) -> Result<u64, RedisFault> {
        let key = key.to_string();
        self.redis
            .eval::<i64, _>(&COUNT, &[key], &[] as &[&str])
            .await
            .map(|n| n.max(0) as u64)
    }
}

/// Adds `n` to `tollgate_inflight_lease_events_total{event}`.
fn count(event: &str, n: u64) {
    if n > 0 {
        METRICS
            .inflight_events
            .with_label_values(&[event])
            .inc_by(n);
    }
}
