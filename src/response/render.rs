//! Writing a response tollgate makes itself: a problem+json body with its headers, either on a
//! Pingora session or as raw HTTP/1.1 bytes (request-head errors, before a session exists).

use super::Problem;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;

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
