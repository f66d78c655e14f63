//! Where limiter state lives: [`memory`] (bounded in-process stores: the edge's buckets, the
//! local fallback, tier fit) and [`redis`] (the shared store: connections, the guarded call with
//! circuit breaker and retry, key strings, scripts, fleet membership).

pub mod memory;
pub mod redis;
