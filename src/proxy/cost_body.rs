//! The request body read before the tenant decision for a cost read from it
//! (`cost: { from: request_bytes }` without a `Content-Length`, `cost: { json: <path> }`,
//! docs/rules.md#costs-read-from-the-request).
//!
//! Read only into Pingora's retry buffer (at most [`REPLAY_LIMIT`] bytes, or the route's
//! `max_body_bytes` when smaller), which the proxy sends to the backend before streaming
//! anything else, so the backend receives the exact bytes the client sent and the cost is
//! debited before the backend sees the request. A body that does not fit is not buffered
//! further: the caller refuses the request (the connection is not reused, part of the body
//! is read). The read is bounded by `server.body_idle_timeout` between reads and
//! `server.body_read_timeout` from the end of the head (408 beyond, as a buffered body's).
//!
//! [`REPLAY_LIMIT`]: crate::http::request_json::REPLAY_LIMIT

use super::body_buffer::{read_into_retry_buffer, BodyRead};
use super::ctx::Ctx;
use crate::config::{HttpLimits, RuleCost};
use crate::http::body::declared_length;
use crate::http::request_json::REPLAY_LIMIT;
use crate::observe::metrics::METRICS;
use crate::pipeline::cost::{BodyState, CostInput};
use crate::pipeline::{self, Rejection};
use crate::policy::rules::AppliedRule;
use crate::quota::rules::RuleCall;
use crate::snapshot::Snapshot;
use bytes::Bytes;
use pingora::prelude::*;
use pingora::proxy::Session;
use std::time::Instant;

/// A body read for its cost.
pub(super) enum CostBody {
    /// The whole body (`None`: the request has none).
    Whole(Option<Bytes>),
    /// It is longer than the bytes that may be buffered (its declared length, or what was read).
    TooLarge,
}

/// Reads the whole request body when it fits `limit` bytes. `Ok(Err(_))`: a 408, the body
/// stopped arriving. Errors: the client broke off while sending it.
pub(super) async fn read(
    session: &mut Session,
    limit: usize,
    limits: &HttpLimits,
    started: Instant,
) -> Result<std::result::Result<CostBody, Rejection>> {
    let declared = declared_length(&session.req_header().headers);
    if declared.is_some_and(|n| n > limit as u64) {
        return Ok(Ok(CostBody::TooLarge));
    }
    let downstream = session.as_downstream_mut();
    if downstream.is_body_done() {
        // Nothing to read, or read whole already (`server.body_buffer_bytes`).
        return Ok(Ok(CostBody::Whole(session.get_retry_buffer())));
    }
    if downstream.is_body_empty() {
        return Ok(Ok(CostBody::Whole(None)));
    }
    let read = read_into_retry_buffer(session, limits, started, limit).await?;
    Ok(read.map(|r| match r {
        BodyRead::Whole => CostBody::Whole(session.get_retry_buffer()),
        BodyRead::OverLimit => CostBody::TooLarge,
    }))
}

/// The request's costs (docs/rules.md#costs-read-from-the-request): the route's tokens,
/// returned, and each applied rate rule's, written into its call ([`pipeline::cost::apply`],
/// after reading the body when a cost needs it). `Ok(Ok((cost, read)))`: `read` is true when
/// some cost was read from the request (the kept plan's script calls, built with the route's
/// fixed cost, no longer fit). `Ok(Err(_))`: the request is refused (a cost above its `max`,
/// a repeated field, a body that could not be read, a 408).
/// Errors: the client broke off while sending its body.
pub(super) async fn costs(
    session: &mut Session,
    ctx: &Ctx,
    snap: &Snapshot,
    rules: &mut [(AppliedRule<'_>, RuleCall)],
) -> Result<std::result::Result<(u64, bool), Rejection>> {
    let route = ctx.route(snap);
    let fixed = route.map_or(1, |r| r.cost);
    let fixed_rule = rules
        .iter()
        .any(|(a, _)| matches!(a.rule.cost, Some(RuleCost::Fixed(_))));
    if !pipeline::cost::reads(route, rules) && !fixed_rule {
        return Ok(Ok((fixed, false)));
    }
    let declared_len = declared_length(&session.req_header().headers);
    let body_wanted = pipeline::cost::body_wanted(route, rules, declared_len);
    let limit = route
        .and_then(|r| r.max_body_bytes)
        .map_or(REPLAY_LIMIT, |m| REPLAY_LIMIT.min(m as usize));
    let body = match body_wanted {
        false => None,
        true => match read(session, limit, &snap.config.server.http, ctx.started).await? {
            Ok(b) => Some(b),
            Err(r) => return Ok(Err(r)),
        },
    };
    let state = match &body {
        None => BodyState::NotRead,
        Some(CostBody::Whole(b)) => BodyState::Whole(b.as_deref()),
        Some(CostBody::TooLarge) => BodyState::TooLarge { limit },
    };
    let req = session.req_header();
    let input = CostInput {
        headers: &req.headers,
        query: req.uri.query(),
        declared_len,
        body: state,
    };
    Ok(pipeline::cost::apply(route, rules, &input).map(|c| {
        for (owner, reason) in &c.defaulted {
            METRICS
                .cost_defaulted
                .with_label_values(&[owner.as_str(), reason])
                .inc();
        }
        (c.route, c.read)
    }))
}
