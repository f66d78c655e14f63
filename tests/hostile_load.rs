//! The gateway under a hostile client's load, black-box against the real binary and backend
//! (docs/http-hardening.md):
//! - request bodies trickled one byte at a time hold no upstream slot (HTTP/1.1 and h2c): they
//!   are buffered before the slot stage, so another tenant is still served; a body that stops
//!   gets 408 (`server.body_idle_timeout`), a streamed one that keeps trickling gets 408 at
//!   `server.body_read_timeout`, and every slot comes back;
//! - the connection limits (`server.max_connections`, `max_connections_per_client`) refuse the
//!   connection beyond their number with a 503 and count it;
//! - a log sink that takes nothing does not stall requests: access lines past
//!   `observability.log_buffer_bytes` are dropped and counted.
//!
//! Assertions are on statuses, reasons and counts; timeouts under test are short, every other
//! wait is generous.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Upstream `echo` (2 slots, a short queue) behind a catch-all anonymous route; `server` adds
/// to the harness's server settings.
fn slots_config(backend: &str, server: &str) -> GatewayConfig {
    GatewayConfig::new()
        .server(&format!("{{ threads: 2, grace_period: 1s, {server} }}"))
        .upstream_spec(
            "echo",
            &format!(
                "{{ backends: [\"{backend}\"], max_concurrency: 2, \
                 queue: {{ max: 2, timeout_ms: 300 }} }}"
            ),
        )
        .route("{ path_prefix: \"/\", upstream: echo, auth: none }")
}

fn in_flight(gw: &Gateway) -> f64 {
    metric_or_zero(gw, "tollgate_upstream_in_flight", &[("upstream", "echo")])
}

/// Opens a connection from `from` and sends a POST head announcing `length` body bytes and the
/// first byte of the body, no more.
async fn trickle(gw: &Gateway, from: &str, length: usize) -> RawConn {
    let mut conn = RawConn::connect(gw.listen_addr(), Some(ip(from)))
        .await
        .expect("connect");
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
         Content-Length: {length}\r\n\r\nx"
    );
    conn.write_raw(head.as_bytes()).await.expect("write head");
    conn
}

/// Six POSTs of one tenant whose bodies stop after one byte, on an upstream of 2 slots with a
/// queue of 2: another tenant's GETs are all served (the bodies are buffered before the slot
/// stage, holding nothing at the upstream); the buffered bytes are visible in the gauge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickled_bodies_do_not_starve_another_tenant() {
    let backend = Backend::start("trickle");
    let yaml = slots_config(&backend.addr(), "body_idle_timeout: 60s").yaml();
    let gw = Gateway::start(&yaml);
    let mut slow = Vec::new();
    for _ in 0..6 {
        slow.push(trickle(&gw, "127.0.0.2", 1000).await);
    }
    // Settled: all six bodies are being buffered (or, without buffering, hold the slots).
    let settled = eventually(Duration::from_secs(10), || {
        gw.metric("tollgate_request_body_buffer_bytes") == Some(6000.0) || in_flight(&gw) == 2.0
    })
    .await;
    assert!(settled, "the six POSTs arrived");
    let other = client_from(ip("127.0.0.3"));
    for i in 0..5 {
        let resp = other
            .get(gw.url(&format!("/other/{i}")))
            .send()
            .await
            .expect("GET");
        let status = resp.status().as_u16();
        assert_eq!(status, 200, "{}", resp.text().await.unwrap_or_default());
    }
    // The other tenant's last slot is released just after its answer.
    let idle = eventually(Duration::from_secs(10), || in_flight(&gw) == 0.0).await;
    assert!(idle, "no trickling body holds a slot");
    assert_eq!(
        gw.metric("tollgate_request_body_buffer_bytes"),
        Some(6000.0)
    );
    // The slow bodies complete, one after the other: each is forwarded whole.
    for mut conn in slow {
        conn.write_raw(&[b'y'; 999])
            .await
            .expect("rest of the body");
        let reply = conn.read_reply().await.expect("answer");
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let drained = eventually(Duration::from_secs(10), || {
        gw.metric("tollgate_request_body_buffer_bytes") == Some(0.0)
    })
    .await;
    assert!(drained, "the buffer budget comes back");
}

/// A body that stops arriving gets 408 `body_timeout` after `server.body_idle_timeout`, counted
/// as an http decision; it never reached the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_gets_408() {
    let backend = Backend::start("stall");
    let yaml = slots_config(&backend.addr(), "body_idle_timeout: 300ms").yaml();
    let gw = Gateway::start(&yaml);
    let mut conn = trickle(&gw, "127.0.0.2", 10).await;
    let reply = conn.read_reply().await.expect("answer");
    assert_eq!(reply.status, 408, "{}", reply.body);
    let p = problem(&reply.body);
    assert_eq!(p["reason"], "body_timeout", "{p}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap_or("")
            .contains("server.body_idle_timeout"),
        "{p}"
    );
    let labels = [
        ("layer", "http"),
        ("outcome", "body_timeout"),
        ("tier", "-"),
    ];
    assert_eq!(
        metric_or_zero(&gw, "tollgate_decisions_total", &labels),
        1.0
    );
    assert_eq!(backend.stats().requests, 0, "nothing reached the backend");
    assert_eq!(gw.metric("tollgate_request_body_buffer_bytes"), Some(0.0));
}

/// A body too large to buffer streams (holding its slot), and one that keeps trickling is cut
/// at `server.body_read_timeout` with 408; its slot comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_body_that_keeps_trickling_gets_408() {
    let backend = Backend::start("stream");
    let server = "body_buffer_bytes: 16, body_idle_timeout: 30s, body_read_timeout: 1s";
    let yaml = slots_config(&backend.addr(), server).yaml();
    let gw = Gateway::start(&yaml);
    let mut conn = trickle(&gw, "127.0.0.2", 100_000).await;
    let filled = eventually(Duration::from_secs(10), || in_flight(&gw) == 1.0).await;
    assert!(filled, "the streamed body holds a slot");
    let trickler = tokio::spawn(async move {
        for _ in 0..150 {
            if conn.write_raw(b"z").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        conn
    });
    let mut conn = trickler.await.unwrap();
    let reply = conn.read_reply().await.expect("answer");
    assert_eq!(reply.status, 408, "{}", reply.body);
    assert_eq!(problem(&reply.body)["reason"], "body_timeout");
    let freed = eventually(Duration::from_secs(10), || in_flight(&gw) == 0.0).await;
    assert!(freed, "the slot comes back");
    let labels = [
        ("layer", "http"),
        ("outcome", "body_timeout"),
        ("tier", "-"),
    ];
    assert_eq!(
        metric_or_zero(&gw, "tollgate_decisions_total", &labels),
        1.0
    );
}

/// HTTP/2 (h2c), many streams on one connection: six streams whose bodies stop after one byte
/// hold no slot either, so another tenant is served; the streams end with 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_streams_with_trickled_bodies_do_not_starve_another_tenant() {
    let backend = Backend::start("h2trickle");
    let yaml = slots_config(&backend.addr(), "body_idle_timeout: 3s")
        .listen(&["{ addr: \"{listen}\", h2: true }"])
        .yaml();
    let gw = Gateway::start(&yaml);
    let h2 = client_builder()
        .http2_prior_knowledge()
        .local_address(ip("127.0.0.2"))
        .build()
        .unwrap();
    let mut streams = Vec::new();
    for i in 0..6 {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
        tx.send(Ok(b"x".to_vec())).await.unwrap();
        let body = reqwest::Body::wrap_stream(tokio_stream_from(rx));
        let req = h2
            .post(gw.url(&format!("/h2/{i}")))
            .header("content-length", "1000")
            .body(body)
            .send();
        streams.push((tx, tokio::spawn(req)));
    }
    let settled = eventually(Duration::from_secs(10), || {
        gw.metric("tollgate_request_body_buffer_bytes") == Some(6000.0) || in_flight(&gw) == 2.0
    })
    .await;
    assert!(settled, "the six h2 streams arrived");
    let other = client_from(ip("127.0.0.3"));
    for i in 0..5 {
        let status = other
            .get(gw.url(&format!("/other/{i}")))
            .send()
            .await
            .expect("GET")
            .status();
        assert_eq!(status, 200);
    }
    let idle = eventually(Duration::from_secs(10), || in_flight(&gw) == 0.0).await;
    assert!(idle, "no trickling stream holds a slot");
    assert_eq!(
        gw.metric("tollgate_request_body_buffer_bytes"),
        Some(6000.0)
    );
    for (tx, req) in streams {
        let resp = req.await.unwrap().expect("h2 answer");
        assert_eq!(resp.status().as_u16(), 408);
        drop(tx);
    }
}

/// A stream of the chunks received on `rx`.
fn tokio_stream_from(
    rx: tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

/// `server.max_connections: 3`: the fourth open connection is refused with a 503
/// `connection_limit` (scope `listener`) and counted; once one closes, a new one is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_connection_cap_refuses_beyond_its_number() {
    let backend = Backend::start("conncap");
    let yaml = GatewayConfig::echo(&backend.addr(), "none")
        .server("{ threads: 2, grace_period: 1s, max_connections: 3 }")
        .yaml();
    let gw = Gateway::start(&yaml);
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut conn = RawConn::connect(gw.listen_addr(), None).await.unwrap();
        let reply = conn.request("GET", "/held", &[]).await.unwrap();
        assert_eq!(reply.status, 200);
        open.push(conn);
    }
    let mut fourth = RawConn::connect(gw.listen_addr(), None).await.unwrap();
    let reply = fourth.request("GET", "/fourth", &[]).await.unwrap();
    assert_eq!(reply.status, 503, "{}", reply.body);
    let p = problem(&reply.body);
    assert_eq!(p["reason"], "connection_limit", "{p}");
    assert_eq!(p["scope"], "listener", "{p}");
    let labels = [("listener", gw.listen_addr()), ("scope", "listener")];
    assert_eq!(
        metric_or_zero(&gw, "tollgate_connections_refused_total", &labels),
        1.0
    );
    let open_now = [("listener", gw.listen_addr())];
    assert_eq!(
        metric_or_zero(&gw, "tollgate_connections_open", &open_now),
        3.0
    );
    open.pop().unwrap().close();
    let freed = eventually(Duration::from_secs(10), || {
        metric_or_zero(&gw, "tollgate_connections_open", &open_now) == 2.0
    })
    .await;
    assert!(freed, "a closed connection gives its place back");
    let mut again = RawConn::connect(gw.listen_addr(), None).await.unwrap();
    assert_eq!(
        again.request("GET", "/again", &[]).await.unwrap().status,
        200
    );
}

/// `server.max_connections_per_client: 2`: a third connection from one address is refused
/// (scope `client`) while another address is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_client_connection_cap_refuses_that_client_only() {
    let backend = Backend::start("clientcap");
    let yaml = GatewayConfig::echo(&backend.addr(), "none")
        .server("{ threads: 2, grace_period: 1s, max_connections_per_client: 2 }")
        .yaml();
    let gw = Gateway::start(&yaml);
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut conn = RawConn::connect(gw.listen_addr(), Some(ip("127.0.0.2")))
            .await
            .unwrap();
        assert_eq!(conn.request("GET", "/a", &[]).await.unwrap().status, 200);
        open.push(conn);
    }
    let mut third = RawConn::connect(gw.listen_addr(), Some(ip("127.0.0.2")))
        .await
        .unwrap();
    let reply = third.request("GET", "/third", &[]).await.unwrap();
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(problem(&reply.body)["scope"], "client");
    let mut other = RawConn::connect(gw.listen_addr(), Some(ip("127.0.0.3")))
        .await
        .unwrap();
    assert_eq!(other.request("GET", "/b", &[]).await.unwrap().status, 200);
    let labels = [("listener", gw.listen_addr()), ("scope", "client")];
    assert_eq!(
        metric_or_zero(&gw, "tollgate_connections_refused_total", &labels),
        1.0
    );
}

/// The gateway with its stdout and stderr on a pipe nobody reads (a log sink that blocks once
/// the pipe's 64 KiB are full) and a 4 KiB access-log buffer: 600 requests are all answered,
/// and the access lines that did not fit are dropped and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_log_sink_does_not_stall_requests() {
    let backend = Backend::start("logsink");
    let (listen, admin) = (free_addr(), free_addr());
    let yaml = GatewayConfig::echo(&backend.addr(), "none")
        .section("observability", "{ log_buffer_bytes: 4096 }")
        .yaml()
        .replace("{listen}", &listen)
        .replace("{admin}", &admin);
    let dir = test_dir("tollgate-logsink-");
    let config = dir.path().join("gateway.yaml");
    std::fs::write(&config, yaml).unwrap();
    // The read ends stay open (held by `child`) and are never read.
    let child = Command::new(GATEWAY_BIN)
        .args(["run", "-c"])
        .arg(&config)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tollgate");
    let _child = KillOnDrop(child);
    let up = eventually(Duration::from_secs(30), || {
        http_request(&admin, "GET", "/healthz", Duration::from_millis(500))
            .is_ok_and(|r| r.status == 200)
    })
    .await;
    assert!(up, "the gateway answers /healthz");
    let http = http();
    let mut answered = 0;
    for i in 0..600 {
        let url = format!("http://{listen}/log/{i}?padding={}", "p".repeat(200));
        let status = http.get(&url).send().await.expect("answered").status();
        assert_eq!(status, 200);
        answered += 1;
    }
    assert_eq!(answered, 600);
    let metrics = http_request(&admin, "GET", "/metrics", Duration::from_secs(5)).unwrap();
    let dropped = metric_value(
        &metrics.body,
        "tollgate_log_lines_dropped_total{log=\"access\"}",
    )
    .unwrap_or(0.0);
    assert!(dropped > 0.0, "access lines dropped: {dropped}");
}

/// Kills and reaps the child when dropped (also when the test panics).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tollgate check` warns (exit 0) about a per-client connection limit behind trusted proxies
/// (the TCP peers are then the proxies), and not without one.
#[test]
fn check_warns_about_a_per_client_limit_behind_proxies() {
    let backend = Backend::start("warn");
    let with = |edge: &str| {
        GatewayConfig::echo(&backend.addr(), "none")
            .server("{ threads: 2, max_connections_per_client: 8 }")
            .edge(edge)
            .yaml()
    };
    let out = check_config(&with(
        "{ limit: 100, per: 1s, trusted_proxies: [\"10.1.2.3\"] }",
    ));
    assert_eq!(out.code(), Some(0), "{}", out.all());
    assert!(
        out.all().contains(
            "warning: server.max_connections_per_client: counts connections per TCP peer"
        ),
        "{}",
        out.all()
    );
    let out = check_config(&with("{ limit: 100, per: 1s }"));
    assert_eq!(out.code(), Some(0), "{}", out.all());
    assert!(!out.all().contains("warning:"), "{}", out.all());
}

/// `Expect: 100-continue`: the gateway answers `100 Continue` itself before reading the body it
/// buffers (the client waits for it), and the request is then served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_continue_gets_its_100_before_the_body_is_buffered() {
    let backend = Backend::start("continue");
    let yaml = slots_config(&backend.addr(), "body_idle_timeout: 60s").yaml();
    let gw = Gateway::start(&yaml);
    let mut conn = RawConn::connect(gw.listen_addr(), None).await.unwrap();
    conn.write_raw(
        b"POST /c HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    )
    .await
    .unwrap();
    let interim = tokio::time::timeout(Duration::from_secs(30), conn.read_head())
        .await
        .expect("an answer")
        .expect("a head");
    assert_eq!(interim.status, 100);
    conn.write_raw(b"hello").await.unwrap();
    let reply = conn.read_reply().await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
}
