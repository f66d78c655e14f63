//! The admin listener's replies: JSON, RFC 9457 problem+json, and the problem for a quota-store
//! fault met by an admin call; and the one query-string reader of the admin routes.

use crate::response::Problem;
use crate::store::redis::client::RedisFault;
use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};

/// A JSON reply.
pub fn json_reply(status: u16, body: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("Content-Type", "application/json")
        .header("Cache-Control", "no-store")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_default()
}

/// A 200 reply of JSON text kept as is (the OpenAPI document).
pub fn raw_json_reply(body: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(200)
        .header("Content-Type", "application/json")
        .header("Cache-Control", "no-store")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap_or_default()
}

/// An RFC 9457 problem+json reply with `headers`.
pub fn problem_reply(p: &Problem, headers: &[(&str, &str)]) -> Response<Full<Bytes>> {
    let id = crate::http::request_id::generate();
    let mut b = Response::builder()
        .status(p.status)
        .header("Content-Type", "application/problem+json")
        .header("Cache-Control", "no-store");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Full::new(p.to_body(&id))).unwrap_or_default()
}

/// A 503 problem for a Redis fault met by an admin call.
pub fn store_problem(fault: RedisFault) -> Problem {
    Problem::status(
        503,
        format!(
            "the quota store did not answer ({}); nothing was changed",
            fault.as_str()
        ),
    )
    .with("reason", json!(fault.as_str()))
}

/// The first value of parameter `name` in a query string, percent-decoded (`+` is a space).
/// Errors: a value that is not percent-encoded UTF-8 (400 naming the parameter).
pub fn query_param(query: Option<&str>, name: &str) -> Result<Option<String>, Problem> {
    let Some(value) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    else {
        return Ok(None);
    };
    percent_decode_str(&value.replace('+', " "))
        .decode_utf8()
        .map(|v| Some(v.into_owned()))
        .map_err(|_| Problem::status(400, format!("{name}: not percent-encoded UTF-8")))
}
