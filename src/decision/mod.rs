//! The decision service: tollgate's limiter for other proxies, a front door beside
//! [`proxy`](crate::proxy) and [`admin`](crate::admin) (docs/decision-service.md).
//!
//! [`grpc`] serves Envoy's rate limit service (`ShouldRateLimit`, v3), [`http`] the same
//! decision as JSON (`POST /v1/check`, `POST /v1/report`, shapes in [`json`]). Both stay thin: a call is
//! checked and turned into descriptors ([`answer::asked`]), decided by the same rule code as a
//! proxied request ([`pipeline::descriptors`](crate::pipeline::descriptors): descriptor
//! matching in [`policy::descriptor`](crate::policy::descriptor), one all-or-nothing quota
//! decision, the proxy's judge, metrics and headers), and mapped back ([`answer::response`]).

pub mod answer;
pub mod block;
pub mod grpc;
pub mod http;
pub mod json;
pub mod rls;
pub mod trace;

use crate::config::{DecisionFailure, FailurePolicy};
use crate::observe::labels::Outcome;
use crate::pipeline::descriptors::{self, ReportError};
use crate::quota::usage::Settled;
use crate::response::Problem;
use crate::snapshot::{App, Snapshot};
use rls::{RateLimitRequest, RateLimitResponse};
use tonic::Status;

/// Decides one `ShouldRateLimit` call against the current snapshot (the answer is
/// [`Checked::response`]). Errors: `INVALID_ARGUMENT` for a malformed call
/// ([`answer::asked`]) or a domain no rule has; `UNAVAILABLE` when Redis cannot decide and
/// `decision.grpc.on_failure` is `unavailable`.
pub async fn should_rate_limit(app: &App, req: &RateLimitRequest) -> Result<Checked, Status> {
    let failure = app
        .snapshot
        .load()
        .config
        .decision
        .grpc
        .as_ref()
        .map_or(DecisionFailure::Rules, |g| g.on_failure);
    check(app, req, failure, false).await
}

/// A decided call: the rate limit service's answer, per descriptor (in the call's order) the
/// seconds its refusing buckets ask the caller to wait (`None`: it did not refuse), and how it
/// was decided (for its trace span, [`trace`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub response: RateLimitResponse,
    pub retry_after_s: Vec<Option<u64>>,
    /// `admitted`, `limited`, `failed_open`, `fallback`, ... as on the proxy path.
    pub outcome: Outcome,
    /// The rule whose numbers the answer reports (none when no rule applied).
    pub policy: Option<String>,
    /// The block that refused the call (its admin API view), if one did ([`block`]).
    pub blocked: Option<serde_json::Value>,
}

/// Decides one call (all its descriptors, all or nothing) for either face of the service: a
/// call a block covers is refused first, nothing debited ([`block`]);
/// `dry_run`: nothing is debited or counted ([`descriptors::decide_dry`]). Errors:
/// `INVALID_ARGUMENT` for a malformed call or an unknown domain; `UNAVAILABLE` when Redis
/// cannot decide and `failure` says so, or a dry run cannot read a bucket.
pub async fn check(
    app: &App,
    req: &RateLimitRequest,
    failure: DecisionFailure,
    dry_run: bool,
) -> Result<Checked, Status> {
    let asked = answer::asked(req)?;
    let snap = app.snapshot.load_full();
    known_domain(&snap, &req.domain)?;
    let now_s = crate::observe::tier_fit::unix_ms() / 1000;
    if let Some(refused) = block::refused(&snap, &asked, now_s) {
        return Ok(refused);
    }
    let mut planned = descriptors::plan(&snap, &req.domain, &asked);
    if failure == DecisionFailure::Unavailable {
        // The caller decides a Redis fault: no bucket (not even a `local` one) is debited for it.
        for (_, call) in &mut planned.rules {
            call.on_failure = FailurePolicy::Open;
        }
    }
    let status = snap.config.response.status;
    let (combined, verdict) = if dry_run {
        descriptors::decide_dry(&snap, &planned, status)
            .await
            .map_err(|f| {
                Status::unavailable(format!(
                    "the quota store did not answer ({}): a dry run cannot read the buckets",
                    f.as_str()
                ))
            })?
    } else {
        descriptors::decide(&snap, &planned, status).await
    };
    let headers = verdict
        .headers
        .as_ref()
        .map(|h| snap.quota_pairs(h))
        .unwrap_or_default();
    let retry_after_s = planned
        .by_descriptor
        .iter()
        .map(|mine| answer::retry_after(&planned, &combined, mine))
        .collect();
    let response = answer::response(&planned, &combined, &verdict, headers, failure)?;
    Ok(Checked {
        response,
        retry_after_s,
        outcome: verdict.outcome,
        policy: verdict.headers.map(|h| h.policy_name),
        blocked: None,
    })
}

/// `INVALID_ARGUMENT` unless some rule has `match.domain` `domain`.
pub fn known_domain(snap: &Snapshot, domain: &str) -> Result<(), Status> {
    let known = snap
        .config
        .limits
        .iter()
        .any(|r| r.matcher.domain.as_deref() == Some(domain));
    if known {
        return Ok(());
    }
    Err(Status::invalid_argument(format!(
        "unknown domain \"{domain}\": no limit rule has this match.domain"
    )))
}

/// Debits one call's descriptors a cost known only afterwards ([`descriptors::report`]: into
/// debt if need be, never refused) and answers, per descriptor, each bucket's rule limit and
/// level after the debit. Errors (problems): 400 for a malformed call or an unknown domain,
/// 422 when a bucket's rule is not a token bucket (nothing debited), 503 when Redis did not
/// answer.
pub async fn report(
    app: &App,
    req: &RateLimitRequest,
) -> Result<Vec<Vec<(rls::RateLimit, Settled)>>, Problem> {
    let asked = answer::asked(req).map_err(|s| Problem::status(400, s.message()))?;
    let snap = app.snapshot.load_full();
    known_domain(&snap, &req.domain).map_err(|s| Problem::status(400, s.message()))?;
    let planned = descriptors::plan(&snap, &req.domain, &asked);
    let settled = match descriptors::report(&snap, &planned).await {
        Ok(s) => s,
        Err(ReportError::NotTokenBucket(rule)) => {
            return Err(Problem::status(
                422,
                format!("rule \"{rule}\" is not a token_bucket: only a token bucket can carry the debt a report may leave; nothing was debited"),
            ))
        }
        Err(ReportError::Store(f)) => {
            return Err(Problem::status(
                503,
                format!(
                    "the quota store did not answer ({}); the cost may not have been debited, or only in part",
                    f.as_str()
                ),
            ))
        }
    };
    Ok(planned
        .by_descriptor
        .iter()
        .map(|mine| {
            mine.iter()
                .filter_map(|&i| {
                    let (a, _) = &planned.rules[i];
                    let s = settled.get(i)?;
                    Some((answer::rate_limit(a.rate, &a.rule.name), *s))
                })
                .collect()
        })
        .collect())
}
