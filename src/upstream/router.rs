//! Route matching: host (exact, then `*.suffix`, then any) and longest path prefix.
//!
//! Like nginx `server_name`: an exact host beats a wildcard, a longer wildcard suffix beats a
//! shorter one, and a route without host is the default. Within the best host class the longest
//! `path_prefix` wins; prefixes match whole path segments (`/orders` matches `/orders` and
//! `/orders/1`, not `/ordersx`), and a prefix ending in `/` matches anything below it.

use crate::config::{HostMatch, RouteSettings};

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

fn prefix_matches(prefix: &str, path: &str) -> bool {
    path.starts_with(prefix)
        && (prefix.ends_with('/')
            || path.len() == prefix.len()
            || matches!(path.as_bytes()[prefix.len()], b'/' | b'?'))
}

/// `Host` value → lower-case host without port (IPv6 literals keep their brackets).
pub fn normalize_host(raw: &str) -> String {
    let raw = raw.trim();
    let host = if raw.starts_with('[') {
        raw.split_inclusive(']').next().unwrap_or(raw)
    } else {
        raw.rsplit_once(':').map(|(h, _)| h).unwrap_or(raw)
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl Router {
    /// A router over `routes` (already validated).
    pub fn new(routes: Vec<RouteSettings>) -> Self {
        Router { routes }
    }

    /// Index (in config order) of the best route for a normalised `host` and `path`, or `None`
    /// (404).
    pub fn find(&self, host: &str, path: &str) -> Option<usize> {
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
