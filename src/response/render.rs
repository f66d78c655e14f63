//! Writing a response tollgate makes itself: a problem+json body with its headers, either on a
//! Pingora session or as raw HTTP/1.1 bytes (request-head errors, before a session exists); for
//! a gRPC call, the same refusal as a trailers-only gRPC response ([`send_refusal`]).

use super::grpc::{self, GrpcStatus};
use super::Problem;
use pingora::http::ResponseHeader;
use pingora::protocols::http::ServerSession;
use pingora::proxy::Session;

/// Writes a refusal the way the client can read it: a trailers-only gRPC response
/// ([`send_grpc_status`]) when the request is a gRPC call (`content-type: application/grpc*`),
/// else problem+json ([`send_problem`]). Same arguments and errors as [`send_problem`].
pub async fn send_refusal(
    session: &mut Session,
    problem: &Problem,
    request_id: &str,
    headers: &[(&'static str, String)],
) -> pingora::Result<()> {
    let content_type = session.req_header().headers.get(http::header::CONTENT_TYPE);
    match content_type
        .filter(|v| grpc::is_grpc(v.as_bytes()))
        .cloned()
    {
        Some(content_type) => {
            let retry_after_s = headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("Retry-After"))
                .and_then(|(_, value)| value.parse().ok());
            let status = GrpcStatus::of(problem, retry_after_s);
            send_grpc_status(session, &status, content_type, request_id, headers).await
        }
        None => send_problem(session, problem, request_id, headers).await,
    }
}

/// Writes a trailers-only gRPC response (gRPC over HTTP/2, "Responses"): one HEADERS frame that
/// ends the stream, with `:status` 200, the request's `content-type`, the [`GrpcStatus`] fields,
/// `x-request-id` and `headers` (rate-limit fields and `Retry-After` as metadata). On HTTP/1.1,
/// which gRPC does not use, the same fields with `content-length: 0`.
pub async fn send_grpc_status(
    session: &mut Session,
    status: &GrpcStatus,
    content_type: http::HeaderValue,
    request_id: &str,
    headers: &[(&'static str, String)],
) -> pingora::Result<()> {
    let mut h = ResponseHeader::build(200, Some(6 + headers.len()))?;
    h.insert_header("content-type", content_type)?;
    for (name, value) in status.fields() {
        h.insert_header(name, value)?;
    }
    h.insert_header("x-request-id", request_id)?;
    for (name, value) in headers {
        h.append_header(*name, value.as_str())?;
    }
    match session.as_downstream_mut() {
        // Pingora's proxy session writes h2 headers without END_STREAM; the stream's own
        // writer can end it with the headers, as trailers-only requires.
        ServerSession::H2(h2) => h2.write_response_header(Box::new(h), true),
        _ => {
            h.insert_header("content-length", "0")?;
            session.write_response_header(Box::new(h), false).await?;
            session.write_response_body(None, true).await
        }
    }
}

/// Writes a complete problem+json response (header with Content-Length, then body).
///
/// `headers` are added as given (e.g. `Retry-After`, `WWW-Authenticate`, rate-limit fields).
/// Errors are pingora write errors (the client went away); callers treat them as "responded".
pub async fn send_problem(
    session: &mut Session,
    problem: &Problem,
    request_id: &str,
    headers: &[(&'static str, String)],
) -> pingora::Result<()> {
    let body = problem.to_body(request_id);
    let mut h = ResponseHeader::build(problem.status, Some(4 + headers.len()))?;
    h.insert_header("Content-Type", "application/problem+json")?;
    h.insert_header("Content-Length", body.len().to_string())?;
    h.insert_header("X-Request-Id", request_id)?;
    h.insert_header("Cache-Control", "no-store")?;
    for (name, value) in headers {
        h.append_header(*name, value.as_str())?;
    }
    session.write_response_header(Box::new(h), false).await?;
    session.write_response_body(Some(body), true).await
}

/// A complete HTTP/1.1 problem+json response as bytes, with `Connection: close`, for answers
/// written straight to a connection before Pingora has a session (request-head errors).
pub fn problem_response_bytes(problem: &Problem, request_id: &str) -> Vec<u8> {
    let body = problem.to_body(request_id);
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/problem+json\r\nContent-Length: {}\r\n\
         X-Request-Id: {request_id}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        problem.status,
        problem.title,
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}
