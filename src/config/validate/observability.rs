//! `observability:`: access log, log format and the bound on per-tenant metric series.

use super::common::Check;
use crate::config::model::{
    ObservabilitySettings, OtlpProtocol, TracingSettings, DEFAULT_LOG_BUFFER_BYTES,
    DEFAULT_TRACE_QUEUE,
};
use crate::config::raw::{RawObservability, RawTracing};
use std::time::Duration;

/// Default `service.instance.id`: one random id per process, the same across reloads.
static INSTANCE_ID: once_cell::sync::Lazy<String> =
    once_cell::sync::Lazy::new(|| uuid::Uuid::new_v4().to_string());

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
        tracing: raw
            .and_then(|r| r.tracing.as_ref())
            .and_then(|t| tracing(c, t)),
    }
}

/// `observability.tracing`: endpoint, protocol, sampling in [0, 1], queue bound, resource.
fn tracing(c: &mut Check, raw: &RawTracing) -> Option<TracingSettings> {
    let before = c.errors.len();
    let protocol = match raw.otlp.protocol.as_deref() {
        None | Some("grpc") => OtlpProtocol::Grpc,
        Some("http/protobuf") => OtlpProtocol::HttpProtobuf,
        Some(other) => {
            c.err(
                "observability.tracing.otlp.protocol",
                format!("\"{other}\" is not an OTLP protocol (grpc, http/protobuf)"),
            );
            OtlpProtocol::Grpc
        }
    };
    let endpoint = otlp_endpoint(c, &raw.otlp.endpoint, protocol);
    let sampling = raw.sampling.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&sampling) {
        c.err(
            "observability.tracing.sampling",
            format!("must be between 0 and 1 (got {sampling})"),
        );
    }
    let queue_size = match raw.queue_size {
        None => DEFAULT_TRACE_QUEUE,
        Some(v) if (1..=1_000_000).contains(&v) => v as usize,
        Some(v) => {
            c.err(
                "observability.tracing.queue_size",
                format!("must be between 1 and 1000000 (got {v})"),
            );
            DEFAULT_TRACE_QUEUE
        }
    };
    let path = "observability.tracing.otlp.timeout";
    let export_timeout = match raw.otlp.timeout.as_deref() {
        None => Some(Duration::from_secs(5)),
        Some(t) => c.duration(path, t).filter(|d| {
            let ok = !d.is_zero() && *d <= Duration::from_secs(60);
            if !ok {
                c.err(path, "must be between 1ms and 60s");
            }
            ok
        }),
    };
    let mut resource = raw.resource.clone().unwrap_or_default();
    for (key, value) in &resource {
        if key.trim().is_empty() || value.is_empty() {
            c.err(
                format!("observability.tracing.resource.{key}"),
                "keys and values must not be empty",
            );
        }
    }
    resource
        .entry("service.name".into())
        .or_insert_with(|| "tollgate".into());
    resource
        .entry("service.instance.id".into())
        .or_insert_with(|| INSTANCE_ID.clone());
    if c.errors.len() > before {
        return None;
    }
    Some(TracingSettings {
        endpoint: endpoint?,
        protocol,
        sampling,
        propagate: raw.propagate.unwrap_or(true),
        stages: raw.stages.unwrap_or(false),
        tenant: raw.tenant.unwrap_or(true),
        queue_size,
        export_timeout: export_timeout?,
        resource,
    })
}

/// The collector URL: `http://host:port` (gRPC, and HTTP/protobuf), `https://` for
/// HTTP/protobuf; HTTP/protobuf without a path gets `/v1/traces`.
fn otlp_endpoint(c: &mut Check, text: &str, protocol: OtlpProtocol) -> Option<String> {
    let path = "observability.tracing.otlp.endpoint";
    let uri = match text.parse::<http::Uri>() {
        Ok(u) if u.host().is_some_and(|h| !h.is_empty()) => u,
        _ => {
            c.err(
                path,
                format!("\"{text}\" is not a URL like http://127.0.0.1:4317"),
            );
            return None;
        }
    };
    match (uri.scheme_str(), protocol) {
        (Some("http"), _) | (Some("https"), OtlpProtocol::HttpProtobuf) => {}
        (Some("https"), OtlpProtocol::Grpc) => {
            c.err(
                path,
                "https is not supported with protocol grpc: use http:// (a local collector or \
                 agent) or protocol http/protobuf",
            );
            return None;
        }
        _ => {
            c.err(
                path,
                format!("\"{text}\": the scheme must be http or https"),
            );
            return None;
        }
    }
    let bare = matches!(uri.path(), "" | "/") && uri.query().is_none();
    Some(match protocol {
        OtlpProtocol::HttpProtobuf if bare => format!("{}/v1/traces", text.trim_end_matches('/')),
        _ => text.to_string(),
    })
}
