//! Blocks set through the admin API (docs/live-state.md#blocks), black-box: one real
//! `redis-server`, the echo backend and two real `tollgate` gateways on that Redis.
//!
//! Clients connect from different 127/8 addresses (all loopback on Linux); IPv6 clients come
//! through a trusted proxy's `X-Forwarded-For` (the gateways listen on 127.0.0.1). Propagation is
//! waited for (polling, generous deadline), never timed.

mod common;

use common::admin::*;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

const TIERS: &str = "  free: { limit: 1, per: 1h, burst: 1000 }\n";
const READ_ENV: &str = "TOLLGATE_TEST_READ_TOKEN";
const READ_TOKEN: &str = "read-token-5c2e8a";
/// Clients from this address may name the client in `X-Forwarded-For`.
const PROXY: &str = "127.0.0.3";
const STORE: &str = "store: { blocks: true, cache: { ttl: 1h, negative_ttl: 1h } }\n";

/// How long a change may take to be seen (the contract is `store.propagation`, 1 s by
/// default; a loaded CI machine gets a wide margin).
const SEEN_WITHIN: Duration = Duration::from_secs(20);

fn yaml(redis: &RedisServer, backend: &Backend) -> String {
    yaml_on(&redis.url(), backend, STORE)
}

/// The gateway config on the Redis at `url` with `store` as its `store:` section.
fn yaml_on(url: &str, backend: &Backend, store: &str) -> String {
    GatewayConfig::echo(&backend.addr(), "required")
        .redis(url, STRICT_REDIS)
        .tier_lines(TIERS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: {ADMIN_TOKEN_ENV}, tokens: [\
             {{ token_env: {READ_ENV}, scope: read, name: dashboard }}] }}"
        ))
        .edge(&format!(
            "{{ limit: 100000, per: 1s, burst: 100000, trusted_proxies: [\"{PROXY}/32\"] }}"
        ))
        .api_key(&api_key_of("acme"), "acme", "free")
        .raw(store)
        .yaml()
}

/// Two gateways on one Redis, started with the write and the read token.
fn pair() -> Fleet {
    Fleet::start(
        yaml,
        &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN), (READ_ENV, READ_TOKEN)],
    )
}

/// One request to `gw` from `from` (a 127/8 address), with `key` and `X-Forwarded-For: xff`.
async fn send(gw: &Gateway, from: &str, key: Option<&str>, xff: Option<&str>) -> Reply {
    let mut req = http_from(from).get(gw.url("/"));
    if let Some(k) = key {
        req = req.header("x-api-key", k);
    }
    if let Some(x) = xff {
        req = req.header("x-forwarded-for", x);
    }
    Reply::read(req.send().await.expect("proxied request"))
        .await
        .expect("reply")
}

/// Polls until `gw` answers `status` to the request; the last reply when it did, `None` when
/// it did not within [`SEEN_WITHIN`].
async fn becomes(
    gw: &Gateway,
    from: &str,
    key: Option<&str>,
    xff: Option<&str>,
    status: u16,
) -> Option<Reply> {
    match poll(
        SEEN_WITHIN,
        || send(gw, from, key, xff),
        |r| r.status == status,
    )
    .await
    {
        Ok(r) => Some(r),
        Err(r) => {
            eprintln!("last reply: {r:?}");
            None
        }
    }
}

async fn put(gw: &Gateway, path: &str, body: Value) -> Value {
    admin_ok(gw.admin_addr(), "PUT", path, Some(&body)).await
}

/// Removes the block at `path` through `gw`'s admin API.
async fn delete(gw: &Gateway, path: &str) {
    admin_ok(gw.admin_addr(), "DELETE", path, None).await;
}

/// Whether `gw` comes to admit a request from `from` with `key` within [`SEEN_WITHIN`].
async fn admits(gw: &Gateway, from: &str, key: Option<&str>) -> bool {
    becomes(gw, from, key, None, 200).await.is_some()
}

/// The refusal's problem body, checked for its shape: a 403 problem naming `kind` `value`.
fn blocked(r: &Reply, kind: &str, value: &str) -> Value {
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(
        r.header("content-type"),
        Some("application/problem+json"),
        "{r:?}"
    );
    let p: Value = serde_json::from_str(&r.body).expect("problem JSON");
    assert_eq!(p["status"], 403);
    assert_eq!(p["block"]["type"], kind, "{p}");
    assert_eq!(p["block"]["value"], value, "{p}");
    p
}

fn puts(gw: &Gateway, outcome: &str) -> f64 {
    metric(
        gw,
        "tollgate_admin_writes_total",
        &[("operation", "block_put"), ("outcome", outcome)],
    )
    .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn address_and_network_blocks_are_refused_at_the_edge_on_both_gateways() {
    let rig = pair();
    let key = api_key_of("acme");
    // An address, with expiry, set on A.
    let set = put(
        &rig.a,
        "/v1/blocks/ip/127.0.0.2",
        json!({"reason": "credential stuffing", "expires_in_s": 3600}),
    )
    .await;
    assert_eq!(set["value"], "127.0.0.2/32");
    assert_eq!(puts(&rig.a, "ok"), 1.0);
    for gw in [&rig.a, &rig.b] {
        // Refused before identity: without a key it is the block's 403, not a 401.
        let r = becomes(gw, "127.0.0.2", None, None, 403)
            .await
            .expect("blocked");
        let p = blocked(&r, "ip", "127.0.0.2/32");
        assert_eq!(p["block"]["reason"], "credential stuffing");
        let left = p["block"]["remaining_s"].as_u64().expect("remaining_s");
        assert!((1..=3600).contains(&left), "{p}");
        assert!(p["detail"]
            .as_str()
            .unwrap()
            .contains("credential stuffing"));
        let retry: u64 = r
            .header("retry-after")
            .expect("Retry-After")
            .parse()
            .unwrap();
        assert!((1..=3600).contains(&retry), "{r:?}");
        assert_eq!(send(gw, "127.0.0.4", Some(&key), None).await.status, 200);
    }
    // A network without expiry, set on B: no Retry-After.
    put(
        &rig.b,
        "/v1/blocks/ip/127.0.0.9%2F29",
        json!({"reason": "scanner"}),
    )
    .await;
    for gw in [&rig.a, &rig.b] {
        let r = becomes(gw, "127.0.0.13", Some(&key), None, 403)
            .await
            .expect("blocked");
        let p = blocked(&r, "ip", "127.0.0.8/29");
        assert_eq!(p["block"]["remaining_s"], Value::Null);
        assert_eq!(r.header("retry-after"), None, "{r:?}");
        assert_eq!(send(gw, "127.0.0.16", Some(&key), None).await.status, 200);
    }
    // An IPv6 network, the client named by a trusted proxy.
    put(
        &rig.a,
        "/v1/blocks/ip/2001:db8::%2F32",
        json!({"reason": "v6 abuse", "expires_in_s": 600}),
    )
    .await;
    for gw in [&rig.a, &rig.b] {
        let xff = Some("2001:db8:7::1");
        let r = becomes(gw, PROXY, Some(&key), xff, 403)
            .await
            .expect("blocked");
        blocked(&r, "ip", "2001:db8::/32");
        let other = send(gw, PROXY, Some(&key), Some("2001:db9::1")).await;
        assert_eq!(other.status, 200, "{other:?}");
    }
    // The list shows all three; a reload keeps them in force.
    let list = admin(rig.a.admin_addr(), "GET", "/v1/blocks?type=ip", None).await;
    let values: Vec<&str> = list.expect_ok()["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["127.0.0.2/32", "127.0.0.8/29", "2001:db8::/32"]);
    rig.a.reload_ok(&rig.yaml).await;
    blocked(
        &send(&rig.a, "127.0.0.2", None, None).await,
        "ip",
        "127.0.0.2/32",
    );
    // Removed on B: admitted again on both.
    delete(&rig.b, "/v1/blocks/ip/127.0.0.2").await;
    for gw in [&rig.a, &rig.b] {
        assert!(admits(gw, "127.0.0.2", Some(&key)).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_and_key_blocks_are_refused_on_both_gateways() {
    let rig = pair();
    let filed = api_key_of("acme");
    let created = admin(
        rig.a.admin_addr(),
        "POST",
        "/v1/keys",
        Some(&json!({"tenant": "other", "tier": "free", "name": "ci"})),
    )
    .await;
    let created = created.expect_ok().clone();
    let (secret, id) = (
        created["secret"].as_str().unwrap(),
        created["id"].as_str().unwrap(),
    );
    assert_eq!(
        send(&rig.b, "127.0.0.1", Some(secret), None).await.status,
        200
    );
    put(
        &rig.a,
        "/v1/blocks/tenant/acme",
        json!({"reason": "unpaid"}),
    )
    .await;
    put(
        &rig.b,
        &format!("/v1/blocks/key/{id}"),
        json!({"reason": "leaked", "expires_in_s": 3600}),
    )
    .await;
    for gw in [&rig.a, &rig.b] {
        let r = becomes(gw, "127.0.0.1", Some(&filed), None, 403)
            .await
            .expect("tenant blocked");
        blocked(&r, "tenant", "acme");
        let r = becomes(gw, "127.0.0.1", Some(secret), None, 403)
            .await
            .expect("key blocked");
        blocked(&r, "key", id);
        assert!(r.header("retry-after").is_some(), "{r:?}");
    }
    delete(&rig.b, "/v1/blocks/tenant/acme").await;
    delete(&rig.a, &format!("/v1/blocks/key/{id}")).await;
    for gw in [&rig.a, &rig.b] {
        assert!(admits(gw, "127.0.0.1", Some(&filed)).await);
        assert!(admits(gw, "127.0.0.1", Some(secret)).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_block_admits_again() {
    let rig = pair();
    let key = api_key_of("acme");
    put(
        &rig.a,
        "/v1/blocks/ip/127.0.0.5",
        json!({"reason": "short", "expires_in_s": 2}),
    )
    .await;
    let r = becomes(&rig.b, "127.0.0.5", Some(&key), None, 403).await;
    assert!(r.is_some(), "never blocked");
    for gw in [&rig.a, &rig.b] {
        assert!(admits(gw, "127.0.0.5", Some(&key)).await);
    }
    let list = admin(rig.a.admin_addr(), "GET", "/v1/blocks", None).await;
    assert_eq!(list.expect_ok()["blocks"], json!([]));
    admin(rig.a.admin_addr(), "GET", "/v1/blocks/ip/127.0.0.5", None)
        .await
        .expect_problem(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_subscription_still_converges_and_redis_down_keeps_the_blocks() {
    let mut rig = pair();
    let key = api_key_of("acme");
    assert_eq!(
        send(&rig.b, "127.0.0.6", Some(&key), None).await.status,
        200
    );
    // Every subscriber's connection is cut; the block's message reaches none that is down.
    rig.redis.kill_pubsub_clients();
    put(&rig.a, "/v1/blocks/ip/127.0.0.6", json!({"reason": "r"})).await;
    let r = becomes(&rig.b, "127.0.0.6", Some(&key), None, 403).await;
    blocked(&r.expect("B converged"), "ip", "127.0.0.6/32");
    // Redis stops: the blocks last loaded stay in force (no Redis call decides them).
    rig.redis.kill();
    for gw in [&rig.a, &rig.b] {
        for _ in 0..3 {
            blocked(
                &send(gw, "127.0.0.6", Some(&key), None).await,
                "ip",
                "127.0.0.6/32",
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_token_cannot_write_and_bad_input_changes_nothing() {
    let rig = pair();
    let a = rig.a.admin_addr();
    let read = format!("Bearer {READ_TOKEN}");
    let body = json!({"reason": "r"});
    let r = admin_call(
        a,
        "PUT",
        "/v1/blocks/ip/127.0.0.7",
        Some(&read),
        Some(&body),
    )
    .await;
    r.expect_problem(403);
    let r = admin_call(a, "DELETE", "/v1/blocks/ip/127.0.0.7", Some(&read), None).await;
    r.expect_problem(403);
    let r = admin_call(a, "GET", "/v1/blocks", Some(&read), None).await;
    assert_eq!(r.expect_ok()["blocks"], json!([]));
    assert_eq!(
        metric(
            &rig.a,
            "tollgate_admin_writes_total",
            &[("operation", "block_put"), ("outcome", "forbidden")]
        ),
        Some(1.0)
    );

    let long = "r".repeat(10_000);
    let cases = [
        (
            "/v1/blocks/ip/10.0.0.0%2F33",
            json!({"reason": "r"}),
            "value",
        ),
        (
            "/v1/blocks/ip/not-an-address",
            json!({"reason": "r"}),
            "value",
        ),
        ("/v1/blocks/cidr/10.0.0.0", json!({"reason": "r"}), "type"),
        ("/v1/blocks/tenant/ip:nope", json!({"reason": "r"}), "value"),
        ("/v1/blocks/key/nope", json!({"reason": "r"}), "value"),
        ("/v1/blocks/ip/10.0.0.1", json!({"reason": long}), "reason"),
        ("/v1/blocks/ip/10.0.0.1", json!({}), "reason"),
        // An expiry in the past.
        (
            "/v1/blocks/ip/10.0.0.1",
            json!({"reason": "r", "expires_in_s": -60}),
            "expires_in_s",
        ),
        (
            "/v1/blocks/ip/10.0.0.1",
            json!({"reason": "r", "expires_in_s": 0}),
            "expires_in_s",
        ),
        ("/v1/blocks/ip/10.0.0.1", json!({"reason": ""}), "reason"),
        (
            "/v1/blocks/ip/10.0.0.1",
            json!({"reason": "r", "why": 1}),
            "why",
        ),
    ];
    let mut before = rig.redis.keys("*live*");
    before.sort();
    for (path, body, field) in cases {
        let r = admin(a, "PUT", path, Some(&body)).await;
        let p = r.expect_problem(400);
        assert_eq!(p["field"], field, "{path} {body}: {p}");
    }
    admin(a, "DELETE", "/v1/blocks/ip/10.0.0.1", None)
        .await
        .expect_problem(404);
    let r = admin(a, "GET", "/v1/blocks?type=cidr", None).await;
    assert_eq!(r.expect_problem(400)["field"], "type");
    // Nothing changed: no block, no new key in Redis, the version untouched.
    let r = admin(a, "GET", "/v1/blocks", None).await;
    assert_eq!(r.expect_ok()["blocks"], json!([]));
    let mut after = rig.redis.keys("*live*");
    after.sort();
    assert_eq!(after, before);
    // Every case but the unknown type reached a write route and is audited as refused.
    assert_eq!(puts(&rig.a, "refused"), 10.0);
    let _ = &rig.b;
}

/// Sets tenant `tenant`'s live limits on `gw` (a burst the `RateLimit-Policy` of every answer
/// names as `q=`).
async fn override_burst(gw: &Gateway, tenant: &str, burst: u64) {
    admin(
        gw.admin_addr(),
        "PUT",
        &format!("/v1/tenants/{tenant}/limits"),
        Some(&json!({"limit": 1, "per": "1h", "burst": burst})),
    )
    .await
    .expect_ok();
}

/// The first two requests a gateway serves, sent at once: one from the blocked `127.0.0.2`
/// and one with acme's key from `127.0.0.4`. Both must meet the live state read from Redis:
/// the block's 403 and the override's burst (`q=<burst>`) in `RateLimit-Policy`.
async fn first_requests_meet_the_live_state(gw: &Gateway, burst: u64) {
    let key = api_key_of("acme");
    let (shut, admitted) = tokio::join!(
        send(gw, "127.0.0.2", None, None),
        send(gw, "127.0.0.4", Some(&key), None)
    );
    blocked(&shut, "ip", "127.0.0.2/32");
    assert_eq!(admitted.status, 200, "{admitted:?}");
    let policy = admitted.header("ratelimit-policy").unwrap_or_default();
    assert!(
        policy.contains(&format!("q={burst};")),
        "the first admitted request did not carry the live override: {policy:?}"
    );
}

/// A block and a limit override set before a gateway starts are in force on its very first
/// requests: the gateway reads the live state before its listeners accept. Its Redis is
/// reached through a relay that delays every byte by 200 ms, so a gateway that served before
/// reading the state would answer its first requests from an empty one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_set_before_the_start_holds_on_the_first_request() {
    let rig = pair();
    put(
        &rig.a,
        "/v1/blocks/ip/127.0.0.2",
        json!({"reason": "set before the start"}),
    )
    .await;
    override_burst(&rig.a, "acme", 7).await;
    let relay = TcpRelay::start_delayed(&rig.redis.addr(), Duration::from_millis(200));
    let late = Gateway::start_with_env(
        &yaml_on(&relay.url(), &rig.backend, STORE),
        &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)],
    );
    first_requests_meet_the_live_state(&late, 7).await;
    assert!(late.log().contains("live state loaded before serving"));
}

/// A reload onto another Redis serves that Redis's blocks and overrides from its first
/// request. Both stores are at the same version and override generation, so a gateway that
/// kept the previous store's state would never read the new one by the version check alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_onto_another_redis_serves_its_state_at_once() {
    let env = [(ADMIN_TOKEN_ENV, ADMIN_TOKEN)];
    let backend = Backend::start("echo");
    let (first, second) = (RedisServer::start(), RedisServer::start());
    let a = Gateway::start_with_env(&yaml_on(&first.url(), &backend, STORE), &env);
    let c = Gateway::start_with_env(&yaml_on(&second.url(), &backend, STORE), &env);
    // The same history on both stores (version 2, one override write), other contents.
    put(
        &a,
        "/v1/blocks/ip/127.0.0.5",
        json!({"reason": "first store"}),
    )
    .await;
    override_burst(&a, "acme", 5).await;
    put(
        &c,
        "/v1/blocks/ip/127.0.0.2",
        json!({"reason": "second store"}),
    )
    .await;
    override_burst(&c, "acme", 7).await;
    assert!(becomes(&a, "127.0.0.5", None, None, 403).await.is_some());
    a.reload_ok(&yaml_on(&second.url(), &backend, STORE)).await;
    first_requests_meet_the_live_state(&a, 7).await;
    assert_eq!(
        send(&a, "127.0.0.5", Some(&api_key_of("acme")), None)
            .await
            .status,
        200,
        "the first store's block is gone with it"
    );
}

/// `store:` without `blocks` enforces blocks (the default), like keys and overrides; with
/// `blocks: false` a `PUT` is a 404 problem naming the setting and stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_are_on_by_default_and_a_put_while_off_is_refused() {
    let env = [(ADMIN_TOKEN_ENV, ADMIN_TOKEN)];
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let on = Gateway::start_with_env(&yaml_on(&redis.url(), &backend, "store: {}\n"), &env);
    put(
        &on,
        "/v1/blocks/ip/127.0.0.2",
        json!({"reason": "default on"}),
    )
    .await;
    let r = becomes(&on, "127.0.0.2", None, None, 403)
        .await
        .expect("blocked with store.blocks left to its default");
    blocked(&r, "ip", "127.0.0.2/32");
    redis.flushall();
    let off = Gateway::start_with_env(
        &yaml_on(&redis.url(), &backend, "store: { blocks: false }\n"),
        &env,
    );
    let body = json!({"reason": "while off"});
    let refused = admin(
        off.admin_addr(),
        "PUT",
        "/v1/blocks/ip/127.0.0.3",
        Some(&body),
    )
    .await;
    let p = refused.expect_problem(404);
    assert!(
        p["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("store.blocks"),
        "{p}"
    );
    assert!(redis.keys("*blocks*").is_empty(), "nothing stored");
    assert_eq!(send(&off, "127.0.0.3", None, None).await.status, 401);
}

/// Redis unreachable at start: the gateway starts anyway (after at most a few seconds), says
/// so in its log, and puts the blocks in force once Redis answers, through its version check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_started_without_redis_serves_and_reads_the_state_later() {
    let rig = pair();
    put(
        &rig.a,
        "/v1/blocks/ip/127.0.0.2",
        json!({"reason": "set before the start"}),
    )
    .await;
    let relay = TcpRelay::start(&rig.redis.addr());
    relay.cut();
    let late = Gateway::start_with_env(
        &yaml_on(&relay.url(), &rig.backend, STORE),
        &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)],
    );
    assert!(
        late.log().contains("live state not loaded"),
        "{}",
        late.log_tail(20)
    );
    relay.restore();
    let r = becomes(&late, "127.0.0.2", None, None, 403)
        .await
        .expect("blocked once Redis answers");
    blocked(&r, "ip", "127.0.0.2/32");
}
