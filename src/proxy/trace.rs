//! The request's server span (`observability.tracing`, docs/observability.md#traces): started
//! before the first stage as the child of the client's W3C `traceparent` when it sent one, sent
//! on to the backend, and ended with the decision's attributes when the request ends. With
//! tracing off every function here returns at its first test: no span, no allocation.

use super::ctx::Ctx;
use crate::observe::labels::Outcome;
use crate::observe::tracing::{
    self as otel, HeaderExtractor, HeaderPairs, RedisUse, RequestTrace, SpanFacts,
};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use pingora::http::RequestHeader;
use std::time::{Instant, SystemTime};

/// Starts the request's span when tracing is on.
pub(super) fn start(ctx: &mut Ctx, req: &RequestHeader) {
    if ctx.snapshot.config.observability.tracing.is_none() {
        return;
    }
    let Some(tracing) = otel::active() else {
        return;
    };
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(&req.headers));
    let span = tracing
        .tracer
        .span_builder("HTTP")
        .with_kind(SpanKind::Server)
        .with_start_time(SystemTime::now())
        .start_with_context(&tracing.tracer, &parent);
    ctx.trace = Some(Box::new(RequestTrace {
        tracing,
        span,
        stages: Vec::new(),
        redis: RedisUse::default(),
        admitted_as: None,
        queue_wait: None,
    }));
}

/// True when the request is traced (its stages' Redis calls are then counted).
pub(super) fn traced(ctx: &Ctx) -> bool {
    ctx.trace.is_some()
}

/// The stage `name` starts now (a child span with `tracing.stages`).
pub(super) fn stage(ctx: &mut Ctx, name: &'static str) {
    if let Some(t) = ctx.trace.as_mut().filter(|t| t.tracing.stages) {
        t.stages.push((name, SystemTime::now()));
    }
}

/// The stages' Redis use.
pub(super) fn redis_used(ctx: &mut Ctx, used: RedisUse) {
    if let Some(t) = &mut ctx.trace {
        t.redis = used;
    }
}

/// The tenant stage admitted the request as `outcome`.
pub(super) fn admitted_as(ctx: &mut Ctx, outcome: Outcome) {
    if let Some(t) = &mut ctx.trace {
        t.admitted_as = Some(outcome);
    }
}

/// When a request starts waiting for its upstream slot: `Some` only when traced.
pub(super) fn wait_started(ctx: &Ctx) -> Option<Instant> {
    ctx.trace.as_ref().map(|_| Instant::now())
}

/// The upstream slot wait that began at `started` ended.
pub(super) fn wait_ended(ctx: &mut Ctx, started: Option<Instant>) {
    if let (Some(t), Some(at)) = (&mut ctx.trace, started) {
        t.queue_wait = Some(at.elapsed());
    }
}

/// With `tracing.propagate`, the span's `traceparent` (and `tracestate`) on the backend request,
/// replacing the client's.
pub(super) fn propagate(ctx: &Ctx, upstream: &mut RequestHeader) -> pingora::Result<()> {
    let Some(t) = ctx.trace.as_ref().filter(|t| t.tracing.propagate) else {
        return Ok(());
    };
    let cx = Context::new().with_remote_span_context(t.span.span_context().clone());
    let mut pairs = HeaderPairs::default();
    TraceContextPropagator::new().inject_context(&cx, &mut pairs);
    for (name, value) in pairs.0 {
        match value.is_empty() {
            true => drop(upstream.remove_header(name)),
            false => upstream.insert_header(name, value)?,
        }
    }
    Ok(())
}

/// Ends the request's span (and its stage spans) with what the request decided; `status` is
/// the status answered (0: none).
pub(super) fn finish(ctx: &mut Ctx, req: &RequestHeader, status: u16) {
    let Some(mut t) = ctx.trace.take() else {
        return;
    };
    let snap = &ctx.snapshot;
    let (layer, outcome) = ctx.decided;
    let decision = match outcome {
        Outcome::Admitted => t.admitted_as.unwrap_or(Outcome::Admitted),
        o => o,
    };
    let refused = ctx.refused_with.is_some() && outcome != Outcome::Error;
    let quota = ctx.quota_headers.as_ref();
    let leased = quota.is_some_and(|q| {
        let tier = snap.config.tiers.get(&q.policy_name);
        !q.degraded && tier.is_some_and(|t| t.policy.lease.is_some())
    });
    let tier = ctx.tier_label();
    let facts = SpanFacts {
        method: req.method.as_str(),
        route: ctx
            .route(snap)
            .map(|r| (r.path_prefix.as_str(), r.id.as_str())),
        status,
        client: Some(ctx.client).filter(|c| !c.is_unspecified()),
        decision: Some(decision),
        refused_by: refused.then_some(layer),
        policy: quota.map(|q| q.policy_name.as_str()),
        tenant: ctx.tenant(),
        tier: (tier != "-").then_some(tier),
        redis: t.redis,
        leased,
        queue_wait: t.queue_wait,
        request_id: ctx.request_id(),
    };
    let end = SystemTime::now();
    t.span.update_name(otel::span_name(&facts));
    t.span
        .set_attributes(otel::attributes(&facts, t.tracing.tenant));
    if status >= 500 {
        t.span.set_status(Status::error(""));
    }
    if !t.stages.is_empty() {
        let parent = Context::new().with_remote_span_context(t.span.span_context().clone());
        let tracer = &t.tracing.tracer;
        let ends = t.stages.iter().skip(1).map(|(_, at)| *at).chain([end]);
        for ((name, from), to) in t.stages.iter().zip(ends) {
            let mut span = tracer
                .span_builder(*name)
                .with_kind(SpanKind::Internal)
                .with_start_time(*from)
                .start_with_context(tracer, &parent);
            span.end_with_timestamp(to);
        }
    }
    t.span.end_with_timestamp(end);
}
