//! Where a stage's decision takes effect: a refusal becomes the response (problem+json, its
//! headers and the rate-limit headers), every decision is counted, and the deciding layer is
//! recorded for the access log. The one place a refusal is written (problem+json, or a gRPC status
//! for a gRPC call).

use super::ctx::Ctx;
use super::head::HeadRefusal;
use crate::observe::metrics::METRICS;
use crate::pipeline::{Decision, Layer, Outcome, Rejection};
use crate::response::render::send_refusal;
use crate::response::Problem;
use pingora::prelude::*;
use pingora::proxy::Session;

/// The one place a rejection becomes a response: records the deciding layer, counts it
/// (`tollgate_decisions_total`, and the per-tenant counter for the tenant layer), and
/// writes the problem with its headers and, after the tenant stage, the rate-limit headers.
pub(super) async fn refuse(session: &mut Session, ctx: &mut Ctx, mut r: Rejection) -> Result<bool> {
    ctx.release_held(true);
    name_route(ctx, &mut r.problem);
    ctx.decided = (r.layer, r.reason);
    count(ctx, r.layer, r.reason);
    if r.reason == Outcome::BadTarget {
        tracing::warn!(
            request_id = %ctx.request_id(),
            client = %ctx.client,
            reason = %r.problem.extensions.get("reason").and_then(|v| v.as_str()).unwrap_or(""),
            target = %crate::http::log_escape(session.req_header().raw_path(), 200),
            "request target refused"
        );
    }
    let mut headers = r.response_headers();
    headers.extend(ctx.quota_pairs());
    // A client that went away cannot be answered; that is not our error.
    if send_refusal(session, &r.problem, ctx.request_id(), &headers)
        .await
        .is_ok()
    {
        ctx.refused_with = Some(r.problem.status);
    }
    Ok(true)
}

/// Answers an HTTP/2 request whose head breaks a request-head rule as the HTTP/1 front end
/// answers one (problem+json with `reason`, counted as `layer="http"` with its outcome, logged
/// as `request head refused`), on its stream only.
pub(super) async fn refuse_head(
    session: &mut Session,
    ctx: &mut Ctx,
    r: HeadRefusal,
) -> Result<bool> {
    tracing::warn!(
        request_id = %ctx.request_id(),
        client = %ctx.client,
        status = r.status,
        reason = %r.outcome.as_str(),
        detail = %r.detail,
        "request head refused"
    );
    let problem =
        Problem::status(r.status, r.detail).with("reason", serde_json::json!(r.outcome.as_str()));
    refuse(
        session,
        ctx,
        Rejection::new(Layer::Http, r.outcome, problem),
    )
    .await
}

/// Adds the matched route's label (`routes[].name`, else `routes[<index>]`) to a refusal
/// after the route stage, as its `route` member.
fn name_route(ctx: &Ctx, problem: &mut Problem) {
    if let Some(route) = ctx.route(&ctx.snapshot) {
        let label = serde_json::Value::String(route.id.clone());
        problem.extensions.insert("route".to_string(), label);
    }
}

/// Writes `problem` (with the request's rate-limit headers) as the answer, unless one was written
/// already; for refusals found after the request was handed to Pingora's proxying (an error
/// `fail_to_proxy` would otherwise answer). What the request holds is given back first
/// ([`Ctx::release_held`]; usage reserves refunded when `refused`, a refusal of tollgate's own
/// rather than a backend failure). Counting is the caller's.
pub(super) async fn answer_now(
    session: &mut Session,
    ctx: &mut Ctx,
    problem: &Problem,
    refused: bool,
) {
    ctx.release_held(refused);
    if session.response_written().is_some() {
        return;
    }
    let mut problem = problem.clone();
    name_route(ctx, &mut problem);
    let problem = &problem;
    // Pingora closes the downstream after an error: say so in the response.
    session.set_keepalive(None);
    let headers = ctx.quota_pairs();
    // A client that went away cannot be answered; that is not our error.
    if send_refusal(session, problem, ctx.request_id(), &headers)
        .await
        .is_ok()
    {
        ctx.refused_with = Some(problem.status);
    }
}

/// Counts one decision of `layer` (and, for the tenant layer, the per-tenant counter).
pub(super) fn count(ctx: &mut Ctx, layer: Layer, outcome: Outcome) {
    let series = &ctx.snapshot.decision_series;
    // The tier's series is looked up once per request and tier label.
    let index = match ctx.tier_series {
        Some(index) => index,
        None => {
            let index = series.tier_index(ctx.tier_label());
            ctx.tier_series = Some(index);
            index
        }
    };
    series.inc_at(index, layer, outcome, ctx.tier_label());
    if let (Layer::Tenant, Some(tenant)) = (layer, ctx.tenant()) {
        let bound = ctx.snapshot.config.observability.tenant_metrics;
        METRICS.tenant_decision(bound, tenant, outcome);
    }
}

/// Applies a stage's decision: `Ok(true)` when the request was answered. An admission is
/// counted as `admitted` for `layer`.
pub(super) async fn settle(
    session: &mut Session,
    ctx: &mut Ctx,
    layer: Layer,
    decision: Decision,
) -> Result<bool> {
    match decision {
        Decision::Admit | Decision::Delay(_) => {
            count(ctx, layer, Outcome::Admitted);
            Ok(false)
        }
        Decision::Reject(r) => refuse(session, ctx, r).await,
        Decision::ShadowReject(r) => {
            shadow(ctx, r);
            Ok(false)
        }
    }
}

/// A rejection of a layer in shadow mode: counted as `shadow_limited`, logged, not enforced
/// (the access log shows it as the deciding layer unless a later one refuses).
fn shadow(ctx: &mut Ctx, r: Rejection) {
    ctx.decided = (r.layer, Outcome::ShadowLimited);
    count(ctx, r.layer, Outcome::ShadowLimited);
    tracing::info!(
        request_id = %ctx.request_id(),
        layer = r.layer.as_str(),
        would_be = r.reason.as_str(),
        status = r.problem.status,
        tenant = ctx.tenant().unwrap_or("-"),
        client = %ctx.client,
        "shadow mode: this request would have been refused"
    );
}
