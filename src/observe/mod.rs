//! What tollgate tells operators: Prometheus [`metrics`] and their per-config [`series`], the
//! decision [`labels`], per-tenant [`tier_fit`], the [`access_log`] and OpenTelemetry [`tracing`].

pub mod access_log;
pub mod labels;
pub mod metrics;
pub mod series;
pub mod tier_fit;
pub mod tracing;
