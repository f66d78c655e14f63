//! Tests of the test harness itself (`tests/common`): redis-server control, the `tollgate-echo`
//! backend and its counters, the helpers. None of them needs a working gateway except
//! `gateway_start_failure_reports_the_log`, which only needs `tollgate run` to exit non-zero on a
//! broken config.

mod common;

use common::*;
use std::collections::HashSet;
use std::io::Write;
use std::time::Duration;

#[test]
fn free_ports_are_unique_and_bindable() {
    let mut seen = HashSet::new();
    for _ in 0..200 {
        let port = free_port();
        assert!(seen.insert(port), "port {port} handed out twice");
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("free port is bindable");
    }
}

#[test]
fn redis_keys_pttl_and_command_stats() {
    let redis = RedisServer::start();
    assert_eq!(redis.url(), format!("redis://127.0.0.1:{}/0", redis.port()));
    let mut con = redis.conn();
    redis::cmd("SET")
        .arg("t:{a}:tb")
        .arg("1")
        .arg("PX")
        .arg(60_000)
        .query::<()>(&mut con)
        .unwrap();
    redis::cmd("SET")
        .arg("t:{b}:tb")
        .arg("1")
        .query::<()>(&mut con)
        .unwrap();
    redis::cmd("SET")
        .arg("other")
        .arg("1")
        .query::<()>(&mut con)
        .unwrap();

    assert_eq!(redis.keys("t:*"), vec!["t:{a}:tb", "t:{b}:tb"]);
    let pttl = redis.pttl("t:{a}:tb");
    assert!(pttl > 0 && pttl <= 60_000, "pttl {pttl}");
    assert_eq!(redis.pttl("t:{b}:tb"), -1);
    assert_eq!(redis.pttl("missing"), -2);

    assert_eq!(redis.command_calls("set"), 3);
    assert_eq!(redis.command_calls("evalsha"), 0);
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return 1")
        .query(&mut con)
        .unwrap();
    for _ in 0..2 {
        let one: i64 = redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(0)
            .query(&mut con)
            .unwrap();
        assert_eq!(one, 1);
    }
    assert_eq!(redis.command_calls("evalsha"), 2);
    assert_eq!(redis.command_calls("EVALSHA"), 2);
    assert_eq!(redis.command_calls("script|load"), 1);

    redis.reset_stats();
    assert_eq!(redis.command_calls("evalsha"), 0);
    redis.flushall();
    assert!(redis.keys("*").is_empty());
}

#[test]
fn redis_pause_and_resume() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    redis.pause();
    con.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let err = redis::cmd("PING").query::<String>(&mut con);
    assert!(err.is_err(), "a paused redis must not answer: {err:?}");
    redis.resume();
    // The timed-out connection may hold a late reply; use a fresh one.
    let pong: String = redis::cmd("PING").query(&mut redis.conn()).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn redis_kill_and_restart_on_the_same_port() {
    let mut redis = RedisServer::start();
    let port = redis.port();
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut redis.conn())
        .unwrap();
    let old_pid = redis.pid();

    redis.kill();
    assert!(!redis.is_running());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "a killed redis refuses connections"
    );

    redis.restart();
    assert!(redis.is_running());
    assert_eq!(redis.port(), port);
    assert_ne!(redis.pid(), old_pid);
    assert!(
        redis.keys("*").is_empty(),
        "no persistence: a restart is empty"
    );

    // Restart also works on a live server.
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut redis.conn())
        .unwrap();
    redis.restart();
    assert!(redis.keys("*").is_empty());
}

/// A server of another test that took the port in between is never taken for this handle's
/// own: the start fails on "address in use" (and `start` retries on another port) instead of
/// going on against a server `kill` does not stop.
#[test]
fn redis_restart_onto_a_port_taken_by_another_server_fails() {
    let mut redis = RedisServer::start();
    let port = redis.port();
    redis.kill();
    let mut other = std::process::Command::new(redis_server_binary())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the other redis-server");
    let up = wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let restarted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| redis.restart()));
    let _ = other.kill();
    let _ = other.wait();
    assert!(up, "the other server listens");
    assert!(
        restarted.is_err(),
        "the other server's answer was taken for the restarted one's"
    );
}

#[test]
fn command_calls_parser() {
    let info = "# Commandstats\r\ncmdstat_evalsha:calls=42,usec=10,usec_per_call=0.2,rejected_calls=0,failed_calls=1\r\ncmdstat_script|load:calls=3,usec=1\r\n";
    assert_eq!(parse_command_calls(info, "evalsha"), 42);
    assert_eq!(parse_command_calls(info, "script|load"), 3);
    assert_eq!(parse_command_calls(info, "eval"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_answers_json_describing_the_request() {
    let backend = Backend::start("alpha");
    let resp = client()
        .post(backend.url("/some/path?x=1&y=two"))
        .header("X-Multi", "a")
        .header("X-Multi", "b")
        .header("X-Request-Id", "rid-1")
        .body("hello world")
        .send()
        .await
        .unwrap();
    assert_eq!(
        header_str(&resp, "content-type").as_deref(),
        Some("application/json")
    );
    let v = echo_json(resp).await;
    assert_eq!(v["name"], "alpha");
    assert_eq!(v["method"], "POST");
    assert_eq!(v["path"], "/some/path");
    assert_eq!(v["query"], "x=1&y=two");
    assert_eq!(v["body_len"], 11);
    assert_eq!(v["headers"]["x-multi"], "a, b");
    assert_eq!(v["headers"]["x-request-id"], "rid-1");
    assert_eq!(v["headers"]["host"], backend.addr());

    let v = echo_json(client().get(backend.url("/")).send().await.unwrap()).await;
    assert_eq!(v["query"], "");
    assert_eq!(v["body_len"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_counts_requests_and_peak_concurrency() {
    let backend = Backend::start("b");
    assert_eq!(backend.stats(), Stats::default());
    let http = client();
    let calls = (0..5).map(|_| {
        let http = http.clone();
        let url = backend.url("/slow?delay_ms=500");
        tokio::spawn(async move { http.get(url).send().await.unwrap().status().as_u16() })
    });
    let calls: Vec<_> = calls.collect();
    assert!(
        eventually(Duration::from_secs(5), || backend.stats().in_flight == 5).await,
        "5 requests in flight: {:?}",
        backend.stats()
    );
    for call in calls {
        assert_eq!(call.await.unwrap(), 200);
    }
    // Control endpoints are never counted.
    backend.set_healthy(true);
    http.get(backend.url("/healthz")).send().await.unwrap();
    let stats = backend.stats();
    assert_eq!(
        stats,
        Stats {
            requests: 5,
            in_flight: 0,
            peak_in_flight: 5
        }
    );

    backend.reset();
    assert_eq!(backend.stats(), Stats::default());
    http.get(backend.url("/one")).send().await.unwrap();
    assert_eq!(
        backend.stats(),
        Stats {
            requests: 1,
            in_flight: 0,
            peak_in_flight: 1
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_releases_in_flight_when_the_client_disconnects() {
    let backend = Backend::start("c");
    let mut stream = std::net::TcpStream::connect(backend.addr()).unwrap();
    write!(
        stream,
        "GET /x?delay_ms=60000 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || backend.stats().in_flight == 1).await,
        "request in flight"
    );
    drop(stream);
    assert!(
        eventually(Duration::from_secs(5), || backend.stats().in_flight == 0).await,
        "in_flight back to 0 after the client went away: {:?}",
        backend.stats()
    );
    assert_eq!(backend.stats().requests, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_health_toggle() {
    let backend = Backend::start("d");
    let http = client();
    let health = |http: reqwest::Client, url: String| async move {
        let resp = http.get(url).send().await.unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    };
    assert_eq!(
        health(http.clone(), backend.url("/healthz")).await,
        (200, "ok\n".into())
    );
    backend.set_healthy(false);
    assert_eq!(health(http.clone(), backend.url("/healthz")).await.0, 503);
    // Ordinary requests are unaffected.
    assert_eq!(
        http.get(backend.url("/x")).send().await.unwrap().status(),
        200
    );
    backend.set_healthy(true);
    assert_eq!(health(http.clone(), backend.url("/healthz")).await.0, 200);
    assert_eq!(backend.stats().requests, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_status_size_and_echo() {
    let backend = Backend::start("e");
    let http = client();

    let resp = http.get(backend.url("/x?status=418")).send().await.unwrap();
    assert_eq!(resp.status(), 418);
    assert_eq!(echo_json_any(resp).await["name"], "e");

    let resp = http
        .get(backend.url("/x?size=5242880&status=201"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.content_length(), Some(5_242_880));
    let body = resp.bytes().await.unwrap();
    assert!(body[..] == echo_pattern(5_242_880)[..], "pattern body");

    let resp = http.get(backend.url("/x?size=0")).send().await.unwrap();
    assert_eq!(resp.bytes().await.unwrap().len(), 0);

    let upload: Vec<u8> = (0..5 * 1024 * 1024).map(|_| rand::random::<u8>()).collect();
    let resp = http
        .put(backend.url("/up?echo=1&size=10"))
        .body(upload.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.bytes().await.unwrap();
    assert_eq!(body.len(), upload.len());
    assert!(body[..] == upload[..], "echo round trip");

    let resp = http
        .get(backend.url("/x?delay_ms=banana"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
}

async fn echo_json_any(resp: reqwest::Response) -> serde_json::Value {
    serde_json::from_str(&resp.text().await.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_backend_refuses_connections() {
    let mut backend = Backend::start("f");
    let addr = backend.addr();
    backend.kill();
    assert!(client()
        .get(format!("http://{addr}/"))
        .send()
        .await
        .is_err());
}

#[test]
fn sync_http_client_reads_control_endpoints() {
    let backend = Backend::start("g");
    let reply = http_get(&backend.addr(), "/healthz").unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "ok\n");
    assert_eq!(
        reply.header("Content-Type"),
        Some("text/plain; charset=utf-8")
    );
}

/// `GatewayConfig` renders each section once, in its fixed order, with API keys as their digest,
/// setters replacing what they set; and what it renders is a config the gateway accepts.
#[test]
fn gateway_config_renders_every_section() {
    let config = GatewayConfig::echo("127.0.0.1:9", "required")
        .redis("redis://127.0.0.1:1", "timeout_ms: 1000")
        .redis_opts(STRICT_REDIS)
        .edge("{ limit: 5, per: 1s }")
        .default_tier("T")
        .api_key("k1", "acme", "T")
        .api_key_with("k2", "a}b", None)
        .tier("T", "{ limit: 1, per: 1d, burst: 3 }")
        .tier_lines("  T: { limit: 2, per: 1d, burst: 3 }\n  P: { limit: 9, per: 1s }\n")
        .tenant("acme", "{ burst: 2 }")
        .upstream_with("other", "127.0.0.1:8", "max_concurrency: 1")
        .route("{ path_prefix: \"/o\", upstream: other, auth: none }")
        .section("response", "{ headers: both }");
    let want = format!(
        "listen: [\"{{listen}}\"]\n\
         admin: {{ listen: \"{{admin}}\" }}\n\
         server: {{ threads: 2, grace_period: 1s }}\n\
         redis: {{ url: \"redis://127.0.0.1:1\", {STRICT_REDIS} }}\n\
         edge: {{ limit: 5, per: 1s }}\n\
         identity:\n  default_tier: T\n  api_keys:\n    keys:\n\
         \x20     - {{ sha256: \"{}\", tenant: \"acme\", tier: \"T\" }}\n\
         \x20     - {{ sha256: \"{}\", tenant: \"a}}b\" }}\n\
         tiers:\n  T: {{ limit: 2, per: 1d, burst: 3 }}\n  P: {{ limit: 9, per: 1s }}\n\
         tenants:\n  acme: {{ burst: 2 }}\n\
         upstreams:\n  echo: {{ backends: [\"127.0.0.1:9\"] }}\n\
         \x20 other: {{ backends: [\"127.0.0.1:8\"], max_concurrency: 1 }}\n\
         routes:\n  - {{ path_prefix: \"/\", upstream: echo, auth: required }}\n\
         \x20 - {{ path_prefix: \"/o\", upstream: other, auth: none }}\n\
         response: {{ headers: both }}\n",
        sha256_hex("k1"),
        sha256_hex("k2"),
    );
    assert_eq!(config.yaml(), want);
    let text = render(&config.yaml(), "127.0.0.1:1", "127.0.0.1:2");
    if let Err(errors) = tollgate::config::parse(&text) {
        panic!("{errors:?}\n{text}");
    }
    // Without keys, identity is left out unless the key list is asked for (then empty).
    let bare = GatewayConfig::new().no_server().no_admin().yaml();
    assert_eq!(bare, "listen: [\"{listen}\"]\n");
    let empty_keys = GatewayConfig::new().api_keys_always().yaml();
    assert!(
        empty_keys.ends_with("identity:\n  api_keys:\n    keys: []\n"),
        "{empty_keys}"
    );
}

/// `metric` matches the name and the label set, in any order and only whole: a subset or a
/// superset of the labels is another series; escaped label values are decoded.
#[test]
fn metric_lookup_matches_labels_as_a_set() {
    let text = "\
# TYPE tollgate_decisions_total counter
tollgate_decisions_total{layer=\"tenant\",outcome=\"limited\",tier=\"T\"} 4
tollgate_decisions_total{layer=\"edge\",outcome=\"limited\",tier=\"-\"} 9 1700000000000
tollgate_odd{path=\"a\\\"b,c}\\\\\"} 2
tollgate_up 1
";
    let limited = [("outcome", "limited"), ("tier", "T"), ("layer", "tenant")];
    assert_eq!(
        metric(text, "tollgate_decisions_total", &limited),
        Some(4.0)
    );
    let edge = [("tier", "-"), ("layer", "edge"), ("outcome", "limited")];
    assert_eq!(metric(text, "tollgate_decisions_total", &edge), Some(9.0));
    assert_eq!(
        metric(text, "tollgate_decisions_total", &limited[..2]),
        None,
        "a subset of the labels is another series"
    );
    assert_eq!(
        metric(
            text,
            "tollgate_decisions_total",
            &[
                ("layer", "tenant"),
                ("outcome", "limited"),
                ("tier", "T"),
                ("x", "y")
            ]
        ),
        None,
        "a superset of the labels is another series"
    );
    assert_eq!(
        metric(text, "tollgate_odd", &[("path", "a\"b,c}\\")]),
        Some(2.0)
    );
    assert_eq!(metric(text, "tollgate_up", &[]), Some(1.0));
    assert_eq!(metric_or_zero(text, "tollgate_down", &[]), 0.0);
    assert_eq!(
        metric_value(
            text,
            r#"tollgate_decisions_total{tier="T",outcome="limited",layer="tenant"}"#
        ),
        Some(4.0),
        "metric_value matches labels as a set too"
    );
}

#[test]
fn metric_lookup_matches_whole_series() {
    let text = "\
# HELP tollgate_requests_total Requests.
# TYPE tollgate_requests_total counter
tollgate_requests_total{route=\"routes[0]\",status_class=\"2xx\"} 3
tollgate_requests_total{route=\"routes[10]\",status_class=\"2xx\"} 7
tollgate_requests_total{route=\"a b\",status_class=\"5xx\"} 2 1700000000000
tollgate_up 1
tollgate_request_duration_seconds_bucket{route=\"routes[0]\",le=\"+Inf\"} 3
";
    assert_eq!(
        metric_value(
            text,
            r#"tollgate_requests_total{route="routes[0]",status_class="2xx"}"#
        ),
        Some(3.0)
    );
    assert_eq!(
        metric_value(
            text,
            r#"tollgate_requests_total{route="a b",status_class="5xx"}"#
        ),
        Some(2.0)
    );
    assert_eq!(metric_value(text, "tollgate_up"), Some(1.0));
    assert_eq!(metric_value(text, "tollgate_requests_total"), None);
    assert_eq!(
        metric_value(
            text,
            r#"tollgate_requests_total{route="routes[1]",status_class="2xx"}"#
        ),
        None
    );
}

#[test]
fn helpers() {
    assert_eq!(
        render(
            "listen: [\"{listen}\"]\nadmin: { listen: \"{admin}\" }",
            "L",
            "A"
        ),
        "listen: [\"L\"]\nadmin: { listen: \"A\" }"
    );
    assert!(is_uuid_like("123e4567-e89b-12d3-a456-426614174000"));
    assert!(!is_uuid_like("123e4567e89b12d3a456426614174000"));
    assert_eq!(
        sha256_hex("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let p = problem(r#"{"type":"about:blank","title":"Not Found","status":404}"#);
    assert_eq!(p["status"], 404);
    assert_eq!(
        echo_pattern(63),
        [&ECHO_PATTERN[..], &ECHO_PATTERN[..2]].concat()
    );
    assert_eq!(
        strip_ansi("\u{1b}[2mtime\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m a=1"),
        "time  INFO a=1"
    );
}

#[test]
fn gateway_start_failure_reports_the_log() {
    // Not a valid configuration: `tollgate run` must exit, and the harness must say so with
    // the log instead of waiting 30 s.
    let err = match Gateway::try_start("admin: { listen: \"{admin}\" }\nlisten: 12\n") {
        Ok(_) => panic!("a gateway with a broken config must not come up"),
        Err(e) => e,
    };
    assert!(err.contains("exited during startup"), "{err}");
    assert!(err.contains("log tail"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_lifecycle_start_reload_term() {
    let a = Backend::start("a");
    let b = Backend::start("b");
    let yaml = |routes: &str| {
        GatewayConfig::new()
            .upstream("up_a", &a.addr())
            .upstream("up_b", &b.addr())
            .route_lines(routes)
            .yaml()
    };
    let mut gw = Gateway::start(&yaml(
        "  - { path_prefix: \"/\", upstream: up_a, auth: none }\n",
    ));
    assert!(gw
        .url("/x")
        .starts_with(&format!("http://{}/", gw.listen_addr())));
    assert_eq!(gw.admin_get("/healthz").status, 200);
    let http = client();
    let name = |resp: reqwest::Response| async move {
        echo_json(resp).await["name"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        name(http.get(gw.url("/b/1")).send().await.unwrap()).await,
        "a"
    );
    // Counters are updated after the response went out: poll.
    assert!(
        eventually(Duration::from_secs(5), || gw
            .metrics()
            .contains("tollgate_requests_total"))
        .await
    );

    let listen = gw.listen_addr().to_owned();
    gw.reload(&yaml(
        "  - { path_prefix: \"/b\", upstream: up_b, auth: none }\n  \
         - { path_prefix: \"/\", upstream: up_a, auth: none }\n",
    ));
    let written = std::fs::read_to_string(gw.config_path()).unwrap();
    assert!(
        written.contains(&listen),
        "reload keeps the ports:\n{written}"
    );
    let mut switched = false;
    for _ in 0..100 {
        if name(http.get(gw.url("/b/1")).send().await.unwrap()).await == "b" {
            switched = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(switched, "reload applied; log:\n{}", gw.log_tail(20));

    let pid = gw.pid();
    gw.signal("TERM");
    let status = gw.wait_exit(Duration::from_secs(15));
    assert!(status.is_some(), "gateway {pid} exits after SIGTERM");
    assert!(
        status.unwrap().success(),
        "graceful exit is a success: {status:?}"
    );
}
