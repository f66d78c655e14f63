//! The trace exporter's lifecycle: builds the OTLP pipeline of `observability.tracing` (gRPC or
//! HTTP/protobuf), puts its tracer in use ([`apply`], at start and on every reload) and ends it
//! ([`stop`], at exit).
//!
//! Export is off the request path and never waits on the collector: a finished span is handed
//! to a bounded queue with `try_send` (`queue_size` spans) and one export thread sends batches
//! of up to [`MAX_BATCH`] spans, [`LINGER`] after the first, each bounded by `otlp.timeout`.
//! When the queue is full (the collector is slow or gone) a span is dropped and counted
//! (`tollgate_trace_spans_dropped_total{reason="queue_full"}`); a batch the collector refuses
//! or does not answer in time is dropped and counted (`reason="export_failed"`), never retried,
//! so memory stays within the queue plus one batch. The SDK's own batch processor keeps its
//! drop count private, hence this small one.

use crate::config::model::{OtlpProtocol, TracingSettings};
use crate::observe::tracing::{install, Tracing, TRACE_METRICS};
use once_cell::sync::Lazy;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{
    Sampler, SdkTracerProvider, Span, SpanData, SpanExporter, SpanProcessor,
};
use opentelemetry_sdk::Resource;
use parking_lot::Mutex;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most spans in one export.
pub const MAX_BATCH: usize = 512;
/// A batch is sent this long after its first span, unless full before.
pub const LINGER: Duration = Duration::from_millis(200);

/// The settings of the pipeline in use (a reload with the same ones keeps it).
static CURRENT: Mutex<Option<TracingSettings>> = Mutex::new(None);

/// Puts `settings` in use: a new pipeline when they changed, none when tracing is off. Requests
/// in flight end their spans on the pipeline they started with; it shuts down after them.
pub fn apply(settings: Option<&TracingSettings>) {
    let mut current = CURRENT.lock();
    if current.as_ref() == settings {
        return;
    }
    let tracing = settings.map(|s| {
        Lazy::force(&TRACE_METRICS);
        Arc::new(pipeline(s))
    });
    *current = settings.cloned();
    drop(install(tracing));
    match settings {
        Some(s) => tracing::info!(
            endpoint = %s.endpoint,
            sampling = s.sampling,
            "trace export to an OTLP collector"
        ),
        None => tracing::debug!("trace export off"),
    }
}

/// Ends tracing at exit: stops new spans and sends what is queued (waiting at most
/// `otlp.timeout` for the collector).
pub fn stop() {
    *CURRENT.lock() = None;
    if let Some(old) = install(None) {
        let _ = old.provider.force_flush();
    }
}

/// The tracer provider of `s`: parent-based sampling at `s.sampling`, the resource, and the
/// queue processor feeding the export thread.
fn pipeline(s: &TracingSettings) -> Tracing {
    let (tx, rx) = mpsc::sync_channel(s.queue_size);
    let batch = MAX_BATCH.min(s.queue_size);
    let settings = s.clone();
    let spawned = std::thread::Builder::new()
        .name("tollgate-trace-export".into())
        .spawn(move || export_loop(&settings, rx, batch));
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "trace export thread not started: spans will be dropped");
    }
    let ratio = Sampler::TraceIdRatioBased(s.sampling);
    let provider = SdkTracerProvider::builder()
        .with_sampler(Sampler::ParentBased(Box::new(ratio)))
        .with_resource(resource(s))
        .with_span_processor(QueueProcessor {
            tx,
            wait: s.export_timeout,
        })
        .build();
    let tracer = provider.tracer("tollgate");
    Tracing {
        provider,
        tracer,
        propagate: s.propagate,
        stages: s.stages,
        tenant: s.tenant,
    }
}

/// The resource attributes of `s` (`service.name`, `service.instance.id`, ...).
fn resource(s: &TracingSettings) -> Resource {
    let attributes = s.resource.iter();
    Resource::builder_empty()
        .with_attributes(attributes.map(|(k, v)| KeyValue::new(k.clone(), v.clone())))
        .build()
}

/// What the export thread receives.
enum Msg {
    Span(Box<SpanData>),
    /// Send what is queued now, then acknowledge.
    Flush(mpsc::Sender<()>),
}

/// Hands finished spans to the export thread without waiting (a full queue drops the span).
#[derive(Debug)]
struct QueueProcessor {
    tx: SyncSender<Msg>,
    /// How long a flush or shutdown waits for the export thread.
    wait: Duration,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Msg")
    }
}

impl QueueProcessor {
    fn flush(&self) -> OTelSdkResult {
        let (ack, done) = mpsc::channel();
        match self.tx.try_send(Msg::Flush(ack)) {
            Ok(()) => done
                .recv_timeout(self.wait + LINGER)
                .map_err(|_| OTelSdkError::Timeout(self.wait)),
            Err(_) => Err(OTelSdkError::InternalFailure("export queue full".into())),
        }
    }
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        match self.tx.try_send(Msg::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                TRACE_METRICS
                    .dropped
                    .with_label_values(&["queue_full"])
                    .inc();
            }
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.flush()
    }

    /// Returns at once (the provider may be dropped on a request's thread): the export thread
    /// sends what is queued and ends when this processor, its queue's sender, is dropped.
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// The export thread: its own single-threaded runtime drives the OTLP client; batches of up
/// to `batch` spans, [`LINGER`] after the first; ends when the processor is gone.
fn export_loop(s: &TracingSettings, rx: Receiver<Msg>, batch: usize) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::warn!(error = %e, "trace export runtime not started: spans will be dropped");
            return;
        }
    };
    let mut exporter = match rt.block_on(async { exporter(s) }) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e, "OTLP exporter not built: spans will be dropped");
            return;
        }
    };
    exporter.set_resource(&resource(s));
    let mut spans: Vec<SpanData> = Vec::with_capacity(batch);
    loop {
        let mut flush = None;
        let mut closed = false;
        match rx.recv() {
            Ok(Msg::Span(span)) => spans.push(*span),
            Ok(Msg::Flush(ack)) => flush = Some(ack),
            Err(_) => closed = true,
        }
        let until = Instant::now() + LINGER;
        while flush.is_none() && !closed && spans.len() < batch {
            match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(Msg::Span(span)) => spans.push(*span),
                Ok(Msg::Flush(ack)) => flush = Some(ack),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => closed = true,
            }
        }
        if flush.is_some() || closed {
            // Everything queued before the flush goes too.
            while let Ok(Msg::Span(span)) = rx.try_recv() {
                spans.push(*span);
            }
        }
        for chunk in spans.chunks(batch.max(1)) {
            send(&rt, &exporter, chunk.to_vec(), s.export_timeout);
        }
        spans.clear();
        if let Some(ack) = flush {
            let _ = ack.send(());
        }
        if closed {
            return;
        }
    }
}

/// One export, at most `timeout`; counts the spans exported or dropped.
fn send(
    rt: &tokio::runtime::Runtime,
    exporter: &opentelemetry_otlp::SpanExporter,
    spans: Vec<SpanData>,
    timeout: Duration,
) {
    if spans.is_empty() {
        return;
    }
    let n = spans.len() as u64;
    let result = rt.block_on(async { tokio::time::timeout(timeout, exporter.export(spans)).await });
    match result {
        Ok(Ok(())) => TRACE_METRICS.exported.inc_by(n),
        outcome => {
            TRACE_METRICS
                .dropped
                .with_label_values(&["export_failed"])
                .inc_by(n);
            let error = match outcome {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".to_string(),
            };
            tracing::debug!(spans = n, %error, "trace export failed; spans dropped");
        }
    }
}

/// The OTLP span exporter of `s` (built inside the export thread's runtime).
fn exporter(
    s: &TracingSettings,
) -> Result<opentelemetry_otlp::SpanExporter, opentelemetry_otlp::ExporterBuildError> {
    let builder = opentelemetry_otlp::SpanExporter::builder();
    match s.protocol {
        OtlpProtocol::Grpc => builder
            .with_tonic()
            .with_endpoint(s.endpoint.clone())
            .with_timeout(s.export_timeout)
            .build(),
        OtlpProtocol::HttpProtobuf => builder
            .with_http()
            .with_endpoint(s.endpoint.clone())
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_timeout(s.export_timeout)
            .build(),
    }
}
