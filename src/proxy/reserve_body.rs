//! The request body read before the tenant decision, for a usage reserve the client states in
//! it (`usage.reserve: { from_json: <field>, default: <n> }`, docs/usage-cost.md#reserve-from-the-request-body).
//!
//! Read only when it can be replayed: the body goes into Pingora's retry buffer
//! (`enable_retry_buffering`, at most [`REPLAY_LIMIT`] bytes), which the proxy sends to the
//! backend before streaming anything else, so the backend receives the exact bytes the client
//! sent. A body the head does not announce as JSON within that size is not touched (the
//! default reserve applies). The whole read is bounded by `server.header_read_timeout`: a
//! client that does not finish its body in time gets a 408 and the connection closes.

use crate::http::request_json::{readable, REPLAY_LIMIT};
use crate::pipeline::{Layer, Outcome, Rejection};
use crate::response::Problem;
use bytes::Bytes;
use pingora::prelude::*;
use pingora::proxy::Session;
use std::time::Duration;

/// The request body for the reserve: `Ok(Ok(Some(body)))` when `wanted` and the head
/// announces a readable JSON body (then read whole, kept for the backend), `Ok(Ok(None))` when
/// it is not read. `Ok(Err(_))`: a 408 refusal, the body did not arrive within `limit`.
/// Errors: the client broke off while sending it (the caller records `client_left`).
pub(super) async fn read(
    session: &mut Session,
    wanted: bool,
    limit: Duration,
) -> Result<std::result::Result<Option<Bytes>, Rejection>> {
    if !wanted || !readable(&session.req_header().headers, REPLAY_LIMIT) {
        return Ok(Ok(None));
    }
    session.enable_retry_buffering();
    let whole = async {
        while session.read_request_body().await?.is_some() {}
        Ok::<_, Box<Error>>(())
    };
    match tokio::time::timeout(limit, whole).await {
        Ok(Ok(())) => Ok(Ok(session.get_retry_buffer())),
        Ok(Err(e)) => Err(e.into_down()),
        Err(_) => {
            // Part of the body is read and the rest may still come: never reuse the connection.
            session.set_keepalive(None);
            let detail = format!(
                "the request body did not arrive within {} ms (server.header_read_timeout)",
                limit.as_millis()
            );
            let p = Problem::status(408, detail);
            Ok(Err(Rejection::new(Layer::Tenant, Outcome::BodyTimeout, p)))
        }
    }
}
