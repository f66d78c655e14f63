//! Opt-in token leasing (`tiers.<name>.lease`, docs/DESIGN.md 4c "Lease", issue 18), black-box:
//! real `redis-server`, real `tollgate-echo` backend, real gateways. The tier never refills
//! (`limit: 1, per: 1h`) and leases are held long (`max_hold: 1m`, nothing expires during a
//! test), so every count is exact. Failures are visible: Redis faults answer 503 (`closed`).

mod common;

use common::*;
use tokio::task::JoinSet;

const BURST: u64 = 60;
const TOKENS: u64 = 10;
const KEY: &str = "lease-test-key-0123456789";
/// A second tenant's key: its first request loads the script (a NOSCRIPT EVALSHA, then
/// SCRIPT LOAD), before the counted part of a test.
const WARM_KEY: &str = "lease-warm-key-0123456789";

fn yaml(redis: &RedisServer, backend: &Backend) -> String {
    yaml_holding(redis, backend, "1m")
}

fn yaml_holding(redis: &RedisServer, backend: &Backend, max_hold: &str) -> String {
    config_holding(redis, backend, max_hold).yaml()
}

fn config_holding(redis: &RedisServer, backend: &Backend, max_hold: &str) -> GatewayConfig {
    GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier(
            "t",
            &format!(
                "{{ limit: 1, per: 1h, burst: {BURST}, lease: {{ tokens: {TOKENS}, max_hold: {max_hold} }} }}"
            ),
        )
        .api_key(KEY, "acme", "t")
        .api_key(WARM_KEY, "warm", "t")
}

/// Whole tokens in the tenant's Redis bucket (a missing key is a full bucket).
fn bucket_tokens(redis: &RedisServer) -> u64 {
    let fields: std::collections::HashMap<String, String> =
        redis.hgetall("tollgate:{acme}:tb").into_iter().collect();
    match (fields.get("l"), fields.get("s")) {
        (Some(l), Some(s)) => l.parse::<u64>().unwrap() / s.parse::<u64>().unwrap(),
        _ => BURST,
    }
}

/// Script calls Redis ran (EVALSHA and EVAL) since the last `CONFIG RESETSTAT`.
fn script_calls(redis: &RedisServer) -> u64 {
    redis.command_calls("evalsha") + redis.command_calls("eval")
}

/// One instance admits exactly the burst, one script call per lease of `TOKENS`, with
/// `;leased` headers whose `r` is exactly what the bucket and the lease still hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_admits_exactly_the_burst_with_one_call_per_lease() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start(&yaml(&redis, &backend));
    let http = http();
    let warm = try_get_with_key(&http, &gw.url("/x"), Some(WARM_KEY)).await;
    assert_eq!(warm.expect("warm-up").status, 200);
    redis.reset_stats();
    for i in 1..=BURST {
        let r = try_get_with_key(&http, &gw.url("/x"), Some(KEY))
            .await
            .expect("request");
        assert_eq!(r.status, 200, "request {i}: {r:?}");
        let policy = r.header("ratelimit-policy").unwrap_or_default();
        assert_eq!(policy, format!("\"t\";q={BURST};w=216000;leased"), "{r:?}");
        let limit = r.header("ratelimit").unwrap_or_default();
        assert!(limit.ends_with(";leased"), "request {i}: {limit}");
        assert_eq!(r.remaining(), BURST - i, "request {i}: {limit}");
    }
    let calls = script_calls(&redis);
    assert_eq!(calls, BURST / TOKENS, "one script call per lease");
    assert!(
        calls as f64 / BURST as f64 <= 1.0 / TOKENS as f64 + 0.01,
        "{calls} script calls for {BURST} admissions"
    );
    for _ in 0..5 {
        let r = try_get_with_key(&http, &gw.url("/x"), Some(KEY))
            .await
            .expect("request");
        assert_eq!(r.status, 429, "{r:?}");
        assert!(r.header("retry-after").is_some(), "{r:?}");
        assert!(
            r.header("ratelimit-policy")
                .is_some_and(|p| p.ends_with(";leased")),
            "{r:?}"
        );
    }
}

/// Three instances on one Redis, hammered concurrently until each refuses a whole round:
/// together they admit exactly the burst (tokens leave Redis before use, so never more; and an
/// instance refuses only with an empty lease, so none is left held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_never_admit_more_than_the_burst() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gws: Vec<Gateway> = (0..3)
        .map(|_| Gateway::start(&yaml(&redis, &backend)))
        .collect();
    let http = http();
    let mut admitted = [0u64; 3];
    let mut refused_round = [false; 3];
    for round in 0..100 {
        let mut set = JoinSet::new();
        for (g, gw) in gws.iter().enumerate() {
            for _ in 0..8 {
                let (http, url) = (http.clone(), gw.url("/x"));
                set.spawn(async move {
                    let r = try_get_with_key(&http, &url, Some(KEY)).await;
                    (g, r.map(|r| r.status))
                });
            }
        }
        let mut ok = [0u64; 3];
        let mut refused = [0u64; 3];
        while let Some(res) = set.join_next().await {
            let (g, status) = res.expect("task");
            match status.expect("request") {
                200 => ok[g] += 1,
                429 => refused[g] += 1,
                s => panic!("round {round}: status {s}"),
            }
        }
        for g in 0..3 {
            admitted[g] += ok[g];
            refused_round[g] = ok[g] == 0 && refused[g] == 8;
        }
        if refused_round.iter().all(|r| *r) {
            break;
        }
    }
    assert!(
        refused_round.iter().all(|r| *r),
        "never exhausted: {admitted:?}"
    );
    let total: u64 = admitted.iter().sum();
    assert!(total <= BURST, "over-admitted: {admitted:?}");
    assert!(
        total + TOKENS * 3 >= BURST,
        "under-admission beyond tokens x instances: {admitted:?}"
    );
    assert_eq!(total, BURST, "per instance {admitted:?}");
}

/// A lease nobody uses goes back to the bucket after `max_hold` (the sweep), without
/// overfilling it; the next request takes a fresh lease from the restored bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_lease_goes_back_after_max_hold() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start(&yaml_holding(&redis, &backend, "200ms"));
    let http = http();
    let r = try_get_with_key(&http, &gw.url("/x"), Some(KEY))
        .await
        .expect("request");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.remaining(), BURST - 1);
    // The lease left Redis before use: 10 taken, 1 used, 9 held by the gateway (unless the
    // sweep already gave them back on a slow machine).
    let now = bucket_tokens(&redis);
    assert!(now == BURST - TOKENS || now == BURST - 1, "{now}");
    let back = eventually(std::time::Duration::from_secs(10), || {
        bucket_tokens(&redis) == BURST - 1
    })
    .await;
    assert!(back, "bucket holds {} tokens", bucket_tokens(&redis));
    let r = try_get_with_key(&http, &gw.url("/x"), Some(KEY))
        .await
        .expect("request");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.remaining(), BURST - 2);
    // 10 more taken (49 left), or already given back after this lease's max_hold (58).
    let now = bucket_tokens(&redis);
    assert!(now == BURST - 1 - TOKENS || now == BURST - 2, "{now}");
}

/// SIGTERM to an idle gateway holding a lease (nothing expires for a minute): the unused
/// tokens go back to the bucket before the process exits, and it exits with status 0 long
/// before its 60 s grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_gives_the_unused_lease_back_then_exits_early() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = config_holding(&redis, &backend, "1m")
        .server("{ grace_period: 60s }")
        .yaml();
    let mut gw = Gateway::start(&yaml);
    let r = try_get_with_key(&http(), &gw.url("/x"), Some(KEY))
        .await
        .expect("request");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        bucket_tokens(&redis),
        BURST - TOKENS,
        "a lease of {TOKENS} taken"
    );
    gw.signal("TERM");
    let status = gw
        .wait_exit(std::time::Duration::from_secs(20))
        .expect("exits once the lease is back, before its grace period");
    assert!(status.success(), "{status:?}");
    assert_eq!(
        bucket_tokens(&redis),
        BURST - 1,
        "the 9 unused tokens are back"
    );
}

/// Redis frozen (SIGSTOP) under concurrent requests of one leased tenant: every request gets
/// the failure policy's answer, and the requests queued behind the one lease call in flight
/// share its fault instead of each making its own call in turn (which held the last of them
/// for one `timeout_ms` per request ahead of it). The breaker never opens here
/// (`min_calls: 1000`), so only the sharing keeps the calls few.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_redis_queued_requests_share_the_lease_calls_fault() {
    const REQUESTS: usize = 24;
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(
            &redis.url(),
            "timeout_ms: 300, circuit_breaker: { min_calls: 1000 }, on_failure: closed",
        )
        .tier(
            "t",
            &format!("{{ limit: 1, per: 1h, burst: {BURST}, lease: {{ tokens: {TOKENS}, max_hold: 1m }} }}"),
        )
        .api_key(KEY, "acme", "t")
        .api_key(WARM_KEY, "warm", "t")
        .yaml();
    let gw = Gateway::start(&yaml);
    let http = http();
    let warm = try_get_with_key(&http, &gw.url("/x"), Some(WARM_KEY)).await;
    assert_eq!(warm.expect("warm-up").status, 200);
    let calls_before = gw.metric_or_zero(FAILED_CALLS);

    redis.pause();
    let mut set = JoinSet::new();
    for _ in 0..REQUESTS {
        let (http, url) = (http.clone(), gw.url("/x"));
        set.spawn(async move { try_get_with_key(&http, &url, Some(KEY)).await });
    }
    while let Some(res) = set.join_next().await {
        let r = res.expect("task").expect("request");
        assert_eq!(r.status, 503, "the closed policy's answer: {r:?}");
    }
    redis.resume();

    let m = gw.metrics();
    let calls = gw.metric_or_zero(FAILED_CALLS) - calls_before;
    let timeouts = metric_or_zero(&m, "tollgate_redis_errors_total", &[("kind", "timeout")]);
    assert_eq!(
        timeouts as usize, REQUESTS,
        "every request counts its fault: {m}"
    );
    // One call per wave of arrivals more than timeout_ms apart; 24 concurrent requests come in
    // one or two such waves (8 leaves a wide margin). Without the sharing: one call each.
    assert!(
        (1.0..=8.0).contains(&calls),
        "{calls} lease calls for {REQUESTS} requests: {m}"
    );
}

/// Failed Redis calls the gateway made (`tollgate_redis_call_duration_seconds`, result error).
const FAILED_CALLS: &str = "tollgate_redis_call_duration_seconds_count{result=\"error\"}";

/// An admin reset through one instance while another holds leased tokens does not hand those
/// tokens out twice: the bucket is refilled to its burst less what is leased out, so the fleet
/// admits at most the burst after the reset (here exactly burst − 1: the token the holder spent
/// before the reset is not given back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_leaves_tokens_leased_out_out_of_the_refilled_bucket() {
    use common::admin::{admin_call, ADMIN_TOKEN, ADMIN_TOKEN_ENV};
    const BURST: u64 = 20;
    const TOKENS: u64 = 4;
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\" }}"
        ))
        .tier(
            "t",
            &format!(
                "{{ limit: 1, per: 1h, burst: {BURST}, lease: {{ tokens: {TOKENS}, max_hold: 1m }} }}"
            ),
        )
        .api_key(KEY, "acme", "t")
        .yaml();
    let env = [(ADMIN_TOKEN_ENV, ADMIN_TOKEN)];
    let (a, b) = (
        Gateway::start_with_env(&yaml, &env),
        Gateway::start_with_env(&yaml, &env),
    );
    let http = http();
    let send = |gw: &Gateway| {
        let (http, url) = (http.clone(), gw.url("/x"));
        async move {
            try_get_with_key(&http, &url, Some(KEY))
                .await
                .expect("request")
                .status
        }
    };
    // B leases 4 tokens and spends one: it holds 3 the reset cannot take back.
    assert_eq!(send(&b).await, 200);
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let reset = admin_call(
        a.admin_addr(),
        "POST",
        "/v1/tenants/acme/reset",
        Some(&bearer),
        None,
    )
    .await;
    assert_eq!(reset.expect_ok()["reset"], true);
    let mut admitted = 0;
    for _ in 0..2 * BURST {
        for gw in [&a, &b] {
            let s = send(gw).await;
            assert!(s == 200 || s == 429, "status {s}");
            admitted += u64::from(s == 200);
        }
    }
    assert!(
        admitted <= BURST,
        "{admitted} admitted after the reset, over the burst of {BURST}"
    );
    assert_eq!(admitted, BURST - 1, "the burst less the token spent before");
}
