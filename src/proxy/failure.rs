//! What a request that could not be proxied is answered with (Pingora's `fail_to_proxy`).

use crate::response::Problem;
use crate::tls::upstream::tls_failure_detail;
use pingora::{Error, ErrorSource, ErrorType};

/// The problem of a request that could not be proxied: a 502 or 504 names the route's upstream
/// by its config name (`upstreams.<name>`), in `detail` and as the `upstream` member, never a
/// backend's address; other statuses are answered as they are.
pub fn upstream_problem(status: u16, detail: String, upstream: Option<&str>) -> Problem {
    match upstream {
        Some(name) if matches!(status, 502 | 504) => {
            Problem::status(status, format!("upstream \"{name}\": {detail}"))
                .with("upstream", serde_json::Value::String(name.to_string()))
        }
        _ => Problem::status(status, detail),
    }
}

/// The status and `detail` of a request that could not be proxied: its own status for an
/// `HTTPStatus` error (e.g. 413 while streaming the body), 408 when the client's body stopped
/// arriving (a downstream read timeout), 504 for upstream timeouts, 502 for an
/// upstream that cannot be reached, fails TLS or fails otherwise, 400 for a malformed request,
/// and 0 (no answer possible) when the client's connection failed.
pub fn failure_status(e: &Error) -> (u16, String) {
    use ErrorType::*;
    let upstream = e.esource() == &ErrorSource::Upstream;
    match e.etype() {
        HTTPStatus(code) => {
            let detail = e.context.as_ref().map(|c| c.as_str().to_string());
            (*code, detail.unwrap_or_default())
        }
        ReadTimedout if e.esource() == &ErrorSource::Downstream => (
            408,
            "no request body bytes arrived in time (server.body_idle_timeout)".to_string(),
        ),
        ConnectTimedout | ReadTimedout | WriteTimedout | TLSHandshakeTimedout => {
            (504, "the upstream did not answer in time".to_string())
        }
        _ if upstream => match tls_failure_detail(e) {
            Some(detail) => (502, detail),
            None => (
                502,
                "the upstream could not be reached or failed".to_string(),
            ),
        },
        WriteError | ReadError | ConnectionClosed if e.esource() == &ErrorSource::Downstream => {
            (0, String::new())
        }
        _ if e.esource() == &ErrorSource::Downstream => (400, "malformed request".to_string()),
        _ => (502, "the request could not be proxied".to_string()),
    }
}

#[cfg(test)]
mod tests;
