//! `server:`: process settings (restart-only) and the HTTP/1 limits.

use super::common::Check;
use crate::config::model::{HttpLimits, ServerSettings, DEFAULT_WORK_STEALING};
use crate::config::raw::RawServer;
use std::time::Duration;

/// Most worker threads per service: far above any core count, low enough that a typo (an extra
/// digit) is an error rather than an attempt to start billions of threads.
const MAX_THREADS: u64 = 1024;

/// Longest `server.grace_period` and `server.graceful_shutdown_timeout`, in seconds (one day).
const MAX_DRAIN_S: u64 = 86_400;

/// `server:`, with its defaults when the section is absent.
pub(super) fn settings(c: &mut Check, raw: Option<&RawServer>) -> ServerSettings {
    let threads = raw.and_then(|s| s.threads);
    let (grace, grace_path) = c.duration_in(
        "server",
        ("grace_period", raw.and_then(|s| s.grace_period.as_deref())),
        ("grace_period_s", raw.and_then(|s| s.grace_period_s)),
        1000,
    );
    let (shutdown, shutdown_path) = c.duration_in(
        "server",
        (
            "graceful_shutdown_timeout",
            raw.and_then(|s| s.graceful_shutdown_timeout.as_deref()),
        ),
        (
            "graceful_shutdown_timeout_s",
            raw.and_then(|s| s.graceful_shutdown_timeout_s),
        ),
        1000,
    );
    ServerSettings {
        threads: c.opt_positive_at_most("server.threads", threads, 2, MAX_THREADS) as usize,
        work_stealing: raw
            .and_then(|s| s.work_stealing)
            .unwrap_or(DEFAULT_WORK_STEALING),
        grace_period_s: c.opt_positive_at_most(&grace_path, grace, 10, MAX_DRAIN_S),
        graceful_shutdown_timeout_s: c.opt_positive_at_most(
            &shutdown_path,
            shutdown,
            5,
            MAX_DRAIN_S,
        ),
        upgrade_sock: raw
            .and_then(|s| s.upgrade_sock.clone())
            .unwrap_or_else(|| "/tmp/tollgate_upgrade.sock".into()),
        pid_file: raw
            .and_then(|s| s.pid_file.clone())
            .unwrap_or_else(|| "/tmp/tollgate.pid".into()),
        http: http_limits(c, raw),
    }
}

/// `server.max_header_bytes`, `max_headers`, `header_read_timeout`, `keepalive_timeout`, the
/// request-body buffer and timeouts, and the connection limits.
fn http_limits(c: &mut Check, raw: Option<&RawServer>) -> HttpLimits {
    let d = HttpLimits::default();
    let mut bounded = |path: &str, value: Option<i64>, default: usize, max: usize| -> usize {
        c.opt_positive_at_most(path, value, default as u64, max as u64) as usize
    };
    let max_header_bytes = bounded(
        "server.max_header_bytes",
        raw.and_then(|s| s.max_header_bytes),
        d.max_header_bytes,
        524_288,
    );
    let max_headers = bounded(
        "server.max_headers",
        raw.and_then(|s| s.max_headers),
        d.max_headers,
        256,
    );
    // `parse_duration` refuses zero and negative values with the field path.
    let body_buffer_bytes = match raw.and_then(|s| s.body_buffer_bytes) {
        None => d.body_buffer_bytes,
        Some(v) if (0..=65_536).contains(&v) => v as usize,
        Some(v) => {
            c.err(
                "server.body_buffer_bytes",
                format!("must be 0 (off) to 65536, the replay buffer's size (got {v})"),
            );
            d.body_buffer_bytes
        }
    };
    let body_buffer_total_bytes = c.opt_positive(
        "server.body_buffer_total_bytes",
        raw.and_then(|s| s.body_buffer_total_bytes),
        d.body_buffer_total_bytes as u64,
    ) as usize;
    let max_connections = c.opt_positive(
        "server.max_connections",
        raw.and_then(|s| s.max_connections),
        d.max_connections as u64,
    ) as usize;
    let max_connections_per_client = match raw.and_then(|s| s.max_connections_per_client) {
        None => d.max_connections_per_client,
        Some(v) if v >= 0 => v as usize,
        Some(v) => {
            c.err(
                "server.max_connections_per_client",
                format!("must be 0 (no limit) or more (got {v})"),
            );
            d.max_connections_per_client
        }
    };
    let mut timeout = |path: &str, text: Option<&String>, default: Duration| {
        text.and_then(|t| c.duration(path, t)).unwrap_or(default)
    };
    HttpLimits {
        max_header_bytes,
        max_headers,
        body_buffer_bytes,
        body_buffer_total_bytes,
        body_idle_timeout: timeout(
            "server.body_idle_timeout",
            raw.and_then(|s| s.body_idle_timeout.as_ref()),
            d.body_idle_timeout,
        ),
        body_read_timeout: timeout(
            "server.body_read_timeout",
            raw.and_then(|s| s.body_read_timeout.as_ref()),
            d.body_read_timeout,
        ),
        max_connections,
        max_connections_per_client,
        preserve_header_case: raw
            .and_then(|s| s.preserve_header_case)
            .unwrap_or(d.preserve_header_case),
        header_read_timeout: timeout(
            "server.header_read_timeout",
            raw.and_then(|s| s.header_read_timeout.as_ref()),
            d.header_read_timeout,
        ),
        keepalive_timeout: timeout(
            "server.keepalive_timeout",
            raw.and_then(|s| s.keepalive_timeout.as_ref()),
            d.keepalive_timeout,
        ),
    }
}
