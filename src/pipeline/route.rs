//! Stage 2, route: the request target normalised (or refused), then host + longest path prefix
//! → route; and the route's body size limit on the declared `Content-Length`.

use super::{Layer, Outcome, Rejection};
use crate::config::RouteSettings;
use crate::http::{self, body, target};
use crate::response::Problem;
use crate::snapshot::Snapshot;
use pingora::http::RequestHeader;
use serde_json::json;

/// Normalises `req`'s target in place (what the backend receives) and finds its route: the
/// index into `snap.config.routes`. Errors: 400 `bad_target` (a target that cannot be
/// normalised safely, or whose `;` parameters change its route, with `reason`), 404 `not_found`.
pub fn resolve(snap: &Snapshot, req: &mut RequestHeader) -> Result<usize, Rejection> {
    if let Some(found) = resolve_plain(snap, req) {
        return found;
    }
    let target = target::normalise_target(req.raw_path()).map_err(bad_target)?;
    // Matched before the request line changes, on the host borrowed from the head; a target
    // that cannot be applied is refused before what the match found is looked at.
    let found = snap
        .router
        .find(&http::routing_host(req, &target), &target.path);
    if http::apply_target(req, &target).is_err() {
        return Err(bad_target(target::TargetError::UnsupportedForm));
    }
    routed(found)
}

/// [`resolve`] of the usual request, whose target the rules leave as it is and which has no
/// authority besides `Host` (HTTP/1 origin-form): routed on the head as it came, with nothing to
/// rewrite ([`target::plain_path`]; what `normalise_target` and `apply_target` would do is
/// nothing). `None` for every other request, which [`resolve`] takes the full way.
fn resolve_plain(snap: &Snapshot, req: &RequestHeader) -> Option<Result<usize, Rejection>> {
    if req.uri.authority().is_some() {
        return None;
    }
    let raw = req.raw_path();
    let end = raw.iter().position(|&b| b == b'?').unwrap_or(raw.len());
    let path = target::plain_path(&raw[..end])?;
    let host = req
        .headers
        .get(::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(http::normalize_host)
        .unwrap_or_default();
    Some(routed(snap.router.find(&host, path)))
}

/// The route the router found: 400 `ambiguous_parameters`, 404 `not_found`, or its index.
fn routed(
    found: Result<Option<usize>, crate::routing::AmbiguousParameters>,
) -> Result<usize, Rejection> {
    let found = found.map_err(|_| bad_target(target::TargetError::AmbiguousParameters))?;
    found.ok_or_else(|| {
        let p = Problem::status(404, "no route matches this host and path");
        Rejection::new(Layer::Route, Outcome::NotFound, p)
    })
}

/// 400 `malformed` (reason `method_case`) for a method with a lower-case letter
/// ([`http::method::has_lower_case`]): a backend that upper-cases it would run the view of a
/// method the limits never saw. Checked before routing, on HTTP/1.1, HTTP/2 and gRPC alike.
pub fn check_method(req: &RequestHeader) -> Result<(), Rejection> {
    if !http::method::has_lower_case(req.method.as_str()) {
        return Ok(());
    }
    let p = Problem::status(
        400,
        "the request method has lower-case letters; methods are sent in upper case (GET, POST)",
    )
    .with("reason", json!("method_case"));
    Err(Rejection::new(Layer::Http, Outcome::Malformed, p))
}

/// The route `req` will take, without changing `req` (`None`: its target is refused or no
/// route matches). For decisions taken before routing that depend on the route (the edge in a
/// shadow route).
pub fn peek<'a>(snap: &'a Snapshot, req: &RequestHeader) -> Option<&'a RouteSettings> {
    let target = target::normalise_target(req.raw_path()).ok()?;
    let host = http::routing_host(req, &target);
    let index = snap.router.find(&host, &target.path).ok()??;
    snap.config.routes.get(index)
}

/// The 400 for a target that cannot be normalised safely.
pub fn bad_target(why: target::TargetError) -> Rejection {
    let p = Problem::status(400, why.detail()).with("reason", json!(why.as_str()));
    Rejection::new(Layer::Http, Outcome::BadTarget, p)
}

/// 413 when the declared `Content-Length` is over `route.max_body_bytes`.
pub fn check_body(route: &RouteSettings, req: &RequestHeader) -> Result<(), Rejection> {
    if route.max_body_bytes.is_none() {
        return Ok(());
    }
    let declared = req
        .headers
        .get(::http::header::CONTENT_LENGTH)
        .map(|v| v.as_bytes());
    if body::declared_too_large(declared, route.max_body_bytes) {
        return Err(body_too_large(route.max_body_bytes));
    }
    Ok(())
}

/// The 413 for a body over `max` bytes (declared, or found while streaming).
pub fn body_too_large(max: Option<u64>) -> Rejection {
    let p = Problem::status(413, body_limit_detail(max));
    Rejection::new(Layer::Http, Outcome::BodyTooLarge, p)
}

/// The 413 `detail`.
pub fn body_limit_detail(max: Option<u64>) -> String {
    format!(
        "the request body is larger than this route's limit of {} bytes",
        max.unwrap_or(0)
    )
}

#[cfg(test)]
mod tests;
