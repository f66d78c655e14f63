//! Issue A, "Redis slow or down": the tenant stage's declared failure policy (`open`, `closed`,
//! `local`), the circuit breaker around Redis, recovery after a restart, and case C05.
//! Black-box: a real `redis-server` (killed, frozen with SIGSTOP, restarted), a real backend and
//! the real gateway per test, talking HTTP.
//!
//! Determinism on a noisy machine: tiers refill ~never (`limit: 1, per: 1d`) so counts are exact;
//! every client has a 10 s timeout, so "no hang" means "every request completed"; nothing asserts
//! a wall-clock duration. Tenants are fresh in every scenario whose counts are asserted: a tenant
//! already rejected by Redis would stay rejected by the local deny cache until its known retry
//! time.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::task::JoinSet;

const REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

// ---------------------------------------------------------------------------------------------
// Config and traffic helpers
// ---------------------------------------------------------------------------------------------

/// The API key of `tenant` (sent in `X-API-Key`).
fn key(tenant: &str) -> String {
    format!("key-of-{tenant}")
}

/// A gateway config: one echo upstream behind an `auth: required` catch-all route, the given
/// `redis:` flow-map body (after `url`), the `edge:` flow map (empty: none), tiers (YAML lines
/// indented by two spaces) and one API key per `(tenant, tier)`.
fn gateway_yaml(
    redis_url: &str,
    redis_extra: &str,
    edge: &str,
    tiers: &str,
    keys: &[(String, &str)],
    backend: &str,
) -> String {
    let mut config = GatewayConfig::echo(backend, "required")
        .redis(redis_url, redis_extra)
        .api_keys_always()
        .tier_lines(tiers);
    if !edge.is_empty() {
        config = config.edge(edge);
    }
    for (tenant, tier) in keys {
        config = config.api_key(&key(tenant), tenant, tier);
    }
    config.yaml()
}

/// `n` tenant names `<prefix>-<i>` paired with `tier`.
fn tenants(prefix: &str, n: usize, tier: &'static str) -> Vec<(String, &'static str)> {
    (0..n).map(|i| (format!("{prefix}-{i}"), tier)).collect()
}

/// GET `url` with `tenant`'s API key; panics on any transport error (including the 10 s timeout).
async fn get(http: &reqwest::Client, url: &str, tenant: &str) -> Reply {
    try_get_with_key(http, url, Some(&key(tenant)))
        .await
        .unwrap_or_else(|e| panic!("GET {url} as {tenant}: {e}"))
}

const QUOTA_HEADERS: [&str; 7] = [
    "ratelimit-policy",
    "ratelimit",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "tollgate-degraded",
    "retry-after",
];

/// A 200 admitted by the `open` policy: no quota header at all (they would be invented).
fn assert_failed_open(r: &Reply) {
    assert_eq!(r.status, 200, "failed-open answer: {r:?}");
    for h in QUOTA_HEADERS {
        assert!(
            r.header(h).is_none(),
            "failed-open answer carries {h}: {r:?}"
        );
    }
}

/// A 503 problem+json `temporary-reduced-capacity` with Retry-After ≥ 1 (the `closed` policy).
fn assert_failed_closed(r: &Reply) {
    assert_eq!(r.status, 503, "failed-closed answer: {r:?}");
    let ct = r.header("content-type").unwrap_or_default();
    assert!(ct.starts_with("application/problem+json"), "{r:?}");
    let p = problem(&r.body);
    assert_eq!(p["type"], REDUCED_CAPACITY, "{r:?}");
    assert_eq!(p["status"], 503, "{r:?}");
    let retry: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("failed-closed answer without a numeric Retry-After: {r:?}"));
    assert!(retry >= 1, "Retry-After {retry}: {r:?}");
    assert!(r.header("ratelimit").is_none(), "{r:?}");
}

/// A decision made by Redis: policy `"<tier>";q=<burst>;w=..` without `;degraded`.
fn assert_redis_decided(r: &Reply, tier: &str, burst: u64) {
    let policy = r
        .header("ratelimit-policy")
        .unwrap_or_else(|| panic!("no RateLimit-Policy (not decided by Redis): {r:?}"));
    assert!(
        policy.starts_with(&format!("\"{tier}\";q={burst};w=")) && !policy.contains("degraded"),
        "policy {policy:?}: {r:?}"
    );
    assert!(r.header("tollgate-degraded").is_none(), "{r:?}");
}

/// A decision of the local fallback bucket: policy ends with `;degraded`, `Tollgate-Degraded:
/// redis`. Returns the remaining count of the `RateLimit` field.
fn assert_degraded(r: &Reply, tier: &str, burst: u64) -> u64 {
    let policy = r.header("ratelimit-policy").unwrap_or_default();
    assert!(
        policy.starts_with(&format!("\"{tier}\";q={burst};w=")) && policy.ends_with(";degraded"),
        "policy {policy:?}: {r:?}"
    );
    assert_eq!(r.header("tollgate-degraded"), Some("redis"), "{r:?}");
    r.remaining()
}

/// Tenant-layer decisions of `tier` with `outcome` in `m` (a gateway or exposition text).
fn decisions(m: impl Exposition, tier: &str, outcome: &str) -> f64 {
    let labels = [("layer", "tenant"), ("outcome", outcome), ("tier", tier)];
    metric_or_zero(&m, "tollgate_decisions_total", &labels)
}

/// Redis errors of `kind` in `m`.
fn redis_errors(m: impl Exposition, kind: &str) -> f64 {
    metric_or_zero(&m, "tollgate_redis_errors_total", &[("kind", kind)])
}

/// Breaker transitions to `to` in `m`.
fn transitions(m: impl Exposition, to: &str) -> f64 {
    metric_or_zero(
        &m,
        "tollgate_redis_breaker_transitions_total",
        &[("to", to)],
    )
}

/// Answers of the catch-all route with a 5xx status.
fn route_5xx(gw: &Gateway) -> f64 {
    let labels = [("route", "routes[0]"), ("status_class", "5xx")];
    metric_or_zero(gw, "tollgate_requests_total", &labels)
}

const BREAKER_STATE: &str = "tollgate_redis_breaker_state";

/// Lines of the gateway log containing `needle`.
fn log_lines(gw: &Gateway, needle: &str) -> usize {
    gw.log().lines().filter(|l| l.contains(needle)).count()
}

/// Every breaker state change is logged exactly once (not once per request). Log lines are
/// written by a background thread: wait for them to match the transition counters.
async fn assert_one_log_line_per_transition(gw: &Gateway) {
    let pairs = [
        ("open", "circuit breaker opened"),
        ("half_open", "redis breaker probing"),
        ("closed", "circuit breaker closed"),
    ];
    let counts = || {
        let m = gw.metrics();
        pairs
            .iter()
            .map(|(to, needle)| {
                let transitions = transitions(&m, to) as usize;
                (*needle, log_lines(gw, needle), transitions)
            })
            .collect::<Vec<_>>()
    };
    let matched = eventually(Duration::from_secs(10), || {
        counts()
            .iter()
            .all(|(_, lines, transitions)| lines == transitions)
    })
    .await;
    assert!(
        matched,
        "(log line, lines, transitions): {:?}; log tail:\n{}",
        counts(),
        gw.log_tail(20)
    );
}

/// `/healthz` JSON.
fn healthz(gw: &Gateway) -> serde_json::Value {
    let reply = gw.admin_get("/healthz");
    assert_eq!(reply.status, 200, "/healthz: {}", reply.body);
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("/healthz not JSON ({e})"))
}

/// Waits until redis' `evalsha` call count stops moving (queued calls of a frozen connection
/// run right after SIGCONT) and returns it.
async fn settled_evalsha(redis: &RedisServer) -> u64 {
    settled(Duration::from_millis(250), || {
        redis.command_calls("evalsha")
    })
    .await
}

/// `failed_calls=` of EVALSHA in `INFO commandstats` (a NOSCRIPT answer is one).
fn evalsha_failed(redis: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut redis.conn())
        .expect("INFO commandstats");
    info.lines()
        .find_map(|l| l.trim().strip_prefix("cmdstat_evalsha:"))
        .and_then(|rest| {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix("failed_calls="))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Sends requests as `tenant` until Redis decides `want` of them (a call slower than a tight
/// `timeout_ms` on a busy machine falls back instead; that must not fail a warm-up).
async fn warm_up(
    http: &reqwest::Client,
    url: &str,
    tenant: &str,
    tier: &str,
    burst: u64,
    want: usize,
) {
    let mut decided = 0;
    for _ in 0..50 {
        let r = get(http, url, tenant).await;
        assert_eq!(r.status, 200, "warm-up: {r:?}");
        if r.header("ratelimit-policy")
            .is_some_and(|p| !p.contains("degraded"))
        {
            assert_redis_decided(&r, tier, burst);
            decided += 1;
            if decided == want {
                return;
            }
        }
    }
    panic!("Redis never decided {want} warm-up requests");
}

// ---------------------------------------------------------------------------------------------
// Redis killed under load
// ---------------------------------------------------------------------------------------------

/// Redis settings of the kill/freeze tests: 50 ms timeout and a breaker that opens after 5 calls
/// at 50 % failures and then stays open for 30 s.
const BREAKER_30S: &str = "timeout_ms: 50, fleet_size: 1, circuit_breaker: { min_calls: 5, \
                           failure_ratio: 0.5, window_s: 10, break_s: 30 }";

const POLICY_TIERS: &str = "  open_t: { limit: 1, per: 1d, burst: 1000, on_failure: open }\n  \
     closed_t: { limit: 1, per: 1d, burst: 1000, on_failure: closed }\n  \
     local_t: { limit: 1, per: 1d, burst: 5, on_failure: local }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_under_load_each_policy_holds() {
    let mut redis = RedisServer::start();
    let backend = Backend::start("echo");
    let mut keys = vec![
        ("bg".to_string(), "open_t"),
        ("warm-open".to_string(), "open_t"),
    ];
    let open = tenants("open", 4, "open_t");
    let closed = tenants("closed", 4, "closed_t");
    let local = tenants("local", 8, "local_t");
    keys.extend(open.iter().cloned());
    keys.extend(closed.iter().cloned());
    keys.extend(local.iter().cloned());
    let yaml = gateway_yaml(
        &redis.url(),
        BREAKER_30S,
        "",
        POLICY_TIERS,
        &keys,
        &backend.addr(),
    );
    let gw = Gateway::start(&yaml);
    let url = gw.url("/load");
    let http = http();

    // Redis decides while it is up.
    warm_up(&http, &url, "warm-open", "open_t", 1000, 2).await;

    // Continuous background load (open tier) across the kill: every request completes with a
    // 200, decided by Redis before the kill and failed open after it.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut background = JoinSet::new();
    for _ in 0..3 {
        let (http, url, stop) = (http.clone(), url.clone(), stop_rx.clone());
        background.spawn(async move {
            let (mut by_redis, mut failed_open) = (0u64, 0u64);
            while !*stop.borrow() {
                let r = get(&http, &url, "bg").await;
                assert_eq!(r.status, 200, "background load: {r:?}");
                if r.header("ratelimit-policy").is_some() {
                    assert_redis_decided(&r, "open_t", 1000);
                    by_redis += 1;
                } else {
                    assert_failed_open(&r);
                    failed_open += 1;
                }
            }
            (by_redis, failed_open)
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    redis.kill();

    // Fresh tenants of each policy, all at once.
    let mut load = JoinSet::new();
    for (tenant, tier) in open.iter().chain(&closed).chain(&local) {
        for _ in 0..8 {
            let (http, url, tenant, tier) = (http.clone(), url.clone(), tenant.clone(), *tier);
            load.spawn(async move {
                let r = get(&http, &url, &tenant).await;
                (tenant, tier, r)
            });
        }
    }
    let mut by_tenant: BTreeMap<String, Vec<Reply>> = BTreeMap::new();
    while let Some(done) = load.join_next().await {
        let (tenant, tier, r) = done.expect("request task");
        assert!(r.status != 500, "a 500: {r:?}");
        match tier {
            "open_t" => assert_failed_open(&r),
            "closed_t" => assert_failed_closed(&r),
            _ => {}
        }
        by_tenant.entry(tenant).or_default().push(r);
    }
    for (tenant, _) in &local {
        let replies = &by_tenant[tenant];
        let mut admitted: Vec<u64> = replies
            .iter()
            .filter(|r| r.status == 200)
            .map(|r| assert_degraded(r, "local_t", 5))
            .collect();
        admitted.sort_unstable();
        assert_eq!(admitted, [0, 1, 2, 3, 4], "{tenant}: local bucket of 5");
        for r in replies.iter().filter(|r| r.status != 200) {
            assert_eq!(r.status, 429, "{tenant}: {r:?}");
            assert_eq!(assert_degraded(r, "local_t", 5), 0);
            let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
            assert!(retry >= 1, "{r:?}");
        }
    }

    stop_tx.send(true).unwrap();
    let (mut by_redis, mut failed_open) = (0, 0);
    while let Some(done) = background.join_next().await {
        let (r, f) = done.expect("background task");
        by_redis += r;
        failed_open += f;
    }
    assert!(by_redis > 0, "the background load ran before the kill");
    assert!(failed_open > 0, "the background load ran after the kill");

    // The metrics count exactly what was sent (the background tenant is in open_t too).
    let m = gw.metrics();
    assert_eq!(
        decisions(&m, "open_t", "failed_open") as u64,
        32 + failed_open
    );
    assert_eq!(decisions(&m, "closed_t", "failed_closed") as u64, 32);
    assert_eq!(decisions(&m, "local_t", "fallback") as u64, 8 * 5);
    assert_eq!(decisions(&m, "local_t", "limited") as u64, 8 * 3);
    assert_eq!(
        decisions(&m, "local_t", "admitted") as u64,
        0,
        "never reached Redis"
    );
    assert!(redis_errors(&m, "connection") as u64 > 0, "{m}");
    assert_eq!(redis_errors(&m, "script") as u64, 0, "{m}");
    // Request counters are written in the logging phase, just after the answer went out.
    let counted = eventually(Duration::from_secs(10), || route_5xx(&gw) == 32.0).await;
    assert!(
        counted,
        "only the closed tier's 503s are 5xx: {}",
        gw.metrics()
    );
    // (Whether the breaker opened depends on how many successes the background load put in
    // the window before the kill; the frozen-Redis test covers the breaker.)
    assert_eq!(gw.admin_get("/readyz").status, 200);
    assert_one_log_line_per_transition(&gw).await;
}

// ---------------------------------------------------------------------------------------------
// Redis frozen (SIGSTOP): breaker opens, Redis is left alone
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_redis_opens_the_breaker_and_is_not_called_while_open() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let mut keys = vec![("warm".to_string(), "open_t")];
    keys.extend(tenants("frozen", 1, "open_t"));
    keys.extend(tenants("local", 1, "local_t"));
    let yaml = gateway_yaml(
        &redis.url(),
        BREAKER_30S,
        "",
        POLICY_TIERS,
        &keys,
        &backend.addr(),
    );
    let gw = Gateway::start(&yaml);
    let url = gw.url("/frozen");
    let http = http();

    // Script loaded, connection established, two successes in the window.
    warm_up(&http, &url, "warm", "open_t", 1000, 2).await;
    assert_eq!(healthz(&gw)["limiter"], "ok");
    let calls_before = redis.command_calls("evalsha");
    let failed_before = evalsha_failed(&redis);
    let errors_before = redis_errors(&gw, "timeout") as u64;

    redis.pause();
    // One request at a time until the breaker opens: each call times out after 50 ms and the
    // request fails open.
    let mut sent_while_closed = 0u64;
    while gw.metric_or_zero(BREAKER_STATE) != 1.0 {
        assert!(sent_while_closed < 50, "the breaker never opened");
        assert_failed_open(&get(&http, &url, "frozen-0").await);
        sent_while_closed += 1;
    }
    // 2 successes + 3 failures = 5 calls at ratio 0.6: open on the 3rd (sooner only if a warm
    // call was slow enough to time out on a busy machine).
    assert!(
        sent_while_closed <= 3,
        "min_calls 5, ratio 0.5, after 2 successes"
    );
    let m = gw.metrics();
    assert_eq!(
        redis_errors(&m, "timeout") as u64 - errors_before,
        sent_while_closed,
        "every frozen call ends in a timeout: {m}"
    );
    assert_eq!(transitions(&m, "open") as u64, 1);
    let health = healthz(&gw);
    assert_eq!(health["limiter"], "degraded", "{health}");
    assert_eq!(health["redis_breaker"], "open", "{health}");
    assert_eq!(
        gw.admin_get("/readyz").status,
        200,
        "degraded is still ready"
    );

    // While open, no request waits for Redis or calls it: the policy decides at once.
    let mut set = JoinSet::new();
    for i in 0..30 {
        let (http, url) = (http.clone(), url.clone());
        set.spawn(async move {
            if i % 2 == 0 {
                ("open", get(&http, &url, "frozen-0").await)
            } else {
                ("local", get(&http, &url, "local-0").await)
            }
        });
    }
    let mut local_admitted = 0;
    while let Some(done) = set.join_next().await {
        let (kind, r) = done.expect("request task");
        if kind == "open" {
            assert_failed_open(&r);
        } else if r.status == 200 {
            assert_degraded(&r, "local_t", 5);
            local_admitted += 1;
        } else {
            assert_eq!(r.status, 429, "{r:?}");
            assert_degraded(&r, "local_t", 5);
        }
    }
    assert_eq!(local_admitted, 5, "local fallback bucket of 5");
    let m = gw.metrics();
    assert_eq!(
        decisions(&m, "open_t", "failed_open") as u64,
        sent_while_closed + 15
    );
    assert_eq!(decisions(&m, "local_t", "fallback") as u64, 5);
    let errors: u64 = ["timeout", "connection", "script", "other"]
        .iter()
        .map(|k| redis_errors(&m, k) as u64)
        .sum();
    assert_eq!(
        errors - errors_before,
        sent_while_closed,
        "no Redis call while open: {m}"
    );

    // Unfreeze: the calls queued on the frozen connection run now, and the tokens of those
    // that debited are given back (one give-back each, docs/redis.md#calls-that-time-out);
    // nothing sent while the breaker was open may show up (break_s is 30: still open).
    redis.resume();
    let late = |outcome: &str| {
        gw.metric_or_zero(&format!(
            "tollgate_redis_late_replies_total{{outcome=\"{outcome}\"}}"
        )) as u64
    };
    let ended = || {
        [
            "compensated",
            "nothing_debited",
            "undo_failed",
            "lost",
            "dropped",
        ]
        .iter()
        .map(|o| late(o))
        .sum::<u64>()
    };
    assert!(
        eventually(Duration::from_secs(10), || ended() == sent_while_closed).await,
        "every timed-out call waited for: {}",
        gw.metrics()
    );
    let calls_after = settled_evalsha(&redis).await;
    // A give-back's first EVALSHA may meet NOSCRIPT (then SCRIPT LOAD and EVALSHA again).
    let noscript = evalsha_failed(&redis) - failed_before;
    assert_eq!(
        late("compensated"),
        sent_while_closed,
        "each frozen call debited"
    );
    assert!(
        calls_after - calls_before - noscript <= 2 * sent_while_closed,
        "Redis ran {} EVALSHA after the freeze ({noscript} NOSCRIPT), only {sent_while_closed} \
         were sent before the breaker opened, plus one give-back each",
        calls_after - calls_before
    );
    for _ in 0..10 {
        assert_failed_open(&get(&http, &url, "frozen-0").await);
    }
    assert_eq!(settled_evalsha(&redis).await, calls_after);
    assert_eq!(gw.metric_or_zero(BREAKER_STATE), 1.0);
    assert_one_log_line_per_transition(&gw).await;
    assert_eq!(log_lines(&gw, "circuit breaker opened"), 1);
}

// ---------------------------------------------------------------------------------------------
// Recovery: restart (empty Redis, no script loaded) and SIGCONT
// ---------------------------------------------------------------------------------------------

/// Sends one request every 50 ms until the breaker is open; each must be a failed-closed 503.
async fn open_the_breaker(gw: &Gateway, http: &reqwest::Client, url: &str, tenant: &str) {
    let mut sent = 0;
    while gw.metric_or_zero(BREAKER_STATE) != 1.0 {
        assert!(sent < 100, "the breaker never opened");
        assert_failed_closed(&get(http, url, tenant).await);
        sent += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_redis_takes_decisions_back_without_noscript_errors() {
    let mut redis = RedisServer::start();
    let backend = Backend::start("echo");
    let keys = vec![("t".to_string(), "closed_t"), ("u".to_string(), "closed_t")];
    // timeout_ms is generous here: a killed Redis refuses at once, and a probe must not fail
    // only because the machine is busy.
    let yaml = gateway_yaml(
        &redis.url(),
        "timeout_ms: 1000, fleet_size: 1, circuit_breaker: { min_calls: 5, failure_ratio: 0.5, \
         window_s: 10, break_s: 1 }",
        "",
        POLICY_TIERS,
        &keys,
        &backend.addr(),
    );
    let gw = Gateway::start(&yaml);
    let url = gw.url("/restart");
    let http = http();

    let r = get(&http, &url, "t").await;
    assert_redis_decided(&r, "closed_t", 1000);
    assert_eq!(r.remaining(), 999);

    // 1. A restart while the breaker is closed and no traffic flows: the next request finds a
    //    dead connection and an empty Redis without the script. Not a single error.
    redis.restart();
    for expected in [999, 998, 997] {
        let r = get(&http, &url, "t").await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_redis_decided(&r, "closed_t", 1000);
        assert_eq!(r.remaining(), expected, "the restarted Redis starts empty");
    }
    assert_eq!(redis_errors(&gw, "script"), 0.0);
    assert_eq!(decisions(&gw, "closed_t", "failed_closed"), 0.0);
    assert!(
        redis.command_calls("script|load") >= 1,
        "NOSCRIPT was answered by a load"
    );

    // 2. An outage long enough to open the breaker, then a restart: after break_s the first
    //    probe goes to the new Redis and succeeds; `probes` (3) successes close the breaker.
    redis.kill();
    open_the_breaker(&gw, &http, &url, "t").await;
    redis.restart();
    tokio::time::sleep(Duration::from_millis(1_200)).await; // > break_s
    for expected in [999, 998, 997, 996, 995] {
        let r = get(&http, &url, "t").await;
        assert_redis_decided(&r, "closed_t", 1000);
        assert_eq!(r.remaining(), expected);
    }
    let m = gw.metrics();
    assert_eq!(metric_or_zero(&m, BREAKER_STATE, &[]) as u64, 0, "{m}");
    assert_eq!(
        transitions(&m, "open") as u64,
        1,
        "the first probe succeeded: {m}"
    );
    assert_eq!(transitions(&m, "half_open") as u64, 1, "{m}");
    assert_eq!(transitions(&m, "closed") as u64, 1, "{m}");
    assert_eq!(redis_errors(&m, "script") as u64, 0, "{m}");
    assert!(redis_errors(&m, "connection") as u64 > 0, "{m}");
    assert_eq!(healthz(&gw)["limiter"], "ok");

    // 3. Frozen instead of killed, then SIGCONT: same recovery on the surviving connection.
    redis.pause();
    let mut sent = 0;
    while gw.metric_or_zero(BREAKER_STATE) != 1.0 {
        assert!(sent < 100, "the breaker never opened");
        // timeout_ms 1000: each frozen call takes a second.
        let r = get(&http, &url, "u").await;
        assert_failed_closed(&r);
        sent += 1;
    }
    redis.resume();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let mut last = None;
    for _ in 0..5 {
        let r = get(&http, &url, "u").await;
        assert_redis_decided(&r, "closed_t", 1000);
        let rem = r.remaining();
        if let Some(prev) = last {
            assert_eq!(rem + 1, prev);
        }
        last = Some(rem);
    }
    let m = gw.metrics();
    assert_eq!(metric_or_zero(&m, BREAKER_STATE, &[]) as u64, 0, "{m}");
    assert_eq!(transitions(&m, "open") as u64, 2, "{m}");
    assert_eq!(transitions(&m, "closed") as u64, 2, "{m}");
    assert!(redis_errors(&m, "timeout") as u64 > 0, "{m}");
    assert_eq!(redis_errors(&m, "script") as u64, 0, "{m}");
    assert_one_log_line_per_transition(&gw).await;
    assert!(!gw.log().contains("NOSCRIPT"), "{}", gw.log_tail(30));
}

/// Redis frozen under 20 concurrent requests of one tenant: every request fails closed, and
/// the breaker counts the Redis calls made (one per batch of coalesced requests), not the
/// requests that shared them: one busy tenant's failed batch must not weigh like 20 failed
/// calls and open the breaker for every tenant. (`min_calls: 8`; the requests come in one or
/// two batches, so at most a few calls fail.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_coalesced_batch_counts_once_per_call_in_the_breaker() {
    const REQUESTS: usize = 20;
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let keys = vec![
        ("warm".to_string(), "closed_t"),
        ("busy".to_string(), "closed_t"),
    ];
    let yaml = gateway_yaml(
        &redis.url(),
        "timeout_ms: 300, fleet_size: 1, circuit_breaker: { min_calls: 8, failure_ratio: 0.5, \
         window_s: 60, break_s: 30 }",
        "",
        POLICY_TIERS,
        &keys,
        &backend.addr(),
    );
    let gw = Gateway::start(&yaml);
    let url = gw.url("/batch");
    let http = http();
    warm_up(&http, &url, "warm", "closed_t", 1000, 1).await;

    redis.pause();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..REQUESTS {
        let (http, url) = (http.clone(), url.clone());
        set.spawn(async move { get(&http, &url, "busy").await });
    }
    while let Some(r) = set.join_next().await {
        assert_failed_closed(&r.expect("task"));
    }
    redis.resume();

    let m = gw.metrics();
    assert_eq!(redis_errors(&m, "timeout") as usize, REQUESTS, "{m}");
    assert_eq!(transitions(&m, "open") as u64, 0, "{m}");
    assert_eq!(metric_or_zero(&m, BREAKER_STATE, &[]) as u64, 0, "{m}");
}

// ---------------------------------------------------------------------------------------------
// Redis never reachable at startup
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_starts_without_redis_and_recovers_when_it_appears() {
    // Reserve a port for a Redis that is not running yet.
    let mut redis = RedisServer::start();
    redis.kill();
    let backend = Backend::start("echo");
    let keys = vec![
        ("o".to_string(), "open_t"),
        ("c".to_string(), "closed_t"),
        ("l".to_string(), "local_t"),
    ];
    // Nothing listens on the port: every call is refused at once, whatever timeout_ms says; a
    // generous one keeps a busy machine from failing the calls once Redis is there.
    let yaml = gateway_yaml(
        &redis.url(),
        "timeout_ms: 1000, fleet_size: 1, circuit_breaker: { min_calls: 5, failure_ratio: 0.5, \
         window_s: 10, break_s: 1 }",
        "",
        POLICY_TIERS,
        &keys,
        &backend.addr(),
    );
    let gw = Gateway::start(&yaml);
    let url = gw.url("/nostart");
    let http = http();

    for i in 0..3u64 {
        assert_failed_open(&get(&http, &url, "o").await);
        assert_failed_closed(&get(&http, &url, "c").await);
        let r = get(&http, &url, "l").await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(assert_degraded(&r, "local_t", 5), 4 - i);
    }
    assert_eq!(gw.admin_get("/readyz").status, 200);
    assert!(redis_errors(&gw, "connection") > 0.0);

    redis.restart();
    // Within break_s plus a probe, decisions are back in Redis (a generous bound for a busy
    // machine; the exact probe accounting is asserted in the restart test).
    let mut back = false;
    for _ in 0..100 {
        let r = get(&http, &url, "o").await;
        assert_eq!(r.status, 200, "{r:?}");
        if r.header("ratelimit-policy").is_some() {
            assert_redis_decided(&r, "open_t", 1000);
            back = true;
            break;
        }
        assert_failed_open(&r);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "decisions never returned to Redis");
    // The breaker closes after its probes; every policy is decided by Redis again.
    for _ in 0..3 {
        assert_redis_decided(&get(&http, &url, "o").await, "open_t", 1000);
    }
    let r = get(&http, &url, "c").await;
    assert_redis_decided(&r, "closed_t", 1000);
    assert_eq!(r.remaining(), 999, "closed tier never reached Redis before");
    let r = get(&http, &url, "l").await;
    assert_redis_decided(&r, "local_t", 5);
    assert_eq!(
        r.remaining(),
        1,
        "the local fallback's 3 admissions are carried into Redis (5 - 3 - this one)"
    );
    assert_eq!(gw.metric_or_zero(BREAKER_STATE), 0.0);
    assert_eq!(
        redis.keys("tollgate:*"),
        ["tollgate:{c}:tb", "tollgate:{l}:tb", "tollgate:{o}:tb"]
    );
    assert_one_log_line_per_transition(&gw).await;
}

/// Redis down from the start, the breaker far from opening (min_calls 1000): `/healthz` and
/// `tollgate_limiter_degraded` say degraded from the first decision that fell back, while the
/// breaker is still closed, and the log names the cause (connection refused) once rather than
/// once per connection attempt of the start-up warm-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_from_start_is_degraded_from_the_first_fallback() {
    let backend = Backend::start("echo");
    let nowhere = format!("redis://{}/0", free_addr());
    let yaml = gateway_yaml(
        &nowhere,
        "timeout_ms: 1000, fleet_size: 1, circuit_breaker: { min_calls: 1000 }",
        "",
        POLICY_TIERS,
        &[("l".to_string(), "local_t")],
        &backend.addr(),
    );
    let gw = Gateway::start(&yaml);
    let r = get(&http(), &gw.url("/"), "l").await;
    assert_eq!(assert_degraded(&r, "local_t", 5), 4);
    let health = healthz(&gw);
    assert_eq!(
        (&health["limiter"], &health["redis_breaker"]),
        (&serde_json::json!("degraded"), &serde_json::json!("closed")),
        "{health}"
    );
    assert_eq!(gw.metric_or_zero("tollgate_limiter_degraded"), 1.0);
    assert_eq!(gw.metric_or_zero(BREAKER_STATE), 0.0);
    let failed = |gw: &Gateway| log_lines(gw, "redis connection failed");
    assert!(
        eventually(Duration::from_secs(10), || failed(&gw) >= 1).await,
        "no connection fault logged:\n{}",
        gw.log_tail(20)
    );
    assert_eq!(
        (failed(&gw), log_lines(&gw, "connection refused")),
        (1, 1),
        "the cause once, its repeats left out:\n{}",
        gw.log_tail(20)
    );
}

// ---------------------------------------------------------------------------------------------
// Case C05
// ---------------------------------------------------------------------------------------------

/// C05 for one `redis.on_failure` policy: Redis URL to a port nothing listens on, timeout 50 ms;
/// tier `T` burst 5 ~no refill (k1), tier `big` for the edge part (edge burst 3 ~no refill,
/// 127.0.0.1 exempt so the ten k1 requests are not edge-limited).
async fn case_c05(policy: &str) -> (Gateway, Vec<Reply>) {
    let backend = Backend::start("echo");
    let nowhere = format!("redis://{}/0", free_addr());
    let keys = vec![("k1".to_string(), "T"), ("k2".to_string(), "big")];
    let yaml = gateway_yaml(
        &nowhere,
        &format!("timeout_ms: 50, fleet_size: 1, on_failure: {policy}"),
        "{ limit: 1, per: 1d, burst: 3, exempt: [\"127.0.0.1/32\"] }",
        "  T: { limit: 1, per: 1d, burst: 5 }\n  big: { limit: 1, per: 1d, burst: 1000 }\n",
        &keys,
        &backend.addr(),
    );
    let gw = Gateway::start(&yaml);
    let url = gw.url("/c05");
    let http = http();
    let mut replies = Vec::new();
    for _ in 0..10 {
        let r = get(&http, &url, "k1").await;
        assert_ne!(r.status, 500, "{r:?}");
        replies.push(r);
    }

    // The edge limiter needs no Redis: from one address, the 4th request is an edge 429.
    let other = http_from("127.0.0.2");
    for i in 0..4 {
        let r = get(&other, &url, "k2").await;
        if i < 3 {
            match policy {
                "open" => assert_failed_open(&r),
                "closed" => assert_failed_closed(&r),
                _ => {
                    assert_eq!(r.status, 200, "{r:?}");
                    assert_degraded(&r, "big", 1000);
                }
            }
        } else {
            assert_eq!(r.status, 429, "4th request from one address: {r:?}");
            let p = problem(&r.body);
            assert_eq!(p["violated-policies"], serde_json::json!(["edge"]), "{r:?}");
            assert!(r.header("retry-after").is_some(), "{r:?}");
        }
    }
    assert_eq!(
        metric_or_zero(
            &gw,
            "tollgate_decisions_total",
            &[("layer", "edge"), ("outcome", "limited"), ("tier", "-")]
        ),
        1.0
    );
    assert_eq!(gw.admin_get("/readyz").status, 200);
    (gw, replies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c05_open_admits_without_quota_headers() {
    let (gw, replies) = case_c05("open").await;
    for r in &replies {
        assert_failed_open(r);
    }
    assert_eq!(decisions(&gw, "T", "failed_open"), 10.0);
    assert_eq!(decisions(&gw, "big", "failed_open"), 3.0);
    assert!(redis_errors(&gw, "connection") + redis_errors(&gw, "timeout") > 0.0);
    // The access log names the failure policy, not a plain admission.
    let logged = eventually(Duration::from_secs(10), || {
        log_lines(&gw, r#"layer="tenant" decision="failed_open""#) == 13
    })
    .await;
    assert!(logged, "{}", gw.log_tail(20));
    assert_eq!(log_lines(&gw, r#"decision="admitted""#), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c05_closed_is_503_with_retry_after_never_500() {
    let (gw, replies) = case_c05("closed").await;
    for r in &replies {
        assert_failed_closed(r);
    }
    assert_eq!(decisions(&gw, "T", "failed_closed"), 10.0);
    assert_eq!(decisions(&gw, "big", "failed_closed"), 3.0);
    // Request counters are written in the logging phase, just after the answer went out.
    let counted = eventually(Duration::from_secs(10), || route_5xx(&gw) == 13.0).await;
    assert!(counted, "only the 503s are 5xx: {}", gw.metrics());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c05_local_uses_the_local_bucket_exactly() {
    let (gw, replies) = case_c05("local").await;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);
    let remaining: Vec<u64> = replies.iter().map(|r| assert_degraded(r, "T", 5)).collect();
    assert_eq!(remaining, [4, 3, 2, 1, 0, 0, 0, 0, 0, 0]);
    for r in &replies[5..] {
        let p = problem(&r.body);
        assert_eq!(p["violated-policies"], serde_json::json!(["T"]), "{r:?}");
        let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!(retry >= 1);
    }
    assert_eq!(decisions(&gw, "T", "fallback"), 5.0);
    assert_eq!(decisions(&gw, "T", "limited"), 5.0);
    assert_eq!(decisions(&gw, "big", "fallback"), 3.0);
    let logged = eventually(Duration::from_secs(10), || {
        log_lines(&gw, r#"layer="tenant" decision="fallback""#) == 8
    })
    .await;
    assert!(logged, "{}", gw.log_tail(20));
}

/// Cold start: the gateway connects to Redis before its admin listener answers, so the first
/// request does not pay the connection set-up inside the 50 ms `timeout_ms` (on a busy host it
/// used to fall to the failure policy). Seen from Redis: the gateway's connection exists before
/// any request, and the first request, with the default timeout and `on_failure: local`, is
/// decided by Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_connection_is_made_before_the_gateway_reports_healthy() {
    let redis = RedisServer::start();
    let backend = Backend::start("warm");
    let yaml = gateway_yaml(
        &redis.url(),
        "on_failure: local",
        "",
        "  T: { limit: 1, per: 1d, burst: 5 }\n",
        &tenants("warm", 1, "T"),
        &backend.addr(),
    );
    let gw = Gateway::start(&yaml);
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut redis.conn())
        .unwrap();
    // One line per connection: the one asking, and the gateway's.
    assert!(
        clients.lines().count() >= 2,
        "no gateway connection before the first request:\n{clients}"
    );
    let r = get(&client(), &gw.url("/"), "warm-0").await;
    assert_eq!(r.status, 200);
    assert_redis_decided(&r, "T", 5);
    assert_eq!(backend.stats().requests, 1);
}
