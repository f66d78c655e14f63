//! OpenTelemetry traces: the tracer in use ([`active`], installed by the runtime's exporter,
//! `crate::runtime::trace_export`), the traced request's state ([`RequestTrace`]) and the
//! attributes of a request's server span, made from what the request decided ([`attributes`],
//! pure). Attribute names follow the OpenTelemetry HTTP semantic conventions (v1.26+:
//! `http.request.method`, `http.route`, `http.response.status_code`, `client.address`) and
//! tollgate's own (`tollgate.*`, docs/observability.md#traces).

use crate::observe::labels::{Layer, Outcome};
pub use crate::store::redis::call_count::{counted, note_redis_call, RedisUse};
use arc_swap::ArcSwapOption;
use once_cell::sync::Lazy;
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::KeyValue;
use prometheus::{register_int_counter, register_int_counter_vec, IntCounter, IntCounterVec};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// The tracer requests use, with the settings the request path reads.
pub struct Tracing {
    /// Owns the export pipeline: dropping the last reference shuts it down.
    pub provider: opentelemetry_sdk::trace::SdkTracerProvider,
    pub tracer: opentelemetry_sdk::trace::SdkTracer,
    /// Send `traceparent`/`tracestate` to the backend.
    pub propagate: bool,
    /// One child span per stage.
    pub stages: bool,
    /// Put `tollgate.tenant` on the span.
    pub tenant: bool,
}

static ACTIVE: ArcSwapOption<Tracing> = ArcSwapOption::const_empty();

/// The tracer in use, `None` when tracing is off.
pub fn active() -> Option<Arc<Tracing>> {
    ACTIVE.load_full()
}

/// Puts `tracing` in use for the next requests (requests in flight finish with the one they
/// started with); returns the one it replaces.
pub fn install(tracing: Option<Arc<Tracing>>) -> Option<Arc<Tracing>> {
    ACTIVE.swap(tracing)
}

/// Span export counters (registered when tracing is first configured).
pub struct TraceMetrics {
    /// `tollgate_trace_spans_dropped_total{reason}`: `queue_full` (the export queue was full:
    /// the collector is slow or gone) or `export_failed` (the collector refused, failed or timed
    /// out).
    pub dropped: IntCounterVec,
    /// `tollgate_trace_spans_exported_total`: spans the collector accepted.
    pub exported: IntCounter,
}

/// The process-wide span export counters.
pub static TRACE_METRICS: Lazy<TraceMetrics> = Lazy::new(|| TraceMetrics {
    dropped: register_int_counter_vec!(
        "tollgate_trace_spans_dropped_total",
        "Trace spans dropped instead of exported, by reason (queue_full, export_failed)",
        &["reason"]
    )
    .unwrap(),
    exported: register_int_counter!(
        "tollgate_trace_spans_exported_total",
        "Trace spans the OTLP collector accepted"
    )
    .unwrap(),
});

/// A traced request's span and what only its span needs (`crate::proxy` fills it in).
pub struct RequestTrace {
    pub tracing: Arc<Tracing>,
    pub span: opentelemetry_sdk::trace::Span,
    /// Stage starts (name, time), with `tracing.stages`; each ends where the next starts.
    pub stages: Vec<(&'static str, std::time::SystemTime)>,
    pub redis: RedisUse,
    /// The tenant stage's admission (`admitted`, `fallback`, `pool_admitted`, `failed_open`).
    pub admitted_as: Option<Outcome>,
    pub queue_wait: Option<Duration>,
}

/// What a request decided and how it ended: everything its server span carries.
#[derive(Debug, Clone, Default)]
pub struct SpanFacts<'a> {
    pub method: &'a str,
    /// The matched route's path prefix (`http.route`) and name (`tollgate.route`).
    pub route: Option<(&'a str, &'a str)>,
    /// The status answered (a gRPC refusal's HTTP status, docs/grpc.md); 0 when none was.
    pub status: u16,
    /// `client.address`: the client as `server.trusted_proxies` resolved it.
    pub client: Option<IpAddr>,
    /// How the request was decided (`tollgate.decision`): the refusing outcome, else the
    /// tenant stage's admission (`admitted`, `fallback`, `pool_admitted`, `failed_open`).
    pub decision: Option<Outcome>,
    /// The layer that refused (`tollgate.refused_by`), none when admitted.
    pub refused_by: Option<Layer>,
    /// The policy (tier, calendar quota or limit rule) whose numbers the answer reports.
    pub policy: Option<&'a str>,
    pub tenant: Option<&'a str>,
    pub tier: Option<&'a str>,
    /// Redis use of the stages.
    pub redis: RedisUse,
    /// Admitted from tokens this instance leased in advance (a `lease` tier, no Redis call).
    pub leased: bool,
    /// Time waited for an upstream slot.
    pub queue_wait: Option<Duration>,
    /// The request id (`X-Request-Id`), to find the access log line.
    pub request_id: &'a str,
}

/// The failure policy an outcome was decided by, if any (`tollgate.failure_policy`).
pub fn failure_policy(outcome: Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Fallback => Some("local"),
        Outcome::FailedOpen => Some("open"),
        Outcome::FailedClosed => Some("closed"),
        _ => None,
    }
}

/// The server span's name: `{method} {http.route}`, or the method alone without a route
/// (HTTP semantic conventions: low-cardinality names only).
pub fn span_name(f: &SpanFacts<'_>) -> String {
    match f.route {
        Some((prefix, _)) => format!("{} {prefix}", f.method),
        None => f.method.to_string(),
    }
}

/// The server span's attributes; `tollgate.tenant` only `with_tenant`.
pub fn attributes(f: &SpanFacts<'_>, with_tenant: bool) -> Vec<KeyValue> {
    let mut kv = Vec::with_capacity(16);
    kv.push(KeyValue::new("http.request.method", f.method.to_string()));
    if let Some((prefix, name)) = f.route {
        kv.push(KeyValue::new("http.route", prefix.to_string()));
        kv.push(KeyValue::new("tollgate.route", name.to_string()));
    }
    if f.status > 0 {
        kv.push(KeyValue::new(
            "http.response.status_code",
            i64::from(f.status),
        ));
    }
    if let Some(ip) = f.client {
        kv.push(KeyValue::new("client.address", ip.to_string()));
    }
    if let Some(d) = f.decision {
        kv.push(KeyValue::new("tollgate.decision", d.as_str()));
        if let Some(p) = failure_policy(d) {
            kv.push(KeyValue::new("tollgate.failure_policy", p));
        }
    }
    if let Some(layer) = f.refused_by {
        kv.push(KeyValue::new("tollgate.refused_by", layer.as_str()));
    }
    if let Some(p) = f.policy {
        kv.push(KeyValue::new("tollgate.policy", p.to_string()));
    }
    if let (true, Some(t)) = (with_tenant, f.tenant) {
        kv.push(KeyValue::new("tollgate.tenant", t.to_string()));
    }
    if let Some(t) = f.tier {
        kv.push(KeyValue::new("tollgate.tier", t.to_string()));
    }
    kv.push(KeyValue::new(
        "tollgate.redis_calls",
        i64::from(f.redis.calls),
    ));
    if f.redis.coalesced {
        kv.push(KeyValue::new("tollgate.coalesced", true));
    }
    if f.leased {
        kv.push(KeyValue::new("tollgate.leased", true));
    }
    if let Some(w) = f.queue_wait {
        let ms = w.as_secs_f64() * 1000.0;
        kv.push(KeyValue::new("tollgate.upstream.queue_wait_ms", ms));
    }
    if !f.request_id.is_empty() {
        kv.push(KeyValue::new(
            "tollgate.request_id",
            f.request_id.to_string(),
        ));
    }
    kv
}

/// Reads W3C trace context headers from a request's headers.
pub struct HeaderExtractor<'a>(pub &'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Collects the W3C trace context headers to send (name, value).
#[derive(Default)]
pub struct HeaderPairs(pub Vec<(&'static str, String)>);

impl Injector for HeaderPairs {
    fn set(&mut self, key: &str, value: String) {
        let name = match key {
            "traceparent" => "traceparent",
            "tracestate" => "tracestate",
            _ => return,
        };
        self.0.push((name, value));
    }
}

#[cfg(test)]
mod tests;
