//! The decision service: tollgate's limiter for other proxies, a front door beside
//! [`proxy`](crate::proxy) and [`admin`](crate::admin) (docs/decision-service.md).
//!
//! [`grpc`] serves Envoy's rate limit service (`ShouldRateLimit`, v3). It stays thin: a call is
//! checked and turned into descriptors ([`answer::asked`]), decided by the same rule code as a
//! proxied request ([`pipeline::descriptors`](crate::pipeline::descriptors): descriptor
//! matching in [`policy::descriptor`](crate::policy::descriptor), one all-or-nothing quota
//! decision, the proxy's judge, metrics and headers), and mapped back ([`answer::response`]).

pub mod answer;
pub mod grpc;
pub mod rls;

use crate::config::DecisionFailure;
use crate::pipeline::descriptors;
use crate::snapshot::App;
use rls::{RateLimitRequest, RateLimitResponse};
use tonic::Status;

/// Decides one `ShouldRateLimit` call against the current snapshot. Errors: `INVALID_ARGUMENT`
/// for a malformed call ([`answer::asked`]) or a domain no rule has; `UNAVAILABLE` when Redis
/// cannot decide and `decision.grpc.on_failure` is `unavailable`.
pub async fn should_rate_limit(
    app: &App,
    req: RateLimitRequest,
) -> Result<RateLimitResponse, Status> {
    let asked = answer::asked(&req)?;
    let snap = app.snapshot.load_full();
    let known = snap
        .config
        .limits
        .iter()
        .any(|r| r.matcher.domain.as_deref() == Some(req.domain.as_str()));
    if !known {
        return Err(Status::invalid_argument(format!(
            "unknown domain \"{}\": no limit rule has this match.domain",
            req.domain
        )));
    }
    let failure = snap
        .config
        .decision
        .grpc
        .as_ref()
        .map_or(DecisionFailure::Rules, |g| g.on_failure);
    let planned = descriptors::plan(&snap, &req.domain, &asked);
    let status = snap.config.response.status;
    let (combined, verdict) = descriptors::decide(&snap, &planned, status).await;
    let headers = verdict
        .headers
        .as_ref()
        .map(|h| snap.quota_pairs(h))
        .unwrap_or_default();
    answer::response(&planned, &combined, &verdict, headers, failure)
}
