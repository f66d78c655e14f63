//! Stage 4, fleet-wide concurrency (`tiers.<name>.max_in_flight`, docs/DESIGN.md 4e): a lease
//! per request, taken before the tier's rate decision and held until the request ends
//! ([`crate::quota::inflight`]). A request refused later (by its rate limits, a full upstream)
//! gives its lease back at once, since the lease lives in the request's state.

use super::tenant::Plan;
use super::{Layer, Outcome, Rejection};
use crate::config::HeaderMode;
use crate::quota::inflight::{InflightLease, InflightOutcome};
use crate::quota::QuotaService;
use crate::response::{self, ratelimit, Problem};
use serde_json::json;
use std::sync::Arc;

/// The policy name of a tier's concurrency cap: `<tier>.concurrency`.
pub fn policy_name(tier: &str) -> String {
    format!("{tier}.concurrency")
}

/// Takes a lease when the plan's tier has `max_in_flight`: `Ok(None)` without a cap (or failed
/// open). Errors: `status` (429 by default) `quota-exceeded` naming `<tier>.concurrency` with
/// `Retry-After: 1` when the cap is reached; 503 when Redis is unavailable and the tier fails
/// closed.
pub async fn take(
    quota: &Arc<QuotaService>,
    plan: &Plan<'_>,
    status: u16,
    headers: HeaderMode,
) -> Result<Option<InflightLease>, Rejection> {
    let tier = plan.limits.tier;
    let Some(max) = tier.max_in_flight else {
        return Ok(None);
    };
    match quota
        .acquire_inflight(&plan.tenant, max, tier.on_failure)
        .await
    {
        InflightOutcome::Held(lease) => Ok(Some(lease)),
        InflightOutcome::FailedOpen => Ok(None),
        InflightOutcome::Refused { max, degraded } => {
            Err(refused(&tier.name, max, degraded, status, headers))
        }
        InflightOutcome::FailedClosed { retry_after_s } => {
            let p = Problem::typed(
                503,
                response::REDUCED_CAPACITY,
                "Rate limiter unavailable",
                format!(
                    "the quota store is unavailable and tier \"{}\" fails closed; retry later",
                    tier.name
                ),
            );
            let r = Rejection::new(Layer::Tenant, Outcome::FailedClosed, p);
            Err(r.retry_after(Some(retry_after_s)))
        }
    }
}

/// The refusal of a request over its tier's cap of `max` requests in flight.
pub fn refused(tier: &str, max: u64, degraded: bool, status: u16, mode: HeaderMode) -> Rejection {
    let name = policy_name(tier);
    let detail = format!(
        "tenant already has {max} requests in flight{} (tier \"{tier}\" allows {max}); retry when one ends",
        if degraded { " on this instance" } else { " across the fleet" },
    );
    let problem = Problem::typed(status, response::QUOTA_EXCEEDED, "Quota exceeded", detail)
        .with("violated-policies", json!([name]));
    let mut headers = ratelimit::concurrency_pairs(&name, max, mode);
    if degraded {
        headers.push(("Tollgate-Degraded", "redis".to_string()));
    }
    Rejection::new(Layer::Tenant, Outcome::Limited, problem)
        .with_headers(headers)
        .retry_after(Some(1))
}

#[cfg(test)]
mod tests;
