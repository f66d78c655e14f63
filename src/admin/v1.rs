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

use super::reply::{json_reply, problem_reply};
use super::{config_view, explain, tenants};
use crate::response::Problem;
use crate::snapshot::App;
use crate::tenant_id;
use bytes::Bytes;
use http::{HeaderMap, Method};
use http_body_util::Full;
use hyper::Response;
use percent_encoding::percent_decode_str;

/// Largest request body the API reads (`POST /v1/explain`), bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

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
