//! The tenant stage for tiers with another algorithm than the token bucket, or with calendar
//! quotas: one call of `lua/policy.lua` (see [`super::policy_script`]) behind the same breaker, timeout
//! and failure policies as the token bucket path; the `local` fallback runs the tier's
//! algorithm in memory ([`crate::store::memory::algo_store`]).
//!
//! While degraded, calendar quotas are not enforced (the local fallback has no calendar
//! counters shared with the fleet; a day's quota is a fleet-wide budget and guessing a local
//! share of it would refuse or admit arbitrarily). The main limit is enforced at its local
//! share, as for the token bucket. What the fallback admitted is carried into the main limit's
//! state and the quotas by the tenant's next call in Redis ([`super::policy_carry`]).

use super::policy_script::{self as policy, BatchDecision, CallKey, PolicyCall, PolicyDecision};
use super::{record_call, refused_wait};
use super::{QuotaOutcome, QuotaService, TenantQuota};
use crate::config::{FailurePolicy, TierPolicy};
use crate::limit::gcra::TatState;
use crate::limit::Decision;
use crate::response::{QuotaReport, ReportKind};
use crate::store::redis::client::RedisFault;
use crate::store::redis::guarded::{Answered, Budget, RetryOn};
use crate::store::redis::keys::main_key;
use std::sync::Arc;

/// What a policy decision adds to the main limit's decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyExtras {
    /// Each calendar quota's decision, in config order (empty when none, or degraded).
    pub quotas: Vec<Decision>,
    /// `leaky_bucket`: ms the admitted request waits for its slot.
    pub delay_ms: u64,
    /// `leaky_bucket`, admitted: what identifies its reservation, to give the slot back.
    pub reservation: Option<Reservation>,
}

impl PolicyExtras {
    /// One header report per calendar quota of `policy` (tier `tier`) that was decided (none
    /// when degraded); `policy` is the one that decided, so a regional cut reports its own `q`.
    /// Policy names are `<tier>.<period>`; `w` is the period's nominal length in seconds.
    pub fn reports(&self, tier: &str, policy: &TierPolicy) -> Vec<QuotaReport> {
        policy
            .quotas
            .iter()
            .zip(&self.quotas)
            .map(|(q, d)| QuotaReport {
                name: format!("{tier}.{}", q.period.as_str()),
                kind: ReportKind::CalendarQuota,
                limit: q.limit,
                window_s: q.period.nominal_s(),
                decision: *d,
            })
            .collect()
    }
}

/// A leaky bucket reservation: the state it wrote, and where (Redis or the local fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    pub state: TatState,
    pub local: bool,
}

impl QuotaService {
    pub(super) fn policy_call<'a>(&self, q: &'a TenantQuota<'a>) -> PolicyCall<'a> {
        PolicyCall {
            tenant: q.tenant,
            algorithm: q.tier_policy.algorithm,
            rate: q.rate,
            cost: q.cost,
            max_delay_ms: q.tier_policy.max_delay_ms,
            quotas: &q.tier_policy.quotas,
        }
    }

    /// One guarded policy-script call for a request with call identity `key`, coalesced with
    /// identical calls in flight on this instance; retried once on a connection error (only:
    /// unlike the token bucket path, not on `NotMaster`) within `redis.timeout_ms`. Errors: the
    /// failure policy's wait (ms).
    pub(super) async fn ask_policy(&self, key: Arc<CallKey>) -> Result<BatchDecision, u64> {
        // Shared, not copied, by every attempt and by the coalescer's queue.
        let key = &key;
        let call = |n: usize| async move {
            let late = || policy::late_refund(key.clone(), n);
            let command = key.command(n)?;
            let reply = self
                .redis
                .send_undoable::<policy::PolicyReply, _>(
                    policy::policy_script(),
                    command,
                    Some(late),
                )
                .await?
                .0;
            let spec = key.spec().ok_or(RedisFault::Other)?;
            policy::decode_reply_of(&reply, spec, n).ok_or(RedisFault::Other)
        };
        let answer = self
            .guarded()
            .call(
                self.now_ms(),
                self.retry(RetryOn::Connection, Budget::FromCall),
                |_| self.policy_coalesce.decide(key.clone(), call),
                record_call,
            )
            .await;
        match answer {
            Ok(Answered { value, .. }) => Ok(value),
            Err(refused) => Err(refused_wait(refused)),
        }
    }

    /// Decides one request of a tier with a non-token-bucket algorithm or quotas: one policy
    /// call ([`ask_policy`](Self::ask_policy)).
    pub(super) async fn decide_policies(&self, q: &TenantQuota<'_>) -> QuotaOutcome {
        let call = self.policy_call(q);
        let entry = call.entry(self.redis.key_prefix());
        let mut key = policy::call_key(self.redis.key_prefix(), &[&entry], Some(call.quota_part()));
        // After an outage under `local`: what the local fallback admitted, taken into the
        // tenant's state and quotas by this same call (one relaxed load otherwise).
        if self.policy_carry.pending() && !self.breaker.degraded() {
            if let Some(c) = self.policy_carry.take(q.tenant, self.now_ms()) {
                tracing::debug!(tenant = q.tenant, carried = ?c, "local admissions carried into redis");
                key = CallKey::new(key.keys, key.args + &c.words());
            }
        }
        let d = match self.ask_policy(Arc::new(key)).await {
            Ok(b) => PolicyDecision::from_batch(b),
            Err(retry_in_ms) => return self.policy_fallback(q, retry_in_ms),
        };
        if d.admitted {
            // The tenant's bucket changed: a refusal remembered for it no longer describes it.
            self.deny.forget(q.tenant);
        }
        let reservation = d.reservation.map(|state| Reservation {
            state,
            local: false,
        });
        QuotaOutcome::Decided {
            decision: d.main.decision,
            rate: q.rate,
            degraded: false,
            extras: PolicyExtras {
                quotas: d.quotas,
                delay_ms: if d.admitted { d.main.delay_ms } else { 0 },
                reservation: reservation.filter(|_| d.admitted),
            },
        }
    }

    pub(super) fn policy_fallback(&self, q: &TenantQuota<'_>, retry_in_ms: u64) -> QuotaOutcome {
        if q.on_failure != FailurePolicy::Local {
            return self.fallback(q, retry_in_ms);
        }
        let rate = q.rate.divided(self.fleet_size());
        let p = q.tier_policy;
        let now_ms = self.now_ms();
        let (o, reserved) = self.local_policies.decide(
            &q.tenant.to_string(),
            p.algorithm,
            now_ms,
            &rate,
            q.cost,
            p.max_delay_ms,
        );
        if o.decision.admitted {
            let unix_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let quotas = !p.quotas.is_empty();
            let c = &self.policy_carry;
            c.note(
                q.tenant,
                p.algorithm,
                q.rate,
                rate,
                quotas,
                q.cost,
                now_ms,
                unix_ms,
            );
        }
        QuotaOutcome::Decided {
            decision: o.decision,
            rate,
            degraded: true,
            extras: PolicyExtras {
                quotas: vec![],
                delay_ms: o.delay_ms,
                reservation: reserved.map(|state| Reservation { state, local: true }),
            },
        }
    }

    /// Gives back the slot of a delayed `leaky_bucket` request whose client went away (only
    /// while it is the tenant's latest reservation; see `limit::leaky_bucket::refund`). `rate` is
    /// the bucket that decided (the local share when degraded). Errors are logged, never
    /// returned: the worst case is a slot not given back.
    pub async fn give_back(&self, q: &TenantQuota<'_>, rate: &crate::limit::Rate, r: Reservation) {
        if r.local {
            let tenant = q.tenant.to_string();
            if self.local_policies.refund(&tenant, r.state, rate, q.cost) {
                self.policy_carry.give_back(&tenant, q.cost);
            }
            return;
        }
        let key = main_key(self.redis.key_prefix(), q.tenant, q.tier_policy.algorithm);
        let args = [
            r.state.tat_ms,
            r.state.rem,
            r.state.scale,
            q.cost,
            rate.per_ms,
        ]
        .map(|v| v.to_string());
        match self
            .redis
            .eval::<Vec<i64>, _>(policy::refund_script(), &[key], &args)
            .await
        {
            Ok(v) => tracing::debug!(tenant = q.tenant, given_back = ?v, "leaky bucket slot"),
            Err(e) => tracing::warn!(tenant = q.tenant, fault = e.as_str(), "slot not given back"),
        }
    }
}
