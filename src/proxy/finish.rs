//! The end of every request (Pingora's `logging`): the upstream slot is released, the usage
//! reserve is settled, the route's metrics series observes the request, and the access log gets
//! its line.

use super::ctx::Ctx;
use pingora::proxy::Session;
use pingora::{Error, ErrorSource};

/// Closes the request: releases its upstream slot, settles its usage reserve (off the response
/// path: the settlement call is spawned), observes the route's series (status and
/// duration), ends the request's trace span (when tracing is on) and writes the access log line
/// when `observability.access_log` is on.
pub(super) fn finish(session: &Session, e: Option<&Error>, ctx: &mut Ctx) {
    let written = session.response_written().map(|r| r.status.as_u16());
    let status = ctx.refused_with.or(written).unwrap_or(0);
    ctx.slot.take();
    let client_gone = e.is_some_and(|e| *e.esource() == ErrorSource::Downstream);
    for meter in ctx.usage.drain(..) {
        let ending = meter.ending(e.is_some(), client_gone);
        meter.settle(ending);
    }
    ctx.settle.finish(status, client_gone, e.is_some());
    super::trace::finish(ctx, session.req_header(), status);
    let snap = &ctx.snapshot;
    let route = ctx.route(snap).map(|r| r.id.as_str()).unwrap_or("none");
    let elapsed = ctx.started.elapsed();
    let series = match ctx.route {
        Some(i) => snap.route_series.get(i),
        None => snap.route_series.last(),
    };
    if let Some(series) = series {
        series.observe(status, elapsed.as_secs_f64());
    }
    if snap.config.observability.access_log {
        let req = session.req_header();
        tracing::info!(
            target: crate::observe::access_log::TARGET,
            request_id = %ctx.request_id(),
            method = %req.method,
            path = %req.uri.path(),
            route,
            client = %ctx.client,
            tenant = ctx.tenant().unwrap_or("-"),
            tier = ctx.tier_label(),
            layer = ctx.decided.0.as_str(),
            decision = ctx.decided.1.as_str(),
            status,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
        );
        if let Some(dropped) = crate::observe::access_log::drop_report() {
            tracing::warn!(
                dropped,
                "access log lines dropped: the log output is not keeping up \
                 (observability.log_buffer_bytes)"
            );
        }
    }
}
