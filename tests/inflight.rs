//! Fleet-wide concurrency per tenant (`tiers.<name>.max_in_flight`, docs/DESIGN.md 4e) through
//! real gateways, a real `redis-server` and the real echo backend (`delay_ms` keeps a request in
//! flight; the backend counts its peak). Leases live in `tollgate:{<tenant>}:inflight`.
//!
//! Where time matters the tests poll with wide deadlines; they assert counts and statuses.

mod common;
#[path = "common/tls.rs"]
mod tls_common;

use common::*;
use std::time::{Duration, Instant};
use tls_common::{h2_get, h2_read, h2c};
use tokio::task::JoinSet;

fn api_key(tenant: &str) -> String {
    format!("key-{tenant}-0123456789")
}

/// A gateway config: tier `T` (`tier` flow-map fields), API key of tenant `k1`, `redis:`
/// options `redis_opts`, listener `listen` (a YAML scalar).
fn config(
    redis: &RedisServer,
    backend: &Backend,
    tier: &str,
    redis_opts: &str,
    listen: &str,
) -> String {
    GatewayConfig::echo(&backend.addr(), "required")
        .listen(&[listen])
        .redis(&redis.url(), redis_opts)
        .tier(
            "T",
            &format!("{{ limit: 1, per: 1h, burst: 1000, {tier} }}"),
        )
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .yaml()
}

const PLAIN: &str = "\"{listen}\"";
const REDIS: &str = "timeout_ms: 2000, on_failure: closed";
const KEY: &str = "tollgate:{k1}:inflight";

fn held(redis: &RedisServer) -> u64 {
    redis::cmd("ZCARD")
        .arg(KEY)
        .query(&mut redis.conn())
        .expect("ZCARD")
}

async fn get(http: &reqwest::Client, url: &str) -> Reply {
    let resp = http
        .get(url)
        .header("x-api-key", api_key("k1"))
        .send()
        .await
        .expect("send");
    Reply::read(resp).await.expect("read")
}

/// `n` slow requests at once, round robin over `urls`.
async fn slow_burst(urls: &[String], n: usize, delay_ms: u64) -> Vec<Reply> {
    let http = client();
    let mut set = JoinSet::new();
    for i in 0..n {
        let (http, url) = (
            http.clone(),
            format!("{}?delay_ms={delay_ms}", urls[i % urls.len()]),
        );
        set.spawn(async move { get(&http, &url).await });
    }
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        out.push(r.expect("task"));
    }
    out
}

/// Two gateways, cap 3, ten slow concurrent requests: exactly three reach the backend at once;
/// the others are 429 naming `T.concurrency` with `Retry-After: 1`; every lease is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_hold_exactly_the_cap() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = config(&redis, &backend, "max_in_flight: 3", REDIS, PLAIN);
    let gws = [Gateway::start(&yaml), Gateway::start(&yaml)];
    let urls: Vec<String> = gws.iter().map(|g| g.url("/s")).collect();
    let replies = slow_burst(&urls, 10, 3000).await;
    let ok = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!(
        ok,
        3,
        "{:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert_eq!(backend.stats().peak_in_flight, 3);
    let refused = replies.iter().find(|r| r.status == 429).expect("a refusal");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(
        refused.header("ratelimit-policy"),
        Some("\"T.concurrency\";q=3")
    );
    assert!(refused.body.contains("T.concurrency"), "{}", refused.body);
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 0).await);
    // Leases back: the next request is admitted.
    assert_eq!(get(&client(), &gws[0].url("/s")).await.status, 200);
    let acquired = "tollgate_inflight_lease_events_total{event=\"acquired\"}";
    let total = gws[0].metric_or_zero(acquired) + gws[1].metric_or_zero(acquired);
    assert_eq!(total, 4.0);
}

/// A gateway killed with SIGKILL while holding the tenant's three leases: the other gateway
/// refuses until the leases expire (`lease_ttl: 2s`), then admits again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_gateway_leaks_nothing_beyond_lease_ttl() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let opts = format!("{REDIS}, lease_ttl: 2s");
    let yaml = config(&redis, &backend, "max_in_flight: 3", &opts, PLAIN);
    let mut doomed = Gateway::start(&yaml);
    let survivor = Gateway::start(&yaml);
    let url = doomed.url("/s?delay_ms=30000");
    let http = client();
    let mut hung = JoinSet::new();
    for _ in 0..3 {
        let (http, url) = (http.clone(), url.clone());
        hung.spawn(async move {
            http.get(&url)
                .header("x-api-key", api_key("k1"))
                .send()
                .await
        });
    }
    assert!(eventually(Duration::from_secs(10), || held(&redis) == 3).await);
    doomed.kill();
    assert_eq!(
        get(&http, &survivor.url("/s")).await.status,
        429,
        "leases still held"
    );
    let killed_at = Instant::now();
    let mut back = false;
    while killed_at.elapsed() < Duration::from_secs(15) {
        if get(&http, &survivor.url("/s")).await.status == 200 {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(back, "the dead gateway's leases never expired");
    hung.abort_all();
}

/// A request running three times `lease_ttl` keeps its lease (renewed in the background):
/// with a cap of 1 every other request is refused until it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_request_keeps_its_lease() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let opts = format!("{REDIS}, lease_ttl: 1s");
    let gw = Gateway::start(&config(&redis, &backend, "max_in_flight: 1", &opts, PLAIN));
    let http = client();
    let long = {
        let (http, url) = (http.clone(), gw.url("/s?delay_ms=6000"));
        tokio::spawn(async move { get(&http, &url).await })
    };
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 1).await);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(get(&http, &gw.url("/s")).await.status, 429, "lease renewed");
    }
    assert_eq!(long.await.expect("long request").status, 200);
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 0).await);
    assert!(gw.metric_or_zero("tollgate_inflight_lease_events_total{event=\"renewed\"}") >= 2.0);
}

/// A client that gives up (HTTP/1.1 connection closed, h2 stream reset) gives its lease back at
/// once, long before it would expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_abort_and_h2_reset_give_the_lease_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let listen = "{ addr: \"{listen}\", h2: true }";
    let gw = Gateway::start(&config(&redis, &backend, "max_in_flight: 1", REDIS, listen));
    // HTTP/1.1: the client times out and closes its connection.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(700))
        .build()
        .unwrap();
    let url = gw.url("/s?delay_ms=20000");
    let r = impatient
        .get(&url)
        .header("x-api-key", api_key("k1"))
        .send()
        .await;
    assert!(r.is_err(), "the client gave up");
    assert!(
        eventually(Duration::from_secs(5), || held(&redis) == 0).await,
        "HTTP/1.1 abort"
    );
    // h2c: RST_STREAM while the request is at the backend.
    let mut h2 = h2c(gw.listen_addr()).await;
    let key = api_key("k1");
    let slow = h2_get(
        &mut h2,
        "http",
        gw.listen_addr(),
        "/s?delay_ms=20000",
        &[("x-api-key", &key)],
    );
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 1).await);
    drop(slow);
    assert!(
        eventually(Duration::from_secs(5), || held(&redis) == 0).await,
        "h2 reset"
    );
    let ok = h2_get(
        &mut h2,
        "http",
        gw.listen_addr(),
        "/s",
        &[("x-api-key", &key)],
    );
    assert_eq!(h2_read(ok).await.0, 200);
}

/// SIGTERM with an HTTP/1.1 request and an h2 stream in flight (each holding a lease) and an idle
/// h2 connection: both requests are answered, their leases leave Redis (`lease_ttl: 60s`, so not
/// by expiry), and the gateway then exits with status 0 long before its 60 s grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_requests_in_flight_returns_their_leases_and_exits_early() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .listen(&["{ addr: \"{listen}\", h2: true }"])
        .server("{ grace_period: 60s }")
        .redis(&redis.url(), &format!("{REDIS}, lease_ttl: 60s"))
        .tier("T", "{ limit: 1, per: 1h, burst: 1000, max_in_flight: 5 }")
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .yaml();
    let mut gw = Gateway::start(&yaml);
    let key = api_key("k1");
    let mut idle = h2c(gw.listen_addr()).await;
    let warm = h2_get(
        &mut idle,
        "http",
        gw.listen_addr(),
        "/s",
        &[("x-api-key", &key)],
    );
    assert_eq!(h2_read(warm).await.0, 200);
    let slow_h1 = {
        let (http, url) = (client(), gw.url("/s?delay_ms=2000"));
        tokio::spawn(async move { get(&http, &url).await })
    };
    let mut h2 = h2c(gw.listen_addr()).await;
    let slow_h2 = h2_get(
        &mut h2,
        "http",
        gw.listen_addr(),
        "/s?delay_ms=2000",
        &[("x-api-key", &key)],
    );
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 2).await);
    gw.signal("TERM");
    assert_eq!(slow_h1.await.expect("h1 task").status, 200);
    assert_eq!(h2_read(slow_h2).await.0, 200);
    let status = gw
        .wait_exit(Duration::from_secs(20))
        .expect("exits once nothing is in flight, before its grace period");
    assert!(status.success(), "{status:?}");
    assert_eq!(held(&redis), 0, "leases given back before the exit");
    drop(idle);
}

/// Redis frozen: the tier's failure policy answers (`closed`: 503); Redis down with `local`:
/// each instance allows `ceil(max / fleet_size)` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_faults_follow_the_failure_policy() {
    let mut redis = RedisServer::start();
    let backend = Backend::start("echo");
    let closed = config(
        &redis,
        &backend,
        "max_in_flight: 3",
        "timeout_ms: 300, on_failure: closed",
        PLAIN,
    );
    let gw = Gateway::start(&closed);
    let http = client();
    assert_eq!(get(&http, &gw.url("/s")).await.status, 200);
    redis.pause();
    let r = get(&http, &gw.url("/s")).await;
    redis.resume();
    assert_eq!(r.status, 503, "{}", r.body);
    let local = config(
        &redis,
        &backend,
        "max_in_flight: 3, on_failure: local",
        "timeout_ms: 300, fleet_size: 2",
        PLAIN,
    );
    let gw = Gateway::start(&local);
    assert_eq!(get(&http, &gw.url("/s")).await.status, 200);
    redis.kill();
    let replies = slow_burst(&[gw.url("/s")], 3, 2000).await;
    let mut statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        [200, 200, 429],
        "ceil(3 / 2) = 2 on this instance"
    );
    let refused = replies.iter().find(|r| r.status == 429).unwrap();
    assert_eq!(refused.header("tollgate-degraded"), Some("redis"));
}

/// A WebSocket holds its lease while open and gives it back when the client closes it. The
/// backend is a minimal upgrade endpoint on a raw socket: it answers `101` and then keeps the
/// connection until the other side closes (the gateway only relays bytes after the upgrade).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_holds_its_lease_until_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let redis = RedisServer::start();
    let ws_addr = ws_echo_backend().await;
    let yaml = GatewayConfig::echo(&ws_addr, "required")
        .redis(&redis.url(), REDIS)
        .tier("T", "{ limit: 1, per: 1h, burst: 1000, max_in_flight: 1 }")
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .yaml();
    let gw = Gateway::start(&yaml);
    let request = format!(
        "GET /ws HTTP/1.1\r\nHost: gw.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Api-Key: {}\r\n\r\n",
        api_key("k1")
    );
    let mut buf = vec![0u8; 4096];
    // Pingora 0.9.1 sometimes ends a tunnel right after relaying the 101, when the backend's
    // answer is read before the request's empty body (cloudflare/pingora#946; README "Known
    // issues"). Such a tunnel must give its lease back like any closed one; then try again.
    let mut tries = 0;
    let ws = loop {
        tries += 1;
        let mut ws = tokio::net::TcpStream::connect(gw.listen_addr())
            .await
            .unwrap();
        ws.write_all(request.as_bytes()).await.unwrap();
        let n = ws.read(&mut buf).await.unwrap();
        let head = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        // Bytes flow both ways, and the lease is held meanwhile. A write to a tunnel already
        // torn down fails: that tunnel counts as closed too.
        let mut open = ws.write_all(b"ping").await.is_ok();
        let mut got = Vec::new();
        while open && !got.ends_with(b"ping") {
            let n = ws.read(&mut buf).await.unwrap_or(0);
            open = n > 0;
            got.extend_from_slice(&buf[..n]);
        }
        if open {
            break ws;
        }
        assert!(tries < 5, "every tunnel closed early");
        assert!(
            eventually(Duration::from_secs(5), || held(&redis) == 0).await,
            "a tunnel closed early kept its lease"
        );
    };
    assert_eq!(held(&redis), 1);
    assert_eq!(get(&client(), &gw.url("/other")).await.status, 429);
    drop(ws);
    assert!(
        eventually(Duration::from_secs(5), || held(&redis) == 0).await,
        "closed WebSocket"
    );
}

/// `GET /v1/tenants/{id}` shows the tenant's leases in flight across the fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_shows_leases_in_flight() {
    use common::admin::{admin, ADMIN_TOKEN, ADMIN_TOKEN_ENV};
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\" }}"
        ))
        .redis(&redis.url(), REDIS)
        .tier("T", "{ limit: 1, per: 1h, burst: 1000, max_in_flight: 4 }")
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .yaml();
    let gw = Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
    let url = gw.url("/s");
    let slow = tokio::spawn(async move { slow_burst(&[url], 2, 3000).await });
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 2).await);
    let t = admin(gw.admin_addr(), "GET", "/v1/tenants/k1", None).await;
    let v = t.expect_ok();
    assert_eq!(
        v["in_flight"],
        serde_json::json!({"max": 4, "held": 2, "source": "config"}),
        "{v}"
    );
    let replies = slow.await.unwrap();
    assert!(replies.iter().all(|r| r.status == 200));
}

/// A concurrency rule (`limits[].max_in_flight`) caps the requests in flight per key on its
/// routes, across the fleet, next to the tier's own limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_rule_caps_its_routes() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), REDIS)
        .tier("T", "{ limit: 1, per: 1h, burst: 1000 }")
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .section(
            "limits",
            "\n  - { name: uploads, match: { routes: [\"/upload\"] }, key: [tenant], max_in_flight: 2 }\n",
        )
        .yaml();
    let gws = [Gateway::start(&yaml), Gateway::start(&yaml)];
    let urls: Vec<String> = gws.iter().map(|g| g.url("/upload")).collect();
    let replies = slow_burst(&urls, 5, 3000).await;
    let mut statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 429, 429, 429]);
    let refused = replies.iter().find(|r| r.status == 429).unwrap();
    assert_eq!(
        refused.header("ratelimit-policy"),
        Some("\"uploads.concurrency\";q=2")
    );
    assert_eq!(refused.header("retry-after"), Some("1"));
    // Counted under the rule, not as the tier's refusal.
    let sum = |series: &str| gws.iter().map(|g| g.metric_or_zero(series)).sum::<f64>();
    let tenant = |outcome: &str| {
        format!("tollgate_decisions_total{{layer=\"tenant\",outcome=\"{outcome}\",tier=\"T\"}}")
    };
    assert_eq!(
        (
            sum(r#"tollgate_rule_decisions_total{outcome="limited",rule="uploads"}"#),
            sum(&tenant("rule_limited")),
            sum(&tenant("limited")),
        ),
        (3.0, 3.0, 0.0)
    );
    // Other routes are not capped.
    let others = slow_burst(&[gws[0].url("/other")], 4, 500).await;
    assert!(others.iter().all(|r| r.status == 200));
    let key = "tollgate:{k1}:c:uploads:tenant=2.k1";
    let zcard = || -> u64 {
        redis::cmd("ZCARD")
            .arg(key)
            .query(&mut redis.conn())
            .unwrap()
    };
    assert!(eventually(Duration::from_secs(5), || zcard() == 0).await);
}

/// A request refused at a later stage (a full upstream) and one whose backend fails both give
/// their leases back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_refusals_and_backend_errors_give_the_lease_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let dead = free_addr();
    let yaml = GatewayConfig::new()
        .upstream_with("echo", &backend.addr(), "max_concurrency: 1")
        .upstream("dead", &dead)
        .route("{ path_prefix: \"/dead\", upstream: dead, auth: required }")
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .redis(&redis.url(), REDIS)
        .tier("T", "{ limit: 1, per: 1h, burst: 1000, max_in_flight: 5 }")
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .yaml();
    let gw = Gateway::start(&yaml);
    let http = client();
    let slow = {
        let (http, url) = (http.clone(), gw.url("/s?delay_ms=4000"));
        tokio::spawn(async move { get(&http, &url).await })
    };
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 1).await);
    // The upstream's one slot is taken: refused by the slot stage after taking a lease.
    let full = get(&http, &gw.url("/s")).await;
    assert_eq!(full.status, 503, "{}", full.body);
    assert!(
        eventually(Duration::from_secs(5), || held(&redis) == 1).await,
        "the refused request's lease"
    );
    let failed = get(&http, &gw.url("/dead")).await;
    assert_eq!(failed.status, 502, "{}", failed.body);
    // The body names the upstream by its name, never the backend's address.
    let p: serde_json::Value = serde_json::from_str(&failed.body).expect("problem+json");
    assert_eq!(
        (&p["upstream"], &p["route"]),
        (&serde_json::json!("dead"), &serde_json::json!("routes[0]")),
        "{p}"
    );
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .starts_with("upstream \"dead\": "),
        "{p}"
    );
    assert!(!failed.body.contains(&dead), "{}", failed.body);
    assert!(
        eventually(Duration::from_secs(5), || held(&redis) == 1).await,
        "the failed request's lease"
    );
    assert_eq!(slow.await.unwrap().status, 200);
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 0).await);
}

/// A request that times out in an upstream's queue gives its lease back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_timeout_gives_the_lease_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .upstream_with(
            "echo",
            &backend.addr(),
            "max_concurrency: 1, queue: { max: 5, timeout_ms: 300 }",
        )
        .redis(&redis.url(), REDIS)
        .tier("T", "{ limit: 1, per: 1h, burst: 1000, max_in_flight: 5 }")
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .yaml();
    let gw = Gateway::start(&yaml);
    let http = client();
    let slow = {
        let (http, url) = (http.clone(), gw.url("/s?delay_ms=4000"));
        tokio::spawn(async move { get(&http, &url).await })
    };
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 1).await);
    let queued = get(&http, &gw.url("/s")).await;
    assert_eq!(queued.status, 503, "{}", queued.body);
    assert!(
        eventually(Duration::from_secs(5), || held(&redis) == 1).await,
        "the timed-out request's lease"
    );
    assert_eq!(slow.await.unwrap().status, 200);
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 0).await);
}

/// Redis frozen (SIGSTOP) past `timeout_ms` while a request asks for its lease: the request
/// gets its failure-policy answer (`open`: admitted without a lease), and the acquire Redis runs
/// once it is thawed takes a lease nobody holds. The gateway gives it back by its id as soon as
/// Redis answers again, long before `lease_ttl` (60 s here): the tenant is not refused for a
/// lease no request holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_taken_by_a_call_that_timed_out_is_given_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let opts = "timeout_ms: 300, on_failure: open, lease_ttl: 60s";
    let yaml = config(&redis, &backend, "max_in_flight: 1", opts, PLAIN);
    let gw = Gateway::start(&yaml);
    let http = client();
    let url = gw.url("/s");
    assert_eq!(get(&http, &url).await.status, 200);
    assert!(eventually(Duration::from_secs(5), || held(&redis) == 0).await);
    redis.pause();
    let during = get(&http, &url).await;
    redis.resume();
    assert_eq!(during.status, 200, "{}", during.body);
    // Counted as `orphan_released` when the release that found it held got its answer (a
    // release sent while Redis was frozen may have done it unanswered).
    let gone = || held(&redis) == 0;
    assert!(
        eventually(Duration::from_secs(10), gone).await,
        "held: {}",
        held(&redis)
    );
    let after = get(&http, &url).await;
    assert_eq!(after.status, 200, "{}", after.body);
}
