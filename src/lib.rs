//! tollgate: a reverse-proxy API gateway on Pingora whose job is distributed rate limiting.
//!
//! Request path (docs/DESIGN.md section 1): [`edge`] (per client IP, memory) → route
//! ([`upstream::router`]) → [`identity`] (JWT / API key → tenant, tier) → [`quota`] (tenant
//! token bucket in Redis, one Lua script per decision) → [`upstream`] concurrency slot → backend.
//! The stages' decisions are in [`pipeline`]; [`proxy`] is the thin Pingora glue that runs them
//! in order.

// The layout of the admin API's `explain` future (a deep async call tree) needs a query depth
// above the default 128 in the release build.
#![recursion_limit = "256"]

pub mod admin;
pub mod cli;
pub mod concurrency;
pub mod config;
pub mod decision;
pub mod edge;
pub mod hashing;
pub mod http;
pub mod identity;
pub mod limit;
pub mod live;
pub mod observe;
pub mod pending;
pub mod pipeline;
pub mod policy;
pub mod proxy;
pub mod quota;
pub mod region;
pub mod response;
pub mod routing;
pub mod runtime;
pub mod snapshot;
pub mod store;
pub mod tenant_id;
pub mod tls;
pub mod upstream;
