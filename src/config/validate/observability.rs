//! `observability:`: access log, log format and the bound on per-tenant metric series.

use super::common::Check;
use crate::config::model::{ObservabilitySettings, DEFAULT_LOG_BUFFER_BYTES};
use crate::config::raw::RawObservability;

/// `observability:`, with its defaults (access log on, text logs, no per-tenant series) when
/// absent.
pub(super) fn settings(c: &mut Check, raw: Option<&RawObservability>) -> ObservabilitySettings {
    let json_logs = match raw.and_then(|r| r.log_format.as_deref()) {
        None | Some("text") => false,
        Some("json") => true,
        Some(other) => {
            c.err(
                "observability.log_format",
                format!("\"{other}\" is not a log format (text, json)"),
            );
            false
        }
    };
    let tenant_metrics = match raw.and_then(|r| r.tenant_metrics) {
        None => 0,
        Some(v) if v < 0 => {
            c.err("observability.tenant_metrics", "must not be negative");
            0
        }
        Some(v) => v as usize,
    };
    let log_buffer_bytes = match raw.and_then(|r| r.log_buffer_bytes) {
        None => DEFAULT_LOG_BUFFER_BYTES,
        Some(v) if v >= 4096 => v as usize,
        Some(v) => {
            c.err(
                "observability.log_buffer_bytes",
                format!("must be at least 4096 (got {v})"),
            );
            DEFAULT_LOG_BUFFER_BYTES
        }
    };
    ObservabilitySettings {
        log_buffer_bytes,
        access_log: raw.and_then(|r| r.access_log).unwrap_or(true),
        json_logs,
        tenant_metrics,
    }
}
