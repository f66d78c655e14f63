//! `server:`: process settings and HTTP/1 limits.

use std::time::Duration;

/// Default of `server.work_stealing`, picked by measurement (docs/performance.md#worker-runtime-work-stealing).
pub const DEFAULT_WORK_STEALING: bool = true;

/// Process-level settings (`server:`); changing them needs a restart.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    /// Worker threads of the proxy service.
    pub threads: usize,
    /// Tokio runtime of the worker threads (Pingora `ServerConf.work_stealing`): `true` is one
    /// work-stealing runtime for all threads, `false` one single-threaded runtime per thread
    /// (no cross-thread task migration). Default [`DEFAULT_WORK_STEALING`]; restart only.
    pub work_stealing: bool,
    /// Seconds to keep serving in-flight requests after SIGTERM.
    pub grace_period_s: u64,
    /// Seconds allowed for runtimes to stop after the grace period.
    pub graceful_shutdown_timeout_s: u64,
    /// Unix socket path used to hand listeners to a new binary (`--upgrade`).
    pub upgrade_sock: String,
    /// Pid file path.
    pub pid_file: String,
    /// HTTP/1 limits enforced before a request reaches the stages (`crate::http`).
    pub http: HttpLimits,
}

/// `server.max_header_bytes` and friends (docs/DESIGN.md 4b); defaults in the style of nginx.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpLimits {
    /// Bytes of the whole request head (request line and header fields); 431 beyond
    /// (414 when the request line alone is longer). Default 65536, at most 524288.
    pub max_header_bytes: usize,
    /// Number of header fields; 431 beyond. Default 100, at most 256 (Pingora's own cap).
    pub max_headers: usize,
    /// Time allowed to receive a whole request head: from accept on a new connection, from the
    /// first byte on a reused one. Beyond it: 408 (when bytes arrived) and the connection closes.
    /// Default 10 s.
    pub header_read_timeout: Duration,
    /// How long an idle keep-alive connection waits for its next request. Default 60 s.
    pub keepalive_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_header_bytes: 65_536,
            max_headers: 100,
            header_read_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(60),
        }
    }
}
