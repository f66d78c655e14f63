//! `routes:`: how a request is matched to an upstream.

use super::common::Mode;

/// How a route matches the host.
#[derive(Debug, Clone, PartialEq)]
pub enum HostMatch {
    Any,
    /// Exact host, lower case, without port.
    Exact(String),
    /// `*.example.com` stored as `.example.com`.
    Suffix(String),
}

/// Route authentication mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Identity required: anonymous requests are 401.
    Required,
    /// Identity used when present, anonymous otherwise.
    Optional,
    /// Credentials are ignored; every request is anonymous.
    None,
}

/// One entry of `routes:`.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSettings {
    /// The route's label in metrics, logs, explain and problem bodies: `routes[].name`, or
    /// `routes[<index>]` for a route without one.
    pub id: String,
    /// Where the route is in the file (`routes[<index>]`), for config messages.
    pub field: String,
    pub host: HostMatch,
    pub path_prefix: String,
    pub upstream: String,
    pub auth: AuthMode,
    /// Tokens one request costs (with [`cost_from`](Self::cost_from): its `default`).
    pub cost: u64,
    /// `cost: { from | header | json | query, .. }`: the cost is read from each request,
    /// charged to the tier and every applied rule without a cost of its own.
    pub cost_from: Option<super::cost::CostFrom>,
    /// Largest request body in bytes (413 beyond); `None` = unlimited.
    pub max_body_bytes: Option<u64>,
    /// `routes[].mode`: shadow makes every limit layer shadow for this route (edge, tenant,
    /// upstream slot); identity failures stay enforced.
    pub mode: Mode,
}

impl HostMatch {
    /// The host as written in `routes[].host`: `*` for any host, `*.example.com` for a suffix.
    pub fn spelling(&self) -> std::borrow::Cow<'_, str> {
        match self {
            HostMatch::Any => "*".into(),
            HostMatch::Exact(h) => h.as_str().into(),
            HostMatch::Suffix(s) => format!("*{s}").into(),
        }
    }
}

impl RouteSettings {
    /// The value of the `route` key part of a limit rule: the route's `name` when it has one
    /// (stable when routes are reordered or a prefix is edited), else its host as written and
    /// its path prefix (`api.example.com/v1`, `*.example.com/v1`, `*/v1`), so two routes with the
    /// same prefix on different hosts never share a bucket. A name never holds `/` and a
    /// host-and-prefix value always does, so the two spellings cannot meet; a host never holds
    /// `/`, so the prefix's first `/` ends it.
    pub fn key_value(&self) -> String {
        if self.id != self.field {
            return self.id.clone();
        }
        [self.host.spelling().as_ref(), self.path_prefix.as_str()].concat()
    }
}
