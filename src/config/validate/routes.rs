//! `routes:`: host and path prefix to an upstream, with the route's auth mode, cost and mode;
//! and the checks of routes against the tiers and the identity settings.

use super::common::Check;
use super::host;
use crate::config::model::{AuthMode, HostMatch, IdentitySettings, RouteSettings, Tier};
use crate::config::raw::{RawRoute, RawUpstream};
use std::collections::{BTreeMap, BTreeSet};

/// `routes:`: at least one, each naming a configured upstream, no two with the same host and
/// path prefix.
pub(super) fn settings(
    c: &mut Check,
    raw: &[RawRoute],
    upstreams: &BTreeMap<String, RawUpstream>,
) -> Vec<RouteSettings> {
    if raw.is_empty() {
        c.err("routes", "needs at least one route");
    }
    let mut routes = Vec::new();
    let mut seen_routes = BTreeSet::new();
    let mut names = BTreeMap::new();
    for (i, r) in raw.iter().enumerate() {
        let path = format!("routes[{i}]");
        if let Some(name) = &r.name {
            check_name(c, &format!("{path}.name"), name);
            if let Some(first) = names.insert(name.as_str(), i) {
                c.err(
                    format!("{path}.name"),
                    format!(
                        "\"{name}\" is already the name of routes[{first}]: route names are unique"
                    ),
                );
            }
        }
        if let Some(route) = route_settings(c, &path, r, upstreams) {
            let key = (format!("{:?}", route.host), route.path_prefix.clone());
            if !seen_routes.insert(key) {
                c.err(
                    &path,
                    "duplicate route: the same host and path_prefix appear earlier",
                );
            }
            routes.push(route);
        }
    }
    routes
}

/// Longest `routes[].name`.
pub const MAX_ROUTE_NAME: usize = 64;

/// `routes[].name`: a metric label and log field, so short and plain; not `none` (the label of
/// requests no route matched).
fn check_name(c: &mut Check, path: &str, name: &str) {
    let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if name.is_empty() || name.len() > MAX_ROUTE_NAME || !name.bytes().all(plain) {
        c.err(
            path,
            format!("\"{name}\": a route name is 1 to {MAX_ROUTE_NAME} letters, digits, '.', '_' or '-'"),
        );
    } else if name == "none" {
        c.err(
            path,
            "\"none\" is the label of requests no route matched: choose another name",
        );
    }
}

/// A route's `cost` must fit in the burst of some tier, else its requests are never admitted.
pub(super) fn check_costs(c: &mut Check, tiers: &BTreeMap<String, Tier>, routes: &[RouteSettings]) {
    if let Some(largest) = tiers.values().map(|t| t.rate.burst).max() {
        for r in routes.iter().filter(|r| r.cost > largest) {
            c.err(
                format!("{}.cost", r.field),
                format!(
                    "{} exceeds the burst of every tier (largest {largest}): such requests could never be admitted",
                    r.cost
                ),
            );
        }
    }
}

/// `auth: required` needs a way to authenticate (`identity.jwt`, `api_keys` or `mtls`).
pub(super) fn check_auth(c: &mut Check, identity: &IdentitySettings, routes: &[RouteSettings]) {
    let has_identity =
        identity.jwt.is_some() || identity.api_keys.is_some() || identity.mtls.is_some();
    for r in routes.iter().filter(|r| r.auth == AuthMode::Required) {
        if !has_identity {
            c.err(
                format!("{}.auth", r.field),
                "is \"required\" but identity configures none of jwt, api_keys, mtls",
            );
        }
    }
}

/// A path prefix at `path` (`routes[i].path_prefix`, `limits[i].match.routes[j]`): it starts
/// with `/` and is written as requests are routed (normalised, no `;` parameters, no query), else
/// it never matches.
pub(super) fn check_path_prefix(c: &mut Check, path: &str, prefix: &str) {
    if !prefix.starts_with('/') {
        c.err(path, "must start with /");
        return;
    }
    // Requests are routed on normalised paths: a prefix in any other spelling never matches.
    match crate::http::target::normalise_target(prefix.as_bytes()) {
        Ok(_) if prefix.contains(';') => c.err(
            path,
            "contains ';': routes match the path without its ; parameters, so this never matches",
        ),
        Ok(t) if t.path == prefix && t.query.is_none() => {}
        Ok(t) => c.err(
            path,
            format!(
                "\"{prefix}\" is not a normalised path (requests are routed on normalised paths); write \"{}\"",
                t.path
            ),
        ),
        Err(e) => c.err(path, e.detail()),
    }
}

/// `routes[i]` at `path`.
fn route_settings(
    c: &mut Check,
    path: &str,
    r: &RawRoute,
    upstreams: &BTreeMap<String, RawUpstream>,
) -> Option<RouteSettings> {
    if !upstreams.contains_key(&r.upstream) {
        c.err(
            format!("{path}.upstream"),
            format!("no upstream named \"{}\"", r.upstream),
        );
    }
    let host = match r.host.as_deref().map(host::route_host) {
        None => HostMatch::Any,
        Some(Ok(m)) => m,
        Some(Err(why)) => {
            let h = r.host.as_deref().unwrap_or_default();
            c.err(
                format!("{path}.host"),
                format!("\"{h}\" never matches a request: {why}"),
            );
            // The config is refused; as written, so it is not reported as a duplicate of `*`.
            HostMatch::Exact(h.to_string())
        }
    };
    let path_prefix = r.path_prefix.clone().unwrap_or_else(|| "/".into());
    check_path_prefix(c, &format!("{path}.path_prefix"), &path_prefix);
    let auth = match r.auth.as_deref() {
        None | Some("optional") => AuthMode::Optional,
        Some("required") => AuthMode::Required,
        Some("none") => AuthMode::None,
        Some(other) => {
            c.err(
                format!("{path}.auth"),
                format!("\"{other}\" is not an auth mode (required, optional, none)"),
            );
            AuthMode::Optional
        }
    };
    let (cost, cost_from) = super::cost::route(c, &format!("{path}.cost"), r.cost.as_ref());
    Some(RouteSettings {
        id: r.name.clone().unwrap_or_else(|| path.to_string()),
        field: path.to_string(),
        host,
        path_prefix,
        upstream: r.upstream.clone(),
        auth,
        cost,
        cost_from,
        max_body_bytes: r
            .max_body_bytes
            .and_then(|v| c.positive(&format!("{path}.max_body_bytes"), v)),
        mode: c.mode(&format!("{path}.mode"), r.mode.as_deref()),
    })
}
