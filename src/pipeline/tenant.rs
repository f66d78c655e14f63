//! Stage 4, tenant quota: the tenant's tier sizes its bucket, one Redis script call decides
//! (docs/DESIGN.md sections 2–3, 4c); a refusal may be rescued by the tier's burst pool.
//!
//! [`plan`] (pure) says what to ask, [`run`] asks the quota store (and the pool, on the refusal
//! path only), [`judge`] (pure) turns the answer into a [`Verdict`].

use super::{Decision, Layer, Outcome, Rejection};
use crate::config::{PoolSettings, TierPolicy};
use crate::identity::Identity;
use crate::limit::{self, Rate};
use crate::observe::tier_fit::TierFit;
use crate::policy::{self, Applied};
use crate::quota::{QuotaOutcome, QuotaService, Reservation, TenantQuota};
use crate::response::{self, Problem, QuotaHeaders};
use crate::snapshot::Snapshot;
use serde_json::json;

/// What the tenant stage asks the quota store for one request.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    /// The identity's tenant (borrowed: the plan lives within its request).
    pub tenant: &'a str,
    /// The limits that apply ([`policy::resolve`]): the tier and the tenant's effective bucket.
    pub limits: Applied<'a>,
    /// Tokens this request costs (`routes[].cost`).
    pub cost: u64,
}

impl Plan<'_> {
    /// The policy that decides: the tier's, or its regional cut.
    pub fn policy(&self) -> &TierPolicy {
        self.limits.policy()
    }

    /// The quota store request.
    pub fn request(&self) -> TenantQuota<'_> {
        TenantQuota {
            tenant: self.tenant,
            policy: &self.limits.tier.name,
            rate: self.limits.rate,
            cost: self.cost,
            on_failure: self.limits.tier.on_failure,
            tier_policy: self.policy(),
        }
    }
}

/// The plan for `identity` on a route costing `cost`, with the limits [`policy::resolve`] says
/// apply (this region's part of the budget under `multi_region:`, whose demand it records):
/// `Ok(None)` when the stage does not apply (no tiers, or an identity without a tier); a 403
/// `rejected` when its tier does not exist.
pub fn plan<'a>(
    snap: &'a Snapshot,
    identity: &'a Identity,
    cost: u64,
) -> Result<Option<Plan<'a>>, Rejection> {
    let (Some(_), Some(tier_name)) = (&snap.quota, &identity.tier) else {
        return Ok(None);
    };
    let region = snap.region.as_deref();
    let live = snap.live_limits(&identity.tenant);
    let resolved = policy::resolve(
        &snap.config,
        region,
        live.as_deref(),
        &identity.tenant,
        tier_name,
    );
    let Some(limits) = resolved else {
        let p = Problem::status(403, format!("tier \"{tier_name}\" does not exist"));
        return Err(Rejection::new(Layer::Identity, Outcome::Rejected, p));
    };
    if let Some(region) = region {
        region.record(&identity.tenant, cost);
    }
    Ok(Some(Plan {
        tenant: &identity.tenant,
        limits,
        cost,
    }))
}

/// What the tenant stage decided, with what the response and the metrics need.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub decision: Decision,
    /// The `outcome` label of an admission (`admitted`, `fallback`, `pool_admitted`,
    /// `failed_open`); a rejection carries its own.
    pub outcome: Outcome,
    /// Rate-limit headers for the response (none when failed open).
    pub headers: Option<QuotaHeaders>,
    /// The admission left under 20% of the burst.
    pub near_limit: bool,
    /// A `leaky_bucket` slot taken (with the bucket that decided), to give back if the client
    /// leaves during its delay.
    pub reservation: Option<(Rate, Reservation)>,
    /// Per usage entry asked (in order): its reserve was debited in Redis, so the request
    /// settles it when it ends (docs/DESIGN.md 4e "Usage cost"). Empty without usage budgets.
    pub usage_reserved: Vec<bool>,
    /// Per policy entry of an admission decided with rules (the tier's first): the clock of the
    /// call that debited it in Redis ([`Combined::debited_at`](crate::quota::rules::Combined)),
    /// for the settle step ([`super::settle`]). Empty otherwise.
    pub debited_at: Vec<Option<u64>>,
    /// The enforced rules that refused the request (indices into the decided rules), for
    /// their penalty boxes ([`super::block`]). Empty otherwise.
    pub refused_rules: Vec<usize>,
}

impl Verdict {
    fn new(decision: Decision, outcome: Outcome, headers: Option<QuotaHeaders>) -> Self {
        Verdict {
            decision,
            outcome,
            headers,
            near_limit: false,
            reservation: None,
            usage_reserved: Vec::new(),
            debited_at: Vec::new(),
            refused_rules: Vec::new(),
        }
    }

    /// An admission labelled `outcome`, with `headers`.
    pub fn admit(outcome: Outcome, headers: Option<QuotaHeaders>) -> Self {
        Verdict::new(Decision::Admit, outcome, headers)
    }

    /// The refusal `r` (shadowed when `shadow`), labelled `outcome`, with `headers`.
    pub fn refuse(
        r: Rejection,
        shadow: bool,
        outcome: Outcome,
        headers: Option<QuotaHeaders>,
    ) -> Self {
        Verdict::new(Decision::refuse(r, shadow), outcome, headers)
    }
}

/// Asks the quota store, and the tier's burst pool when the tenant's bucket (in Redis, not
/// the fallback) refused; then [`judge`]s. Records the outcome in the tier-fit tracker.
pub async fn run(
    quota: &QuotaService,
    fit: &TierFit,
    plan: &Plan<'_>,
    status: u16,
    shadow: bool,
) -> Verdict {
    // Boxed: the store's futures are deep, and nesting them in the proxy's request future
    // would need a higher recursion limit for its layout (one allocation next to a Redis call).
    let outcome = Box::pin(quota.decide(&plan.request())).await;
    // Tier fit counts the tenant's own policies (before any burst pool, shadow or not).
    let (tier, now) = (&plan.limits.tier.name, crate::observe::tier_fit::unix_ms());
    outcome.record_fit(fit, plan.tenant, tier, now);
    let mut pool = None;
    // The headers are built here only for a tier with a pool ([`judge`] builds them once).
    let with_pool = plan.limits.tier.pool.as_ref();
    if let Some((p, h)) = with_pool.and_then(|p| Some((p, headers_of(plan, &outcome)?))) {
        // Not when degraded: the pool lives in Redis too.
        if !h.admitted() && !h.degraded {
            let asked = quota.decide_pool(&plan.limits.tier.name, plan.tenant, p, plan.cost);
            pool = asked.await.ok().map(|d| (p, d));
        }
    }
    judge(plan, status, outcome, pool, shadow)
}

/// The headers of a bucket decision (none when the store failed open or closed).
fn headers_of(plan: &Plan<'_>, outcome: &QuotaOutcome) -> Option<QuotaHeaders> {
    let QuotaOutcome::Decided {
        decision,
        rate,
        degraded,
        extras,
    } = outcome
    else {
        return None;
    };
    Some(QuotaHeaders {
        policy_name: plan.limits.tier.name.clone(),
        rate: *rate,
        decision: *decision,
        degraded: *degraded,
        quotas: extras.reports(&plan.limits.tier.name, plan.policy()),
        listed_before: None,
    })
}

/// The verdict on `outcome` (and on the pool's decision, when it was asked): admissions carry
/// their headers and outcome label; refusals are 429-style (`status`) `quota-exceeded`
/// problems with `violated-policies` and the rate-limit headers, or 503
/// `temporary-reduced-capacity` when the store failed closed; shadowed when `shadow`.
pub fn judge(
    plan: &Plan<'_>,
    status: u16,
    outcome: QuotaOutcome,
    pool: Option<(&PoolSettings, limit::Decision)>,
    shadow: bool,
) -> Verdict {
    let (headers, extras) = match (headers_of(plan, &outcome), outcome) {
        (Some(h), QuotaOutcome::Decided { extras, .. }) => (h, extras),
        (_, QuotaOutcome::FailedClosed { retry_after_s }) => {
            let owner = format!("tier \"{}\"", plan.limits.tier.name);
            let r = Rejection::failed_closed(&owner, retry_after_s);
            return Verdict::new(Decision::refuse(r, shadow), Outcome::FailedClosed, None);
        }
        _ => return Verdict::new(Decision::Admit, Outcome::FailedOpen, None),
    };
    let (decision, rate) = (headers.decision, headers.rate);
    if headers.admitted() {
        let outcome = if headers.degraded {
            Outcome::Fallback
        } else {
            Outcome::Admitted
        };
        let d = match extras.delay_ms {
            0 => Decision::Admit,
            ms => Decision::Delay(ms),
        };
        let mut v = Verdict::new(d, outcome, Some(headers));
        v.near_limit = decision.remaining * 5 < rate.burst;
        v.reservation = extras.reservation.map(|r| (rate, r));
        return v;
    }
    if let Some((p, d)) = pool.filter(|(_, d)| d.admitted) {
        let h = QuotaHeaders::pool_admitted(&headers, p.rate, d);
        return Verdict::new(Decision::Admit, Outcome::PoolAdmitted, Some(h));
    }
    let cost = plan.cost;
    let name = &plan.limits.tier.name;
    let detail = if decision.admitted {
        headers.quota_detail(cost)
    } else if decision.never_admissible() {
        format!(
            "this request costs {cost} tokens, more than the {} tokens tier \"{name}\" can ever hold",
            rate.burst
        )
    } else {
        format!(
            "tenant quota of tier \"{name}\" exhausted: {} of {} tokens left, this request costs {cost}",
            decision.remaining, rate.burst
        )
    };
    let problem = Problem::typed(status, response::QUOTA_EXCEEDED, "Quota exceeded", detail)
        .with("violated-policies", json!(headers.violated()));
    let r = Rejection::new(Layer::Tenant, Outcome::Limited, problem);
    let r = r.retry_after(headers.retry_after_s());
    Verdict::new(Decision::refuse(r, shadow), Outcome::Limited, Some(headers))
}

#[cfg(test)]
mod tests;
