//! The admin API under `/v1` (docs/DESIGN.md 4c "Admin API"): routing, Bearer auth and the
//! JSON / problem+json replies. Every `/v1/*` path answers 404 while the API is off
//! (`admin.token_env` unset, or its variable unset or empty), and 401 without the right token.
//!
//! | method | path                      | handler                       |
//! |--------|---------------------------|-------------------------------|
//! | GET    | `/v1/tenants/{id}`        | [`super::tenants::get`]       |
//! | POST   | `/v1/tenants/{id}/reset`  | [`super::tenants::reset`]     |
//! | POST   | `/v1/explain`             | [`super::explain::explain`]   |
//! | GET    | `/v1/config`              | [`super::config_view::view`]  |

use super::{config_view, explain, tenants};
use crate::response::Problem;
use crate::snapshot::App;
use crate::tenant_id;
use bytes::Bytes;
use http::{HeaderMap, Method};
use http_body_util::Full;
use hyper::Response;
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};

/// Largest request body the API reads (`POST /v1/explain`), bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A JSON reply.
pub fn json_reply(status: u16, body: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("Content-Type", "application/json")
        .header("Cache-Control", "no-store")
        .body(Full::new(Bytes::from(body.to_string())))
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

fn not_found() -> Problem {
    Problem::status(404, "no such admin resource")
}

fn method_not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let p = Problem::status(405, format!("this resource accepts {allow} only"));
    problem_reply(&p, &[("Allow", allow)])
}

/// A tenant id from a path segment: percent-decoded UTF-8, then valid by
/// [`tenant_id::validate`] (or an anonymous `ip:<address>` id). Errors: a 400 problem.
pub fn tenant_from_segment(segment: &str) -> Result<String, Problem> {
    let bad = |why: String| Problem::status(400, format!("tenant id in the path {why}"));
    let id = percent_decode_str(segment)
        .decode_utf8()
        .map_err(|_| bad("is not percent-encoded UTF-8".into()))?
        .into_owned();
    if let Some(addr) = id.strip_prefix(tenant_id::ANONYMOUS_PREFIX) {
        return match addr.parse::<std::net::IpAddr>() {
            Ok(_) => Ok(id),
            Err(_) => Err(bad("starts with \"ip:\" but is not ip:<address>".into())),
        };
    }
    tenant_id::validate(&id).map_err(|e| bad(e.to_string()))?;
    Ok(id)
}

/// Answers one `/v1` request. `body` is read only for methods that take one.
pub async fn handle(
    app: &App,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let snap = app.snapshot.load_full();
    let Some(token) = &snap.admin_token else {
        let p = Problem::status(404, "the admin API is off (admin.token_env)");
        return problem_reply(&p, &[]);
    };
    let authorization = headers
        .get(http::header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if let Err(denied) = token.check(authorization) {
        let p = Problem::status(401, "this admin API needs the admin Bearer token");
        return problem_reply(&p, &[("WWW-Authenticate", denied.www_authenticate())]);
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let result = match segments[..] {
        ["v1", "config"] => match *method {
            Method::GET => Ok(config_view::view(&snap.config)),
            _ => return method_not_allowed("GET"),
        },
        ["v1", "explain"] => match *method {
            Method::POST => explain::explain(app, &snap, &body).await,
            _ => return method_not_allowed("POST"),
        },
        ["v1", "tenants", id] => match *method {
            Method::GET => match tenant_from_segment(id) {
                Ok(t) => tenants::get(app, &snap, &t).await,
                Err(p) => Err(p),
            },
            _ => return method_not_allowed("GET"),
        },
        ["v1", "tenants", id, "reset"] => match *method {
            Method::POST => match tenant_from_segment(id) {
                Ok(t) => tenants::reset(app, &snap, &t).await,
                Err(p) => Err(p),
            },
            _ => return method_not_allowed("POST"),
        },
        _ => Err(not_found()),
    };
    match result {
        Ok(v) => json_reply(200, &v),
        Err(p) => problem_reply(&p, &[]),
    }
}

/// A 503 problem for a Redis fault met by an admin call.
pub fn store_problem(fault: crate::store::redis::client::RedisFault) -> Problem {
    Problem::status(
        503,
        format!(
            "the quota store did not answer ({}); nothing was changed",
            fault.as_str()
        ),
    )
    .with("reason", json!(fault.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_segments() {
        assert_eq!(tenant_from_segment("acme").unwrap(), "acme");
        assert_eq!(tenant_from_segment("a%2Fb%20c").unwrap(), "a/b c");
        assert_eq!(tenant_from_segment("ip:10.0.0.1").unwrap(), "ip:10.0.0.1");
        for bad in ["", "%20acme", "a%0Ab", "%FF", "ip:nope"] {
            assert_eq!(tenant_from_segment(bad).unwrap_err().status, 400, "{bad}");
        }
    }
}
