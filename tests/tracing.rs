//! OpenTelemetry traces (`observability.tracing`, docs/observability.md#traces), end to end: a
//! real OTLP receiver (`tests/otlp/receiver.py`, gRPC and HTTP/protobuf, on the
//! `opentelemetry-proto` messages from PyPI, pinned in `tests/otlp/requirements.txt` and
//! installed in the repository's venv by `scripts/venv.sh`), a real Redis, the echo backend
//! (which answers the request headers it got) and the real gateway.
//!
//! Determinism: spans are identified by the request id each request sends; a tier refills
//! ~never (`limit: 1, per: 1d`) so its second request is refused; every wait is a poll with a
//! wide deadline, nothing asserts a duration.

mod common;
#[path = "common/rls.rs"]
mod rls;

use common::*;
use rls::Rls;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The venv's python with the receiver's requirements.
fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = venv_with("tests/otlp/requirements.txt");
        format!("{}/bin/python", venv.display())
    })
}

/// `tests/otlp/receiver.py` on free ports: the spans it received, as JSON.
struct Receiver_ {
    child: Child,
    spans: Arc<Mutex<Vec<Value>>>,
    grpc: u16,
    http: u16,
}

impl Receiver_ {
    fn start(hold: bool) -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut cmd = Command::new(python());
        cmd.arg(root.join("tests/otlp/receiver.py"));
        if hold {
            cmd.arg("--hold");
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the OTLP receiver");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx): (_, Receiver<String>) = mpsc::channel();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let sink = spans.clone();
        std::thread::spawn(move || {
            let mut ports = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("PORTS ") {
                    if let Some(tx) = ports.take() {
                        let _ = tx.send(line);
                    }
                } else if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    sink.lock().unwrap().push(v["span"].clone());
                }
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the receiver's PORTS line");
        let mut it = line.split_whitespace().skip(1).map(|p| p.parse().unwrap());
        Receiver_ {
            child,
            spans,
            grpc: it.next().unwrap(),
            http: it.next().unwrap(),
        }
    }

    fn spans(&self) -> Vec<Value> {
        self.spans.lock().unwrap().clone()
    }

    /// The server span (kind 2) of the request with id `rid`, within 30 s.
    fn server_span(&self, rid: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found = self.spans().into_iter().find(|s| {
                s["kind"] == 2 && s["attributes"]["tollgate.request_id"].as_str() == Some(rid)
            });
            if let Some(s) = found {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "no server span for {rid}; got {:#?}",
                self.spans()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Receiver_ {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `observability:` section with `tracing` set to `tracing` (a flow map).
fn observability(tracing: &str) -> String {
    format!("{{ tracing: {tracing} }}")
}

/// A gateway config: echo behind `auth: required`, tiers `one` (1 a day, refused after) and
/// `open_t` (failure policy open), keys `key-a` (tenant `a`, tier `one`) and `key-o` (tenant
/// `o`, tier `open_t`), Redis at `redis_url`, and `observability.tracing`.
fn config(redis_url: &str, backend: &str, tracing: &str) -> String {
    GatewayConfig::echo(backend, "required")
        .redis(redis_url, "timeout: 200ms")
        .api_keys_always()
        .tier_lines(
            "  one: { limit: 1, per: 1d, burst: 1 }\n  \
             open_t: { limit: 1000, per: 1s, burst: 1000, on_failure: open }\n",
        )
        .api_key("key-a", "a", "one")
        .api_key("key-o", "o", "open_t")
        .section("observability", &observability(tracing))
        .yaml()
}

/// GET `/` with request id `rid`, the API key when given and extra headers.
async fn get(gw: &Gateway, rid: &str, key: Option<&str>, extra: &[(&str, &str)]) -> Reply {
    let mut req = http().get(gw.url("/")).header("x-request-id", rid);
    if let Some(k) = key {
        req = req.header("x-api-key", k);
    }
    for (n, v) in extra {
        req = req.header(*n, *v);
    }
    Reply::read(req.send().await.expect("request"))
        .await
        .expect("read")
}

/// The `traceparent` the backend received (from the echo body).
fn backend_traceparent(r: &Reply) -> Option<String> {
    let v: Value = serde_json::from_str(&r.body).expect("echo JSON");
    v["headers"]["traceparent"].as_str().map(str::to_string)
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_carry_the_decision_and_the_backend_joins_the_trace() {
    let collector = Receiver_::start(false);
    let mut redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tracing = format!(
        "{{ otlp: {{ endpoint: \"http://127.0.0.1:{}\", protocol: grpc }}, sampling: 1.0, \
         stages: true, resource: {{ service.name: edge-gw, deployment.environment: test }} }}",
        collector.grpc
    );
    let gw = Gateway::start(&config(&redis.url(), &backend.addr(), &tracing));

    // Admitted, continuing the client's trace.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let incoming = format!("00-{trace_id}-{parent}-01");
    let ok = get(
        &gw,
        "rid-admitted",
        Some("key-a"),
        &[("traceparent", &incoming)],
    )
    .await;
    assert_eq!(ok.status, 200, "{ok:?}");
    let limited = get(&gw, "rid-limited", Some("key-a"), &[]).await;
    assert_eq!(limited.status, 429, "{limited:?}");
    let anonymous = get(&gw, "rid-unauth", None, &[]).await;
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    redis.kill();
    let open = get(&gw, "rid-open", Some("key-o"), &[]).await;
    assert_eq!(open.status, 200, "{open:?}");

    let span = collector.server_span("rid-admitted");
    assert_eq!(span["trace_id"], trace_id, "the client's trace continues");
    assert_eq!(span["parent_span_id"], parent);
    assert_eq!(attr(&span, "tollgate.decision"), "admitted");
    assert_eq!(attr(&span, "tollgate.tenant"), "a");
    assert_eq!(attr(&span, "tollgate.tier"), "one");
    assert_eq!(attr(&span, "tollgate.redis_calls"), 1);
    assert_eq!(attr(&span, "http.request.method"), "GET");
    assert_eq!(attr(&span, "http.route"), "/");
    assert_eq!(attr(&span, "http.response.status_code"), 200);
    assert_eq!(attr(&span, "client.address"), "127.0.0.1");
    assert!(attr(&span, "tollgate.refused_by").is_null(), "{span}");
    assert_eq!(span["resource"]["service.name"], "edge-gw");
    assert_eq!(span["resource"]["deployment.environment"], "test");
    assert!(span["resource"]["service.instance.id"].is_string());
    // The backend got the span's own context: same trace, the server span as parent.
    let sent = backend_traceparent(&ok).expect("traceparent at the backend");
    let want = format!("00-{trace_id}-{}-01", span["span_id"].as_str().unwrap());
    assert_eq!(sent, want);

    let span = collector.server_span("rid-limited");
    assert_eq!(attr(&span, "tollgate.decision"), "limited");
    assert_eq!(attr(&span, "tollgate.refused_by"), "tenant");
    assert_eq!(attr(&span, "tollgate.policy"), "one");
    assert_eq!(attr(&span, "http.response.status_code"), 429);
    assert_eq!(span["parent_span_id"], "", "a new trace: no parent");

    let span = collector.server_span("rid-unauth");
    assert_eq!(attr(&span, "tollgate.decision"), "unauthenticated");
    assert_eq!(attr(&span, "tollgate.refused_by"), "identity");
    assert_eq!(attr(&span, "http.response.status_code"), 401);
    assert!(attr(&span, "tollgate.tenant").is_null());

    let span = collector.server_span("rid-open");
    assert_eq!(attr(&span, "tollgate.decision"), "failed_open");
    assert_eq!(attr(&span, "tollgate.failure_policy"), "open");
    assert_eq!(attr(&span, "tollgate.tier"), "open_t");
    let sent = backend_traceparent(&open).expect("traceparent at the backend");
    let server_id = span["span_id"].as_str().unwrap();
    assert!(sent.contains(server_id), "{sent} vs {span}");

    // Stage spans (tracing.stages) are children of the server span; never one per Redis call.
    let admitted = collector.server_span("rid-admitted");
    let id = admitted["span_id"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let names = loop {
        let names: Vec<String> = collector
            .spans()
            .iter()
            .filter(|s| s["parent_span_id"] == id)
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect();
        if names.iter().any(|n| n == "upstream") || Instant::now() > deadline {
            break names;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for stage in ["edge", "route", "identity", "tenant", "slot", "upstream"] {
        assert!(names.iter().any(|n| n == stage), "{stage} in {names:?}");
    }
    assert_eq!(names.len(), 7, "one span per stage and no more: {names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_zero_sends_nothing_and_reload_changes_endpoint_and_sampling() {
    let collector = Receiver_::start(false);
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let before = format!(
        "{{ otlp: {{ endpoint: \"http://127.0.0.1:{}\" }}, sampling: 0, tenant: false }}",
        collector.grpc
    );
    let gw = Gateway::start(&config(&redis.url(), &backend.addr(), &before));
    for i in 0..20 {
        let r = get(&gw, &format!("rid-unsampled-{i}"), Some("key-o"), &[]).await;
        assert_eq!(r.status, 200, "{r:?}");
        // Not recorded, yet the context goes on to the backend (flags 00: not sampled).
        let sent = backend_traceparent(&r).expect("traceparent at the backend");
        assert!(sent.ends_with("-00"), "{sent}");
    }

    let after = format!(
        "{{ otlp: {{ endpoint: \"http://127.0.0.1:{}\", protocol: http/protobuf }}, \
         sampling: 1, tenant: false }}",
        collector.http
    );
    gw.reload_ok(&config(&redis.url(), &backend.addr(), &after))
        .await;
    let r = get(&gw, "rid-sampled", Some("key-o"), &[]).await;
    assert_eq!(r.status, 200, "{r:?}");
    let span = collector.server_span("rid-sampled");
    assert_eq!(span["via"], "http", "the reloaded endpoint and protocol");
    assert!(attr(&span, "tollgate.tenant").is_null(), "tenant: false");
    assert_eq!(attr(&span, "tollgate.tier"), "open_t");
    // Nothing of the sampling-0 period ever arrived (it would have been sent within the
    // linger of the first pipeline, long before the reloaded one's span).
    let spans = collector.spans();
    assert!(
        spans.iter().all(|s| {
            let rid = s["attributes"]["tollgate.request_id"].as_str();
            !rid.unwrap_or_default().starts_with("rid-unsampled")
        }),
        "{spans:#?}"
    );
    // The receiver prints a span before it answers the export; the gateway counts the
    // export once that answer is back, a moment later.
    let exported = "tollgate_trace_spans_exported_total";
    assert!(
        wait_until(Duration::from_secs(30), || gw.metric_or_zero(exported)
            >= 1.0),
        "exported: {}",
        gw.metrics()
    );
    assert_eq!(gw.metric_or_zero(exported), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_gone_or_stuck_drops_spans_and_never_the_requests() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    // Nothing listens on this port: every export fails at once.
    let gone = format!(
        "{{ otlp: {{ endpoint: \"http://127.0.0.1:{}\" }}, sampling: 1 }}",
        free_port()
    );
    let gw = Gateway::start(&config(&redis.url(), &backend.addr(), &gone));
    for i in 0..30 {
        let r = get(&gw, &format!("rid-gone-{i}"), Some("key-o"), &[]).await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    let series = "tollgate_trace_spans_dropped_total{reason=\"export_failed\"}";
    assert!(
        wait_until(Duration::from_secs(30), || gw.metric_or_zero(series)
            >= 30.0),
        "dropped: {}",
        gw.metrics()
    );

    // A collector that accepts and never answers: the queue (8 spans) and one batch (8) are
    // all that is ever held; the rest is dropped and counted, and every request is answered.
    let stuck = Receiver_::start(true);
    let held = format!(
        "{{ otlp: {{ endpoint: \"http://127.0.0.1:{}\", timeout: 60s }}, sampling: 1, \
         queue_size: 8 }}",
        stuck.grpc
    );
    gw.reload_ok(&config(&redis.url(), &backend.addr(), &held))
        .await;
    for i in 0..100 {
        let r = get(&gw, &format!("rid-stuck-{i}"), Some("key-o"), &[]).await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    // A request's span ends once its response is written, a moment after the client read
    // it: the last requests' drops are counted shortly after their answers.
    let series = "tollgate_trace_spans_dropped_total{reason=\"queue_full\"}";
    let all_but_held = wait_until(Duration::from_secs(30), || {
        gw.metric_or_zero(series) >= 100.0 - 16.0
    });
    let full = gw.metric_or_zero(series);
    assert!(all_but_held, "queue_full drops: {full}");
    assert!(full <= 100.0 - 8.0, "the queue holds its 8: {full}");
    let failed = "tollgate_trace_spans_dropped_total{reason=\"export_failed\"}";
    assert_eq!(
        gw.metric_or_zero(failed),
        30.0,
        "the held batch is still waiting (60s), nothing else failed"
    );
}

#[test]
fn check_names_each_bad_tracing_field() {
    let base = GatewayConfig::echo("127.0.0.1:9", "none");
    for (tracing, field, says) in [
        (
            "{ otlp: { endpoint: \"not a url\" } }",
            "observability.tracing.otlp.endpoint",
            "not a URL",
        ),
        (
            "{ otlp: { endpoint: \"ftp://127.0.0.1:4317\" } }",
            "observability.tracing.otlp.endpoint",
            "scheme",
        ),
        (
            "{ otlp: { endpoint: \"http://127.0.0.1:4317\" }, sampling: 1.5 }",
            "observability.tracing.sampling",
            "between 0 and 1",
        ),
        (
            "{ otlp: { endpoint: \"http://127.0.0.1:4317\", protocol: thrift } }",
            "observability.tracing.otlp.protocol",
            "grpc, http/protobuf",
        ),
        (
            "{ otlp: { endpoint: \"http://127.0.0.1:4317\" }, queue_size: 0 }",
            "observability.tracing.queue_size",
            "between 1",
        ),
    ] {
        let yaml = base
            .clone()
            .section("observability", &observability(tracing))
            .yaml();
        let out = check_config(&yaml);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(!out.status.success(), "{tracing}: {all}");
        assert!(
            all.contains(field) && all.contains(says),
            "{tracing}: {all}"
        );
    }
    let good = base
        .section(
            "observability",
            &observability(
                "{ otlp: { endpoint: \"http://otel:4318\", protocol: http/protobuf }, \
                 sampling: 0.01, propagate: true }",
            ),
        )
        .yaml();
    let out = check_config(&good);
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_admission_makes_no_redis_call_and_the_slot_wait_is_on_the_span() {
    let collector = Receiver_::start(false);
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tracing = format!(
        "{{ otlp: {{ endpoint: \"http://127.0.0.1:{}\" }}, sampling: 1 }}",
        collector.grpc
    );
    let yaml = GatewayConfig::new()
        .upstream_with(
            "echo",
            &backend.addr(),
            "max_concurrency: 1, queue: { max: 10, timeout_ms: 5000 }",
        )
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .redis(&redis.url(), "")
        .api_keys_always()
        .tier_lines(
            "  leased: { limit: 1, per: 1h, burst: 100, lease: { tokens: 10, max_hold: 1m } }\n",
        )
        .api_key("key-l", "l", "leased")
        .section("observability", &observability(&tracing))
        .yaml();
    let gw = Gateway::start(&yaml);
    for rid in ["rid-lease-1", "rid-lease-2"] {
        let r = get(&gw, rid, Some("key-l"), &[]).await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    let first = collector.server_span("rid-lease-1");
    assert_eq!(attr(&first, "tollgate.redis_calls"), 1, "{first}");
    let second = collector.server_span("rid-lease-2");
    assert_eq!(attr(&second, "tollgate.redis_calls"), 0, "{second}");
    assert_eq!(attr(&second, "tollgate.leased"), true, "{second}");
    assert!(
        attr(&second, "tollgate.upstream.queue_wait_ms").is_f64(),
        "{second}"
    );
}

/// One `ShouldRateLimit` call by `tests/rls/client.py` (its own venv: grpcio) to `target`,
/// with the gRPC metadata `metadata`: the client's JSON answer.
fn rls_call(target: &str, user: &str, metadata: &[(&str, &str)]) -> Value {
    Rls::connect(target).send(serde_json::json!({
        "domain": "api",
        "descriptors": [{ "entries": [["user", user]] }],
        "metadata": metadata,
    }))
}

/// Waits until `addr` accepts connections.
fn wait_listening(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "{addr} never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The decision service's calls get server spans like proxied requests: a `ShouldRateLimit`
/// call (continuing the caller's `traceparent` sent as gRPC metadata) and an HTTP check, each
/// admitted and then refused (a rule of 1 a day), with the decision, the refusing rule and the
/// Redis calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_service_calls_get_server_spans() {
    let collector = Receiver_::start(false);
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let grpc = free_addr();
    let http_addr = free_addr();
    let tracing = format!(
        "{{ otlp: {{ endpoint: \"http://127.0.0.1:{}\", protocol: grpc }}, sampling: 1.0 }}",
        collector.grpc
    );
    let yaml = GatewayConfig::echo(&backend.addr(), "optional")
        .redis(&redis.url(), STRICT_REDIS)
        .section(
            "limits",
            "\n  - { name: per-user, match: { domain: api, descriptors: [user] }, \
             key: [\"descriptor:user\"], limit: 1, per: 1d }\n",
        )
        .section(
            "decision",
            &format!(
                "{{ grpc: {{ listen: \"{grpc}\" }}, \
                 http: {{ listen: \"{http_addr}\", token_env: TG_TRACE_DECISION_TOKEN }} }}"
            ),
        )
        .section("observability", &observability(&tracing))
        .yaml();
    let _gw = Gateway::start_with_env(&yaml, &[("TG_TRACE_DECISION_TOKEN", "s3cret")]);
    wait_listening(&grpc);
    wait_listening(&http_addr);

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let incoming = format!("00-{trace_id}-{parent}-01");
    let ok = rls_call(
        &grpc,
        "u1",
        &[("traceparent", &incoming), ("x-request-id", "rid-grpc-ok")],
    );
    assert_eq!(ok["response"]["overall_code"], "OK", "{ok}");
    let over = rls_call(&grpc, "u1", &[("x-request-id", "rid-grpc-limited")]);
    assert_eq!(over["response"]["overall_code"], "OVER_LIMIT", "{over}");

    let check = |rid: &'static str| {
        http()
            .post(format!("http://{http_addr}/v1/check"))
            .header("authorization", "Bearer s3cret")
            .header("x-request-id", rid)
            .header("content-type", "application/json")
            .body(r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u2"}]}]}"#)
            .send()
    };
    assert_eq!(check("rid-check-ok").await.unwrap().status(), 200);
    assert_eq!(check("rid-check-limited").await.unwrap().status(), 429);

    let span = collector.server_span("rid-grpc-ok");
    assert_eq!(span["trace_id"], trace_id, "the caller's trace continues");
    assert_eq!(span["parent_span_id"], parent);
    assert_eq!(
        span["name"],
        "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
    );
    assert_eq!(attr(&span, "rpc.system"), "grpc");
    assert_eq!(attr(&span, "rpc.method"), "ShouldRateLimit");
    assert_eq!(attr(&span, "rpc.grpc.status_code"), 0);
    assert_eq!(attr(&span, "tollgate.decision"), "admitted");
    assert_eq!(attr(&span, "tollgate.domain"), "api");
    assert_eq!(attr(&span, "tollgate.policy"), "per-user");
    assert_eq!(attr(&span, "tollgate.redis_calls"), 1);
    assert_eq!(attr(&span, "client.address"), "127.0.0.1");
    assert!(attr(&span, "tollgate.refused_by").is_null(), "{span}");

    let span = collector.server_span("rid-grpc-limited");
    assert_eq!(span["parent_span_id"], "", "a new trace: no parent");
    assert_eq!(attr(&span, "tollgate.decision"), "rule_limited");
    assert_eq!(attr(&span, "tollgate.refused_by"), "tenant");
    assert_eq!(attr(&span, "tollgate.policy"), "per-user");

    let span = collector.server_span("rid-check-ok");
    assert_eq!(span["name"], "POST /v1/check");
    assert_eq!(attr(&span, "http.route"), "/v1/check");
    assert_eq!(attr(&span, "http.request.method"), "POST");
    assert_eq!(attr(&span, "http.response.status_code"), 200);
    assert_eq!(attr(&span, "tollgate.decision"), "admitted");
    assert_eq!(attr(&span, "tollgate.redis_calls"), 1);

    let span = collector.server_span("rid-check-limited");
    assert_eq!(attr(&span, "http.response.status_code"), 429);
    assert_eq!(attr(&span, "tollgate.decision"), "rule_limited");
    assert_eq!(attr(&span, "tollgate.refused_by"), "tenant");
    assert_eq!(attr(&span, "tollgate.policy"), "per-user");
}
