//! Issue 11, HTTP side: request-target normalisation (fault 1), Pingora's own parser errors
//! (fault 4), HTTP limits (header size/count, body size, slow clients) and `tollgate check`
//! warnings. Raw targets go over a raw TCP socket so that nothing on the client side rewrites them.

mod common;

use common::*;
use std::time::Duration;

const KEY: &str = "h11-admin-key";

/// `/admin` needs an API key and goes to backend `admin`; everything else is anonymous and goes to
/// backend `pub`. No `server:` section (the gateway's defaults).
fn two_route_config(admin: &Backend, public: &Backend) -> String {
    GatewayConfig::new()
        .no_server()
        .api_key_with(KEY, "ops", None)
        .upstream("admin", &admin.addr())
        .upstream("pub", &public.addr())
        .route("{ path_prefix: \"/admin\", upstream: admin, auth: required }")
        .route("{ path_prefix: \"/\", upstream: pub, auth: none }")
        .yaml()
}

/// HTTP-layer decisions (`layer="http"`) with `outcome`.
fn http_decisions(gw: &Gateway, outcome: &str) -> f64 {
    let labels = [("layer", "http"), ("outcome", outcome), ("tier", "-")];
    metric_or_zero(gw, "tollgate_decisions_total", &labels)
}

fn send(gw: &Gateway, target: &str, headers: &[(&str, &str)]) -> HttpReply {
    http_request_with_headers(
        gw.listen_addr(),
        "GET",
        target,
        headers,
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("GET {target}: {e}"))
}

fn json(reply: &HttpReply) -> serde_json::Value {
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", reply.body))
}

/// Fault 1 as reported: every spelling of `/admin/users` is refused without credentials (401),
/// and the backend never sees any of them.
#[test]
fn issue_11_spellings_of_a_protected_path_do_not_bypass_auth() {
    let admin = Backend::start("admin");
    let public = Backend::start("pub");
    let gw = Gateway::start(&two_route_config(&admin, &public));
    for target in [
        "/public/../admin/users",
        "/./admin/users",
        "//admin/users",
        "/%61dmin/users",
        "/public/%2e%2e/admin/users",
    ] {
        let r = send(&gw, target, &[]);
        assert_eq!(r.status, 401, "{target}: {r:?}");
        assert_eq!(
            r.header("content-type"),
            Some("application/problem+json"),
            "{target}"
        );
    }
    assert_eq!(admin.stats().requests, 0);
    assert_eq!(public.stats().requests, 0);
}

/// `;` path parameters cannot move a request off an auth-required prefix route: Tomcat/Spring-style
/// backends serve `/api;x/y` as `/api/y`, so it takes the `/api` route (401 without credentials),
/// and parameters that would choose another route with and without them are a 400.
#[test]
fn path_parameters_do_not_bypass_a_prefix_route() {
    let api = Backend::start("api");
    let public = Backend::start("pub");
    let config = GatewayConfig::new()
        .no_server()
        .api_key_with(KEY, "ops", None)
        .upstream("api", &api.addr())
        .upstream("pub", &public.addr())
        .route("{ path_prefix: \"/api\", upstream: api, auth: required }")
        .route("{ path_prefix: \"/api/v1\", upstream: api, auth: required }")
        .route("{ path_prefix: \"/\", upstream: pub, auth: optional }")
        .yaml();
    let gw = Gateway::start(&config);
    for target in [
        "/api;x/y",
        "/api;x",
        "/api;/y",
        "/api/v1;x",
        "/api/y;jsessionid=1",
    ] {
        let r = send(&gw, target, &[]);
        assert_eq!(r.status, 401, "{target}: {r:?}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{target}");
    }
    assert_eq!((api.stats().requests, public.stats().requests), (0, 0));

    // With credentials the parameters reach the backend as sent.
    let r = send(&gw, "/api;x/y", &[("X-API-Key", KEY)]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        (json(&r)["name"].clone(), json(&r)["path"].clone()),
        ("api".into(), "/api;x/y".into())
    );
    // Only whole segments: `/apix;y` is not under `/api`.
    let r = send(&gw, "/apix;y", &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(json(&r)["name"], "pub");

    // Under /api/v1 without parameters, under /api as sent: refused, whatever the credentials.
    let before = api.stats().requests;
    for target in ["/api;x/v1/y", "/;x/api"] {
        let r = send(&gw, target, &[("X-API-Key", KEY)]);
        assert_eq!(r.status, 400, "{target}: {r:?}");
        assert_eq!(
            problem(&r.body)["reason"],
            "ambiguous_parameters",
            "{target}"
        );
    }
    assert_eq!(api.stats().requests, before);
}

/// What a table case expects.
enum Want {
    /// 200 from this backend, which received exactly this path and query.
    Served(&'static str, &'static str, &'static str),
    /// 400 problem+json with this `reason`; nothing reaches a backend.
    Refused(&'static str),
}

/// The whole kind: for every spelling, the status and the exact path (and query) the backend got.
#[test]
fn request_targets_are_normalised_or_refused_table() {
    use Want::*;
    let admin = Backend::start("admin");
    let public = Backend::start("pub");
    let gw = Gateway::start(&two_route_config(&admin, &public));
    let addr = gw.listen_addr().to_string();
    let abs = |p: &str| format!("http://{addr}{p}");
    let cases: Vec<(String, Want)> = vec![
        // Dot segments in every position.
        (
            "/public/../admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        ("/./admin/users".into(), Served("admin", "/admin/users", "")),
        ("/admin/./users".into(), Served("admin", "/admin/users", "")),
        (
            "/admin/users/.".into(),
            Served("admin", "/admin/users/", ""),
        ),
        ("/admin/users/..".into(), Served("admin", "/admin/", "")),
        ("/admin/users/../..".into(), Served("pub", "/", "")),
        ("/a/b/../../admin".into(), Served("admin", "/admin", "")),
        ("/admin/../public/x".into(), Served("pub", "/public/x", "")),
        ("/admin/.../x".into(), Served("admin", "/admin/.../x", "")),
        // Encoded dots: lower, upper and mixed case, alone and mixed with raw dots.
        (
            "/public/%2e%2e/admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        (
            "/public/%2E%2E/admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        (
            "/public/%2e%2E/admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        (
            "/public/.%2e/admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        ("/%2e/admin".into(), Served("admin", "/admin", "")),
        // Repeated slashes.
        ("//admin/users".into(), Served("admin", "/admin/users", "")),
        (
            "/admin//users//".into(),
            Served("admin", "/admin/users/", ""),
        ),
        ("///".into(), Served("pub", "/", "")),
        // Encoded unreserved characters are decoded; other escapes get upper-case hex.
        ("/%61dmin/users".into(), Served("admin", "/admin/users", "")),
        (
            "/%61%64%6D%69%6e/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        (
            "/admin/%7Euser/%41%5f".into(),
            Served("admin", "/admin/~user/A_", ""),
        ),
        ("/pub/caf%c3%a9".into(), Served("pub", "/pub/caf%C3%A9", "")),
        ("/pub/a%3bb".into(), Served("pub", "/pub/a%3Bb", "")),
        (
            "/pub/%252e%252e".into(),
            Served("pub", "/pub/%252e%252e", ""),
        ),
        // The query is left alone, `..` and encoded slashes included.
        (
            "/pub/x?q=../..&r=%2F".into(),
            Served("pub", "/pub/x", "q=../..&r=%2F"),
        ),
        (
            "/public/..?next=/admin/../x".into(),
            Served("pub", "/", "next=/admin/../x"),
        ),
        (
            "/public/../admin?a=%2e%2e".into(),
            Served("admin", "/admin", "a=%2e%2e"),
        ),
        // Absolute-form: the path is normalised and forwarded in origin-form.
        (
            abs("/public/../admin/users"),
            Served("admin", "/admin/users", ""),
        ),
        (abs("/%61dmin?x=1"), Served("admin", "/admin", "x=1")),
        (abs(""), Served("pub", "/", "")),
        // Refused: encoded separators, backslashes, NUL and controls, bad escapes, climbing.
        ("/admin%2Fusers".into(), Refused("encoded_slash")),
        ("/public/..%2fadmin".into(), Refused("encoded_slash")),
        ("/a%5Cb".into(), Refused("encoded_backslash")),
        ("/public/..%5cadmin".into(), Refused("encoded_backslash")),
        ("/public\\..\\admin".into(), Refused("backslash")),
        ("/a%00b".into(), Refused("control_character")),
        ("/a%0Ab".into(), Refused("control_character")),
        ("/a%7f".into(), Refused("control_character")),
        ("/a%zzb".into(), Refused("bad_percent_encoding")),
        ("/a%2".into(), Refused("bad_percent_encoding")),
        ("/a%".into(), Refused("bad_percent_encoding")),
        ("/..".into(), Refused("above_root")),
        ("/../admin/users".into(), Refused("above_root")),
        ("/public/../../admin".into(), Refused("above_root")),
        ("/%2e%2e/admin".into(), Refused("above_root")),
        (
            "/public/..;/admin/users".into(),
            Refused("dot_segment_parameters"),
        ),
        ("*".into(), Refused("unsupported_form")),
        (abs("/%2e%2e/admin"), Refused("above_root")),
    ];
    let mut refused = 0;
    for (target, want) in &cases {
        let before = (admin.stats().requests, public.stats().requests);
        let r = send(&gw, target, &[("X-API-Key", KEY)]);
        match want {
            Served(backend, path, query) => {
                assert_eq!(r.status, 200, "{target}: {r:?}");
                let v = json(&r);
                assert_eq!(v["name"], *backend, "{target}");
                assert_eq!(v["path"], *path, "{target}");
                assert_eq!(v["query"], *query, "{target}");
            }
            Refused(reason) => {
                refused += 1;
                assert_eq!(r.status, 400, "{target}: {r:?}");
                assert_eq!(
                    r.header("content-type"),
                    Some("application/problem+json"),
                    "{target}"
                );
                let p = problem(&r.body);
                assert_eq!(p["status"], 400, "{target}");
                assert_eq!(p["reason"], *reason, "{target}");
                assert!(p["request-id"].as_str().is_some_and(|s| !s.is_empty()));
                let after = (admin.stats().requests, public.stats().requests);
                assert_eq!(before, after, "{target} reached a backend");
            }
        }
    }
    let counted = http_decisions(&gw, "bad_target");
    assert_eq!(counted as usize, refused);
    assert!(
        gw.wait_for_log("reason=encoded_slash", Duration::from_secs(5)),
        "refusal reason not logged: {}",
        gw.log_tail(20)
    );
}

/// One anonymous catch-all route to `backend`; `server` is the body of a `server:` section and
/// `route_extra` is added to the route (e.g. `, max_body_bytes: 100`).
fn single_route_config(backend: &Backend, server: &str, route_extra: &str) -> String {
    GatewayConfig::new()
        .server(&format!("{{ threads: 2, grace_period_s: 1{server} }}"))
        .upstream_with("echo", &backend.addr(), "max_concurrency: 1")
        .route(&format!(
            "{{ path_prefix: \"/\", upstream: echo, auth: none{route_extra} }}"
        ))
        .yaml()
}

fn exchange(gw: &Gateway, bytes: &[u8]) -> HttpReply {
    raw_exchange(gw.listen_addr(), bytes, Duration::from_secs(10)).unwrap_or_else(|e| {
        panic!(
            "{:?}: {e}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(80)])
        )
    })
}

/// Fault 4 and the header limits: heads Pingora would answer with a bare 400 (or accept: it only
/// caps heads at 1 MiB / 256 fields) get problem+json with a request id, are counted in
/// `tollgate_requests_total{route="none"}` and by reason, and never reach the backend.
#[test]
fn parser_errors_and_header_limits_are_problem_json_and_counted() {
    let backend = Backend::start("b");
    let gw = Gateway::start(&single_route_config(&backend, "", ""));
    let addr = gw.listen_addr().to_string();
    let big_value = "v".repeat(70_000);
    let many: String = (0..101).map(|i| format!("X-H{i}: {i}\r\n")).collect();
    let long_target = format!("/{}", "p".repeat(70_000));
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "duplicate Host",
            format!(
                "GET / HTTP/1.1\r\nHost: {addr}\r\nHost: other\r\nX-Request-Id: dup-host-1\r\n\r\n"
            )
            .into_bytes(),
            400,
            "malformed",
        ),
        (
            "malformed request line",
            b"GET / HTTP/1.1 trailing\r\nHost: x\r\n\r\n".to_vec(),
            400,
            "malformed",
        ),
        (
            "invalid header name",
            b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n".to_vec(),
            400,
            "malformed",
        ),
        (
            "conflicting Content-Length",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
                .to_vec(),
            400,
            "malformed",
        ),
        (
            "oversized header",
            format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {big_value}\r\n\r\n").into_bytes(),
            431,
            "headers_too_large",
        ),
        (
            "too many headers",
            format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n").into_bytes(),
            431,
            "too_many_headers",
        ),
        (
            "oversized request line",
            format!("GET {long_target} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes(),
            414,
            "uri_too_long",
        ),
    ];
    for (name, bytes, status, reason) in &cases {
        let r = exchange(&gw, bytes);
        assert_eq!(r.status, *status, "{name}: {r:?}");
        assert_eq!(
            r.header("content-type"),
            Some("application/problem+json"),
            "{name}"
        );
        let p = problem(&r.body);
        assert_eq!(p["status"], *status, "{name}");
        assert_eq!(p["reason"], *reason, "{name}");
        let rid = r.header("x-request-id").expect("request id header");
        assert_eq!(p["request-id"], rid, "{name}");
    }
    // The client's request id is kept when the head could be read.
    let r = exchange(&gw, &cases[0].1);
    assert_eq!(r.header("x-request-id"), Some("dup-host-1"));

    // Just under the limits is served normally.
    let fine = format!(
        "GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nConnection: close\r\n\r\n",
        "v".repeat(60_000)
    );
    assert_eq!(exchange(&gw, fine.as_bytes()).status, 200);
    assert_eq!(backend.stats().requests, 1);

    let unrouted = [("route", "none"), ("status_class", "4xx")];
    assert_eq!(
        metric_or_zero(&gw, "tollgate_requests_total", &unrouted) as usize,
        cases.len() + 1
    );
    assert_eq!(http_decisions(&gw, "malformed") as usize, 5);
    assert_eq!(http_decisions(&gw, "headers_too_large") as usize, 1);
    assert_eq!(http_decisions(&gw, "too_many_headers") as usize, 1);
    assert_eq!(http_decisions(&gw, "uri_too_long") as usize, 1);
    assert!(gw.wait_for_log("multiple Host header fields", Duration::from_secs(5)));
}

/// `server.max_header_bytes` and `server.max_headers` are configurable.
#[test]
fn configured_header_limits_apply() {
    let backend = Backend::start("b");
    let gw = Gateway::start(&single_route_config(
        &backend,
        ", max_header_bytes: 1024, max_headers: 5",
        "",
    ));
    let ok = "GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\nConnection: close\r\n\r\n";
    assert_eq!(exchange(&gw, ok.as_bytes()).status, 200);
    let six =
        "GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nConnection: close\r\n\r\n";
    assert_eq!(exchange(&gw, six.as_bytes()).status, 431);
    let big = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nA: {}\r\n\r\n",
        "v".repeat(1100)
    );
    assert_eq!(exchange(&gw, big.as_bytes()).status, 431);
    assert_eq!(backend.stats().requests, 1);
}

/// Pipelined requests (several written at once, RFC 9112 9.3.2) are all answered, in order:
/// the front end hands Pingora one request at a time and keeps the bytes of the next ones,
/// bodies (`Content-Length`) included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_all_answered_in_order() {
    let backend = Backend::start("b");
    let gw = Gateway::start(&single_route_config(&backend, "", ""));
    let addr = gw.listen_addr().to_string();
    let mut conn = RawConn::connect(&addr, None).await.unwrap();
    let batch = "GET /one HTTP/1.1\r\nHost: x\r\n\r\n\
                 POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
                 GET /three HTTP/1.1\r\nHost: x\r\n\r\n";
    conn.write_raw(batch.as_bytes()).await.unwrap();
    for (path, body_len) in [("/one", 0), ("/two", 5), ("/three", 0)] {
        let r = tokio::time::timeout(Duration::from_secs(10), conn.read_reply())
            .await
            .unwrap_or_else(|_| panic!("no answer for {path}"))
            .unwrap();
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(json(&r)["path"], path);
        assert_eq!(json(&r)["body_len"], body_len);
    }
    assert_eq!(backend.stats().requests, 3);
}

async fn next_reply(conn: &mut RawConn) -> HttpReply {
    tokio::time::timeout(Duration::from_secs(20), conn.read_reply())
        .await
        .expect("an answer")
        .expect("a reply")
}

/// Bytes of a next request that arrive while one is at the backend (one byte, or all of it)
/// wait their turn: the first request gets the answer its backend gave, then the next one is
/// served (before, the first was answered 400 after the backend had served it). Two GETs
/// larger than one read of the gateway (over 4 KiB in one write) are both answered too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_pipelined_while_one_is_served_wait_their_turn() {
    let backend = Backend::start("b");
    // Room for more than one request at the backend: a connection's last slot is given back
    // after its answer is written, which may be after the client has read it and sent the
    // next connection's request; that race is not what this test is about.
    let gw = Gateway::start(
        &GatewayConfig::new()
            .server("{ threads: 2, grace_period_s: 1 }")
            .upstream_with("echo", &backend.addr(), "max_concurrency: 8")
            .route("{ path_prefix: \"/\", upstream: echo, auth: none }")
            .yaml(),
    );
    let addr = gw.listen_addr().to_string();
    // One byte of the next request while the first is at the backend; the rest after its
    // answer.
    let mut conn = RawConn::connect(&addr, None).await.unwrap();
    conn.write_raw(b"GET /first?delay_ms=1500 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || backend.stats().in_flight == 1).await);
    conn.write_raw(b"G").await.unwrap();
    let r = next_reply(&mut conn).await;
    assert_eq!(
        (r.status, json(&r)["path"].as_str()),
        (200, Some("/first")),
        "{r:?}"
    );
    conn.write_raw(b"ET /second HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let r = next_reply(&mut conn).await;
    assert_eq!(
        (r.status, json(&r)["path"].as_str()),
        (200, Some("/second")),
        "{r:?}"
    );
    // A whole request while the first is at the backend.
    let mut conn = RawConn::connect(&addr, None).await.unwrap();
    conn.write_raw(b"GET /third?delay_ms=1500 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || backend.stats().in_flight == 1).await);
    conn.write_raw(b"GET /fourth HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    for path in ["/third", "/fourth"] {
        let r = next_reply(&mut conn).await;
        assert_eq!(
            (r.status, json(&r)["path"].as_str()),
            (200, Some(path)),
            "{r:?}"
        );
    }
    // Two GETs of 3 KiB heads in one write.
    let pad = "p".repeat(3000);
    let batch = format!(
        "GET /fifth HTTP/1.1\r\nHost: x\r\nX-Pad: {pad}\r\n\r\n\
         GET /sixth HTTP/1.1\r\nHost: x\r\nX-Pad: {pad}\r\n\r\n"
    );
    let mut conn = RawConn::connect(&addr, None).await.unwrap();
    conn.write_raw(batch.as_bytes()).await.unwrap();
    for path in ["/fifth", "/sixth"] {
        let r = next_reply(&mut conn).await;
        assert_eq!(
            (r.status, json(&r)["path"].as_str()),
            (200, Some(path)),
            "{r:?}"
        );
    }
    assert_eq!(backend.stats().requests, 6);
}

/// `routes[].max_body_bytes`: a declared length over the limit is refused before anything is
/// read or forwarded; a chunked body is cut off once the running total passes the limit, without
/// waiting for its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_limit_refuses_with_413_without_reading_the_whole_body() {
    let backend = Backend::start("b");
    let gw = Gateway::start(&single_route_config(&backend, "", ", max_body_bytes: 100"));
    let addr = gw.listen_addr().to_string();

    let at_limit = format!(
        "POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{}",
        "a".repeat(100)
    );
    let r = exchange(&gw, at_limit.as_bytes());
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(json(&r)["body_len"], 100);

    // Declared too large: only the head is sent; the answer comes without the body.
    let over = "POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n";
    let mut conn = RawConn::connect(&addr, None).await.unwrap();
    conn.write_raw(over.as_bytes()).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), conn.read_reply())
        .await
        .expect("413 before the body was sent")
        .unwrap();
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(backend.stats().requests, 1);

    // Chunked: 2 × 60 bytes, no final chunk; the limit is passed, the answer comes anyway.
    let chunked = format!(
        "POST /u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3c\r\n{0}\r\n3c\r\n{0}\r\n",
        "c".repeat(60)
    );
    let mut conn = RawConn::connect(&addr, None).await.unwrap();
    conn.write_raw(chunked.as_bytes()).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), conn.read_reply())
        .await
        .expect("413 before the body ended")
        .unwrap();
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(problem(&r.body)["status"], 413);
    let counted = http_decisions(&gw, "body_too_large");
    assert_eq!(counted as usize, 2);
}

/// Slowloris: a client sending its head one byte every 300 ms under `header_read_timeout: 1s` is
/// answered 408 and disconnected before its head is complete, while ordinary requests keep being
/// served through the same upstream (which has a single concurrency slot).
#[test]
fn slow_header_client_is_disconnected_and_others_are_served() {
    use std::io::{Read, Write};
    let backend = Backend::start("b");
    let gw = Gateway::start(&single_route_config(
        &backend,
        ", header_read_timeout: 1s",
        "",
    ));
    let addr = gw.listen_addr().to_string();
    let head = b"GET /slow HTTP/1.1\r\nHost: x\r\nX-Padding: 0123456789abcdef\r\n\r\n";
    let trickler = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let (mut sent, mut got) = (0, Vec::new());
            let mut closed = false;
            let mut buf = [0u8; 4096];
            while sent < head.len() {
                if s.write_all(&head[sent..sent + 1]).is_err() {
                    closed = true;
                    break;
                }
                sent += 1;
                match s.read(&mut buf) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e)
                        if e.kind() == std::io::ErrorKind::WouldBlock
                            || e.kind() == std::io::ErrorKind::TimedOut => {}
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
            (sent, closed, String::from_utf8_lossy(&got).into_owned())
        })
    };
    // Meanwhile, ordinary requests are served.
    let mut served = 0;
    while !trickler.is_finished() && served < 20 {
        let r = http_get(&addr, "/normal").expect("normal request");
        assert_eq!(r.status, 200);
        served += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let (sent, closed, got) = trickler.join().unwrap();
    assert!(
        closed,
        "the gateway never closed the slow connection ({sent} bytes sent)"
    );
    assert!(sent < head.len(), "the whole head was sent: {got:?}");
    assert!(got.starts_with("HTTP/1.1 408"), "{got:?}");
    assert!(served > 0);
    assert_eq!(http_decisions(&gw, "header_timeout"), 1.0);
    let r = http_get(&addr, "/after").unwrap();
    assert_eq!(r.status, 200);
}

/// `server.keepalive_timeout`: an idle keep-alive connection is closed by the gateway (Pingora's
/// own default would keep it 60 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keepalive_connection_is_closed() {
    let backend = Backend::start("b");
    let gw = Gateway::start(&single_route_config(
        &backend,
        ", keepalive_timeout: 1s",
        "",
    ));
    let mut conn = RawConn::connect(gw.listen_addr(), None).await.unwrap();
    let r = conn.request("GET", "/one", &[]).await.unwrap();
    assert_eq!(r.status, 200);
    let r = conn.request("GET", "/two", &[]).await.unwrap();
    assert_eq!(r.status, 200, "the connection is reused while active");
    let idle = tokio::time::timeout(Duration::from_secs(20), conn.read_some(1)).await;
    assert!(
        matches!(idle, Ok(Ok(0)) | Ok(Err(_))),
        "the idle connection was not closed: {idle:?}"
    );
}

/// `tollgate check` warns (exit 0) about trusting everyone or a broad range for X-Forwarded-For
/// and about an open route taking requests from a protected one; startup logs the same warnings.
#[test]
fn check_warns_about_broad_trust_and_shadowed_auth_but_passes() {
    let backend = Backend::start("b");
    let yaml = GatewayConfig::new()
        .no_server()
        .edge("{ limit: 100, per: 1s, trusted_proxies: [\"0.0.0.0/0\", \"10.0.0.0/8\", \"10.1.2.3\"] }")
        .api_key_with(KEY, "ops", None)
        .upstream("echo", &backend.addr())
        .route("{ path_prefix: \"/admin\", upstream: echo, auth: required }")
        .route("{ path_prefix: \"/admin/public\", upstream: echo, auth: none }")
        .route("{ path_prefix: \"/\", upstream: echo, auth: none }")
        .yaml();
    let out = check_config(&yaml);
    assert_eq!(out.code(), Some(0), "{}", out.all());
    let all = out.all();
    assert!(all.contains("configuration ok"), "{all}");
    let warnings: Vec<&str> = all.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 3, "{all}");
    assert!(
        warnings[0].starts_with(
            "warning: edge.trusted_proxies[0]: \"0.0.0.0/0\" trusts every IPv4 address"
        ),
        "{all}"
    );
    assert!(
        warnings[1]
            .starts_with("warning: edge.trusted_proxies[1]: \"10.0.0.0/8\" is a broad range"),
        "{all}"
    );
    assert!(
        warnings[2]
            .starts_with("warning: routes[1].auth: is \"none\" but takes requests from routes[0]"),
        "{all}"
    );
    let gw = Gateway::start(&yaml);
    assert!(
        gw.wait_for_log("config warning", Duration::from_secs(5)),
        "{}",
        gw.log_tail(20)
    );
}
