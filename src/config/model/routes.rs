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
    /// Stable label for metrics and logs: `routes[<index>]`.
    pub id: String,
    pub host: HostMatch,
    pub path_prefix: String,
    pub upstream: String,
    pub auth: AuthMode,
    /// Tokens one request costs.
    pub cost: u64,
    /// Largest request body in bytes (413 beyond); `None` = unlimited.
    pub max_body_bytes: Option<u64>,
    /// `routes[].mode`: shadow makes every limit layer shadow for this route (edge, tenant,
    /// upstream slot); identity failures stay enforced.
    pub mode: Mode,
}
