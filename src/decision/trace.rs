//! The decision service's server spans (`observability.tracing`, docs/observability.md#traces):
//! a `ShouldRateLimit` call or an HTTP check/report gets one server span like a proxied request,
//! the child of the caller's W3C `traceparent` when it sent one (parent-based sampling at
//! `sampling`), with the decision's attributes and the Redis calls it made. With tracing off
//! [`start`] returns `None` at its first test and [`run`] only awaits: no span, no allocation.

use crate::observe::labels::{Layer, Outcome};
use crate::observe::tracing::{self as otel, counted, HeaderExtractor, RedisUse, SpanFacts};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

/// The `rpc.service` of Envoy's rate limit service (v3).
pub const RLS_SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";

/// A traced decision call: its span, open until [`finish`].
pub struct CallTrace {
    tracing: Arc<otel::Tracing>,
    span: opentelemetry_sdk::trace::Span,
}

/// Which face answered the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// `ShouldRateLimit` over gRPC; the gRPC status code of the answer (0: OK).
    Grpc { code: i32 },
    /// `POST {path}` over HTTP; the HTTP status answered.
    Http { path: &'static str, status: u16 },
}

/// What one decision call decided: everything its span carries beside the face.
#[derive(Debug, Clone, Default)]
pub struct CallFacts {
    /// The caller as the listener saw it (`client.address`).
    pub client: Option<IpAddr>,
    /// The call's descriptor domain (`tollgate.domain`).
    pub domain: Option<String>,
    /// How the call was decided (`admitted`, `limited`, `failed_open`, ...); `None` when it
    /// was not decided (bad input, the store unavailable with `on_failure: unavailable`).
    pub decision: Option<Outcome>,
    /// The rule whose numbers the answer reports.
    pub policy: Option<String>,
    /// The caller's `X-Request-Id` (Envoy sends its own), to find the call.
    pub request_id: String,
}

/// Starts a call's span when tracing is on, continuing the W3C trace context in `headers`.
pub fn start(headers: &http::HeaderMap) -> Option<CallTrace> {
    let tracing = otel::active()?;
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    let span = tracing
        .tracer
        .span_builder("decision")
        .with_kind(SpanKind::Server)
        .with_start_time(SystemTime::now())
        .start_with_context(&tracing.tracer, &parent);
    Some(CallTrace { tracing, span })
}

/// Runs `work`, counting its Redis calls when the call is traced.
pub async fn run<F: Future>(trace: &Option<CallTrace>, work: F) -> (F::Output, RedisUse) {
    match trace {
        Some(_) => counted(work).await,
        None => (work.await, RedisUse::default()),
    }
}

/// The caller's `X-Request-Id`, when it sent a printable one of at most 128 bytes.
pub fn request_id(headers: &http::HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() <= 128)
        .unwrap_or_default()
        .to_string()
}

/// Ends a call's span: named after the RPC (`{rpc.service}/{rpc.method}`) or the route
/// (`POST /v1/check`), with the HTTP or RPC semantic conventions' attributes and tollgate's.
pub fn finish(trace: Option<CallTrace>, face: Face, facts: &CallFacts, redis: RedisUse) {
    let Some(CallTrace { tracing, mut span }) = trace else {
        return;
    };
    let refused = matches!(
        facts.decision,
        Some(Outcome::Limited | Outcome::RuleLimited | Outcome::FailedClosed)
    );
    let (status, method) = match face {
        Face::Grpc { .. } => (0, "POST"),
        Face::Http { status, .. } => (status, "POST"),
    };
    let common = SpanFacts {
        method,
        route: None,
        status,
        client: facts.client,
        decision: facts.decision,
        refused_by: refused.then_some(Layer::Tenant),
        policy: facts.policy.as_deref(),
        tenant: None,
        tier: None,
        redis,
        leased: false,
        queue_wait: None,
        request_id: &facts.request_id,
    };
    let mut kv = otel::attributes(&common, tracing.tenant);
    if let Some(d) = &facts.domain {
        kv.push(KeyValue::new("tollgate.domain", d.clone()));
    }
    let failed = match face {
        Face::Grpc { code } => {
            span.update_name(format!("{RLS_SERVICE}/ShouldRateLimit"));
            kv.push(KeyValue::new("rpc.system", "grpc"));
            kv.push(KeyValue::new("rpc.service", RLS_SERVICE));
            kv.push(KeyValue::new("rpc.method", "ShouldRateLimit"));
            kv.push(KeyValue::new("rpc.grpc.status_code", i64::from(code)));
            // Server errors per the RPC conventions: UNKNOWN, DEADLINE_EXCEEDED,
            // UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS.
            matches!(code, 2 | 4 | 12 | 13 | 14 | 15)
        }
        Face::Http { path, status } => {
            span.update_name(format!("POST {path}"));
            kv.push(KeyValue::new("http.route", path));
            status >= 500
        }
    };
    span.set_attributes(kv);
    if failed {
        span.set_status(Status::error(""));
    }
    span.end_with_timestamp(SystemTime::now());
}
