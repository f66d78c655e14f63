//! The admin API under `/v1` (docs/DESIGN.md 4c "Admin API"): routing, Bearer auth and the
//! JSON / problem+json replies. Every `/v1/*` path answers 404 while the API is off
//! (`admin.token_env` unset, or its variable unset or empty), and 401 without the right token
//! (the token decides before the body's size does: an unauthenticated call is 401 whatever its
//! body).
//!
//! The routes are the table [`ROUTES`]; the OpenAPI 3.1 document `docs/openapi.json` (served
//! as `GET /v1/openapi.json`, see docs/admin-api.md#openapi-document) lists exactly these, which
//! the unit tests hold.
//!
//! | method | path                      | handler                       |
//! |--------|---------------------------|-------------------------------|
//! | GET    | `/v1/tenants/{id}`        | [`super::tenants::get`]       |
//! | POST   | `/v1/tenants/{id}/reset`  | [`super::tenants::reset`]     |
//! | POST   | `/v1/explain`             | [`super::explain::explain`]   |
//! | GET    | `/v1/config`              | [`super::config_view::view`]  |
//! | GET    | `/v1/status`              | [`super::status::status`]     |
//! | GET    | `/v1/whoami`              | [`super::status::whoami`]     |
//! | GET    | `/v1/openapi.json`        | [`OPENAPI_JSON`], verbatim    |

use super::reply::{json_reply, problem_reply, raw_json_reply};
use super::{config_view, explain, status, tenants};
use crate::response::Problem;
use crate::snapshot::{App, Snapshot};
use crate::tenant_id;
use bytes::Bytes;
use http::{HeaderMap, Method};
use http_body_util::Full;
use hyper::Response;
use percent_encoding::percent_decode_str;
use std::sync::Arc;

/// Largest request body the API reads (`POST /v1/explain`), bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The OpenAPI 3.1 document of this API (`docs/openapi.json`), served as is.
pub const OPENAPI_JSON: &str = include_str!("../../docs/openapi.json");

/// What a route answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Config,
    Explain,
    OpenApi,
    Status,
    Tenant,
    TenantReset,
    WhoAmI,
}

/// Every route of the API: method, path template (`{id}` stands for one path segment, the
/// tenant id) and what answers it. Nothing else under `/v1` is served.
pub const ROUTES: &[(&str, &str, Endpoint)] = &[
    ("GET", "/v1/config", Endpoint::Config),
    ("POST", "/v1/explain", Endpoint::Explain),
    ("GET", "/v1/openapi.json", Endpoint::OpenApi),
    ("GET", "/v1/status", Endpoint::Status),
    ("GET", "/v1/tenants/{id}", Endpoint::Tenant),
    ("POST", "/v1/tenants/{id}/reset", Endpoint::TenantReset),
    ("GET", "/v1/whoami", Endpoint::WhoAmI),
];

/// Where [`route`] sends a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed<'a> {
    /// A route of [`ROUTES`], with the raw (still percent-encoded) `{id}` segment if it has one.
    Found(Endpoint, Option<&'a str>),
    /// The path is a route's but not the method: the methods it accepts (`Allow`).
    MethodNotAllowed(String),
    NotFound,
}

/// The `{id}` segment when `path` has the shape of `template`: `Some(None)` for a template
/// without one, `None` when the shapes differ.
fn matches<'a>(template: &str, path: &'a str) -> Option<Option<&'a str>> {
    let mut t = template.split('/');
    let mut p = path.split('/');
    let mut id = None;
    loop {
        match (t.next(), p.next()) {
            (None, None) => return Some(id),
            (Some("{id}"), Some(segment)) => id = Some(segment),
            (Some(a), Some(b)) if a == b => {}
            _ => return None,
        }
    }
}

/// Routes `method path` by [`ROUTES`].
pub fn route<'a>(method: &Method, path: &'a str) -> Routed<'a> {
    let mut allow: Vec<&str> = Vec::new();
    for (m, template, endpoint) in ROUTES {
        if let Some(id) = matches(template, path) {
            if method.as_str() == *m {
                return Routed::Found(*endpoint, id);
            }
            allow.push(m);
        }
    }
    if allow.is_empty() {
        Routed::NotFound
    } else {
        Routed::MethodNotAllowed(allow.join(", "))
    }
}

fn method_not_allowed(allow: &str) -> Response<Full<Bytes>> {
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

/// The `tier` parameter of a query string (percent-decoded; other parameters are ignored).
/// Errors: a value that is not percent-encoded UTF-8, or an empty one (400).
pub fn tier_param(query: Option<&str>) -> Result<Option<String>, Problem> {
    let Some(value) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("tier="))
    else {
        return Ok(None);
    };
    let tier = percent_decode_str(&value.replace('+', " "))
        .decode_utf8()
        .map_err(|_| Problem::status(400, "tier: not percent-encoded UTF-8"))?
        .into_owned();
    if tier.is_empty() {
        return Err(Problem::status(400, "tier: empty; name a tier of tiers:"));
    }
    Ok(Some(tier))
}

/// The snapshot to answer a `/v1` request from, when the API is on and `headers` carry the
/// token; otherwise the 404 (API off) or 401 (with `WWW-Authenticate`) reply, which wins over
/// a body over [`MAX_BODY_BYTES`].
#[allow(clippy::result_large_err)]
pub fn admit(app: &App, headers: &HeaderMap) -> Result<Arc<Snapshot>, Response<Full<Bytes>>> {
    let snap = app.snapshot.load_full();
    let Some(token) = &snap.admin_token else {
        let p = Problem::status(404, "the admin API is off (admin.token_env)");
        return Err(problem_reply(&p, &[]));
    };
    let authorization = headers
        .get(http::header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if let Err(denied) = token.check(authorization) {
        let p = Problem::status(401, "this admin API needs the admin Bearer token");
        return Err(problem_reply(
            &p,
            &[("WWW-Authenticate", denied.www_authenticate())],
        ));
    }
    Ok(snap)
}

/// Answers one admitted `/v1` request (see [`admit`]). `body` is read only by the routes that
/// take one.
pub async fn handle(
    app: &App,
    snap: &Snapshot,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let result = match route(method, path) {
        Routed::Found(Endpoint::Config, _) => Ok(config_view::view(&snap.config)),
        Routed::Found(Endpoint::OpenApi, _) => return raw_json_reply(OPENAPI_JSON),
        Routed::Found(Endpoint::Status, _) => Ok(status::status(app, snap)),
        Routed::Found(Endpoint::WhoAmI, _) => Ok(status::whoami()),
        Routed::Found(Endpoint::Explain, _) => explain::explain(app, snap, &body).await,
        Routed::Found(Endpoint::Tenant, id) => match tenant_from_segment(id.unwrap_or_default()) {
            Ok(t) => match tier_param(query) {
                Ok(tier) => tenants::get(app, snap, &t, tier.as_deref()).await,
                Err(p) => Err(p),
            },
            Err(p) => Err(p),
        },
        Routed::Found(Endpoint::TenantReset, id) => {
            match tenant_from_segment(id.unwrap_or_default()) {
                Ok(t) => tenants::reset(app, snap, &t).await,
                Err(p) => Err(p),
            }
        }
        Routed::MethodNotAllowed(allow) => return method_not_allowed(&allow),
        Routed::NotFound => Err(Problem::status(404, "no such admin resource")),
    };
    match result {
        Ok(v) => json_reply(200, &v),
        Err(p) => problem_reply(&p, &[]),
    }
}

#[cfg(test)]
mod tests;
