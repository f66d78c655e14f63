//! The metric and access-log labels of a decision: which layer decided ([`Layer`]) and how
//! ([`Outcome`]). `tollgate_decisions_total{layer, outcome, tier}` uses exactly these names.

/// The layer that took a decision (`layer` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// HTTP framing and limits (request head, request target, body size).
    Http,
    /// Per-client-IP limiter in memory (docs/DESIGN.md section 1, stage 1).
    Edge,
    /// Host + path → route.
    Route,
    /// JWT / API key / client certificate → tenant, tier.
    Identity,
    /// The tenant's quota (Redis, or the local fallback).
    Tenant,
    /// Per-upstream concurrency slot, and the proxying itself.
    Upstream,
}

impl Layer {
    /// Every layer, in declaration order (`layer as usize` indexes it).
    pub const ALL: [Layer; 6] = [
        Layer::Http,
        Layer::Edge,
        Layer::Route,
        Layer::Identity,
        Layer::Tenant,
        Layer::Upstream,
    ];

    /// The label value, e.g. `edge`.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Http => "http",
            Layer::Edge => "edge",
            Layer::Route => "route",
            Layer::Identity => "identity",
            Layer::Tenant => "tenant",
            Layer::Upstream => "upstream",
        }
    }
}

/// How a layer decided (`outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Passed this layer.
    Admitted,
    /// Refused by a rate or concurrency limit.
    Limited,
    /// A limit refused, but the layer runs in shadow mode: counted and logged, not enforced.
    ShadowLimited,
    /// 401: no or bad credentials.
    Unauthenticated,
    /// 400/403/503 at the identity layer (duplicate API key header, unknown tier, an issuer
    /// without keys).
    Rejected,
    /// 404: no route for this host and path.
    NotFound,
    /// 400: a request target that cannot be normalised safely.
    BadTarget,
    /// 413: the body is larger than the route allows.
    BodyTooLarge,
    /// Tenant: decided by the local fallback bucket (Redis unavailable).
    Fallback,
    /// Tenant: the tenant's bucket refused, the tier's burst pool admitted.
    PoolAdmitted,
    /// Tenant: Redis unavailable, policy `open`.
    FailedOpen,
    /// Tenant: Redis unavailable, policy `closed` (503).
    FailedClosed,
    /// The client went away while its request waited (leaky-bucket delay).
    ClientLeft,
    /// Upstream: the backend could not be reached or failed.
    Error,
    /// Request head: the request line is too long (414).
    UriTooLong,
    /// Request head: too many bytes of headers (431).
    HeadersTooLarge,
    /// Request head: too many header fields (431).
    TooManyHeaders,
    /// Request head: not parseable HTTP/1 (400).
    Malformed,
    /// Request head: not received within `server.header_read_timeout` (408).
    HeaderTimeout,
    /// Request body: not received within `server.body_idle_timeout` / `body_read_timeout`
    /// (408).
    BodyTimeout,
    /// Tenant: a limit rule (`limits:`) refused a request its tier admitted; the rule's own
    /// count is `tollgate_rule_decisions_total{rule, outcome="limited"}`.
    RuleLimited,
    /// Connection: over `server.max_connections` or `max_connections_per_client` (503).
    ConnectionLimit,
}

impl Outcome {
    /// Every outcome, in declaration order (`outcome as usize` indexes it).
    pub const ALL: [Outcome; 22] = [
        Outcome::Admitted,
        Outcome::Limited,
        Outcome::ShadowLimited,
        Outcome::Unauthenticated,
        Outcome::Rejected,
        Outcome::NotFound,
        Outcome::BadTarget,
        Outcome::BodyTooLarge,
        Outcome::Fallback,
        Outcome::PoolAdmitted,
        Outcome::FailedOpen,
        Outcome::FailedClosed,
        Outcome::ClientLeft,
        Outcome::Error,
        Outcome::UriTooLong,
        Outcome::HeadersTooLarge,
        Outcome::TooManyHeaders,
        Outcome::Malformed,
        Outcome::HeaderTimeout,
        Outcome::BodyTimeout,
        Outcome::RuleLimited,
        Outcome::ConnectionLimit,
    ];

    /// The label value, e.g. `shadow_limited`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Limited => "limited",
            Outcome::ShadowLimited => "shadow_limited",
            Outcome::Unauthenticated => "unauthenticated",
            Outcome::Rejected => "rejected",
            Outcome::NotFound => "not_found",
            Outcome::BadTarget => "bad_target",
            Outcome::BodyTooLarge => "body_too_large",
            Outcome::Fallback => "fallback",
            Outcome::PoolAdmitted => "pool_admitted",
            Outcome::FailedOpen => "failed_open",
            Outcome::FailedClosed => "failed_closed",
            Outcome::ClientLeft => "client_left",
            Outcome::Error => "error",
            Outcome::UriTooLong => "uri_too_long",
            Outcome::HeadersTooLarge => "headers_too_large",
            Outcome::TooManyHeaders => "too_many_headers",
            Outcome::Malformed => "malformed",
            Outcome::HeaderTimeout => "header_timeout",
            Outcome::BodyTimeout => "body_timeout",
            Outcome::RuleLimited => "rule_limited",
            Outcome::ConnectionLimit => "connection_limit",
        }
    }
}

#[cfg(test)]
mod tests;
