//! The request body read whole before the tenant and upstream-slot stages
//! (`server.body_buffer_bytes`, docs/http-hardening.md#request-bodies), the way nginx buffers a
//! body before it takes an upstream connection: a client that trickles its body then holds no
//! upstream slot, no fleet-wide lease and no backend connection, only its buffer.
//!
//! Read only when it can be replayed: the body goes into Pingora's retry buffer (at most
//! [`REPLAY_LIMIT`] bytes), which the proxy sends to the backend before anything else, so the
//! backend receives the exact bytes the client sent. Bodies of unknown length (chunked, HTTP/2
//! without `content-length`), larger ones, and bodies arriving while
//! `server.body_buffer_total_bytes` are already buffered stream as before, bounded by the same
//! timeouts while they do (`stages::body_stage`).
//!
//! [`REPLAY_LIMIT`]: crate::http::request_json::REPLAY_LIMIT

use super::reserve_body::expects_continue;
use crate::config::HttpLimits;
use crate::http::body::declared_length;
use crate::observe::metrics::METRICS;
use crate::pipeline::{Layer, Outcome, Rejection};
use crate::response::Problem;
use pingora::prelude::*;
use pingora::proxy::Session;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Bytes of request bodies buffered now, process-wide.
static BUFFERED: AtomicUsize = AtomicUsize::new(0);

/// One buffered body's share of `server.body_buffer_total_bytes`, given back when dropped (with
/// the request's state, after `logging`).
pub(super) struct BufferedBody(usize);

impl Drop for BufferedBody {
    fn drop(&mut self) {
        BUFFERED.fetch_sub(self.0, Ordering::Relaxed);
        METRICS.body_buffer_bytes.sub(self.0 as i64);
    }
}

/// Takes `len` bytes of the process-wide budget `total`, or `None` when it would be exceeded.
fn reserve(len: usize, total: usize) -> Option<BufferedBody> {
    BUFFERED
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
            now.checked_add(len).filter(|&after| after <= total)
        })
        .ok()?;
    METRICS.body_buffer_bytes.add(len as i64);
    Some(BufferedBody(len))
}

/// Reads the request body whole when `limits` allow buffering it. `Ok(Ok(Some(_)))`: buffered
/// (hold the share until the request ends); `Ok(Ok(None))`: no body, or it streams;
/// `Ok(Err(_))`: a 408 refusal, the body did not arrive within `server.body_idle_timeout`
/// between reads or `server.body_read_timeout` from `started` (the end of the head).
/// Errors: the client broke off while sending it.
pub(super) async fn read(
    session: &mut Session,
    limits: &HttpLimits,
    started: Instant,
) -> Result<std::result::Result<Option<BufferedBody>, Rejection>> {
    let downstream = session.as_downstream_mut();
    if limits.body_buffer_bytes == 0 || downstream.is_body_done() || downstream.is_body_empty() {
        return Ok(Ok(None));
    }
    let fits = declared_length(&session.req_header().headers)
        .filter(|&n| n > 0 && n <= limits.body_buffer_bytes as u64);
    let Some(len) = fits else {
        METRICS
            .request_bodies
            .with_label_values(&["streamed"])
            .inc();
        return Ok(Ok(None));
    };
    let Some(share) = reserve(len as usize, limits.body_buffer_total_bytes) else {
        METRICS
            .request_bodies
            .with_label_values(&["buffer_full"])
            .inc();
        return Ok(Ok(None));
    };
    METRICS
        .request_bodies
        .with_label_values(&["buffered"])
        .inc();
    // No limit of its own: the declared length, checked above, bounds what arrives.
    Ok(read_into_retry_buffer(session, limits, started, usize::MAX)
        .await?
        .map(|_| Some(share)))
}

/// How [`read_into_retry_buffer`] ended.
pub(super) enum BodyRead {
    /// The whole body is in the retry buffer.
    Whole,
    /// More than the limit arrived; the rest is not read and the connection is not reused.
    OverLimit,
}

/// Reads the rest of the request body into Pingora's retry buffer, after the `100 Continue` an
/// `Expect: 100-continue` client waits for, until it ends or more than `limit` bytes arrived.
/// Bounded by `server.body_idle_timeout` between reads and `server.body_read_timeout` from
/// `started` (the end of the head): `Ok(Err(_))` is the 408 of [`timed_out`] beyond them.
/// Errors: the client broke off while sending it.
pub(super) async fn read_into_retry_buffer(
    session: &mut Session,
    limits: &HttpLimits,
    started: Instant,
    limit: usize,
) -> Result<std::result::Result<BodyRead, Rejection>> {
    if expects_continue(session.req_header()) {
        // The client waits for this before it sends the body (RFC 9110 10.1.1); the backend
        // then gets the whole body and no `Expect` (nothing left for it to confirm).
        session.write_continue_response().await?;
        session
            .req_header_mut()
            .remove_header(&http::header::EXPECT);
    }
    session.enable_retry_buffering();
    let deadline = started + limits.body_read_timeout;
    let mut total = 0usize;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = left.min(limits.body_idle_timeout);
        match tokio::time::timeout(wait, session.read_request_body()).await {
            Ok(Ok(Some(chunk))) => {
                total = total.saturating_add(chunk.len());
                if total > limit {
                    // Part of the body is read and the rest would follow: never reuse.
                    session.set_keepalive(None);
                    return Ok(Ok(BodyRead::OverLimit));
                }
            }
            Ok(Ok(None)) => return Ok(Ok(BodyRead::Whole)),
            Ok(Err(e)) => return Err(e.into_down()),
            Err(_) => {
                let total = wait < limits.body_idle_timeout;
                return Ok(Err(timed_out(session, limits, total)));
            }
        }
    }
}

/// The 408 of a body that stopped arriving (`total`: the whole-body deadline passed, else the
/// wait between two reads); the connection is not reused (part of the body may still come).
pub(super) fn timed_out(session: &mut Session, limits: &HttpLimits, total: bool) -> Rejection {
    session.set_keepalive(None);
    Rejection::new(
        Layer::Http,
        Outcome::BodyTimeout,
        timeout_problem(limits, total),
    )
}

/// The 408 problem of a body timeout (`total` as in [`timed_out`]).
pub(super) fn timeout_problem(limits: &HttpLimits, total: bool) -> Problem {
    let detail = if total {
        format!(
            "the request body did not arrive within {} ms (server.body_read_timeout)",
            limits.body_read_timeout.as_millis()
        )
    } else {
        format!(
            "no request body bytes arrived for {} ms (server.body_idle_timeout)",
            limits.body_idle_timeout.as_millis()
        )
    };
    Problem::status(408, detail).with("reason", serde_json::json!("body_timeout"))
}
