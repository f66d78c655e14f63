//! The request body read before the tenant decision, for a usage reserve the client states in
//! it (`usage.reserve: { from_json: <field>, default: <n> }`, docs/usage-cost.md#reserve-from-the-request-body).
//!
//! Read only when it can be replayed: the body goes into Pingora's retry buffer
//! (`enable_retry_buffering`, at most [`REPLAY_LIMIT`] bytes), which the proxy sends to the
//! backend before streaming anything else, so the backend receives the exact bytes the client
//! sent. A body the head does not announce as JSON within that size is not touched (the
//! default reserve applies). The whole read is bounded by `server.header_read_timeout`: a
//! client that does not finish its body in time gets a 408 and the connection closes.
//!
//! A client that sent `Expect: 100-continue` waits for a go-ahead before its body (RFC 9110
//! 10.1.1): on HTTP/1.1 the gateway sends `100 Continue` just before reading, and drops the
//! expectation from the request the backend gets (it is met, and the backend would send a
//! second `100`). A request refused before this point is answered at once, its body unread.

use crate::http::request_json::{readable, REPLAY_LIMIT};
use crate::pipeline::{Layer, Outcome, Rejection};
use crate::response::Problem;
use bytes::Bytes;
use http::header::EXPECT;
use pingora::http::RequestHeader;
use pingora::prelude::*;
use pingora::proxy::Session;
use std::time::Duration;

/// True for an HTTP/1.1 request with `Expect: 100-continue` (case-insensitive, RFC 9110
/// 10.1.1). HTTP/1.0 clients are never sent a 1xx (RFC 9110 15.2); on HTTP/2 Pingora 0.9
/// writes no informational responses.
pub(super) fn expects_continue(req: &RequestHeader) -> bool {
    req.version == http::Version::HTTP_11
        && req
            .headers
            .get_all(&EXPECT)
            .iter()
            .any(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

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
    if expects_continue(session.req_header()) {
        session.write_continue_response().await?;
        session.req_header_mut().remove_header(&EXPECT);
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
