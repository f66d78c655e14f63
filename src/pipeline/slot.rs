//! Stage 5, upstream slot: a per-upstream concurrency slot (optionally queued), held until the
//! response is finished.

use super::{Layer, Outcome, Rejection};
use crate::concurrency::slots::{self, Claimant, SlotGuard, SlotLimits, SlotRejection, Slots};
use crate::config::UpstreamSettings;
use crate::response::{self, Problem};
use pingora::prelude::*;
use pingora::proxy::Session;
use pingora::ErrorType;
use serde_json::json;

/// Waits for a slot of `slots` as `claimant`. While queued, a client that goes away is noticed
/// (only when no request body is pending, so no body bytes are consumed here) and its place is
/// given up at once: that is the `Err` (the request ends). `Ok(Err(why))` is a refusal.
pub async fn acquire(
    session: &mut Session,
    slots: &Slots,
    claimant: Claimant<'_>,
    limits: SlotLimits<'_>,
) -> Result<Result<SlotGuard, SlotRejection>> {
    let mut probe = limits.queue.is_some() && session.as_downstream_mut().is_body_done();
    let wait = slots.acquire(claimant, limits);
    tokio::pin!(wait);
    loop {
        tokio::select! {
            r = &mut wait => return Ok(r),
            read = session.as_downstream_mut().read_body_or_idle(true), if probe => {
                if read.is_err() {
                    return Error::e_explain(ErrorType::ConnectionClosed, "client left while queued for an upstream slot")
                        .map_err(|e| e.into_down());
                }
                probe = false;
            }
        }
    }
}

/// The 503 `temporary-reduced-capacity` of a slot refusal `why` at `upstream` for `tenant`,
/// with `capacity-scope`, `reason` and the upstream's `Retry-After`. `spent` says the tenant
/// stage already debited this request (the detail says it is not refunded).
pub fn rejection(
    why: SlotRejection,
    upstream: &UpstreamSettings,
    tenant: &str,
    spent: bool,
) -> Rejection {
    let suffix = if spent {
        " The tenant token spent on this request is not refunded."
    } else {
        ""
    };
    let p = Problem::typed(
        503,
        response::REDUCED_CAPACITY,
        "Upstream at capacity",
        slots::rejection_detail(why, upstream, tenant, suffix),
    )
    .with("capacity-scope", json!(why.scope()))
    .with("reason", json!(why.as_str()));
    Rejection::new(Layer::Upstream, Outcome::Limited, p).retry_after(Some(upstream.retry_after_s))
}

#[cfg(test)]
mod tests;
