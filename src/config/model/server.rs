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

/// `server.max_header_bytes` and friends: limits on request heads, bodies and connections
/// (docs/DESIGN.md 4b, docs/http-hardening.md#limits-server-and-routes); defaults in the style of nginx.
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
    /// A request body of at most this many bytes (declared by `Content-Length`) is read whole
    /// before the tenant and upstream-slot stages, so a slow sender holds no upstream slot.
    /// Default 65536 (Pingora's replay buffer, also the maximum); 0 turns buffering off.
    pub body_buffer_bytes: usize,
    /// Bytes of request bodies buffered at once across the process; past it a body streams
    /// unbuffered (holding its slot, bounded by the body timeouts). Default 64 MiB.
    pub body_buffer_total_bytes: usize,
    /// Longest wait for the next bytes of a request body; beyond it: 408 and the connection
    /// closes. Default 10 s.
    pub body_idle_timeout: Duration,
    /// Time allowed for a whole request body, from the end of its head; beyond it: 408 and the
    /// connection closes. Default 60 s.
    pub body_read_timeout: Duration,
    /// Open client connections per `listen[]` entry; a connection beyond it is refused (503 on
    /// HTTP/1, closed on HTTP/2). Default 10000.
    pub max_connections: usize,
    /// Open connections per client address (TCP peer) across all listeners; 0 = no limit
    /// (the default).
    pub max_connections_per_client: usize,
    /// Whether header names keep the case they arrived in on their way through (the client's
    /// to the backend, the backend's to the client). Default `false`: the heads tollgate edits
    /// go out with lower-case names, as Envoy sends them and as HTTP/2 requires (RFC 9110 5.1:
    /// names are case-insensitive); `true` keeps Pingora's case-preserving map, which makes each
    /// header tollgate adds cost about four times as many instructions.
    pub preserve_header_case: bool,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_header_bytes: 65_536,
            max_headers: 100,
            header_read_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(60),
            body_buffer_bytes: 65_536,
            body_buffer_total_bytes: 64 * 1024 * 1024,
            body_idle_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_connections_per_client: 0,
            preserve_header_case: false,
        }
    }
}
