//! One budget means one counter (docs/rules.md#one-budget-one-counter): a tier or a limit rule
//! used by many routes and reached over HTTP/1.1, h2c, gRPC and WebSocket is one bucket, in Redis
//! and in the `local` fallback; concurrent first requests of a tenant never seen (cold caches,
//! coalesced into one call or each in its own) never admit more than its budget, for request
//! counts, usage reserves and `max_in_flight`; a zero limit is refused everywhere it could be
//! written, an absent one means no such limit.
//!
//! Black-box: real `redis-server`, echo backend, the gRPC demo server and client, a raw
//! WebSocket endpoint, the real gateway. Buckets refill one token a day, so counts are exact.

mod common;
#[path = "common/grpc.rs"]
#[allow(dead_code)]
mod grpc_common;

use common::*;
use grpc_common::{calls, GrpcServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

const PER_MS: i64 = 86_400_000;

fn key_of(tenant: &str) -> String {
    format!("key-{tenant}-0123456789")
}

/// One WebSocket upgrade through the gateway as `tenant`: its status (101 admitted, 429 refused).
async fn ws_status(gw: &Gateway, tenant: &str) -> u16 {
    let request = format!(
        "GET /ws HTTP/1.1\r\nHost: gw.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Api-Key: {}\r\n\r\n",
        key_of(tenant)
    );
    let mut s = tokio::net::TcpStream::connect(gw.listen_addr())
        .await
        .unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).await.unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    head.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"))
}

/// The mixed-protocol rig: one h1+h2c listener, routes `/a/` and `/b/` (echo), `/ws` (raw
/// WebSocket endpoint) and `/demo.Echo/` (gRPC server over h2), tenant `acme` on tier `T`.
struct Rig {
    _backend: Backend,
    grpc: GrpcServer,
    gw: Gateway,
}

async fn rig(redis_url: &str, redis_opts: &str, tier: &str, limits: &str) -> Rig {
    rig_with(redis_url, redis_opts, tier, limits, "").await
}

/// [`rig`] with an `edge:` section (`edge`, a flow map; empty: none).
async fn rig_with(redis_url: &str, redis_opts: &str, tier: &str, limits: &str, edge: &str) -> Rig {
    let backend = Backend::start("echo");
    let grpc = GrpcServer::start();
    let ws = ws_echo_backend().await;
    let mut c = GatewayConfig::new()
        .listen(&["{ addr: \"{listen}\", h2: true }"])
        .redis(redis_url, redis_opts)
        .upstream("echo", &backend.addr())
        .upstream("ws", &ws)
        .upstream_with("grpc", &grpc.addr(), "h2: true")
        .route_lines(
            "  - { path_prefix: \"/a/\", upstream: echo, auth: required }\n  \
             - { path_prefix: \"/b/\", upstream: echo, auth: required }\n  \
             - { path_prefix: \"/ws\", upstream: ws, auth: required }\n  \
             - { path_prefix: \"/demo.Echo/\", upstream: grpc, auth: required }\n",
        )
        .tier("T", tier)
        .api_key(&key_of("acme"), "acme", "T");
    if !limits.is_empty() {
        c = c.section("limits", &format!("\n{limits}"));
    }
    if !edge.is_empty() {
        c = c.edge(edge);
    }
    let gw = Gateway::start(&c.yaml());
    Rig {
        _backend: backend,
        grpc,
        gw,
    }
}

/// `rounds` rounds of one request each over HTTP/1.1 (`/a/`), h2c (`/b/`), WebSocket (`/ws`),
/// then `rounds` gRPC unary calls: how many were admitted, by protocol.
async fn mixed_traffic(rig: &Rig, rounds: usize) -> [usize; 4] {
    let gw = &rig.gw;
    let h1 = client();
    let h2 = client_builder().http2_prior_knowledge().build().unwrap();
    let key = key_of("acme");
    let mut admitted = [0usize; 4];
    for i in 0..rounds {
        let r = try_get_with_key(&h1, &gw.url(&format!("/a/{i}")), Some(&key))
            .await
            .unwrap();
        assert!(matches!(r.status, 200 | 429), "{r:?}");
        admitted[0] += usize::from(r.status == 200);
        let r = try_get_with_key(&h2, &gw.url(&format!("/b/{i}")), Some(&key))
            .await
            .unwrap();
        assert!(matches!(r.status, 200 | 429), "{r:?}");
        admitted[1] += usize::from(r.status == 200);
        let s = ws_status(gw, "acme").await;
        assert!(matches!(s, 101 | 429), "{s}");
        admitted[2] += usize::from(s == 101);
    }
    let meta = format!("--metadata=x-api-key={key}");
    let n = rounds.to_string();
    for call in calls(gw.listen_addr(), &[&meta], &["unary", "--n", &n]) {
        let code = call["code"].as_str().unwrap_or_default().to_string();
        assert!(
            matches!(code.as_str(), "OK" | "RESOURCE_EXHAUSTED"),
            "{call}"
        );
        admitted[3] += usize::from(code == "OK");
    }
    let _ = &rig.grpc;
    admitted
}

/// Whole tokens in the token bucket hash `key` (`None`: no such key, a full bucket).
fn tokens(redis: &RedisServer, key: &str) -> Option<i64> {
    let l: Option<String> = common::key_field(&mut redis.conn(), key, "l");
    l.map(|l| l.parse::<i64>().unwrap().div_euclid(PER_MS))
}

/// A tier of burst 10 reached by four routes over four protocols (24 attempts): exactly 10
/// admitted, one Redis key, at zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_is_one_budget_across_routes_and_protocols() {
    let redis = RedisServer::start();
    let rig = rig(
        &redis.url(),
        STRICT_REDIS,
        "{ limit: 1, per: 1d, burst: 10 }",
        "",
    )
    .await;
    let admitted = mixed_traffic(&rig, 6).await;
    assert_eq!(admitted.iter().sum::<usize>(), 10, "{admitted:?}");
    assert_eq!(redis.keys("tollgate:*"), ["tollgate:{acme}:tb"]);
    assert_eq!(tokens(&redis, "tollgate:{acme}:tb"), Some(0));
}

/// A limit rule keyed by tenant and matched by all four routes: one bucket of 7 for them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_is_one_budget_across_routes_and_protocols() {
    let redis = RedisServer::start();
    let rule = "  - { name: shared, match: { routes: [\"/a/\", \"/b/\", \"/ws\", \"/demo.Echo/\"] }, key: [tenant], limit: 1, per: 1d, burst: 7 }\n";
    let rig = rig(
        &redis.url(),
        STRICT_REDIS,
        "{ limit: 1, per: 1d, burst: 1000 }",
        rule,
    )
    .await;
    let admitted = mixed_traffic(&rig, 6).await;
    assert_eq!(admitted.iter().sum::<usize>(), 7, "{admitted:?}");
    let rule_keys: Vec<String> = redis
        .keys("tollgate:*")
        .into_iter()
        .filter(|k| k.contains(":r:shared:"))
        .collect();
    assert_eq!(rule_keys.len(), 1, "{rule_keys:?}");
    assert_eq!(tokens(&redis, &rule_keys[0]), Some(0));
}

/// Redis down from the start, `on_failure: local`, `fleet_size: 2`: the tier's local bucket
/// (burst 10 / 2 = 5) and a rule's (burst 6 / 2 = 3) are each one budget across the routes and
/// protocols too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_fallback_is_one_budget_across_routes_and_protocols() {
    let down = format!("redis://127.0.0.1:{}", free_port());
    let opts = "timeout: 500ms, on_failure: local, fleet_size: 2";
    let rig = rig(&down, opts, "{ limit: 1, per: 1d, burst: 10 }", "").await;
    let admitted = mixed_traffic(&rig, 4).await;
    assert_eq!(admitted.iter().sum::<usize>(), 5, "tier: {admitted:?}");
    let rule = "  - { name: shared, match: { routes: [\"/a/\", \"/b/\", \"/ws\", \"/demo.Echo/\"] }, key: [tenant], limit: 1, per: 1d, burst: 6 }\n";
    let rig = rig_again(&down, opts, rule).await;
    let admitted = mixed_traffic(&rig, 4).await;
    assert_eq!(admitted.iter().sum::<usize>(), 3, "rule: {admitted:?}");
}

/// The edge limiter (per client address, in memory) is one budget across the four routes and
/// protocols as well: burst 6 of 16 attempts from 127.0.0.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_is_one_budget_across_routes_and_protocols() {
    let redis = RedisServer::start();
    let tier = "{ limit: 1, per: 1d, burst: 1000 }";
    let edge = "{ limit: 1, per: 1d, burst: 6 }";
    let rig = rig_with(&redis.url(), STRICT_REDIS, tier, "", edge).await;
    let admitted = mixed_traffic(&rig, 4).await;
    assert_eq!(admitted.iter().sum::<usize>(), 6, "{admitted:?}");
}

async fn rig_again(down: &str, opts: &str, rule: &str) -> Rig {
    rig(down, opts, "{ limit: 1, per: 1d, burst: 1000 }", rule).await
}

// ---------------------------------------------------------------------------------------------
// Concurrent first requests of a tenant never seen
// ---------------------------------------------------------------------------------------------

/// How the burst is sent: all identical (one coalesced call decides many), or each with its own
/// rule key (`X-Req`, so no two calls are alike and none is coalesced), over one gateway or
/// split between two on the same Redis.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Coalesced,
    Apart,
}

/// A per-request rule that never refuses: it only makes every request's call different.
const APART_RULE: &str =
    "  - { name: apart, key: [tenant, \"header:x-req\"], limit: 1, per: 1d, burst: 1000 }\n";

fn burst_config(
    redis_url: &str,
    opts: &str,
    backend: &Backend,
    tier: &str,
    shape: Shape,
) -> String {
    let mut c = GatewayConfig::echo(&backend.addr(), "required")
        .listen(&["{ addr: \"{listen}\", h2: true }"])
        .redis(redis_url, opts)
        .tier("T", tier)
        .api_keys_always()
        .api_key(&key_of("t0"), "t0", "T");
    if matches!(shape, Shape::Apart) {
        c = c.section("limits", &format!("\n{APART_RULE}"));
    }
    c.yaml()
}

/// `n` requests at once as tenant `t0` to `path`, round robin over the gateways and over
/// HTTP/1.1 and h2c, each with its own `X-Req`; `body` (JSON) is POSTed when given. The statuses.
async fn burst(gws: &[&Gateway], n: usize, path: &str, body: Option<&str>) -> Vec<u16> {
    burst_of(gws, n, path, body, &[]).await
}

/// [`burst`] of GETs with the extra `headers`.
async fn burst_with(gws: &[&Gateway], n: usize, path: &str, headers: &[(&str, &str)]) -> Vec<u16> {
    burst_of(gws, n, path, None, headers).await
}

async fn burst_of(
    gws: &[&Gateway],
    n: usize,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Vec<u16> {
    let h1 = client();
    let h2 = client_builder().http2_prior_knowledge().build().unwrap();
    let mut set = JoinSet::new();
    for i in 0..n {
        let http = if i % 2 == 0 { h1.clone() } else { h2.clone() };
        let url = gws[i % gws.len()].url(path);
        let body = body.map(str::to_string);
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        set.spawn(async move {
            let mut req = match body {
                Some(b) => http
                    .post(url)
                    .header("content-type", "application/json")
                    .body(b),
                None => http.get(url),
            };
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let r = req
                .header("x-api-key", key_of("t0"))
                .header("x-req", i.to_string())
                .send()
                .await
                .expect("send");
            let status = r.status().as_u16();
            let _ = r.bytes().await;
            status
        });
    }
    let mut out = Vec::new();
    while let Some(s) = set.join_next().await {
        out.push(s.expect("task"));
    }
    out
}

/// 50 concurrent first requests (`path`, `body`) spread over `instances` gateways of `tier`
/// laid out as `shape` on a fresh Redis: that Redis, the gateways (still running) and the
/// statuses.
async fn fifty_on_fleet(
    backend: &Backend,
    tier: &str,
    shape: Shape,
    instances: usize,
    path: &str,
    body: Option<&str>,
) -> (RedisServer, Vec<Gateway>, Vec<u16>) {
    let redis = RedisServer::start();
    let yaml = burst_config(&redis.url(), STRICT_REDIS, backend, tier, shape);
    let gws: Vec<Gateway> = (0..instances).map(|_| Gateway::start(&yaml)).collect();
    let statuses = burst(&gws.iter().collect::<Vec<_>>(), 50, path, body).await;
    (redis, gws, statuses)
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|s| **s == status).count()
}

/// 50 concurrent first requests of `t0` against a tier of burst 5: exactly 5 admitted, the
/// rest 429, whether coalesced or not, on one gateway or two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_first_requests_admit_exactly_the_burst() {
    let backend = Backend::start("echo");
    for shape in [Shape::Coalesced, Shape::Apart] {
        for instances in [1, 2] {
            let tier = "{ limit: 1, per: 1d, burst: 5 }";
            let (redis, _gws, statuses) =
                fifty_on_fleet(&backend, tier, shape, instances, "/x", None).await;
            let case = format!("{shape:?}, {instances} gateway(s): {statuses:?}");
            assert_eq!(count(&statuses, 200), 5, "{case}");
            assert_eq!(count(&statuses, 429), 45, "{case}");
            assert_eq!(tokens(&redis, "tollgate:{t0}:tb"), Some(0), "{case}");
        }
    }
}

/// The same burst with Redis down and `on_failure: local` (`fleet_size: 1`): exactly the burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_first_requests_in_the_local_fallback_admit_exactly_the_burst() {
    let backend = Backend::start("echo");
    let down = format!("redis://127.0.0.1:{}", free_port());
    for shape in [Shape::Coalesced, Shape::Apart] {
        let yaml = burst_config(
            &down,
            "timeout: 500ms, on_failure: local",
            &backend,
            "{ limit: 1, per: 1d, burst: 5 }",
            shape,
        );
        let gw = Gateway::start(&yaml);
        let statuses = burst(&[&gw], 50, "/x", None).await;
        assert_eq!(count(&statuses, 200), 5, "{shape:?}: {statuses:?}");
    }
}

/// A tier with a usage budget of 1000 a day, each request reserving its `max_tokens` (100 when
/// absent).
const USAGE_TIER: &str = "{ limit: 1, per: 1d, burst: 1000, usage: { limit: 1, per: 1d, \
    burst: 1000, from: { openai: true }, reserve: { from_json: max_tokens, default: 100 } } }";

/// 50 concurrent first requests of `t0`, each reserving 100 units of a usage budget of 1000:
/// exactly 10 admitted, the budget at zero (the echo states no usage, so each reserve stands).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_first_usage_reserves_admit_exactly_the_budget() {
    let backend = Backend::start("echo");
    for shape in [Shape::Coalesced, Shape::Apart] {
        for instances in [1, 2] {
            let body = Some("{\"max_tokens\": 100}");
            let (redis, _gws, statuses) =
                fifty_on_fleet(&backend, USAGE_TIER, shape, instances, "/x?echo=1", body).await;
            let case = format!("{shape:?}, {instances} gateway(s): {statuses:?}");
            assert_eq!(count(&statuses, 200), 10, "{case}");
            assert_eq!(count(&statuses, 429), 40, "{case}");
            assert_eq!(tokens(&redis, "tollgate:{t0}:u:tokens"), Some(0), "{case}");
        }
    }
}

/// The same usage burst with Redis down and `on_failure: local` (`fleet_size: 2`): the reserves
/// come from the instance's part of the budget, 1000 / 2 = 500, so exactly 5 are admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_first_usage_reserves_in_the_local_fallback_admit_exactly_its_part() {
    let backend = Backend::start("echo");
    let down = format!("redis://127.0.0.1:{}", free_port());
    let opts = "timeout: 500ms, on_failure: local, fleet_size: 2";
    for shape in [Shape::Coalesced, Shape::Apart] {
        let gw = Gateway::start(&burst_config(&down, opts, &backend, USAGE_TIER, shape));
        let body = Some("{\"max_tokens\": 100}");
        let statuses = burst(&[&gw], 50, "/x?echo=1", body).await;
        assert_eq!(count(&statuses, 200), 5, "{shape:?}: {statuses:?}");
        assert_eq!(count(&statuses, 429), 45, "{shape:?}: {statuses:?}");
    }
}

/// 50 concurrent first requests of `t0` that each stay 4 s at the backend, tier cap
/// `max_in_flight: 3` (and, apart, a concurrency rule of 2 keyed by tenant): never more
/// admitted than the cap, on one gateway or two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_first_requests_never_exceed_max_in_flight() {
    let backend = Backend::start("echo");
    let cases = [
        (
            "{ limit: 1, per: 1d, burst: 1000, max_in_flight: 3 }",
            "",
            3,
        ),
        (
            "{ limit: 1, per: 1d, burst: 1000 }",
            "  - { name: cap, key: [tenant], max_in_flight: 2 }\n",
            2,
        ),
    ];
    for (tier, rule, cap) in cases {
        for instances in [1, 2] {
            let redis = RedisServer::start();
            let mut c = GatewayConfig::echo(&backend.addr(), "required")
                .listen(&["{ addr: \"{listen}\", h2: true }"])
                .redis(&redis.url(), STRICT_REDIS)
                .tier("T", tier)
                .api_keys_always()
                .api_key(&key_of("t0"), "t0", "T");
            if !rule.is_empty() {
                c = c.section("limits", &format!("\n{rule}"));
            }
            let yaml = c.yaml();
            let gws: Vec<Gateway> = (0..instances).map(|_| Gateway::start(&yaml)).collect();
            let statuses = burst(
                &gws.iter().collect::<Vec<_>>(),
                50,
                "/x?delay_ms=4000",
                None,
            )
            .await;
            let case = format!("cap {cap}, {instances} gateway(s): {statuses:?}");
            assert!(count(&statuses, 200) <= cap, "{case}");
            assert!(count(&statuses, 200) >= 1, "{case}");
            assert_eq!(count(&statuses, 200) + count(&statuses, 429), 50, "{case}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Zero and absent limits
// ---------------------------------------------------------------------------------------------

/// A zero is refused wherever a limit can be written (edge, tier, tenant override, usage budget,
/// calendar quota, rule, concurrency caps), by `tollgate check` with the field named; nothing
/// treats 0 as "no limit" or as "refuse everything".
#[test]
fn a_zero_limit_is_refused_everywhere() {
    let base = |edit: &dyn Fn(GatewayConfig) -> GatewayConfig| {
        let c = GatewayConfig::echo("127.0.0.1:9", "required")
            .redis("redis://127.0.0.1:6379", "")
            .api_key(&key_of("t0"), "t0", "T");
        edit(c).yaml()
    };
    let tier = |t: &'static str| move |c: GatewayConfig| c.tier("T", t);
    let cases: Vec<(&str, String)> = vec![
        (
            "edge.limit",
            base(&|c| {
                c.tier("T", "{ limit: 1, per: 1d }")
                    .edge("{ limit: 0, per: 1s }")
            }),
        ),
        (
            "edge.burst",
            base(&|c| {
                c.tier("T", "{ limit: 1, per: 1d }")
                    .edge("{ limit: 5, per: 1s, burst: 0 }")
            }),
        ),
        ("tiers.T.limit", base(&tier("{ limit: 0, per: 1d }"))),
        (
            "tiers.T.burst",
            base(&tier("{ limit: 1, per: 1d, burst: 0 }")),
        ),
        (
            "tiers.T.max_in_flight",
            base(&tier("{ limit: 1, per: 1d, max_in_flight: 0 }")),
        ),
        (
            "tiers.T.usage.limit",
            base(&tier("{ limit: 1, per: 1d, usage: { limit: 0, per: 1d, reserve: 1, from: { openai: true } } }")),
        ),
        (
            "tiers.T.quotas[0].limit",
            base(&tier(
                "{ limit: 1, per: 1d, quotas: [{ period: day, limit: 0 }] }",
            )),
        ),
        (
            "tenants.t0.limit",
            base(&|c| {
                c.tier("T", "{ limit: 1, per: 1d }")
                    .tenant("t0", "{ tier: T, limit: 0 }")
            }),
        ),
        (
            "limits[0].limit",
            base(&|c| {
                c.tier("T", "{ limit: 1, per: 1d }").section(
                    "limits",
                    "\n  - { name: r, key: [tenant], limit: 0, per: 1d }\n",
                )
            }),
        ),
        (
            "limits[0].max_in_flight",
            base(&|c| {
                c.tier("T", "{ limit: 1, per: 1d }").section(
                    "limits",
                    "\n  - { name: r, key: [tenant], max_in_flight: 0 }\n",
                )
            }),
        ),
    ];
    for (field, yaml) in cases {
        let out = check_config(&yaml);
        assert_eq!(out.code(), Some(1), "{field}: {}", out.all());
        assert!(
            out.all().contains(field) && out.all().contains("greater than zero"),
            "{field}: {}",
            out.all()
        );
    }
}

/// An absent limit is no such limit: a tier without `max_in_flight` takes no lease (no key in
/// Redis), and with Redis down the `local` fallback holds no concurrency count either; 20
/// concurrent slow requests all pass, up and down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_cap_is_no_cap_in_redis_and_in_the_local_fallback() {
    let backend = Backend::start("echo");
    let redis = RedisServer::start();
    let down = format!("redis://127.0.0.1:{}", free_port());
    for (url, opts) in [
        (redis.url(), STRICT_REDIS.to_string()),
        (down, "timeout: 500ms, on_failure: local".to_string()),
    ] {
        let yaml = burst_config(
            &url,
            &opts,
            &backend,
            "{ limit: 1, per: 1d, burst: 1000 }",
            Shape::Coalesced,
        );
        let gw = Gateway::start(&yaml);
        let statuses = burst(&[&gw], 20, "/x?delay_ms=500", None).await;
        assert_eq!(count(&statuses, 200), 20, "{url}: {statuses:?}");
        assert!(redis.keys("*inflight*").is_empty());
    }
}

/// The other kinds of budget a first burst can meet, 50 concurrent first requests of `t0` each
/// (split between two gateways where a second instance could add its own share): a leased tier
/// (burst 5 in leases of 2), a calendar quota of 4 a day, a rule of burst 5 keyed by a header
/// value never seen, and with Redis down a `local` concurrency cap of 3 (`fleet_size: 1`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_first_requests_of_every_other_kind_stay_within_the_budget() {
    let backend = Backend::start("echo");
    let down = format!("redis://127.0.0.1:{}", free_port());
    let local = "timeout: 500ms, on_failure: local";
    let cases: [(&str, &str, &str, usize, &str, usize); 4] = [
        (
            "leased",
            "{ limit: 1, per: 1d, burst: 5, lease: { tokens: 2, max_hold: 1m } }",
            "",
            2,
            "/x",
            5,
        ),
        (
            "quota",
            "{ limit: 1, per: 1d, burst: 1000, quotas: [{ period: day, limit: 4 }] }",
            "",
            2,
            "/x",
            4,
        ),
        (
            "rule by header",
            "{ limit: 1, per: 1d, burst: 1000 }",
            "  - { name: by_user, key: [\"header:x-user\"], limit: 1, per: 1d, burst: 5 }\n",
            2,
            "/x",
            5,
        ),
        (
            "local cap",
            "{ limit: 1, per: 1d, burst: 1000, max_in_flight: 3 }",
            "",
            1,
            "/x?delay_ms=4000",
            3,
        ),
    ];
    for (name, tier, rule, instances, path, budget) in cases {
        let redis = RedisServer::start();
        let (url, opts) = if name == "local cap" {
            (down.clone(), local)
        } else {
            (redis.url(), STRICT_REDIS)
        };
        let mut c = GatewayConfig::echo(&backend.addr(), "required")
            .listen(&["{ addr: \"{listen}\", h2: true }"])
            .redis(&url, opts)
            .tier("T", tier)
            .api_keys_always()
            .api_key(&key_of("t0"), "t0", "T");
        if !rule.is_empty() {
            c = c.section("limits", &format!("\n{rule}"));
        }
        let yaml = c.yaml();
        let gws: Vec<Gateway> = (0..instances).map(|_| Gateway::start(&yaml)).collect();
        let gws: Vec<&Gateway> = gws.iter().collect();
        let statuses = burst_with(&gws, 50, path, &[("x-user", "u-never-seen")]).await;
        let case = format!("{name}: {statuses:?}");
        if name == "local cap" {
            assert!((1..=budget).contains(&count(&statuses, 200)), "{case}");
        } else {
            assert_eq!(count(&statuses, 200), budget, "{case}");
        }
        assert_eq!(count(&statuses, 200) + count(&statuses, 429), 50, "{case}");
    }
}
