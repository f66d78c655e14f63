//! `observability:`: logs and per-tenant metric series.

/// `observability:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservabilitySettings {
    pub access_log: bool,
    pub json_logs: bool,
    /// Opt-in bound on per-tenant metric series (0 = off).
    pub tenant_metrics: usize,
}
