//! The settle step of request counts (docs/rules.md#counting-by-outcome): a rule with
//! `count: { status: [...] }` and a tier or rule with `refund_on` keep their request's debit
//! only for the outcomes that count.
//!
//! The debit is taken at admission like any other (reserve), in the request's all-or-nothing
//! decision, so requests in flight at once never get more than the bucket's room through: at
//! most `burst` counted outcomes per refill, whatever the concurrency. When the backend's
//! response head arrives, [`Settle::head`] gives back each debit its status does not count
//! (awaited, so the client's next request sees it); a request that ends without a head is
//! settled by [`Settle::finish`] (spawned). [`gives_back`] is the pure rule.

use crate::config::{Counting, RefundOn};
use crate::limit::calendar::CalendarQuota;
use crate::observe::metrics::METRICS;
use crate::pipeline::tenant::Plan;
use crate::policy::rules::AppliedRule;
use crate::quota::policy_script::{LimitEntry, QuotaPart};
use crate::quota::rules::RuleCall;
use crate::quota::QuotaService;
use std::sync::Arc;

/// When a request's debit is looked at again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// The backend's (final) response head, with its status.
    Head(u16),
    /// The request ended without a response head from the backend. `status`: what tollgate
    /// answered itself (0: nothing, the client was gone); `client_gone`: the client left first;
    /// `upstream_failed`: proxying failed (no backend answered, or it timed out).
    NoHead {
        status: u16,
        client_gone: bool,
        upstream_failed: bool,
    },
}

/// True when `c` gives the request's debit back at `m`. Without a response head, a client that
/// left keeps its debit unless `client_gone_before_response` is listed: hanging up before the
/// answer must not make a counted attempt (a login) free.
pub fn gives_back(c: &Counting, m: Moment) -> bool {
    let r = c.refund_on;
    match m {
        Moment::Head(s) => {
            c.status.is_some_and(|set| !set.contains(s))
                || (r.backend_5xx && (500..600).contains(&s))
        }
        Moment::NoHead {
            client_gone: true, ..
        } => r.client_gone_before_response,
        Moment::NoHead {
            status,
            upstream_failed,
            ..
        } => {
            (upstream_failed && r.upstream_unavailable)
                || c.status
                    .is_some_and(|set| status != 0 && !set.contains(status))
        }
    }
}

impl RefundOn {
    /// The outcomes listed in either.
    pub fn union(self, other: RefundOn) -> RefundOn {
        RefundOn {
            backend_5xx: self.backend_5xx || other.backend_5xx,
            upstream_unavailable: self.upstream_unavailable || other.upstream_unavailable,
            client_gone_before_response: self.client_gone_before_response
                || other.client_gone_before_response,
        }
    }
}

/// One debit an admitted request holds until it is settled.
struct Debit {
    /// The policy (tier or rule) for the metric.
    policy: Arc<str>,
    entry: LimitEntry,
    /// The tier's calendar quotas debited with the tier's entry (and their cost).
    quotas: Option<(Vec<CalendarQuota>, u64)>,
    /// The debiting call's clock (Unix ms).
    at_ms: u64,
    counting: Counting,
}

/// The debits a request keeps until its outcome is known; empty for most requests.
#[derive(Default)]
pub struct Settle {
    quota: Option<Arc<QuotaService>>,
    tenant: String,
    debits: Vec<Debit>,
}

impl Settle {
    /// The debits of an admission to settle later: the tier's (with its quotas) when its
    /// `refund_on` lists something, and each rule's whose `count` or `refund_on` (or the
    /// tier's `refund_on`, which covers every policy of the decision) does. `debited_at` is the
    /// verdict's (the tier's entry first when `plan`, then `rules` in order); a policy not
    /// debited in Redis is not held.
    pub fn of(
        quota: &Arc<QuotaService>,
        plan: Option<&Plan<'_>>,
        rules: &[(AppliedRule<'_>, RuleCall)],
        debited_at: &[Option<u64>],
    ) -> Settle {
        let mut s = Settle::default();
        let tier_refund = plan.map_or_else(RefundOn::default, |p| p.limits.tier.refund_on);
        let at = |i: usize| debited_at.get(i).copied().flatten();
        if let Some(p) = plan {
            let counting = Counting {
                status: None,
                refund_on: tier_refund,
            };
            if let (true, Some(at_ms)) = (counting.settles(), at(0)) {
                let q = p.request();
                s.debits.push(Debit {
                    policy: p.limits.tier.name.as_str().into(),
                    entry: quota.tier_entry(&q),
                    quotas: Some((p.policy().quotas.clone(), p.cost)),
                    at_ms,
                    counting,
                });
            }
            s.tenant = p.tenant.to_string();
        }
        let offset = usize::from(plan.is_some());
        for (i, (a, call)) in rules.iter().enumerate() {
            let mut counting = a.rule.counting;
            counting.refund_on = counting.refund_on.union(tier_refund);
            if let (true, Some(at_ms)) = (counting.settles(), at(offset + i)) {
                s.debits.push(Debit {
                    policy: call.name.clone(),
                    entry: call.entry.clone(),
                    quotas: None,
                    at_ms,
                    counting,
                });
            }
        }
        if !s.debits.is_empty() {
            s.quota = Some(quota.clone());
        }
        s
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.debits.is_empty()
    }

    /// The backend's response head: every held debit is settled by its `status` (1xx heads
    /// are not final and settle nothing); those given back are given back before this returns.
    pub async fn head(&mut self, status: u16) {
        if status < 200 || self.debits.is_empty() {
            return;
        }
        let back = self.decide(Moment::Head(status));
        if let Some(quota) = &self.quota {
            // Boxed: the store call's state would otherwise sit inside the response hook's
            // future, which Pingora allocates and copies for every response, given back or not.
            Box::pin(give_back(quota, &self.tenant, back)).await;
        }
    }

    /// The request ended: what is still held (no response head came) is settled off the
    /// response path. `status`: what tollgate answered (0: nothing).
    pub fn finish(&mut self, status: u16, client_gone: bool, upstream_failed: bool) {
        if self.debits.is_empty() {
            return;
        }
        let back = self.decide(Moment::NoHead {
            status,
            client_gone,
            upstream_failed,
        });
        let (Some(quota), false) = (self.quota.take(), back.is_empty()) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let tenant = std::mem::take(&mut self.tenant);
        crate::pending::spawn(&runtime, async move {
            give_back(&quota, &tenant, back).await;
        });
    }

    /// Takes every held debit: those `m` counts are counted as `counted`, the others returned.
    fn decide(&mut self, m: Moment) -> Vec<Debit> {
        let (back, kept): (Vec<_>, Vec<_>) = self
            .debits
            .drain(..)
            .partition(|d| gives_back(&d.counting, m));
        for d in &kept {
            count(&d.policy, "counted");
        }
        back
    }
}

/// Gives `debits` back, one call each (they may live under different hash tags).
async fn give_back(quota: &QuotaService, tenant: &str, debits: Vec<Debit>) {
    for d in debits {
        let quotas = d.quotas.as_ref().map(|(quotas, cost)| QuotaPart {
            tenant,
            quotas,
            cost: *cost,
        });
        let given = quota.give_back_debit(&d.entry, quotas, d.at_ms).await;
        count(&d.policy, if given { "given_back" } else { "store_failed" });
    }
}

fn count(policy: &str, outcome: &str) {
    METRICS
        .count_settlements
        .with_label_values(&[policy, outcome])
        .inc();
}

#[cfg(test)]
mod tests;
