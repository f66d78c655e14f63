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
    /// `observability.tracing`: OpenTelemetry traces, off when absent.
    pub tracing: Option<TracingSettings>,
}

/// `observability.tracing`: one server span per request exported over OTLP
/// (docs/observability.md#traces). Every field can change on reload.
#[derive(Debug, Clone, PartialEq)]
pub struct TracingSettings {
    /// Where spans go: an `http://` URL (`https://` too for `http/protobuf`). For
    /// `http/protobuf` a URL without a path gets the OTLP traces path `/v1/traces`.
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    /// Share of new traces recorded, in [0, 1]; an incoming `traceparent` decides for its own
    /// trace (parent-based sampling).
    pub sampling: f64,
    /// Send the span's W3C `traceparent`/`tracestate` to the backend.
    pub propagate: bool,
    /// One child span per stage of the request.
    pub stages: bool,
    /// Put `tollgate.tenant` on spans (off for privacy).
    pub tenant: bool,
    /// Finished spans held for export at most; past it spans are dropped and counted.
    pub queue_size: usize,
    /// One export's deadline; an export past it is abandoned and its spans counted as dropped.
    pub export_timeout: std::time::Duration,
    /// Resource attributes: `service.name` (default `tollgate`), `service.instance.id`
    /// (default a random id per process) and any others configured, by key.
    pub resource: std::collections::BTreeMap<String, String>,
}

/// The OTLP transport (`observability.tracing.otlp.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (default port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (default port 4318).
    HttpProtobuf,
}

/// Default of `observability.tracing.queue_size`: finished spans held for export.
pub const DEFAULT_TRACE_QUEUE: usize = 2048;

/// Default of `observability.log_buffer_bytes`: 8 MiB.
pub const DEFAULT_LOG_BUFFER_BYTES: usize = 8 * 1024 * 1024;
