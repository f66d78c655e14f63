//! Costs read from the request (docs/rules.md#costs-read-from-the-request) through the real
//! gateway, a real `redis-server` and the real echo backend: the body's length, a header, a
//! JSON field and a query parameter, each present, missing, garbage and huge, with the debit
//! read back from Redis. Every case over HTTP/1.1 and h2c, from an address of its own (the
//! rules are keyed by client address, so each protocol starts from a full bucket).
//!
//! Counts are exact with buckets that barely refill (`per: 1h`).

mod common;

use common::admin::{admin, ADMIN_TOKEN, ADMIN_TOKEN_ENV};
use common::*;
use serde_json::{json, Value};

const KEY: &str = "key-acme-0123456789";

const RULES: &str = "
  - { name: bytes, match: { routes: [\"/upload\"] }, key: [client_ip], limit: 1, per: 1h, burst: 10000, cost: { from: request_bytes } }
  - { name: units, match: { routes: [\"/units\"] }, key: [client_ip], limit: 1, per: 1h, burst: 100, cost: { header: X-Units, default: 2, max: 500 } }
  - { name: batch, match: { routes: [\"/batch\"] }, key: [client_ip], limit: 1, per: 1h, burst: 1000, cost: { json: batch.length, default: 5, max: 500 } }
  - { name: q, match: { routes: [\"/q\"] }, key: [client_ip], limit: 1, per: 1h, burst: 1000, cost: { query: n, default: 4, max: 500, min: 0 } }
";

/// A gateway with tier `T` (burst 100 000: each request costs it 1, or its body's bytes on
/// `/rb`, whose route reads its cost), the rules above, HTTP/1.1 and h2c on one listener.
fn start(redis: &RedisServer, backend: &Backend) -> Gateway {
    let c = GatewayConfig::new()
        .upstream("echo", &backend.addr())
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\" }}"
        ))
        .listen(&["{ addr: \"{listen}\", h2: true }"])
        .redis(&redis.url(), STRICT_REDIS)
        .tier("T", "{ limit: 1, per: 1h, burst: 100000 }")
        .api_key(KEY, "acme", "T")
        .route_lines(
            "  - { path_prefix: \"/rb\", upstream: echo, auth: required, cost: { from: request_bytes, max: 4000 } }\n  - { path_prefix: \"/\", upstream: echo, auth: required }\n",
        )
        .section("limits", RULES);
    Gateway::start_with_env(&c.yaml(), &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)])
}

/// A client from `ip`, over HTTP/1.1 or (`h2`) h2c prior knowledge.
fn client_at(ip_text: &str, h2: bool) -> reqwest::Client {
    let b = client_builder().local_address(ip(ip_text));
    let b = if h2 { b.http2_prior_knowledge() } else { b };
    b.build().expect("client")
}

/// How a request's body is sent.
enum Body {
    None,
    /// With `Content-Length`.
    Sized(Vec<u8>),
    /// Without: chunked on HTTP/1.1, DATA frames without `content-length` on h2.
    Streamed(Vec<u8>),
}

async fn send(http: &reqwest::Client, url: &str, headers: &[(&str, &str)], body: Body) -> Reply {
    let mut r = http.post(url).header("x-api-key", KEY);
    for (n, v) in headers {
        r = r.header(*n, *v);
    }
    r = match body {
        Body::None => r,
        Body::Sized(b) => r.body(b),
        Body::Streamed(b) => {
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                b.chunks(1000).map(|c| Ok(c.to_vec())).collect();
            r.body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                chunks,
            )))
        }
    };
    Reply::read(r.send().await.expect("send"))
        .await
        .expect("read")
}

/// The level of rule `rule`'s bucket for client `addr`.
fn rule_level(redis: &RedisServer, rule: &str, addr: &str, burst: u64) -> u64 {
    let keys = redis.keys(&format!("*r:{rule}:*"));
    let key = keys.iter().find(|k| k.contains(addr)).cloned();
    key.map_or(burst, |k| redis.bucket_level(&k, burst))
}

fn problem(r: &Reply) -> Value {
    serde_json::from_str(&r.body).unwrap_or_else(|_| panic!("problem+json: {}", r.body))
}

/// The echo backend's `body_len`: the bytes it received.
fn received(r: &Reply) -> u64 {
    let v: Value = serde_json::from_str(&r.body).expect("echo answer");
    v["body_len"].as_u64().unwrap()
}

const PROTOCOLS: [(bool, &str); 2] = [(false, "127.0.0.21"), (true, "127.0.0.22")];

/// `from: request_bytes`: a sized body costs its length, a body without a length is read (up
/// to the replay buffer) and costs its bytes, reaching the backend whole; one too long to read
/// first is 411 and costs nothing; an empty body costs 1; one over the burst is 413 with no
/// Retry-After. On a route, the tier pays the bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bytes_cost_their_length() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(&redis, &backend);
    for (h2, addr) in PROTOCOLS {
        let http = client_at(addr, h2);
        let url = gw.url("/upload");
        let left = |n| assert_eq!(rule_level(&redis, "bytes", addr, 10000), n, "h2: {h2}");
        let r = send(&http, &url, &[], Body::Sized(vec![b'a'; 300])).await;
        assert_eq!((r.status, received(&r)), (200, 300), "h2: {h2}: {}", r.body);
        left(9700);
        let r = send(&http, &url, &[], Body::Streamed(vec![b'b'; 2500])).await;
        assert_eq!(
            (r.status, received(&r)),
            (200, 2500),
            "h2: {h2}: {}",
            r.body
        );
        left(7200);
        let r = send(&http, &url, &[], Body::None).await;
        assert_eq!(r.status, 200, "h2: {h2}");
        left(7199);
        backend.reset();
        let r = send(&http, &url, &[], Body::Streamed(vec![b'c'; 70_000])).await;
        assert_eq!(r.status, 411, "h2: {h2}: {}", r.body);
        assert_eq!(problem(&r)["reason"], "cost-length-required");
        let r = send(&http, &url, &[], Body::Sized(vec![b'd'; 20_000])).await;
        assert_eq!(r.status, 413, "h2: {h2}: {}", r.body);
        assert_eq!(problem(&r)["reason"], "cost-above-burst");
        assert_eq!(
            problem(&r)["violated-policies"],
            serde_json::json!(["bytes"])
        );
        assert!(r.header("retry-after").is_none(), "no wait admits it");
        assert_eq!(
            backend.stats().requests,
            0,
            "h2: {h2}: refused before the backend"
        );
        left(7199);
    }
    // A route's cost read from the request is the tier's too; above its max, 413.
    let tier = "tollgate:{acme}:tb";
    let before = redis.bucket_level(tier, 100_000);
    let http = client_at("127.0.0.23", true);
    let r = send(&http, &gw.url("/rb"), &[], Body::Sized(vec![b'e'; 1234])).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(redis.bucket_level(tier, 100_000), before - 1234);
    let r = send(&http, &gw.url("/rb"), &[], Body::Sized(vec![b'f'; 4001])).await;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(problem(&r)["reason"], "cost-above-max");
    assert_eq!(redis.bucket_level(tier, 100_000), before - 1234);
}

/// `header: X-Units, default: 2, max: 500`: a count is charged as stated, a missing or garbage
/// one the default (counted by reason), a huge one or one above `max` is 413, a repeated one
/// 400, one above the rule's burst 413 `cost-above-burst`; none of the refusals debits anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_states_the_cost() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(&redis, &backend);
    for (h2, addr) in PROTOCOLS {
        let http = client_at(addr, h2);
        let url = gw.url("/units");
        let left = |n| assert_eq!(rule_level(&redis, "units", addr, 100), n, "h2: {h2}");
        let go = |units: Option<&'static str>| {
            let headers: Vec<(&str, &str)> = units.map(|u| ("x-units", u)).into_iter().collect();
            let http = http.clone();
            let url = url.clone();
            async move { send(&http, &url, &headers, Body::None).await }
        };
        assert_eq!(go(Some("7")).await.status, 200);
        left(93);
        assert_eq!(go(None).await.status, 200);
        left(91);
        assert_eq!(go(Some("lots")).await.status, 200);
        left(89);
        assert_eq!(go(Some("-3")).await.status, 200);
        left(87);
        for huge in ["99999999999999999999999", "501"] {
            let r = go(Some(huge)).await;
            assert_eq!(r.status, 413, "h2: {h2}: {}", r.body);
            assert_eq!(problem(&r)["reason"], "cost-above-max");
        }
        let r = go(Some("200")).await;
        assert_eq!(
            (r.status, problem(&r)["reason"].clone()),
            (413, "cost-above-burst".into())
        );
        let r = send(
            &http,
            &url,
            &[("x-units", "1"), ("x-units", "9")],
            Body::None,
        )
        .await;
        assert_eq!(r.status, 400, "h2: {h2}: {}", r.body);
        assert_eq!(problem(&r)["reason"], "ambiguous-cost");
        left(87);
    }
    for (reason, n) in [("absent", 2.0), ("malformed", 4.0)] {
        let labels = [("owner", "rule:units"), ("reason", reason)];
        assert_eq!(
            metric_or_zero(&gw, "tollgate_cost_defaulted_total", &labels),
            n
        );
    }
}

/// `json: batch.length, default: 5, max: 500`: the array's length, the default for a body
/// without the field or not JSON at all, 413 for a batch above `max` and for a body too long
/// to read before the decision. The backend receives the body it was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_field_states_the_cost() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(&redis, &backend);
    let batch = |n: usize| {
        let items = vec!["1"; n].join(",");
        format!("{{\"batch\":[{items}]}}").into_bytes()
    };
    for (h2, addr) in PROTOCOLS {
        let http = client_at(addr, h2);
        let url = gw.url("/batch");
        let json = [("content-type", "application/json")];
        let left = |n| assert_eq!(rule_level(&redis, "batch", addr, 1000), n, "h2: {h2}");
        let body = batch(12);
        let len = body.len() as u64;
        let r = send(&http, &url, &json, Body::Sized(body)).await;
        assert_eq!((r.status, received(&r)), (200, len), "h2: {h2}: {}", r.body);
        left(988);
        let r = send(&http, &url, &json, Body::Streamed(batch(30))).await;
        assert_eq!(r.status, 200, "h2: {h2}: {}", r.body);
        left(958);
        let r = send(&http, &url, &json, Body::Sized(b"{\"other\":1}".to_vec())).await;
        assert_eq!(r.status, 200);
        left(953);
        let r = send(&http, &url, &[], Body::Sized(b"not json at all".to_vec())).await;
        assert_eq!(r.status, 200);
        left(948);
        let r = send(&http, &url, &json, Body::Sized(batch(501))).await;
        assert_eq!(r.status, 413, "h2: {h2}: {}", r.body);
        assert_eq!(problem(&r)["reason"], "cost-above-max");
        let mut big = b"{\"pad\":\"".to_vec();
        big.extend(vec![b'x'; 70_000]);
        big.extend(b"\",\"batch\":[1]}");
        let r = send(&http, &url, &json, Body::Sized(big)).await;
        assert_eq!(r.status, 413, "h2: {h2}: {}", r.body);
        assert_eq!(problem(&r)["reason"], "cost-body-too-large");
        left(948);
    }
}

/// `query: n, default: 4, max: 500, min: 0`: the parameter's count; `0` is free because the
/// rule allows it; missing or garbage is the default; a repeated one 400, a huge one 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_parameter_states_the_cost() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(&redis, &backend);
    for (h2, addr) in PROTOCOLS {
        let http = client_at(addr, h2);
        let left = |n| assert_eq!(rule_level(&redis, "q", addr, 1000), n, "h2: {h2}");
        let status = |query: &'static str| {
            let (http, url) = (http.clone(), gw.url(&format!("/q{query}")));
            async move { send(&http, &url, &[], Body::None).await }
        };
        assert_eq!(status("?n=9").await.status, 200);
        left(991);
        assert_eq!(status("?n=0").await.status, 200);
        left(991);
        assert_eq!(status("").await.status, 200);
        left(987);
        assert_eq!(status("?n=abc").await.status, 200);
        left(983);
        let r = status("?n=1&n=300").await;
        assert_eq!(
            (r.status, problem(&r)["reason"].clone()),
            (400, "ambiguous-cost".into())
        );
        let r = status("?n=99999999999999999999999").await;
        assert_eq!(
            (r.status, problem(&r)["reason"].clone()),
            (413, "cost-above-max".into())
        );
        left(983);
    }
}

/// `POST /v1/explain` of a POST from `client` with `headers` (and the API key) and `body`.
async fn explain(
    gw: &Gateway,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    client: &str,
) -> Value {
    let mut h = json!({"x-api-key": KEY});
    for (n, v) in headers {
        h[*n] = match h.get(*n) {
            Some(first) => json!([first, v]),
            None => json!(v),
        };
    }
    let req =
        json!({"method": "POST", "path": path, "headers": h, "client_ip": client, "body": body});
    admin(gw.admin_addr(), "POST", "/v1/explain", Some(&req))
        .await
        .expect_ok()
        .clone()
}

/// Request headers, as [`send`] and [`explain`] take them.
type Headers = Vec<(&'static str, &'static str)>;

/// A cost explained, then charged: rule, its burst, path, headers, body, the cost.
type Case = (
    &'static str,
    u64,
    &'static str,
    Headers,
    Option<&'static str>,
    u64,
);

/// The tenant layer of an explanation.
fn tenant_layer(e: &Value) -> &Value {
    let layers = e["layers"].as_array().unwrap();
    layers
        .iter()
        .find(|l| l["layer"] == "tenant")
        .unwrap_or_else(|| panic!("{e}"))
}

/// `POST /v1/explain` charges a cost read from the request as the proxy does (a header, a
/// query parameter, a JSON field, the default for a missing one, a route's request bytes),
/// debits nothing, and the request then sent debits exactly the cost it named. A cost the
/// proxy refuses (above `max`, above the burst, stated twice) is the same problem in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_the_cost_a_request_is_then_charged() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(&redis, &backend);
    let addr = "127.0.0.24";
    let http = client_at(addr, false);
    let json_type = ("content-type", "application/json");
    let cases: [Case; 4] = [
        ("units", 100, "/units", vec![("x-units", "7")], None, 7),
        ("q", 1000, "/q?n=9", vec![], None, 9),
        (
            "batch",
            1000,
            "/batch",
            vec![json_type],
            Some(r#"{"batch":[1,2,3]}"#),
            3,
        ),
        ("units", 100, "/units", vec![], None, 2),
    ];
    for (rule, burst, path, headers, body, cost) in cases {
        let before = rule_level(&redis, rule, addr, burst);
        let e = explain(&gw, path, &headers, body, addr).await;
        let t = tenant_layer(&e);
        assert_eq!(t["rules"][0]["name"], rule, "{e}");
        assert_eq!(t["rules"][0]["cost"], cost, "{path}: {e}");
        assert_eq!(t["rules"][0]["would_admit"], true, "{e}");
        assert_eq!(e["outcome"]["status"], 200, "{e}");
        assert_eq!(
            rule_level(&redis, rule, addr, burst),
            before,
            "explain debits nothing"
        );
        let sent = body.map_or(Body::None, |b| Body::Sized(b.as_bytes().to_vec()));
        let r = send(&http, &gw.url(path), &headers, sent).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(
            rule_level(&redis, rule, addr, burst),
            before - cost,
            "{path}"
        );
    }
    // A route's cost read from the request: the tier's cost.
    let tier = "tollgate:{acme}:tb";
    let before = redis.bucket_level(tier, 100_000);
    let e = explain(&gw, "/rb", &[], Some("hello, world"), addr).await;
    assert_eq!(tenant_layer(&e)["cost"], 12, "{e}");
    assert_eq!(
        redis.bucket_level(tier, 100_000),
        before,
        "explain debits nothing"
    );
    let r = send(
        &http,
        &gw.url("/rb"),
        &[],
        Body::Sized(b"hello, world".to_vec()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(redis.bucket_level(tier, 100_000), before - 12);

    // Refusals: the proxy's problem, debiting nothing.
    let before = rule_level(&redis, "units", addr, 100);
    let refusals: [(Headers, u16, &str); 3] = [
        (vec![("x-units", "501")], 413, "cost-above-max"),
        (vec![("x-units", "200")], 413, "cost-above-burst"),
        (
            vec![("x-units", "1"), ("x-units", "9")],
            400,
            "ambiguous-cost",
        ),
    ];
    for (headers, status, reason) in refusals {
        let e = explain(&gw, "/units", &headers, None, addr).await;
        let out = &e["outcome"];
        assert_eq!(
            (out["layer"].clone(), out["status"].clone()),
            (json!("tenant"), json!(status)),
            "{e}"
        );
        let r = send(&http, &gw.url("/units"), &headers, Body::None).await;
        assert_eq!(r.status, status, "{}", r.body);
        let p = problem(&r);
        assert_eq!(p["reason"], reason, "{}", r.body);
        for field in [
            "type",
            "title",
            "status",
            "detail",
            "reason",
            "cost-source",
            "violated-policies",
        ] {
            assert_eq!(out["problem"][field], p[field], "{field}: {e} vs {p}");
        }
    }
    assert_eq!(rule_level(&redis, "units", addr, 100), before);
}

/// `tollgate check` refuses costs that cannot mean anything, naming each field.
#[test]
fn check_refuses_nonsense_costs_with_field_paths() {
    let yaml = GatewayConfig::echo("127.0.0.1:9", "required")
        .redis("redis://127.0.0.1:6379/0", STRICT_REDIS)
        .tier("T", "{ limit: 1, per: 1s }")
        .section(
            "limits",
            "\n  - { name: c, key: [client_ip], max_in_flight: 2, cost: { from: request_bytes } }\n  - { name: m, key: [client_ip], limit: 5, per: 1m, cost: { header: X-Units, default: 10, max: 5 } }\n  - { name: s, key: [client_ip], limit: 5, per: 1m, cost: { header: X-Units, query: n } }\n",
        )
        .yaml();
    let out = check_config(&yaml);
    assert_ne!(out.code(), Some(0), "{out:?}");
    let text = format!("{}{}", out.stdout, out.stderr);
    for path in ["limits[0].cost:", "limits[1].cost.max:", "limits[2].cost:"] {
        assert!(text.contains(path), "{path} in {text}");
    }
}
