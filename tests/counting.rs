//! Counting by outcome (docs/rules.md#counting-by-outcome) through the real gateway, a real
//! `redis-server` and the real echo backend, which answers the status each request asks for
//! (`?status=N`): a rule that counts only failed logins, a tier and its rules that give a
//! request count back when the backend fails. Every case over HTTP/1.1 and h2c.
//!
//! Counts are exact with buckets that barely refill (`per: 1h`).

mod common;

use common::admin::{admin, ADMIN_TOKEN, ADMIN_TOKEN_ENV};
use common::*;
use futures_util::future::join_all;
use serde_json::{json, Value};
use std::time::Duration;

const KEY: &str = "key-acme-0123456789";

/// A gateway on `redis` with tier `T` (`tier`), one API key of tenant `acme`, `/dead` routed to
/// a port nothing listens on, and the `limits:` block `rules`; HTTP/1.1 and h2c on one listener.
fn start(redis: &RedisServer, backend: &Backend, tier: &str, rules: &str) -> Gateway {
    let mut c = GatewayConfig::new()
        .upstream("echo", &backend.addr())
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\" }}"
        ))
        .listen(&["{ addr: \"{listen}\", h2: true }"])
        .redis(&redis.url(), STRICT_REDIS)
        .tier("T", tier)
        .api_key(KEY, "acme", "T")
        .upstream("dead", &format!("127.0.0.1:{}", free_port()))
        .route_lines(
            "  - { path_prefix: \"/dead\", upstream: dead, auth: required }\n  - { path_prefix: \"/\", upstream: echo, auth: required }\n",
        );
    if !rules.is_empty() {
        c = c.section("limits", &format!("\n{rules}"));
    }
    Gateway::start_with_env(&c.yaml(), &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)])
}

/// A client from `ip`, over HTTP/1.1 or (`h2`) h2c prior knowledge.
fn client_at(ip_text: &str, h2: bool) -> reqwest::Client {
    let b = client_builder().local_address(ip(ip_text));
    let b = if h2 { b.http2_prior_knowledge() } else { b };
    b.build().expect("client")
}

async fn post(http: &reqwest::Client, url: &str) -> Reply {
    let r = http
        .post(url)
        .header("x-api-key", KEY)
        .body("user=a&password=b");
    Reply::read(r.send().await.expect("send"))
        .await
        .expect("read")
}

async fn get(http: &reqwest::Client, url: &str) -> Reply {
    let r = http.get(url).header("x-api-key", KEY);
    Reply::read(r.send().await.expect("send"))
        .await
        .expect("read")
}

const LOGIN: &str = "  - { name: login_failures, match: { routes: [\"/login\"], methods: [POST] }, key: [client_ip], limit: 5, per: 1h, count: { status: [401, 403] } }\n";

/// 20 login attempts from one address, the backend refusing all but every 4th: exactly 5
/// failures reach the backend and count, the success between them is free, then 429 (with a
/// truthful Retry-After) for everything, successes included, until the bucket refills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_failed_logins_count() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(
        &redis,
        &backend,
        "{ limit: 1, per: 1h, burst: 1000 }",
        LOGIN,
    );
    for (h2, addr) in [(false, "127.0.0.2"), (true, "127.0.0.3")] {
        backend.reset();
        let http = client_at(addr, h2);
        let mut statuses = Vec::new();
        let mut last = None;
        for i in 0..20 {
            let status = if i % 4 == 3 { 200 } else { 401 };
            let r = post(&http, &gw.url(&format!("/login?status={status}"))).await;
            statuses.push(r.status);
            last = Some(r);
        }
        let want: Vec<u16> = [401, 401, 401, 200, 401, 401]
            .into_iter()
            .chain([429; 14])
            .collect();
        assert_eq!(statuses, want, "h2: {h2}");
        assert_eq!(backend.stats().requests, 6, "h2: {h2}");
        let refused = last.unwrap();
        let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
        assert!(
            (1..=720).contains(&retry),
            "Retry-After {retry}: one token of 5 per hour"
        );
        let key = redis.keys("*r:login_failures:*");
        let key = key
            .iter()
            .find(|k| k.contains(addr))
            .expect("the address's bucket");
        assert_eq!(redis.bucket_level(key, 5), 0, "five failures counted");
    }
    // Successes alone never count; a GET is not matched by the rule.
    let http = client_at("127.0.0.4", false);
    for _ in 0..12 {
        assert_eq!(post(&http, &gw.url("/login?status=200")).await.status, 200);
    }
    assert_eq!(get(&http, &gw.url("/login?status=401")).await.status, 401);
    let key = redis.keys("*r:login_failures:*");
    let key = key
        .iter()
        .find(|k| k.contains("127.0.0.4"))
        .expect("bucket");
    assert_eq!(redis.bucket_level(key, 5), 5, "no success counted");
    let body = json!({"method": "POST", "path": "/login", "headers": {"x-api-key": KEY}, "client_ip": "127.0.0.2"});
    let reply = admin(gw.admin_addr(), "POST", "/v1/explain", Some(&body)).await;
    let v = reply.expect_ok();
    let layers = v["layers"].as_array().unwrap();
    let rule = &layers.iter().find(|l| l["layer"] == "tenant").unwrap()["rules"][0];
    assert_eq!(rule["count_status"], json!([401, 403]), "{rule}");
    assert_eq!(rule["counted"], "after_response", "{rule}");
    assert_eq!(rule["would_admit"], false, "{rule}");
    let m = metric(
        &gw,
        "tollgate_count_settlements_total",
        &[("policy", "login_failures"), ("outcome", "given_back")],
    );
    assert_eq!(m, Some(2.0 + 12.0));
    let m = metric(
        &gw,
        "tollgate_count_settlements_total",
        &[("policy", "login_failures"), ("outcome", "counted")],
    );
    assert_eq!(m, Some(10.0));
}

/// 50 failures at once from one address: each request reserves its count at admission, so
/// exactly `limit` reach the backend however they interleave, over HTTP/1.1 (50 connections)
/// and h2c (50 streams on one connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_failures_never_pass_the_limit() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(
        &redis,
        &backend,
        "{ limit: 1, per: 1h, burst: 1000 }",
        LOGIN,
    );
    for (h2, addr) in [(false, "127.0.0.5"), (true, "127.0.0.6")] {
        backend.reset();
        let http = client_at(addr, h2);
        let url = gw.url("/login?status=401");
        let replies = join_all((0..50).map(|_| post(&http, &url))).await;
        let count = |s: u16| replies.iter().filter(|r| r.status == s).count();
        assert_eq!((count(401), count(429)), (5, 45), "h2: {h2}");
        assert_eq!(backend.stats().requests, 5, "h2: {h2}");
    }
}

/// A tier with `refund_on`: a backend 5xx and an unreachable backend give the request count
/// back, the tier's and its rules' alike (read in Redis); a 200 and a 404 keep it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_backend_costs_no_request_count() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tier = "{ limit: 1, per: 1h, burst: 100, refund_on: [backend_5xx, upstream_unavailable] }";
    let rules = "  - { name: per_address, key: [client_ip], limit: 1, per: 1h, burst: 100 }\n";
    let gw = start(&redis, &backend, tier, rules);
    let tier_key = "tollgate:{acme}:tb";
    let rule_level = |addr: &str| {
        let keys = redis.keys("*r:per_address:*");
        let key = keys.iter().find(|k| k.contains(addr)).cloned();
        key.map_or(100, |k| redis.bucket_level(&k, 100))
    };
    let mut spent = 0;
    for (h2, addr) in [(false, "127.0.0.7"), (true, "127.0.0.8")] {
        let http = client_at(addr, h2);
        for _ in 0..3 {
            assert_eq!(get(&http, &gw.url("/x?status=503")).await.status, 503);
            assert_eq!(get(&http, &gw.url("/x?status=500")).await.status, 500);
            assert_eq!(get(&http, &gw.url("/dead")).await.status, 502);
        }
        // An unreachable backend's refund is sent when the request ends, after the answer.
        let back = || redis.bucket_level(tier_key, 100) == 100 - spent && rule_level(addr) == 100;
        let settled = eventually(Duration::from_secs(10), back).await;
        assert!(
            settled,
            "h2: {h2}: tier {} (want {}), rule {} (want 100), the rule's count too",
            redis.bucket_level(tier_key, 100),
            100 - spent,
            rule_level(addr)
        );
        assert_eq!(get(&http, &gw.url("/x?status=200")).await.status, 200);
        assert_eq!(get(&http, &gw.url("/x?status=404")).await.status, 404);
        spent += 2;
        assert_eq!(redis.bucket_level(tier_key, 100), 100 - spent, "h2: {h2}");
        assert_eq!(rule_level(addr), 98, "h2: {h2}");
    }
}

/// Without `refund_on`, a 5xx costs its request count as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_refund_on_a_failure_counts() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(&redis, &backend, "{ limit: 1, per: 1h, burst: 100 }", "");
    let http = client_at("127.0.0.9", false);
    for _ in 0..3 {
        assert_eq!(get(&http, &gw.url("/x?status=503")).await.status, 503);
    }
    assert_eq!(redis.bucket_level("tollgate:{acme}:tb", 100), 97);
}

const PENALTY: &str = "  - { name: penalty, match: { routes: [\"/p\"] }, key: [client_ip], limit: 1, per: 1h, block_for: 1h }\n  - { name: penalty_ext, match: { routes: [\"/e\"] }, key: [client_ip], limit: 1, per: 1h, block_for: 1h, extend_on_refusal: true }\n";

fn del(redis: &RedisServer, key: &str) {
    let _: () = redis::cmd("DEL")
        .arg(key)
        .query(&mut redis.conn())
        .expect("DEL");
}

/// Leaves 10 s of the block at `key`.
fn shorten(redis: &RedisServer, key: &str) {
    let _: () = redis::cmd("PEXPIRE")
        .arg(key)
        .arg(10_000)
        .query(&mut redis.conn())
        .expect("PEXPIRE");
}

/// The first rule of the tenant layer in `POST /v1/explain` of a GET of `path` from `client`.
async fn explained_rule(gw: &Gateway, path: &str, client: &str) -> Value {
    let body =
        json!({"method": "GET", "path": path, "headers": {"x-api-key": KEY}, "client_ip": client});
    let reply = admin(gw.admin_addr(), "POST", "/v1/explain", Some(&body)).await;
    let v = reply.expect_ok();
    let layers = v["layers"].as_array().unwrap();
    let tenant = layers.iter().find(|l| l["layer"] == "tenant").unwrap();
    tenant["rules"][0].clone()
}

fn problem(r: &Reply) -> Value {
    serde_json::from_str(&r.body).expect("problem+json")
}

/// A refusal by a rule with `block_for` blocks its key on every gateway of the fleet for the
/// block's time, whatever the bucket holds (here refilled by hand): 429 with a `Retry-After`
/// that tells when the block ends. A refusal during the block does not extend it, unless
/// `extend_on_refusal`. Gateway A speaks HTTP/1.1, gateway B h2c.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_penalty_box_holds_across_the_fleet() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tier = "{ limit: 1, per: 1h, burst: 1000 }";
    let a = start(&redis, &backend, tier, PENALTY);
    let b = start(&redis, &backend, tier, PENALTY);
    let (ha, hb) = (
        client_at("127.0.0.10", false),
        client_at("127.0.0.10", true),
    );
    assert_eq!(get(&ha, &a.url("/p")).await.status, 200);
    let refused = get(&ha, &a.url("/p")).await;
    assert_eq!(refused.status, 429);
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!(
        (3500..=3600).contains(&retry),
        "Retry-After {retry}: the block's hour"
    );
    let blocks = redis.keys("*r:penalty:*:blk");
    assert_eq!(blocks.len(), 1, "{:?}", redis.keys("*"));
    // The bucket refills (deleted here): the block still refuses, on the other gateway too.
    for k in redis.keys("*r:penalty:*") {
        if !k.ends_with(":blk") {
            del(&redis, &k);
        }
    }
    let on_b = get(&hb, &b.url("/p")).await;
    assert_eq!(on_b.status, 429, "{}", on_b.body);
    assert_eq!(problem(&on_b)["reason"], "blocked");
    assert_eq!(
        problem(&on_b)["violated-policies"],
        serde_json::json!(["penalty"])
    );
    let retry: u64 = on_b.header("retry-after").unwrap().parse().unwrap();
    assert!((3500..=3600).contains(&retry), "Retry-After {retry}");
    // The admin explanation sees the block (and extends nothing).
    let rule = explained_rule(&b, "/p", "127.0.0.10").await;
    assert_eq!(rule["block_for_ms"], 3_600_000, "{rule}");
    assert_eq!(rule["would_admit"], false, "{rule}");
    let left = rule["blocked_for_s"].as_u64().unwrap();
    assert!((3500..=3600).contains(&left), "{rule}");
    assert_eq!(rule["retry_after_s"], left);
    // A refusal during the block leaves its end where it was...
    shorten(&redis, &blocks[0]);
    assert_eq!(get(&ha, &a.url("/p")).await.status, 429);
    assert!(redis.pttl(&blocks[0]) <= 10_000);
    // ... and its end frees the key (the bucket is full again).
    del(&redis, &blocks[0]);
    assert_eq!(get(&hb, &b.url("/p")).await.status, 200);
    assert_eq!(backend.stats().requests, 2);

    // extend_on_refusal: each refusal during the block starts it again.
    assert_eq!(get(&ha, &a.url("/e")).await.status, 200);
    assert_eq!(get(&ha, &a.url("/e")).await.status, 429);
    let blocks = redis.keys("*r:penalty_ext:*:blk");
    assert_eq!(blocks.len(), 1);
    shorten(&redis, &blocks[0]);
    let again = get(&hb, &b.url("/e")).await;
    assert_eq!(again.status, 429);
    assert!(
        redis.pttl(&blocks[0]) > 3_000_000,
        "extended to the hour again"
    );
    let retry: u64 = again.header("retry-after").unwrap().parse().unwrap();
    assert!((3500..=3600).contains(&retry), "Retry-After {retry}");
}

/// `tollgate check` refuses counting that cannot mean anything, naming each field.
#[test]
fn check_refuses_nonsense_with_field_paths() {
    let yaml = GatewayConfig::echo("127.0.0.1:9", "required")
        .redis("redis://127.0.0.1:6379/0", STRICT_REDIS)
        .tier("T", "{ limit: 1, per: 1s, refund_on: [backend_5xx], pool: { limit: 5, per: 1s } }")
        .section(
            "limits",
            "\n  - { name: c, key: [client_ip], max_in_flight: 2, count: { status: [401] }, block_for: 1m }\n  - { name: s, key: [client_ip], limit: 5, per: 1m, count: { status: [401, 700, \"5xx\"] }, refund_on: [backend_5xx] }\n",
        )
        .yaml();
    let out = check_config(&yaml);
    assert_ne!(out.code(), Some(0), "{out:?}");
    let text = format!("{}{}", out.stdout, out.stderr);
    for path in [
        "tiers.T.refund_on:",
        "limits[0].count:",
        "limits[0].block_for:",
        "limits[1].count.status[1]:",
        "limits[1].refund_on:",
    ] {
        assert!(text.contains(path), "{path} in {text}");
    }
}

/// With Redis stopped, a rule with `block_for` and `on_failure: local` keeps its penalty box in
/// the instance's memory: the local bucket's refusal blocks the key, and the next request is
/// refused as `blocked` with the block's hour as its `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_penalty_box_is_kept_in_memory_while_redis_is_down() {
    let mut redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rule = "  - { name: local_box, match: { routes: [\"/lb\"] }, key: [client_ip], limit: 1, per: 1h, block_for: 1h, on_failure: local }\n";
    let tier = "{ limit: 1, per: 1h, burst: 1000, on_failure: local }";
    let gw = start(&redis, &backend, tier, rule);
    redis.kill();
    for (h2, addr) in [(false, "127.0.0.31"), (true, "127.0.0.32")] {
        let http = client_at(addr, h2);
        assert_eq!(get(&http, &gw.url("/lb")).await.status, 200, "h2: {h2}");
        let refused = get(&http, &gw.url("/lb")).await;
        assert_eq!(refused.status, 429, "h2: {h2}: {}", refused.body);
        let blocked = get(&http, &gw.url("/lb")).await;
        assert_eq!(blocked.status, 429, "h2: {h2}: {}", blocked.body);
        assert_eq!(
            problem(&blocked)["reason"],
            "blocked",
            "h2: {h2}: {}",
            blocked.body
        );
        let retry: u64 = blocked.header("retry-after").unwrap().parse().unwrap();
        assert!(
            (3500..=3600).contains(&retry),
            "h2: {h2}: Retry-After {retry}"
        );
    }
}

/// A shadow rule with `count.status` counts the failures and reports what it would refuse
/// (`shadow_limited`), but every attempt reaches the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_counting_rule_counts_but_never_refuses() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rule = "  - { name: login_watch, match: { routes: [\"/login\"], methods: [POST] }, key: [client_ip], limit: 2, per: 1h, count: { status: [401] }, mode: shadow }\n";
    let gw = start(&redis, &backend, "{ limit: 1, per: 1h, burst: 1000 }", rule);
    for (h2, addr) in [(false, "127.0.0.33"), (true, "127.0.0.34")] {
        let http = client_at(addr, h2);
        for _ in 0..6 {
            let r = post(&http, &gw.url("/login?status=401")).await;
            assert_eq!(r.status, 401, "h2: {h2}: {}", r.body);
            assert!(r.header("retry-after").is_none());
        }
        let key = redis.keys("*r:login_watch:*");
        let key = key.iter().find(|k| k.contains(addr)).expect("bucket");
        assert_eq!(
            redis.bucket_level(key, 2),
            0,
            "h2: {h2}: two failures counted"
        );
    }
    assert_eq!(backend.stats().requests, 12);
    let labels = [("rule", "login_watch"), ("outcome", "shadow_limited")];
    assert_eq!(
        metric_or_zero(&gw, "tollgate_rule_decisions_total", &labels),
        8.0
    );
}
