//! tollgate: a reverse-proxy API gateway on Pingora whose job is distributed rate limiting.
//!
//! Request path (docs/DESIGN.md section 1): [`edge`] (per client IP, memory) → route
//! ([`upstream::router`]) → [`identity`] (JWT / API key → tenant, tier) → [`quota`] (tenant
//! token bucket in Redis, one Lua script per decision) → [`upstream`] concurrency slot → backend.
//! The stages' decisions are in [`pipeline`]; [`proxy`] is the thin Pingora glue that runs them
//! in order.

pub mod access_log;
pub mod admin;
pub mod config;
pub mod edge;
pub mod hashing;
pub mod http;
pub mod identity;
pub mod limit;
pub mod metrics;
pub mod pipeline;
pub mod policy_headers;
pub mod proxy;
pub mod quota;
pub mod region;
pub mod reload;
pub mod response;
pub mod server;
pub mod snapshot;
pub mod tier_fit;
pub mod tls;
pub mod upstream;
