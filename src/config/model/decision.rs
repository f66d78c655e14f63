//! `decision:`: the limiter as a service for other proxies (docs/decision-service.md).

use std::net::SocketAddr;

/// `decision:` (all parts optional; nothing set: no decision service).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DecisionSettings {
    /// `decision.grpc`: Envoy's rate limit service over gRPC.
    pub grpc: Option<GrpcDecision>,
    /// `decision.http`: `POST /v1/check` and `/v1/report`, JSON over HTTP/1.1.
    pub http: Option<HttpDecision>,
}

/// `decision.http`.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpDecision {
    /// The plaintext HTTP/1.1 listener (restart to change).
    pub listen: SocketAddr,
    /// The environment variable holding the Bearer token.
    pub token_env: String,
}

/// `decision.grpc`.
#[derive(Debug, Clone, PartialEq)]
pub struct GrpcDecision {
    /// The plaintext h2 listener (restart to change).
    pub listen: SocketAddr,
    /// What a call gets when Redis cannot decide one of its rules.
    pub on_failure: DecisionFailure,
}

/// `decision.grpc.on_failure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecisionFailure {
    /// Each rule's own `on_failure` (`open`, `closed`, `local`) decides, as on the proxy path.
    #[default]
    Rules,
    /// The call is answered gRPC `UNAVAILABLE`, so the caller's failure mode decides (Envoy's
    /// `failure_mode_deny`).
    Unavailable,
}
