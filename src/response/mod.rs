//! Every response tollgate writes itself: status, headers and RFC 9457 problem+json bodies.
//!
//! Rate-limit headers follow draft-ietf-httpapi-ratelimit-headers-11 (`RateLimit-Policy`,
//! `RateLimit`) with the optional legacy `X-RateLimit-*` family; `Retry-After` is RFC 9110
//! delta-seconds. Pingora does not run `response_filter` for responses we write, so common
//! headers (request id, rate-limit fields) are added here and in `proxy` through [`QuotaHeaders`].
//!
//! [`problem`]: the RFC 9457 body; [`ratelimit`]: every rate-limit header field; [`grpc`]: the
//! same refusals as gRPC statuses for gRPC calls ([`rpc_status`]: their `google.rpc.Status`);
//! [`render`]: writing them.

pub mod grpc;
pub mod problem;
pub mod ratelimit;
pub mod render;
pub mod rpc_status;

pub use problem::{Problem, QUOTA_EXCEEDED, REDUCED_CAPACITY};
pub use ratelimit::{HeaderBlock, QuotaHeaders, QuotaReport, ReportKind};
pub use render::{problem_response_bytes, send_problem};

#[cfg(test)]
mod tests;
