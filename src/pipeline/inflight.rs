//! Stage 4, fleet-wide concurrency (`tiers.<name>.max_in_flight` and concurrency rules,
//! `limits[].max_in_flight`; docs/DESIGN.md 4e): a lease per request, taken before the rate
//! decisions and held until the request ends
//! ([`crate::quota::inflight`]). A request refused later (by its rate limits, a full upstream)
//! gives its lease back at once, since the lease lives in the request's state.

use super::tenant::Plan;
use super::{Layer, Outcome, Rejection};
use crate::config::HeaderMode;
use crate::observe::series::RuleSeries;
use crate::policy::rules::AppliedRule;
use crate::quota::inflight::{InflightLease, InflightOutcome};
use crate::quota::rules::RuleCall;
use crate::quota::QuotaService;
use crate::response::{self, ratelimit, Problem};
use serde_json::json;
use std::sync::Arc;

/// The policy name of a tier's concurrency cap: `<tier>.concurrency`.
pub fn policy_name(tier: &str) -> String {
    format!("{tier}.concurrency")
}

/// Takes a lease when the plan's tier has `max_in_flight` (this region's share of it under
/// `multi_region:`, whose name `region` is): `Ok(None)` without a cap (or failed open). Errors:
/// `status` (429 by default) `quota-exceeded` naming `<tier>.concurrency` with `Retry-After: 1`
/// when the cap is reached; 503 when Redis is unavailable and the tier fails closed.
pub async fn take(
    quota: &Arc<QuotaService>,
    plan: &Plan<'_>,
    status: u16,
    headers: HeaderMode,
    region: Option<&str>,
) -> Result<Option<InflightLease>, Rejection> {
    let tier = plan.limits.tier;
    let Some(max) = plan.limits.max_in_flight else {
        return Ok(None);
    };
    match quota
        .acquire_inflight(plan.tenant, max, tier.on_failure)
        .await
    {
        InflightOutcome::Held(lease) => Ok(Some(lease)),
        InflightOutcome::FailedOpen => Ok(None),
        InflightOutcome::Refused { max, degraded } => {
            let owner = format!("tier \"{}\"", tier.name);
            let how = RefusalHeaders {
                mode: headers,
                region,
            };
            Err(refused(&tier.name, &owner, max, degraded, status, how))
        }
        InflightOutcome::FailedClosed { retry_after_s } => {
            let owner = format!("tier \"{}\"", tier.name);
            Err(Rejection::failed_closed(&owner, retry_after_s))
        }
    }
}

/// Which rate-limit headers a concurrency refusal carries: `response.headers`, and under
/// `multi_region:` this region's name (the cap is its share).
#[derive(Debug, Clone, Copy)]
pub struct RefusalHeaders<'a> {
    pub mode: HeaderMode,
    pub region: Option<&'a str>,
}

/// The refusal of a request over the cap of `max` requests in flight of `policy` (a tier's or
/// a concurrency rule's name; `owner` says which in the detail, e.g. `tier "pro"`).
pub fn refused(
    policy: &str,
    owner: &str,
    max: u64,
    degraded: bool,
    status: u16,
    how: RefusalHeaders<'_>,
) -> Rejection {
    let name = policy_name(policy);
    let detail = format!(
        "{max} requests are in flight{} ({owner} allows {max}); retry when one ends",
        if degraded {
            " on this instance"
        } else {
            " across the fleet"
        },
    );
    let problem = Problem::typed(status, response::QUOTA_EXCEEDED, "Quota exceeded", detail)
        .with("violated-policies", json!([name]));
    let mut headers = ratelimit::concurrency_pairs(&name, max, how.mode, how.region);
    if degraded {
        headers.push(("Tollgate-Degraded", "redis".to_string()));
    }
    Rejection::new(Layer::Tenant, Outcome::Limited, problem)
        .with_headers(headers)
        .retry_after(Some(1))
}

/// Takes a lease of every concurrency rule (`limits[].max_in_flight`, each cut to this region's
/// share under `multi_region:`) in `rules`. A shadow rule's refusal is counted and logged, and
/// the request goes on without its lease. Errors: the first enforced rule at its cap (429
/// `<rule>.concurrency`, `Retry-After: 1`), or failing closed (503); leases taken before are
/// given back as the error drops them.
pub async fn take_rules(
    quota: &Arc<QuotaService>,
    series: &RuleSeries,
    rules: &[(AppliedRule<'_>, RuleCall)],
    status: u16,
    how: RefusalHeaders<'_>,
) -> Result<Vec<InflightLease>, Rejection> {
    let mut leases = Vec::new();
    for (a, call) in rules {
        let Some(max) = a.max_in_flight else {
            continue;
        };
        let key = call.entry.key.to_string();
        let shadow = call.entry.shadow;
        let label = match quota.acquire_inflight_at(key, max, call.on_failure).await {
            InflightOutcome::Held(lease) => {
                leases.push(lease);
                "admitted"
            }
            InflightOutcome::FailedOpen => "failed_open",
            InflightOutcome::Refused { .. } if shadow => {
                tracing::info!(rule = %call.name, "shadow concurrency rule would refuse");
                "shadow_limited"
            }
            InflightOutcome::Refused { max, degraded } => {
                series.inc(a.index, &call.name, "limited");
                let owner = format!("limit rule \"{}\"", call.name);
                let mut r = refused(&call.name, &owner, max, degraded, status, how);
                r.reason = Outcome::RuleLimited;
                return Err(r);
            }
            InflightOutcome::FailedClosed { retry_after_s } if !shadow => {
                let owner = format!("limit rule \"{}\"", call.name);
                return Err(Rejection::failed_closed(&owner, retry_after_s));
            }
            InflightOutcome::FailedClosed { .. } => "failed_closed",
        };
        series.inc(a.index, &call.name, label);
    }
    Ok(leases)
}

#[cfg(test)]
mod tests;
