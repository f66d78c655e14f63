//! The admin API under `/v1` (docs/DESIGN.md 4c "Admin API"): routing, Bearer auth with
//! scopes, the audit of writes and the JSON / problem+json replies. Every `/v1/*` path answers
//! 404 while the API is off (no admin token variable set), and 401 without a known token (the
//! token decides before the body's size does: an unauthenticated call is 401 whatever its
//! body). A `read` token's write is 403; every write is audited ([`super::audit`]).
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
//! | GET    | `/v1/keys`                | [`super::keys::list`]         |
//! | POST   | `/v1/keys`                | [`super::keys::create`]       |
//! | GET    | `/v1/keys/{id}`           | [`super::keys::get`]          |
//! | DELETE | `/v1/keys/{id}`           | [`super::keys::revoke`]       |
//! | POST   | `/v1/keys/{id}/rotate`    | [`super::keys::rotate`]       |
//! | GET    | `/v1/blocks`              | [`super::blocks::list`]       |
//! | GET    | `/v1/blocks/{type}/{id}`  | [`super::blocks::get`]        |
//! | PUT    | `/v1/blocks/{type}/{id}`  | [`super::blocks::put`]        |
//! | DELETE | `/v1/blocks/{type}/{id}`  | [`super::blocks::remove`]     |
//! | GET    | `/v1/tenants/{id}/limits` | [`super::limits::get`]        |
//! | PUT    | `/v1/tenants/{id}/limits` | [`super::limits::set`]        |
//! | DELETE | `/v1/tenants/{id}/limits` | [`super::limits::clear`]      |
//! | GET    | `/v1/rules/{rule}/keys/{key}/limits` | [`super::rule_limits::get`] |
//! | PUT    | `/v1/rules/{rule}/keys/{key}/limits` | [`super::rule_limits::set`] |
//! | DELETE | `/v1/rules/{rule}/keys/{key}/limits` | [`super::rule_limits::clear`] |
//!
//! (`{type}` is one route per type, `ip`, `tenant` and `key`, so the document can state each
//! value's form; another type is a 400 naming `type`.)

use super::audit::{self, Change};
use super::reply::{json_reply, problem_reply, raw_json_reply};
use super::{blocks, config_view, explain, keys, limits, rule_limits, status, tenants};
use crate::config::AdminScope;
use crate::identity::admin_token::Caller;
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
    Keys,
    KeyCreate,
    Key,
    KeyRevoke,
    KeyRotate,
    Blocks,
    Block,
    BlockPut,
    BlockRemove,
    Limits,
    LimitsSet,
    LimitsClear,
    RuleLimits,
    RuleLimitsSet,
    RuleLimitsClear,
}

impl Endpoint {
    /// The operation's name when the endpoint writes (the audit log's `operation` and the
    /// metric's label); `None` for reads (`POST /v1/explain` changes nothing: a read).
    pub fn write_operation(self) -> Option<&'static str> {
        match self {
            Endpoint::Config
            | Endpoint::Explain
            | Endpoint::OpenApi
            | Endpoint::Status
            | Endpoint::Tenant
            | Endpoint::WhoAmI
            | Endpoint::Keys
            | Endpoint::Key
            | Endpoint::Blocks
            | Endpoint::Block
            | Endpoint::Limits
            | Endpoint::RuleLimits => None,
            Endpoint::TenantReset => Some("tenant_reset"),
            Endpoint::KeyCreate => Some("key_create"),
            Endpoint::KeyRevoke => Some("key_revoke"),
            Endpoint::KeyRotate => Some("key_rotate"),
            Endpoint::BlockPut => Some("block_put"),
            Endpoint::BlockRemove => Some("block_remove"),
            Endpoint::LimitsSet => Some("limits_set"),
            Endpoint::LimitsClear => Some("limits_clear"),
            Endpoint::RuleLimitsSet => Some("rule_limits_set"),
            Endpoint::RuleLimitsClear => Some("rule_limits_clear"),
        }
    }
}

/// Every route of the API: method, path template (`{id}` stands for one path segment, the
/// tenant id, key id, block value or rule key; `{rule}` for a rule's name, read by
/// [`rule_segment`]) and what answers it. Nothing else under `/v1` is served.
pub const ROUTES: &[(&str, &str, Endpoint)] = &[
    ("GET", "/v1/config", Endpoint::Config),
    ("POST", "/v1/explain", Endpoint::Explain),
    ("GET", "/v1/openapi.json", Endpoint::OpenApi),
    ("GET", "/v1/status", Endpoint::Status),
    ("GET", "/v1/tenants/{id}", Endpoint::Tenant),
    ("POST", "/v1/tenants/{id}/reset", Endpoint::TenantReset),
    ("GET", "/v1/whoami", Endpoint::WhoAmI),
    ("GET", "/v1/keys", Endpoint::Keys),
    ("POST", "/v1/keys", Endpoint::KeyCreate),
    ("GET", "/v1/keys/{id}", Endpoint::Key),
    ("DELETE", "/v1/keys/{id}", Endpoint::KeyRevoke),
    ("POST", "/v1/keys/{id}/rotate", Endpoint::KeyRotate),
    ("GET", "/v1/blocks", Endpoint::Blocks),
    ("GET", "/v1/blocks/ip/{id}", Endpoint::Block),
    ("PUT", "/v1/blocks/ip/{id}", Endpoint::BlockPut),
    ("DELETE", "/v1/blocks/ip/{id}", Endpoint::BlockRemove),
    ("GET", "/v1/blocks/tenant/{id}", Endpoint::Block),
    ("PUT", "/v1/blocks/tenant/{id}", Endpoint::BlockPut),
    ("DELETE", "/v1/blocks/tenant/{id}", Endpoint::BlockRemove),
    ("GET", "/v1/blocks/key/{id}", Endpoint::Block),
    ("PUT", "/v1/blocks/key/{id}", Endpoint::BlockPut),
    ("DELETE", "/v1/blocks/key/{id}", Endpoint::BlockRemove),
    ("GET", "/v1/tenants/{id}/limits", Endpoint::Limits),
    ("PUT", "/v1/tenants/{id}/limits", Endpoint::LimitsSet),
    ("DELETE", "/v1/tenants/{id}/limits", Endpoint::LimitsClear),
    (
        "GET",
        "/v1/rules/{rule}/keys/{id}/limits",
        Endpoint::RuleLimits,
    ),
    (
        "PUT",
        "/v1/rules/{rule}/keys/{id}/limits",
        Endpoint::RuleLimitsSet,
    ),
    (
        "DELETE",
        "/v1/rules/{rule}/keys/{id}/limits",
        Endpoint::RuleLimitsClear,
    ),
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
            (Some("{rule}"), Some(_)) => {}
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

/// The tenant id of a `/v1/tenants/{id}/limits` path ([`tenant_from_segment`], at most
/// [`keys::MAX_TENANT_CHARS`] characters as for a live key); a bad one is a 400 naming the
/// field `tenant`.
fn limits_tenant(segment: &str) -> Result<String, Problem> {
    let field = |p: Problem| p.with("field", serde_json::json!("tenant"));
    let id = tenant_from_segment(segment).map_err(field)?;
    if id.chars().count() > keys::MAX_TENANT_CHARS {
        let detail = format!(
            "tenant id in the path has more than {} characters",
            keys::MAX_TENANT_CHARS
        );
        return Err(field(Problem::status(400, detail)));
    }
    Ok(id)
}

/// The `{rule}` segment of a `/v1/rules/{rule}/keys/{key}/limits` path (still
/// percent-encoded).
fn rule_segment(path: &str) -> &str {
    path.split('/').nth(3).unwrap_or_default()
}

/// The `tier` parameter of a query string (percent-decoded; other parameters are ignored).
/// Errors: a value that is not percent-encoded UTF-8, or an empty one (400).
pub fn tier_param(query: Option<&str>) -> Result<Option<String>, Problem> {
    match super::reply::query_param(query, "tier")? {
        Some(t) if t.is_empty() => Err(Problem::status(400, "tier: empty; name a tier of tiers:")),
        other => Ok(other),
    }
}

/// The snapshot to answer a `/v1` request from and the caller, when the API is on and
/// `headers` carry a known token; otherwise the 404 (API off) or 401 (with `WWW-Authenticate`)
/// reply, which wins over a body over [`MAX_BODY_BYTES`].
#[allow(clippy::result_large_err)]
pub fn admit(
    app: &App,
    headers: &HeaderMap,
) -> Result<(Arc<Snapshot>, Caller), Response<Full<Bytes>>> {
    let snap = app.snapshot.load_full();
    let Some(tokens) = &snap.admin_token else {
        let p = Problem::status(404, "the admin API is off (admin.token_env, admin.tokens)");
        return Err(problem_reply(&p, &[]));
    };
    let authorization = headers
        .get(http::header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match tokens.check(authorization) {
        Ok(caller) => Ok((snap, caller)),
        Err(denied) => {
            let p = Problem::status(401, "this admin API needs an admin Bearer token");
            Err(problem_reply(
                &p,
                &[("WWW-Authenticate", denied.www_authenticate())],
            ))
        }
    }
}

/// The type segment of a `/v1/blocks/<type>/{id}` path.
fn type_segment(path: &str) -> &str {
    path.split('/').nth(3).unwrap_or_default()
}

/// The target of a write for the audit log: the id segment as sent (still percent-encoded),
/// after its type for a block.
fn audit_target(endpoint: Endpoint, path: &str, id: Option<&str>) -> String {
    match endpoint {
        Endpoint::BlockPut | Endpoint::BlockRemove => {
            format!("{}:{}", type_segment(path), id.unwrap_or(""))
        }
        _ => id.unwrap_or("").to_string(),
    }
}

/// Answers one admitted `/v1` request (see [`admit`]) from `caller`: a write by a `read`
/// token is a 403 problem; every write is audited. `body` is read only by the routes that take
/// one.
pub async fn handle(
    app: &App,
    snap: &Snapshot,
    caller: &Caller,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let routed = route(method, path);
    if routed == Routed::Found(Endpoint::WhoAmI, None) {
        return json_reply(200, &status::whoami(caller.scope));
    }
    let Routed::Found(endpoint, id) = routed else {
        return reply(answer(app, snap, routed, path, query, body).await);
    };
    let Some(operation) = endpoint.write_operation() else {
        return reply(answer(app, snap, routed, path, query, body).await);
    };
    let target = audit_target(endpoint, path, id);
    let target = target.as_str();
    if caller.scope < AdminScope::Write {
        let detail = format!(
            "the token {:?} has the read scope; {operation} needs a write token",
            &*caller.name
        );
        let p = Problem::status(403, detail);
        audit::record(caller, operation, target, 403, true, None, Some(&p.detail));
        return problem_reply(&p, &[]);
    }
    let result = write(app, snap, endpoint, path, id, query, body).await;
    match &result {
        Ok((_, change)) => audit::record(caller, operation, target, 200, false, Some(change), None),
        Err(p) => audit::record(
            caller,
            operation,
            target,
            p.status,
            false,
            None,
            Some(&p.detail),
        ),
    }
    reply(Answer::Json(result.map(|(v, _)| v)))
}

/// What a route answered.
enum Answer {
    Json(Result<serde_json::Value, Problem>),
    Raw(Response<Full<Bytes>>),
}

fn reply(answer: Answer) -> Response<Full<Bytes>> {
    match answer {
        Answer::Json(Ok(v)) => json_reply(200, &v),
        Answer::Json(Err(p)) => problem_reply(&p, &[]),
        Answer::Raw(r) => r,
    }
}

/// Runs one write endpoint: its answer and what it changed.
async fn write(
    app: &App,
    snap: &Snapshot,
    endpoint: Endpoint,
    path: &str,
    id: Option<&str>,
    _query: Option<&str>,
    body: Bytes,
) -> Result<(serde_json::Value, Change), Problem> {
    let id = id.unwrap_or_default();
    match endpoint {
        Endpoint::BlockPut => blocks::put(snap, type_segment(path), id, &body).await,
        Endpoint::BlockRemove => blocks::remove(snap, type_segment(path), id).await,
        Endpoint::KeyCreate => keys::create(snap, &body).await,
        Endpoint::KeyRevoke => keys::revoke(snap, id).await,
        Endpoint::KeyRotate => keys::rotate(snap, id, &body).await,
        Endpoint::LimitsSet => limits::set(snap, &limits_tenant(id)?, &body).await,
        Endpoint::LimitsClear => limits::clear(snap, &limits_tenant(id)?).await,
        Endpoint::RuleLimitsSet => rule_limits::set(snap, rule_segment(path), id, &body).await,
        Endpoint::RuleLimitsClear => rule_limits::clear(snap, rule_segment(path), id).await,
        Endpoint::TenantReset => {
            let t = tenant_from_segment(id)?;
            let v = tenants::reset(app, snap, &t).await?;
            let deleted = v["deleted_keys"].clone();
            let change = Change::new("tenant_reset", t).states(
                serde_json::json!({"keys": deleted}),
                serde_json::json!({"keys": 0}),
            );
            Ok((v, change))
        }
        _ => Err(Problem::status(404, "no such admin resource")),
    }
}

/// Answers one read (or an unrouted request).
async fn answer(
    app: &App,
    snap: &Snapshot,
    routed: Routed<'_>,
    path: &str,
    query: Option<&str>,
    body: Bytes,
) -> Answer {
    let result = match routed {
        Routed::Found(Endpoint::Config, _) => Ok(config_view::view(&snap.config)),
        Routed::Found(Endpoint::OpenApi, _) => return Answer::Raw(raw_json_reply(OPENAPI_JSON)),
        Routed::Found(Endpoint::Status, _) => Ok(status::status(app, snap)),
        Routed::Found(Endpoint::WhoAmI, _) => Err(Problem::status(500, "whoami needs its caller")),
        Routed::Found(Endpoint::Explain, _) => explain::explain(app, snap, &body).await,
        Routed::Found(Endpoint::Tenant, id) => match tenant_from_segment(id.unwrap_or_default()) {
            Ok(t) => match tier_param(query) {
                Ok(tier) => tenants::get(app, snap, &t, tier.as_deref()).await,
                Err(p) => Err(p),
            },
            Err(p) => Err(p),
        },
        Routed::Found(Endpoint::Keys, _) => keys::list(snap, query).await,
        Routed::Found(Endpoint::Key, id) => keys::get(snap, id.unwrap_or_default()).await,
        Routed::Found(Endpoint::Blocks, _) => blocks::list(snap, query).await,
        Routed::Found(Endpoint::Block, id) => {
            blocks::get(snap, type_segment(path), id.unwrap_or_default()).await
        }
        Routed::Found(Endpoint::Limits, id) => match limits_tenant(id.unwrap_or_default()) {
            Ok(t) => limits::get(snap, &t).await,
            Err(p) => Err(p),
        },
        Routed::Found(Endpoint::RuleLimits, id) => {
            rule_limits::get(snap, rule_segment(path), id.unwrap_or_default()).await
        }
        Routed::Found(
            Endpoint::TenantReset
            | Endpoint::KeyCreate
            | Endpoint::KeyRevoke
            | Endpoint::KeyRotate
            | Endpoint::BlockPut
            | Endpoint::BlockRemove
            | Endpoint::LimitsSet
            | Endpoint::LimitsClear
            | Endpoint::RuleLimitsSet
            | Endpoint::RuleLimitsClear,
            _,
        ) => Err(Problem::status(500, "a write routed as a read")),
        Routed::MethodNotAllowed(allow) => return Answer::Raw(method_not_allowed(&allow)),
        Routed::NotFound => Err(blocks::unknown_type(path)
            .unwrap_or_else(|| Problem::status(404, "no such admin resource"))),
    };
    Answer::Json(result)
}

#[cfg(test)]
mod tests;
