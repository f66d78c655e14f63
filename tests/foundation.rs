//! Foundation behaviour of the gateway, black-box: routing, load balancing, health checks,
//! problem+json errors, request ids, forwarding headers, large bodies, `tollgate check`, metrics.
//! Every test starts its own backends and gateway on free loopback ports.

mod common;

use common::*;
use std::time::Duration;

/// A gateway config with the given `upstreams:` / `routes:` bodies (one entry a line, each
/// line indented by two spaces).
fn config(upstreams: &str, routes: &str) -> String {
    GatewayConfig::new()
        .upstream_lines(upstreams)
        .route_lines(routes)
        .yaml()
}

/// One upstream `echo` with a single backend and a catch-all route.
fn single(backend: &str) -> GatewayConfig {
    GatewayConfig::echo(backend, "none")
}

/// Which backend (`name`) answered `path` with the given Host header.
async fn served_by(http: &reqwest::Client, gw: &Gateway, host: &str, path: &str) -> String {
    let resp = http
        .get(gw.url(path))
        .header("host", host)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {host}{path}: {e}"));
    let v = echo_json(resp).await;
    assert_eq!(v["path"], path.split('?').next().unwrap());
    v["name"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_by_exact_host_wildcard_host_and_longest_prefix() {
    let a = Backend::start("a");
    let b = Backend::start("b");
    let c = Backend::start("c");
    let d = Backend::start("d");
    let yaml = config(
        &format!(
            "  up_a: {{ backends: [\"{}\"] }}\n  up_b: {{ backends: [\"{}\"] }}\n  \
             up_c: {{ backends: [\"{}\"] }}\n  up_d: {{ backends: [\"{}\"] }}\n",
            a.addr(),
            b.addr(),
            c.addr(),
            d.addr()
        ),
        "  - { host: \"api.example.com\", path_prefix: \"/orders\", upstream: up_a, auth: none }\n\
         \x20 - { host: \"*.example.org\", path_prefix: \"/shop\", upstream: up_b, auth: none }\n\
         \x20 - { path_prefix: \"/orders/special\", upstream: up_c, auth: none }\n\
         \x20 - { path_prefix: \"/\", upstream: up_d, auth: none }\n",
    );
    let gw = Gateway::start(&yaml);
    let http = client();

    // (Host, path, backend that must serve it.)
    let cases = [
        // Exact host + prefix.
        ("api.example.com", "/orders/1", "a"),
        ("api.example.com", "/orders", "a"),
        // Same host, a path only the catch-all matches.
        ("api.example.com", "/users/1", "d"),
        // Host with a port still matches its route.
        ("api.example.com:8080", "/orders/2", "a"),
        // Wildcard host: any subdomain, at any depth; not the bare domain.
        ("eu.example.org", "/shop/cart", "b"),
        ("x.eu.example.org", "/shop", "b"),
        ("example.org", "/shop/cart", "d"),
        ("eu.example.org", "/other", "d"),
        // Hostless routes: the longest prefix wins.
        ("other.test", "/orders/special/9", "c"),
        ("other.test", "/orders/1", "d"),
        ("other.test", "/", "d"),
    ];
    for (host, path, backend) in cases {
        assert_eq!(
            served_by(&http, &gw, host, path).await,
            backend,
            "{host}{path}"
        );
    }

    assert_eq!(a.stats().requests, 3);
    assert_eq!(b.stats().requests, 2);
    assert_eq!(c.stats().requests, 1);
    assert_eq!(d.stats().requests, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_backends_of_one_upstream_share_the_traffic() {
    let a = Backend::start("a");
    let b = Backend::start("b");
    let yaml = config(
        &format!(
            "  echo: {{ backends: [\"{}\", \"{}\"] }}\n",
            a.addr(),
            b.addr()
        ),
        "  - { path_prefix: \"/\", upstream: echo, auth: none }\n",
    );
    let gw = Gateway::start(&yaml);
    let http = client();
    for i in 0..20 {
        let resp = http.get(gw.url(&format!("/rr/{i}"))).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    let (sa, sb) = (a.stats().requests, b.stats().requests);
    assert_eq!(sa + sb, 20);
    assert!(sa > 0 && sb > 0, "both backends get traffic: a={sa} b={sb}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_check_takes_an_unhealthy_backend_out_of_rotation() {
    let a = Backend::start("a");
    let b = Backend::start("b");
    let yaml = config(
        &format!(
            "  echo: {{ backends: [\"{}\", \"{}\"], health_check: {{ path: \"/healthz\", interval_s: 1 }} }}\n",
            a.addr(),
            b.addr()
        ),
        "  - { path_prefix: \"/\", upstream: echo, auth: none }\n",
    );
    let gw = Gateway::start(&yaml);
    b.set_healthy(false);
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    a.reset();
    b.reset();

    let http = client();
    for i in 0..20 {
        let resp = http.get(gw.url(&format!("/h/{i}"))).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(echo_json(resp).await["name"], "a");
    }
    assert_eq!(a.stats().requests, 20);
    assert_eq!(b.stats().requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_is_a_404_problem() {
    let a = Backend::start("a");
    let yaml = config(
        &format!("  echo: {{ backends: [\"{}\"] }}\n", a.addr()),
        "  - { host: \"only.example.com\", path_prefix: \"/api\", upstream: echo, auth: none }\n",
    );
    let gw = Gateway::start(&yaml);
    let http = client();

    let resp = http
        .get(gw.url("/api/x"))
        .header("host", "other.example.com")
        .send()
        .await
        .unwrap();
    assert!(header_str(&resp, "x-request-id").is_some_and(|v| !v.is_empty()));
    let p = expect_problem(resp, 404).await;
    assert!(p["type"].is_string() && p["title"].is_string(), "{p}");

    let resp = http
        .get(gw.url("/elsewhere"))
        .header("host", "only.example.com")
        .send()
        .await
        .unwrap();
    expect_problem(resp, 404).await;
    assert_eq!(a.stats().requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connection_is_a_502_problem() {
    // A port nothing listens on.
    let dead = free_addr();
    let gw = Gateway::start(&single(&dead).yaml());
    let resp = client().get(gw.url("/x")).send().await.unwrap();
    assert!(header_str(&resp, "x-request-id").is_some_and(|v| !v.is_empty()));
    let p = expect_problem(resp, 502).await;
    assert!(p["detail"].is_string(), "{p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_read_timeout_is_a_504_problem() {
    let a = Backend::start("a");
    let yaml = config(
        &format!(
            "  echo: {{ backends: [\"{}\"], read_timeout: 300ms }}\n",
            a.addr()
        ),
        "  - { path_prefix: \"/\", upstream: echo, auth: none }\n",
    );
    let gw = Gateway::start(&yaml);
    let http = client();
    let resp = http
        .get(gw.url("/slow?delay_ms=2000"))
        .send()
        .await
        .unwrap();
    let p = expect_problem(resp, 504).await;
    // Named by its upstream's name, never by the backend's address.
    assert_eq!(p["upstream"], "echo", "{p}");
    assert!(!p.to_string().contains(&a.addr()), "{p}");
    // A fast request on the same upstream is fine.
    let resp = http.get(gw.url("/fast")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_id_is_generated_or_echoed() {
    let a = Backend::start("a");
    let gw = Gateway::start(&single(&a.addr()).yaml());
    let http = client();

    let resp = http.get(gw.url("/id")).send().await.unwrap();
    let id = header_str(&resp, "x-request-id").expect("generated X-Request-Id");
    assert!(is_uuid_like(&id), "generated id {id:?} looks like a UUID");
    echo_json(resp).await;

    let resp = http.get(gw.url("/id")).send().await.unwrap();
    let other = header_str(&resp, "x-request-id").expect("generated X-Request-Id");
    assert_ne!(id, other, "each request gets its own id");

    let resp = http
        .get(gw.url("/id"))
        .header("x-request-id", "client-chosen-42")
        .send()
        .await
        .unwrap();
    assert_eq!(
        header_str(&resp, "x-request-id").as_deref(),
        Some("client-chosen-42")
    );
    echo_json(resp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_sees_forwarded_for_and_proto() {
    let a = Backend::start("a");
    let gw = Gateway::start(&single(&a.addr()).yaml());

    let v = echo_json(
        client_from(ip("127.0.0.2"))
            .get(gw.url("/fwd"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v["headers"]["x-forwarded-for"], "127.0.0.2", "{v}");
    assert_eq!(v["headers"]["x-forwarded-proto"], "http", "{v}");

    // Whatever a client claims, the last entry is the peer the gateway saw.
    let v = echo_json(
        client_from(ip("127.0.0.3"))
            .get(gw.url("/fwd"))
            .header("x-forwarded-for", "203.0.113.9")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let xff = v["headers"]["x-forwarded-for"].as_str().unwrap_or_default();
    assert_eq!(
        xff.rsplit(',').next().map(str::trim),
        Some("127.0.0.3"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_mib_upload_and_download_are_byte_identical() {
    const SIZE: usize = 5 * 1024 * 1024;
    let a = Backend::start("a");
    let gw = Gateway::start(&single(&a.addr()).yaml());
    let http = client();

    let upload: Vec<u8> = (0..SIZE).map(|_| rand::random::<u8>()).collect();
    let resp = http
        .post(gw.url("/upload?echo=1"))
        .header("content-type", "application/octet-stream")
        .body(upload.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.bytes().await.unwrap();
    assert_eq!(body.len(), SIZE);
    assert!(body[..] == upload[..], "upload round trip differs");

    let resp = http
        .get(gw.url(&format!("/download?size={SIZE}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.bytes().await.unwrap();
    assert_eq!(body.len(), SIZE);
    assert!(body[..] == echo_pattern(SIZE)[..], "download differs");
}

const CHECK_BASE: &str = "listen: [\"{listen}\"]\n\
admin: { listen: \"{admin}\" }\n\
upstreams:\n  orders: { backends: [\"127.0.0.1:9001\"] }\n";

#[test]
fn check_accepts_a_good_config() {
    let out = check_config(&format!(
        "{CHECK_BASE}routes:\n  - {{ path_prefix: \"/\", upstream: orders, auth: none }}\n"
    ));
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert!(out.all().to_lowercase().contains("ok"), "{out:?}");
}

fn check_fails_with(yaml: &str, expected: &[&str]) {
    let out = check_config(yaml);
    assert_eq!(out.code(), Some(1), "{out:?}");
    for needle in expected {
        assert!(
            out.stderr.contains(needle),
            "stderr lacks {needle:?}:\n{}",
            out.stderr
        );
    }
}

#[test]
fn check_reports_an_unknown_upstream() {
    check_fails_with(
        &format!("{CHECK_BASE}routes:\n  - {{ path_prefix: \"/\", upstream: ordrs }}\n"),
        &["routes[0].upstream: no upstream named \"ordrs\""],
    );
}

#[test]
fn check_reports_an_unknown_field() {
    check_fails_with(
        "listen: [\"{listen}\"]\n\
         upstreams:\n  orders: { backends: [\"127.0.0.1:9001\"], max_concurency: 5 }\n\
         routes:\n  - { path_prefix: \"/\", upstream: orders }\n",
        &["max_concurency"],
    );
}

#[test]
fn check_reports_a_non_positive_limit() {
    check_fails_with(
        &format!(
            "{CHECK_BASE}redis: {{ url: \"redis://127.0.0.1:6379/0\" }}\n\
             tiers:\n  free: {{ limit: -5, per: 1m }}\n\
             routes:\n  - {{ path_prefix: \"/\", upstream: orders }}\n"
        ),
        &["tiers.free.limit: must be greater than zero"],
    );
}

#[test]
fn check_reports_a_bad_duration() {
    check_fails_with(
        &format!(
            "{CHECK_BASE}redis: {{ url: \"redis://127.0.0.1:6379/0\" }}\n\
             tiers:\n  free: {{ limit: 5, per: 5x }}\n\
             routes:\n  - {{ path_prefix: \"/\", upstream: orders }}\n"
        ),
        &["tiers.free.per: ", "5x"],
    );
}

#[test]
fn check_reports_yaml_syntax_errors_with_a_line() {
    check_fails_with(
        "listen: [\"{listen}\"\nupstreams:\n  orders: { backends: [\"127.0.0.1:9001\"] }\n",
        &["line"],
    );
}

#[test]
fn check_reports_every_problem() {
    let out = check_config(&format!(
        "{CHECK_BASE}redis: {{ url: \"redis://127.0.0.1:6379/0\" }}\n\
         tiers:\n  free: {{ limit: -5, per: 1m }}\n\
         routes:\n  - {{ path_prefix: \"/\", upstream: ordrs }}\n"
    ));
    assert_eq!(out.code(), Some(1), "{out:?}");
    assert!(
        out.stderr.contains("routes[0].upstream: "),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("tiers.free.limit: "), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_by_route_and_status_class() {
    let a = Backend::start("a");
    let yaml = config(
        &format!("  echo: {{ backends: [\"{}\"] }}\n", a.addr()),
        "  - { path_prefix: \"/api\", upstream: echo, auth: none }\n\
         \x20 - { path_prefix: \"/\", upstream: echo, auth: none }\n",
    );
    let gw = Gateway::start(&yaml);
    assert_eq!(gw.admin_get("/readyz").status, 200);
    let http = client();
    for _ in 0..3 {
        assert_eq!(
            http.get(gw.url("/api/x")).send().await.unwrap().status(),
            200
        );
    }
    for _ in 0..2 {
        let resp = http.get(gw.url("/api/x?status=503")).send().await.unwrap();
        assert_eq!(resp.status(), 503);
    }
    assert_eq!(
        http.get(gw.url("/other")).send().await.unwrap().status(),
        200
    );

    let requests = |route: &str, class: &str| {
        metric(
            &gw,
            "tollgate_requests_total",
            &[("route", route), ("status_class", class)],
        )
    };
    // Counters are updated after the response is sent: allow them a moment.
    let settled = eventually(Duration::from_secs(5), || {
        requests("routes[0]", "2xx") == Some(3.0)
            && requests("routes[0]", "5xx") == Some(2.0)
            && requests("routes[1]", "2xx") == Some(1.0)
    })
    .await;
    assert!(settled, "metrics:\n{}", gw.metrics());
    assert!(
        gw.metrics().contains("tollgate_request_duration_seconds"),
        "duration histogram missing:\n{}",
        gw.metrics()
    );
}

/// SIGTERM: `/readyz` turns 503 while the in-flight request still completes within
/// `server.grace_period_s`, then the process exits cleanly. `server.threads` sets the number of
/// proxy worker threads (Pingora names them after the service).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_requests_and_readyz_turns_503() {
    let a = Backend::start("a");
    let yaml = single(&a.addr())
        .server("{ threads: 3, grace_period_s: 5 }")
        .yaml();
    let mut gw = Gateway::start(&yaml);
    let workers = std::fs::read_dir(format!("/proc/{}/task", gw.pid()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "tollgate proxy")
        .count();
    // Tokio names its blocking-pool threads (a DNS lookup, a file read) after the runtime too,
    // so one may briefly join the three workers.
    assert!(
        workers >= 3,
        "server.threads: 3, found {workers} worker threads"
    );
    assert_eq!(gw.admin_get("/readyz").status, 200);

    let slow = tokio::spawn({
        let url = gw.url("/slow?delay_ms=1500");
        async move { client().get(url).send().await.map(|r| r.status().as_u16()) }
    });
    assert!(
        eventually(Duration::from_secs(5), || a.stats().in_flight == 1).await,
        "the slow request reached the backend"
    );
    gw.signal("TERM");
    assert!(
        eventually(Duration::from_secs(5), || gw.admin_get("/readyz").status
            == 503)
        .await,
        "/readyz answers 503 once graceful shutdown starts"
    );
    assert_eq!(
        slow.await.unwrap().expect("in-flight request answered"),
        200
    );
    let status = gw
        .wait_exit(Duration::from_secs(20))
        .expect("exits after the grace period");
    assert!(status.success(), "{status:?}");
}

/// SIGTERM to a gateway with nothing in flight: it exits with status 0 long before its 60 s
/// grace period ends (an idle keep-alive connection does not hold it), its access log flushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_gateway_exits_on_sigterm_before_its_grace_period() {
    let a = Backend::start("a");
    let yaml = single(&a.addr()).server("{ grace_period: 60s }").yaml();
    let mut gw = Gateway::start(&yaml);
    let http = client();
    let r = http
        .get(gw.url("/warm-before-sigterm"))
        .send()
        .await
        .expect("served");
    assert_eq!(r.status(), 200);
    r.bytes().await.expect("body");
    gw.signal("TERM");
    let status = gw
        .wait_exit(Duration::from_secs(20))
        .expect("an idle gateway exits without waiting for its grace period");
    assert!(status.success(), "{status:?}");
    let log = gw.log();
    assert!(
        log.contains("exiting before the grace period ends"),
        "{}",
        gw.log_tail(20)
    );
    assert!(
        log.contains("/warm-before-sigterm"),
        "the access log is flushed before the exit: {}",
        gw.log_tail(20)
    );
    drop(http);
}

/// A client's request id is kept only when it is one field of visible ASCII; a spaced, tabbed or
/// duplicated id is replaced by a new UUID, the same in the response, at the backend and in the
/// access log (so an id cannot add fields to a text log line).
#[test]
fn only_one_visible_request_id_is_kept() {
    let a = Backend::start("a");
    let gw = Gateway::start(&single(&a.addr()).yaml());
    let send = |headers: &[(&str, &str)]| {
        let (r, v) = echo_get(gw.listen_addr(), "/id", headers);
        let id = r.header("x-request-id").expect("X-Request-Id").to_string();
        assert_eq!(v["headers"]["x-request-id"], id.as_str(), "{v}");
        id
    };
    assert_eq!(send(&[("X-Request-Id", "kept-1")]), "kept-1");
    for refused in [
        vec![("X-Request-Id", "a b")],
        vec![("X-Request-Id", "a\tb")],
        vec![("X-Request-Id", r#"x tenant="acme" status=200"#)],
        vec![("X-Request-Id", "one"), ("X-Request-Id", "two")],
        vec![("X-Request-Id", "same"), ("x-request-id", "same")],
    ] {
        let id = send(&refused);
        assert!(is_uuid_like(&id), "{refused:?} kept as {id:?}");
    }
    assert_eq!(a.stats().requests, 6);
}

/// Every `X-Forwarded-For` field the client sent reaches the backend, in order and as one list,
/// followed by the peer: the list the edge stage reads is the list the backend gets.
#[test]
fn every_forwarded_for_field_is_forwarded() {
    let a = Backend::start("a");
    let gw = Gateway::start(&single(&a.addr()).yaml());
    let (_, v) = echo_get(
        gw.listen_addr(),
        "/fwd",
        &[
            ("X-Forwarded-For", "203.0.113.6"),
            ("X-Forwarded-For", "203.0.113.9, 198.51.100.2"),
        ],
    );
    assert_eq!(
        v["headers"]["x-forwarded-for"], "203.0.113.6, 203.0.113.9, 198.51.100.2, 127.0.0.1",
        "{v}"
    );
}

/// `tollgate hash-key` refuses an empty key (it would store the empty string's digest), and the
/// help's upgrade example runs the new binary in the background (`run` blocks).
#[test]
fn hash_key_refuses_an_empty_key_and_help_shows_a_runnable_upgrade() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let hash = |input: &str| {
        let mut child = Command::new(GATEWAY_BIN)
            .arg("hash-key")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hash-key");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().expect("hash-key output")
    };
    for empty in ["", "\n"] {
        let out = hash(empty);
        assert_eq!(out.status.code(), Some(1), "{empty:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("the key is empty"),
            "{out:?}"
        );
    }
    let out = hash("s3cret\n");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        sha256_hex("s3cret")
    );
    let help = Command::new(GATEWAY_BIN)
        .arg("--help")
        .output()
        .expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--upgrade & kill -QUIT <old pid>"), "{help}");
    assert!(!help.contains("--upgrade &&"), "{help}");
}
