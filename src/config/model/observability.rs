//! `observability:`: logs and per-tenant metric series.

/// `observability:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservabilitySettings {
    pub access_log: bool,
    pub json_logs: bool,
    /// Opt-in bound on per-tenant metric series (0 = off).
    pub tenant_metrics: usize,
    /// Bytes of access-log lines held for a slow log sink; lines past it are dropped and
    /// counted (`tollgate_log_lines_dropped_total`). Default 8 MiB; restart only.
    pub log_buffer_bytes: usize,
}

/// Default of `observability.log_buffer_bytes`: 8 MiB.
pub const DEFAULT_LOG_BUFFER_BYTES: usize = 8 * 1024 * 1024;
