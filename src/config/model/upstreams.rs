//! `upstreams:`: backends, concurrency limits, health checks and TLS.

use std::net::SocketAddr;
use std::time::Duration;

/// `upstreams.<name>`.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamSettings {
    pub name: String,
    /// Backend addresses, resolved at load time.
    pub backends: Vec<SocketAddr>,
    /// Max requests in flight to this upstream per instance; `None` = unlimited.
    pub max_concurrency: Option<u32>,
    /// Max requests in flight to this upstream per tenant per instance; `None` = no cap.
    pub max_concurrency_per_tenant: Option<u32>,
    pub queue: Option<QueueSettings>,
    /// Retry-After (seconds) on a concurrency rejection.
    pub retry_after_s: u64,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub health_check: Option<HealthCheckSettings>,
    /// HTTPS to the backends; `None` = plain HTTP.
    pub tls: Option<UpstreamTls>,
    /// HTTP/2 to the backends (gRPC needs it): prior-knowledge h2c to plain backends, ALPN `h2`
    /// with TLS backends; `None` = HTTP/1.1 (docs/grpc.md#http2-to-backends).
    pub h2: Option<H2Settings>,
}

/// `upstreams.<name>.h2: true`: HTTP/2 to the backends over pooled connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Settings {
    /// Requests (streams) multiplexed on one pooled connection to a backend at most
    /// (`h2_max_streams`, default 100); more open further connections.
    pub max_streams: usize,
}

/// Bounded wait for a concurrency slot.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSettings {
    /// Waiters in total.
    pub max: u32,
    pub timeout: Duration,
    /// Weighted fair queuing across tenants (`fair: true`) instead of arrival order.
    pub fair: bool,
    /// Waiters of one tenant (`max_per_tenant`, default `max`).
    pub max_per_tenant: u32,
}

/// Active HTTP health check of each backend.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheckSettings {
    pub path: String,
    pub interval: Duration,
}

/// `upstreams.<name>.tls`: HTTPS to the backends.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTls {
    /// Server name sent (SNI) and verified; default: the host of the first backend as written.
    pub sni: String,
    /// PEM CA bundle to verify the backends with; `None` = the system trust store.
    pub ca_file: Option<String>,
    /// Verify the backend certificate (chain and name). Default true.
    pub verify: bool,
}
