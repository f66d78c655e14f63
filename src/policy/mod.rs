//! Which limits apply to a request: the one place that says it, for the tenant stage and for the
//! admin API's read-only views alike.
//!
//! A tenant in tier `t` is held to `t`'s policy (main limit and calendar quotas, docs/DESIGN.md
//! 4c) with its `tenants:` override merged field by field, and under `multi_region:` to this
//! region's share of both (docs/DESIGN.md 4c, multi-region).

pub mod descriptor;
pub mod rules;

use crate::config::{Config, LimitOverride, Tier, TierPolicy, UsageBudget};
use crate::limit::share::Share;
use crate::limit::Rate;
use crate::region::RegionBudget;

/// The limits that apply to one tenant in one tier.
#[derive(Debug, Clone)]
pub struct Applied<'a> {
    pub tier: &'a Tier,
    /// The tenant's effective bucket: the tier merged with its `tenants:` override, cut to this
    /// region's share under `multi_region:`.
    pub rate: Rate,
    /// The tier's fleet-wide concurrency cap (`max_in_flight`), cut to this region's share under
    /// `multi_region:` like the burst: `floor(max × share)`, at least 1.
    pub max_in_flight: Option<u64>,
    /// The tier's policy cut to this region's share (`None`: the tier's own).
    regional: Option<TierPolicy>,
    /// The tier's usage budget with the live override's bucket (`None`: the tier's own).
    usage: Option<UsageBudget>,
}

impl Applied<'_> {
    /// The policy that decides: the tier's, or its regional cut.
    pub fn policy(&self) -> &TierPolicy {
        self.regional.as_ref().unwrap_or(&self.tier.policy)
    }

    /// The tier's usage budget (`tiers.<name>.usage`) with the tenant's live override of its
    /// bucket, if any; `None` when the tier has none.
    pub fn usage(&self) -> Option<&UsageBudget> {
        self.usage.as_ref().or(self.tier.usage.as_ref())
    }
}

/// The limits `tenant` is held to in tier `tier`, in this region (`region`: the snapshot's
/// budget under `multi_region:`), with `live` (the tenant's limits set through the admin API)
/// over the file's numbers: most specific wins, field by field (live override > `tenants:` >
/// tier). `None` when the tier does not exist. Pure: it reads the region's current shares and
/// records nothing.
pub fn resolve<'a>(
    config: &'a Config,
    region: Option<&RegionBudget>,
    live: Option<&LimitOverride>,
    tenant: &str,
    tier: &str,
) -> Option<Applied<'a>> {
    let t = config.tiers.get(tier)?;
    let mut rate = match config.tenants.get(tenant) {
        Some(o) => o.merged(t.rate),
        None => t.rate,
    };
    let mut max_in_flight = t.max_in_flight;
    let mut policy = None;
    let mut usage = None;
    if let Some(l) = live {
        usage = l
            .usage
            .as_ref()
            .zip(t.usage.as_ref())
            .map(|(o, u)| UsageBudget {
                rate: o.merged(u.rate),
                ..u.clone()
            });
        rate = l.rate.merged(rate);
        max_in_flight = l.max_in_flight.or(max_in_flight);
        policy = with_quotas(&t.policy, l);
    }
    let Some(region) = region else {
        return Some(Applied {
            tier: t,
            rate,
            max_in_flight,
            regional: policy,
            usage,
        });
    };
    let share = region.share(tenant);
    let base = policy.as_ref().unwrap_or(&t.policy);
    Some(Applied {
        tier: t,
        rate: share.apply(rate),
        max_in_flight: max_in_flight.map(|m| share.of(m)),
        regional: cut_quotas(share, base).or(policy),
        usage,
    })
}

/// `policy` with the quota limits `live` sets (by period; a period `policy` has no quota of
/// is not added); `None` when that changes nothing.
fn with_quotas(policy: &TierPolicy, live: &LimitOverride) -> Option<TierPolicy> {
    let mut changed = policy.clone();
    let mut any = false;
    for q in &mut changed.quotas {
        if let Some(o) = live.quotas.iter().find(|o| o.period == q.period) {
            any |= o.limit != q.limit;
            q.limit = o.limit;
        }
    }
    any.then_some(changed)
}

/// `policy` with every calendar quota's limit cut to `share` (`floor`, at least 1); `None` when
/// there is nothing to cut (the whole budget, or no quotas).
pub fn cut_quotas(share: Share, policy: &TierPolicy) -> Option<TierPolicy> {
    if share == Share::WHOLE || policy.quotas.is_empty() {
        return None;
    }
    let mut cut = policy.clone();
    for q in &mut cut.quotas {
        q.limit = share.of(q.limit);
    }
    Some(cut)
}

#[cfg(test)]
mod tests;
