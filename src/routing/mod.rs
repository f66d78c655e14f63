//! Route matching: host (exact, then `*.suffix`, then any) and longest path prefix.
//!
//! Like nginx `server_name`: an exact host beats a wildcard, a longer wildcard suffix beats a
//! shorter one, and a route without host is the default. Within the best host class the longest
//! `path_prefix` wins; prefixes match whole path segments (`/orders` matches `/orders` and
//! `/orders/1`, not `/ordersx`), and a prefix ending in `/` matches anything below it.
//!
//! Path parameters (`;x` at the end of a segment) are not part of the path routes match on:
//! Tomcat/Spring/Jetty-style backends serve `/api;x/y` as `/api/y`, so a route must not be chosen
//! on a spelling the backend ignores. The route is found on the path without parameters
//! (`/api;x/y` → `/api/y`); a `;` also ends a segment in the path as sent (`/api;x` is under
//! `/api`). When those two readings choose different routes (`/api;x/v1` with a route on
//! `/api/v1`: a backend that ignores parameters and one that does not would each be behind a
//! different route), there is no safe route and the request is refused.

use crate::config::{HostMatch, RouteSettings};
use std::borrow::Cow;

/// Routes of one snapshot, ready to match.
pub struct Router {
    routes: Vec<RouteSettings>,
}

fn host_rank(m: &HostMatch, host: &str) -> Option<usize> {
    match m {
        HostMatch::Exact(h) => (h == host).then_some(usize::MAX),
        HostMatch::Suffix(s) => {
            (host.len() > s.len() && host.ends_with(s.as_str())).then_some(1 + s.len())
        }
        HostMatch::Any => Some(0),
    }
}

/// A path's `;` parameters change its route: the path with and without them take different
/// routes (see the module docs). Answered with 400 `ambiguous_parameters`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmbiguousParameters;

/// True when `host` (normalised) is one `m` matches (as a route's `host` does).
pub fn host_matches(m: &HostMatch, host: &str) -> bool {
    host_rank(m, host).is_some()
}

/// True when `path` is at or below `prefix`, whole segments only (as a route's `path_prefix`
/// matches).
pub fn prefix_matches(prefix: &str, path: &str) -> bool {
    path.starts_with(prefix)
        && (prefix.ends_with('/')
            || path.len() == prefix.len()
            || matches!(path.as_bytes()[prefix.len()], b'/' | b';' | b'?'))
}

/// `path` as a backend that ignores path parameters resolves it: every segment without its `;...`,
/// then empty segments dropped (`/;x/a` → `/a`), a trailing `/` kept (`/a;x/` → `/a/`).
pub fn without_parameters(path: &str) -> Cow<'_, str> {
    if !path.contains(';') {
        return Cow::Borrowed(path);
    }
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut out = String::with_capacity(path.len());
    let mut trailing_slash = false;
    for segment in path.split('/').skip(1) {
        let bare = segment.split(';').next().unwrap_or_default();
        trailing_slash = bare.is_empty();
        if !bare.is_empty() {
            out.push('/');
            out.push_str(bare);
        }
    }
    if out.is_empty() || trailing_slash {
        out.push('/');
    }
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Cow::Owned(out)
}

impl Router {
    /// A router over `routes` (already validated).
    pub fn new(routes: Vec<RouteSettings>) -> Self {
        Router { routes }
    }

    /// Index (in config order) of the best route for a normalised `host` and `path`, or `None`
    /// (404). Errors: the path's `;` parameters change the route ([`AmbiguousParameters`]).
    pub fn find(&self, host: &str, path: &str) -> Result<Option<usize>, AmbiguousParameters> {
        let bare = without_parameters(path);
        let index = self.best(host, &bare);
        if bare != path && self.best(host, path) != index {
            return Err(AmbiguousParameters);
        }
        Ok(index)
    }

    fn best(&self, host: &str, path: &str) -> Option<usize> {
        self.routes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let rank = host_rank(&r.host, host)?;
                prefix_matches(&r.path_prefix, path).then_some((rank, r.path_prefix.len(), i))
            })
            .max_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)))
            .map(|(_, _, i)| i)
    }

    /// The route at `index`.
    pub fn route(&self, index: usize) -> &RouteSettings {
        &self.routes[index]
    }
}

#[cfg(test)]
mod tests;
