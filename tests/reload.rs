//! Issue B, "Hot reload": SIGHUP under load, state carried over (no fresh burst), changed limits
//! applied to live buckets, invalid files rejected, restart-only settings, case C09, the
//! observability of all of it, and the zero-downtime binary upgrade (`--upgrade` + SIGQUIT).
//! Black-box: a real `redis-server`, real `tollgate-echo` backends and the real gateway per test.
//!
//! Determinism: tiers and edge buckets refill ~never (`limit: 1, per: 1d`) so counts are exact;
//! each reload is waited for through `tollgate_config_reloads_total` before the next step; every
//! client has a 10 s timeout ("no hang" = every request completed); no wall-clock assertions.

mod common;

use common::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;

const RELOADS_OK: &str = "tollgate_config_reloads_total{result=\"ok\"}";
const RELOADS_ERR: &str = "tollgate_config_reloads_total{result=\"error\"}";
const LAST_RELOAD: &str = "tollgate_config_last_reload_success_timestamp_seconds";
const REQUESTS: &str = "tollgate_requests_total";

// ---------------------------------------------------------------------------------------------
// Config builder
// ---------------------------------------------------------------------------------------------

/// The API key of `tenant` (sent in `X-API-Key`).
fn key(tenant: &str) -> String {
    format!("key-of-{tenant}")
}

/// Upstream `echo` → `backend`, catch-all route `auth: optional`, tier `T` burst 3 ~no refill,
/// no keys yet (an empty `api_keys.keys`). Redis gets a generous timeout: these tests are not
/// about Redis failures, and a busy machine must not turn a decision into a fallback.
fn base_config(redis: &RedisServer, backend: &Backend) -> GatewayConfig {
    GatewayConfig::echo(&backend.addr(), "optional")
        .redis(&redis.url(), "timeout_ms: 1000")
        .api_keys_always()
        .tier("T", "{ limit: 1, per: 1d, burst: 3 }")
}

/// Reload tests give each tenant the API key [`key`]`(tenant)`.
trait TenantKeys {
    fn key(self, tenant: &str, tier: &str) -> Self;
    fn without_key(self, tenant: &str) -> Self;
}

impl TenantKeys for GatewayConfig {
    fn key(self, tenant: &str, tier: &str) -> Self {
        self.api_key(&key(tenant), tenant, tier)
    }

    fn without_key(self, tenant: &str) -> Self {
        self.without_api_keys_of(tenant)
    }
}

// ---------------------------------------------------------------------------------------------
// Traffic and reload helpers
// ---------------------------------------------------------------------------------------------

impl Reply {
    /// `q=` of the `RateLimit-Policy` field.
    fn quota(&self) -> u64 {
        let field = self
            .header("ratelimit-policy")
            .unwrap_or_else(|| panic!("no RateLimit-Policy header: {self:?}"));
        field
            .split(';')
            .find_map(|p| p.strip_prefix("q="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("RateLimit-Policy without q=: {field}"))
    }

    /// `violated-policies` of a problem body.
    fn violated(&self) -> serde_json::Value {
        problem(&self.body)["violated-policies"].clone()
    }
}

async fn try_get(
    http: &reqwest::Client,
    url: &str,
    tenant: Option<&str>,
) -> Result<Reply, reqwest::Error> {
    try_get_with_key(http, url, tenant.map(key).as_deref()).await
}

/// GET with `tenant`'s API key (anonymous when `None`); panics on any transport error.
async fn get(http: &reqwest::Client, url: &str, tenant: Option<&str>) -> Reply {
    try_get(http, url, tenant)
        .await
        .unwrap_or_else(|e| panic!("GET {url} as {tenant:?}: {e}"))
}

/// Rewrites the config with an invalid one, sends SIGHUP and waits until it is rejected.
async fn reload_rejected(gw: &Gateway, yaml: &str) {
    let (ok, err) = (
        gw.metric_or_zero(RELOADS_OK),
        gw.metric_or_zero(RELOADS_ERR),
    );
    gw.reload(yaml);
    let rejected = eventually(Duration::from_secs(10), || {
        gw.metric_or_zero(RELOADS_ERR) > err
    })
    .await;
    assert!(
        rejected,
        "invalid reload was not counted; log tail:\n{}",
        gw.log_tail(20)
    );
    assert_eq!(gw.metric_or_zero(RELOADS_ERR), err + 1.0);
    assert_eq!(gw.metric_or_zero(RELOADS_OK), ok);
}

/// Waits until `tollgate_config_reloads_total{result="ok"}` stops moving (SIGHUPs sent in a
/// burst coalesce, so how many reloads ran is not known in advance).
async fn reloads_settled(gw: &Gateway) -> f64 {
    settled(Duration::from_millis(200), || gw.metric_or_zero(RELOADS_OK)).await
}

/// Waits (up to 10 s) for a log line containing every one of `needles` and returns it. Log
/// lines are written by a background thread, some after the metric that announces the event.
async fn log_line_with(gw: &Gateway, needles: &[&str]) -> String {
    let find = || {
        gw.log()
            .lines()
            .find(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_owned)
    };
    let found = eventually(Duration::from_secs(10), || find().is_some()).await;
    assert!(
        found,
        "no log line with {needles:?}; log tail:\n{}",
        gw.log_tail(20)
    );
    find().unwrap()
}

fn assert_readyz(gw: &Gateway) {
    let reply = gw.admin_get("/readyz");
    assert_eq!(reply.status, 200, "/readyz: {}", reply.body);
}

/// Continuous load: each task loops GETs until told to stop and records every unexpected
/// outcome (transport errors included) instead of panicking, so one summary reports all.
struct Load {
    stop: tokio::sync::watch::Sender<bool>,
    tasks: JoinSet<u64>,
    failures: Arc<Mutex<Vec<Failure>>>,
    /// Requests answered so far by all tasks together.
    answered: Arc<AtomicU64>,
}

/// One unexpected outcome of the load.
#[derive(Debug)]
struct Failure {
    what: String,
}

impl Load {
    fn new() -> Self {
        Load {
            stop: tokio::sync::watch::channel(false).0,
            tasks: JoinSet::new(),
            failures: Arc::default(),
            answered: Arc::default(),
        }
    }

    /// Adds a task sending GET `url` as `tenant`; `check` returns `Err(why)` for an answer that
    /// is not expected.
    fn spawn(
        &mut self,
        http: reqwest::Client,
        url: String,
        tenant: Option<String>,
        check: fn(&Reply) -> Result<(), String>,
    ) {
        let stop = self.stop.subscribe();
        let failures = self.failures.clone();
        let answered = self.answered.clone();
        self.tasks.spawn(async move {
            let mut sent = 0;
            while !*stop.borrow() {
                sent += 1;
                let failure = match try_get(&http, &url, tenant.as_deref()).await {
                    Ok(r) => check(&r).err().map(|why| format!("{why}: {r:?}")),
                    Err(e) => Some(format!("transport error: {e:?}")),
                };
                if let Some(what) = failure {
                    failures.lock().unwrap().push(Failure { what });
                }
                answered.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            sent
        });
    }

    /// Waits until the tasks together have had `n` more requests answered than now, so that a
    /// step of the test overlaps real traffic however slow the machine is. Panics after 60 s.
    async fn overlap(&self, n: u64) {
        let target = self.answered.load(Ordering::Relaxed) + n;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while self.answered.load(Ordering::Relaxed) < target {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the load made no progress"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops every task; returns how many requests were sent and every failure.
    async fn finish(mut self) -> (u64, Vec<Failure>) {
        self.stop.send(true).unwrap();
        let mut sent = 0;
        while let Some(n) = self.tasks.join_next().await {
            sent += n.expect("load task");
        }
        let failures = std::mem::take(&mut *self.failures.lock().unwrap());
        (sent, failures)
    }
}

/// A client that opens a new connection for every request.
fn http_no_keepalive() -> reqwest::Client {
    client_builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(0)
        .build()
        .expect("client")
}

// ---------------------------------------------------------------------------------------------
// Reload under load
// ---------------------------------------------------------------------------------------------

fn big_quota_admitted(r: &Reply) -> Result<(), String> {
    if r.status != 200 {
        return Err("expected 200".into());
    }
    match r.header("ratelimit-policy") {
        Some(p) if p.starts_with("\"T\";q=1000000;") || p.starts_with("\"T\";q=900000;") => Ok(()),
        other => Err(format!("unexpected policy {other:?}")),
    }
}

fn b_route(r: &Reply) -> Result<(), String> {
    // Backend `b` through route `/b` while config B is live, the catch-all's backend `a` while
    // config A is.
    let by_a = r.body.contains("\"name\":\"a\"");
    let by_b = r.body.contains("\"name\":\"b\"");
    if r.status == 200 && (by_a || by_b) {
        Ok(())
    } else {
        Err("expected 200 from backend a or b".into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_reloads_under_load_fail_no_request() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let b = Backend::start("b");
    let mut base = base_config(&redis, &a).tier("T", "{ limit: 1, per: 1d, burst: 1000000 }");
    for i in 0..4 {
        base = base.key(&format!("load-{i}"), "T");
    }
    let config_a = base.clone();
    let config_b = base
        .tier("T", "{ limit: 1, per: 1d, burst: 900000 }")
        .upstream("other", &b.addr())
        .route("{ path_prefix: \"/b\", upstream: other, auth: optional }")
        .key("extra", "T");
    let gw = Gateway::start(&config_a.yaml());

    let mut load = Load::new();
    for i in 0..4 {
        // Two tasks reuse keep-alive connections across the reloads, two connect anew each time.
        let http = if i % 2 == 0 {
            http()
        } else {
            http_no_keepalive()
        };
        load.spawn(
            http,
            gw.url("/load"),
            Some(format!("load-{i}")),
            big_quota_admitted,
        );
    }
    load.spawn(http(), gw.url("/b/x"), None, b_route);

    for i in 0..50 {
        let next = if i % 2 == 0 { &config_b } else { &config_a };
        gw.reload_ok(&next.yaml()).await;
        // Every reload overlaps some requests, however loaded the machine is.
        load.overlap(3).await;
    }
    let (sent, failures) = load.finish().await;
    assert!(
        failures.is_empty(),
        "{} of {sent} requests failed across 50 reloads, e.g. {:#?}",
        failures.len(),
        failures.iter().take(5).map(|f| &f.what).collect::<Vec<_>>()
    );
    assert!(sent >= 100, "the load ran ({sent} requests)");
    assert_eq!(gw.metric_or_zero(RELOADS_OK), 51.0, "startup + 50 reloads");
    assert_eq!(gw.metric_or_zero(RELOADS_ERR), 0.0);
    assert!(b.stats().requests > 0, "config B's route was live at times");
    assert!(a.stats().requests > 0);
    assert_readyz(&gw);
}

// ---------------------------------------------------------------------------------------------
// State carried over
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drained_tenant_stays_rejected_across_twenty_reloads() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let base = base_config(&redis, &a).key("k1", "T").key("k2", "T");
    let gw = Gateway::start(&base.yaml());
    let http = http();
    let url = gw.url("/x");

    for expected in [2, 1, 0] {
        let r = get(&http, &url, Some("k1")).await;
        assert_eq!((r.status, r.remaining()), (200, expected), "{r:?}");
    }
    let r = get(&http, &url, Some("k1")).await;
    assert_eq!((r.status, r.remaining()), (429, 0), "{r:?}");

    // Identical files and unrelated changes, including a changed `redis:` section (a new Redis
    // client without the local deny cache: Redis itself must still say no).
    let variants = [
        base.clone(),
        base.clone()
            .route("{ path_prefix: \"/new\", upstream: echo, auth: none }"),
        base.clone().key("k3", "T"),
        base.clone().section("response", "{ headers: both }"),
        base.clone().tier("other", "{ limit: 5, per: 1s }"),
    ];
    let with_new_redis_timeout =
        |cfg: &GatewayConfig| cfg.clone().redis_opts("timeout_ms: 900").yaml();
    for i in 0..20 {
        let cfg = &variants[i % variants.len()];
        let yaml = if i % 4 == 3 {
            with_new_redis_timeout(cfg)
        } else {
            cfg.yaml()
        };
        gw.reload_ok(&yaml).await;
        let r = get(&http, &url, Some("k1")).await;
        assert_eq!(r.status, 429, "reload {i}: {r:?}");
        assert_eq!((r.remaining(), r.quota()), (0, 3), "reload {i}: {r:?}");
        assert_eq!(r.violated(), serde_json::json!(["T"]));
    }
    // The limit itself still works for others.
    for expected in [2, 1, 0] {
        let r = get(&http, &url, Some("k2")).await;
        assert_eq!((r.status, r.remaining()), (200, expected), "{r:?}");
    }
    assert_eq!(get(&http, &url, Some("k2")).await.status, 429);
    assert_eq!(a.stats().requests, 6);
}

/// Changing a tier's numbers on reload applies to the live bucket, capped at the new burst
/// (docs/DESIGN.md section 2, "level semantics"): the stored token level is kept as it is, a full
/// bucket (an expired or missing key) is full at the new size, and a drained bucket stays
/// drained. Raising the burst never hands anyone fresh tokens; lowering it caps what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_burst_applies_to_live_buckets_capped_at_the_new_burst() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let mut cfg = base_config(&redis, &a)
        .tier("T", "{ limit: 1, per: 1d, burst: 10 }")
        // Refills in 100 ms: a used bucket is full again (its key expired) a moment later.
        .tier("F", "{ limit: 10, per: 1s, burst: 10 }")
        .key("refilled", "F");
    for t in ["drained", "partial", "partial2", "fresh", "fresh2"] {
        cfg = cfg.key(t, "T");
    }
    let gw = Gateway::start(&cfg.yaml());
    let http = http();
    let url = gw.url("/burst");
    let send = |tenant: &'static str| {
        let (http, url) = (http.clone(), url.clone());
        async move { get(&http, &url, Some(tenant)).await }
    };

    for _ in 0..10 {
        assert_eq!(send("drained").await.status, 200);
    }
    let r = send("drained").await;
    assert_eq!((r.status, r.remaining(), r.quota()), (429, 0, 10));
    for _ in 0..3 {
        assert_eq!(send("partial").await.status, 200);
    }
    for _ in 0..2 {
        assert_eq!(send("partial2").await.status, 200);
    }
    let r = send("refilled").await;
    assert_eq!((r.status, r.remaining()), (200, 9));
    tokio::time::sleep(Duration::from_millis(1_000)).await; // 10× the refill time

    // Raise T's burst 10 → 20 and F's 10 → 20.
    let raised = cfg
        .clone()
        .tier("T", "{ limit: 1, per: 1d, burst: 20 }")
        .tier("F", "{ limit: 10, per: 1s, burst: 20 }");
    gw.reload_ok(&raised.yaml()).await;

    // The very next request shows the new policy; a fresh tenant has all 20.
    for expected in (0..20).rev() {
        let r = send("fresh").await;
        assert_eq!((r.status, r.quota(), r.remaining()), (200, 20, expected));
    }
    let r = send("fresh").await;
    assert_eq!((r.status, r.quota(), r.remaining()), (429, 20, 0));
    // A bucket that was full before the reload is full at the new size.
    let r = send("refilled").await;
    assert_eq!((r.status, r.quota(), r.remaining()), (200, 20, 19), "{r:?}");
    // A drained bucket stays drained: no fresh tokens.
    let r = send("drained").await;
    assert_eq!((r.status, r.quota(), r.remaining()), (429, 20, 0), "{r:?}");
    // A partly used bucket keeps its level (7 of 10 → 7 of 20).
    for expected in (0..7).rev() {
        let r = send("partial").await;
        assert_eq!((r.status, r.quota(), r.remaining()), (200, 20, expected));
    }
    assert_eq!(send("partial").await.status, 429);

    // Lower T's burst 20 → 5: partial2's 8 tokens are capped at 5.
    let lowered = raised.tier("T", "{ limit: 1, per: 1d, burst: 5 }");
    gw.reload_ok(&lowered.yaml()).await;
    for expected in (0..5).rev() {
        let r = send("partial2").await;
        assert_eq!((r.status, r.quota(), r.remaining()), (200, 5, expected));
    }
    assert_eq!(send("partial2").await.status, 429);
    let r = send("fresh2").await;
    assert_eq!((r.status, r.quota(), r.remaining()), (200, 5, 4));
    let r = send("drained").await;
    assert_eq!((r.status, r.quota(), r.remaining()), (429, 5, 0));
}

/// While Redis is down, tenants are decided by the local fallback bucket. A reload that changes
/// the `redis:` section (here `timeout_ms`) builds a new Redis client and breaker, but must not
/// hand out a fresh local burst either, and the breaker metrics must describe the live breaker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_of_redis_settings_keeps_the_local_fallback_buckets() {
    let mut redis = RedisServer::start();
    let a = Backend::start("a");
    let cfg = base_config(&redis, &a).key("k1", "T").key("k2", "T");
    let yaml = |timeout_ms: u32| {
        cfg.clone()
            .redis_opts(&format!(
                "timeout_ms: {timeout_ms}, on_failure: local, fleet_size: 1, \
                 circuit_breaker: {{ min_calls: 2, failure_ratio: 0.5, break_s: 60 }}"
            ))
            .yaml()
    };
    let gw = Gateway::start(&yaml(1000));
    let http = http();
    let url = gw.url("/local");
    let r = get(&http, &url, Some("k2")).await;
    assert_eq!((r.status, r.remaining()), (200, 2), "decided by Redis");
    redis.kill();

    // Local bucket of 3 (fleet_size 1): drained, then rejected.
    for expected in [2, 1, 0] {
        let r = get(&http, &url, Some("k1")).await;
        assert_eq!((r.status, r.remaining()), (200, expected), "{r:?}");
        assert_eq!(r.header("tollgate-degraded"), Some("redis"));
    }
    assert_eq!(get(&http, &url, Some("k1")).await.status, 429);
    assert_eq!(gw.metric_or_zero("tollgate_redis_breaker_state"), 1.0);

    for timeout_ms in [900, 800] {
        gw.reload_ok(&yaml(timeout_ms)).await;
        // The metrics and /healthz describe the same breaker.
        let health: serde_json::Value =
            serde_json::from_str(&gw.admin_get("/healthz").body).unwrap();
        let gauge = gw.metric_or_zero("tollgate_redis_breaker_state");
        let by_health = match health["redis_breaker"].as_str() {
            Some("closed") => 0.0,
            Some("open") => 1.0,
            _ => 2.0,
        };
        assert_eq!(gauge, by_health, "gauge vs /healthz {health}");
        assert_eq!(
            gw.metric_or_zero("tollgate_limiter_degraded"),
            if gauge == 0.0 { 0.0 } else { 1.0 }
        );
        let r = get(&http, &url, Some("k1")).await;
        assert_eq!(r.status, 429, "no fresh local burst after a reload: {r:?}");
        assert_eq!(r.header("tollgate-degraded"), Some("redis"), "{r:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Invalid files, removed keys, new routes, restart-only settings
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_file_is_rejected_and_the_old_config_keeps_serving() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let cfg = base_config(&redis, &a).key("k1", "T");
    let gw = Gateway::start(&cfg.yaml());
    let http = http();
    let url = gw.url("/x");
    let last_ok = gw.metric_or_zero(LAST_RELOAD);
    assert!(last_ok > 0.0);

    let syntax_error = cfg.yaml() + "  - { path_prefix: \"/broken\", upstream: echo\n";
    let unknown_upstream = cfg
        .clone()
        .no_routes()
        .route("{ path_prefix: \"/\", upstream: nowhere, auth: optional }")
        .yaml();
    let negative_limit = cfg
        .clone()
        .tier("T", "{ limit: -5, per: 1d, burst: 3 }")
        .yaml();
    let cases = [
        (syntax_error, "invalid YAML"),
        (unknown_upstream, "routes[0].upstream"),
        (negative_limit, "tiers.T.limit"),
    ];
    let mut expected_remaining = 2;
    for (yaml, field) in &cases {
        reload_rejected(&gw, yaml).await;
        // The rejection names the field path.
        log_line_with(&gw, &["config reload rejected", field]).await;
        assert_readyz(&gw);
        // The old limits keep working: same tier, same bucket.
        let r = get(&http, &url, Some("k1")).await;
        assert_eq!(
            (r.status, r.quota(), r.remaining()),
            (200, 3, expected_remaining),
            "after a rejected {field}: {r:?}"
        );
        expected_remaining = expected_remaining.saturating_sub(1);
    }
    let r = get(&http, &url, Some("k1")).await;
    assert_eq!((r.status, r.remaining()), (429, 0));
    assert_eq!(gw.metric_or_zero(RELOADS_ERR), 3.0);
    assert_eq!(gw.metric_or_zero(RELOADS_OK), 1.0);
    assert_eq!(gw.metric_or_zero(LAST_RELOAD), last_ok, "no success since");

    // A valid file is accepted again afterwards.
    gw.reload_ok(&cfg.yaml()).await;
    assert_eq!(get(&http, &url, Some("k1")).await.status, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_key_is_401_and_new_route_works_right_after_reload() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let b = Backend::start("b");
    let cfg = base_config(&redis, &a)
        .tier("T", "{ limit: 1, per: 1d, burst: 100 }")
        .key("k1", "T")
        .key("k2", "T");
    let gw = Gateway::start(&cfg.yaml());
    let http = http();
    assert_eq!(get(&http, &gw.url("/x"), Some("k2")).await.status, 200);
    let r = get(&http, &gw.url("/new/1"), Some("k1")).await;
    assert_eq!(
        echo_name(&r),
        "a",
        "before the reload /new is the catch-all's"
    );

    let next = cfg
        .without_key("k2")
        .upstream("fresh", &b.addr())
        .route("{ path_prefix: \"/new\", upstream: fresh, auth: required }");
    gw.reload_ok(&next.yaml()).await;

    let r = get(&http, &gw.url("/x"), Some("k2")).await;
    assert_eq!(r.status, 401, "removed key: {r:?}");
    assert!(
        r.header("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer")),
        "{r:?}"
    );
    let r = get(&http, &gw.url("/x"), Some("k1")).await;
    assert_eq!((r.status, r.remaining()), (200, 98), "k1's bucket is kept");
    let r = get(&http, &gw.url("/new/2"), Some("k1")).await;
    assert_eq!(echo_name(&r), "b", "the new route goes to the new upstream");
    assert_eq!(r.remaining(), 97);
    let r = get(&http, &gw.url("/new/3"), None).await;
    assert_eq!(r.status, 401, "the new route requires identity: {r:?}");
    assert_eq!(b.stats().requests, 1);
}

fn echo_name(r: &Reply) -> String {
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.body).expect("echo JSON");
    v["name"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_and_threads_changes_need_restart_and_the_old_listener_keeps_serving() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let cfg = base_config(&redis, &a).key("k1", "T");
    let gw = Gateway::start(&cfg.yaml());
    let http = http();

    let elsewhere = free_addr();
    let next = cfg
        .clone()
        .listen(&[&yaml_str(&elsewhere)])
        .server("{ threads: 3, grace_period_s: 1 }")
        // The rest of the file still applies.
        .route("{ path_prefix: \"/only-new\", upstream: echo, auth: required }");
    gw.reload_ok(&next.yaml()).await;

    let line = log_line_with(&gw, &["needs restart"]).await;
    assert!(
        line.contains("listen") && line.contains("server"),
        "names the settings: {line}"
    );
    let r = get(&http, &gw.url("/x"), Some("k1")).await;
    assert_eq!(
        (r.status, r.remaining()),
        (200, 2),
        "the old listener serves"
    );
    let r = get(&http, &gw.url("/only-new"), None).await;
    assert_eq!(r.status, 401, "the route change applied: {r:?}");
    assert!(
        std::net::TcpStream::connect(&elsewhere).is_err(),
        "nothing listens on the new address before a restart"
    );
}

// ---------------------------------------------------------------------------------------------
// Case C09
// ---------------------------------------------------------------------------------------------

/// C09: reload never hands out a fresh burst. Edge burst 5 and tier `T` burst 5, both ~no
/// refill. "One address" is 127.0.0.2 sending anonymously (route `auth: optional`, no
/// `anonymous` tier: edge only); `k1`'s requests come from 127.0.0.3 and up, one address each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c09_reload_never_hands_out_a_fresh_burst() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let cfg = base_config(&redis, &a)
        .edge("{ limit: 1, per: 1d, burst: 5 }")
        .tier("T", "{ limit: 1, per: 1d, burst: 5 }")
        .key("k1", "T");
    let gw = Gateway::start(&cfg.yaml());
    let url = gw.url("/c09");
    let first = http_from("127.0.0.2");
    let edge_429 = |r: &Reply, step: &str| {
        assert_eq!(r.status, 429, "{step}: {r:?}");
        assert_eq!(r.violated(), serde_json::json!(["edge"]), "{step}: {r:?}");
    };

    // 1. One address sends 6 → 5 × 200, 1 × 429.
    for _ in 0..5 {
        assert_eq!(get(&first, &url, None).await.status, 200);
    }
    edge_429(&get(&first, &url, None).await, "step 1");

    // 2. SIGHUP with the identical file; that address → 429.
    gw.reload_ok(&cfg.yaml()).await;
    edge_429(&get(&first, &url, None).await, "step 2");

    // 3. k1 from five other addresses, one each → 5 × 200. SIGHUP. k1 from a new address →
    //    429 with remaining 0 (the tenant's, not the edge's).
    for (i, expected) in (3..8).zip([4, 3, 2, 1, 0]) {
        let r = get(&http_from(&format!("127.0.0.{i}")), &url, Some("k1")).await;
        assert_eq!((r.status, r.remaining()), (200, expected), "{r:?}");
    }
    gw.reload_ok(&cfg.yaml()).await;
    let r = get(&http_from("127.0.0.8"), &url, Some("k1")).await;
    assert_eq!((r.status, r.remaining(), r.quota()), (429, 0, 5), "{r:?}");
    assert_eq!(r.violated(), serde_json::json!(["T"]), "the tenant's 429");

    // 4. SIGHUP with an unrelated change (a new route); the first address → 429.
    let with_route = cfg
        .clone()
        .route("{ path_prefix: \"/extra\", upstream: echo, auth: none }");
    gw.reload_ok(&with_route.yaml()).await;
    edge_429(&get(&first, &url, None).await, "step 4");

    // 5. 20 SIGHUPs within 2 s interleaved with 40 requests from the first address →
    //    0 × 200, 0 × 5xx. (Signals sent this fast may coalesce into fewer reloads.)
    let before = gw.metric_or_zero(RELOADS_OK);
    for i in 0..20 {
        let yaml = if i % 2 == 0 {
            cfg.yaml()
        } else {
            with_route.yaml()
        };
        gw.reload(&yaml);
        for _ in 0..2 {
            edge_429(&get(&first, &url, None).await, "step 5");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = reloads_settled(&gw).await;
    assert!(after > before, "the SIGHUPs reloaded");
    assert_eq!(gw.metric_or_zero(RELOADS_ERR), 0.0);

    // 6. SIGHUP with invalid YAML → the old config still serves: the first address 429, a new
    //    address 200; an error is logged and counted.
    reload_rejected(&gw, "listen: [\"{listen}\"\nroutes: {{{\n").await;
    log_line_with(&gw, &["config reload rejected"]).await;
    edge_429(&get(&first, &url, None).await, "step 6");
    assert_eq!(get(&http_from("127.0.0.9"), &url, None).await.status, 200);
    let r = get(&http_from("127.0.0.10"), &url, Some("k1")).await;
    assert_eq!((r.status, r.remaining()), (429, 0), "{r:?}");

    // 7. Raise the edge burst 5 → 10 and SIGHUP: the first address is still 429 right after
    //    (its bucket keeps its level); a new address gets the new burst of 10.
    let wider = cfg.clone().edge("{ limit: 1, per: 1d, burst: 10 }");
    gw.reload_ok(&wider.yaml()).await;
    edge_429(&get(&first, &url, None).await, "step 7");
    let fresh = http_from("127.0.0.11");
    for _ in 0..10 {
        assert_eq!(get(&fresh, &url, None).await.status, 200);
    }
    edge_429(&get(&fresh, &url, None).await, "step 7, new address");

    // 5 (step 1) + 5 (k1) + 1 (step 6) + 10 (step 7) reached the backend.
    assert_eq!(a.stats().requests, 21);
    // Edge rejections come before routing (route "none"); the tenant's after it. Counters are
    // written in the logging phase, just after the answer went out.
    let edge = [("route", "none"), ("status_class", "4xx")];
    let tenant = [("route", "routes[0]"), ("status_class", "4xx")];
    let counted = eventually(Duration::from_secs(10), || {
        let m = gw.metrics();
        metric(&m, REQUESTS, &edge) == Some((1 + 1 + 1 + 40 + 1 + 2) as f64)
            && metric(&m, REQUESTS, &tenant) == Some(2.0)
    })
    .await;
    assert!(counted, "every 429 counted: {}", gw.metrics());
    let m = gw.metrics();
    assert!(!m.contains("status_class=\"5xx\""), "no 5xx: {m}");
}

// ---------------------------------------------------------------------------------------------
// Observability
// ---------------------------------------------------------------------------------------------

const JWT_SECRET: &str = "reload-test-secret-0123456789abcdef0123456789";

fn jwt_for(tenant: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({ "tenant": tenant, "tier": "T", "exp": exp }),
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()).expect("HMAC key"),
    )
    .expect("sign JWT")
}

/// The `tollgate::access` events of a JSON log, as their field objects.
fn access_events(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "tollgate::access")
        .map(|v| {
            if v["fields"].is_object() {
                v["fields"].clone()
            } else {
                v
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_access_log_follow_the_traffic() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let cfg = base_config(&redis, &a)
        .jwt(
            "{ tenant_claim: \"tenant\", tier_claim: \"tier\", keys: [ { algorithm: HS256, secret_env: \"TG_TEST_JWT\" } ] }",
        )
        .section("observability", "{ log_format: json, tenant_metrics: 2 }")
    .edge("{ limit: 1, per: 1d, burst: 1000 }")
    .tier("T", "{ limit: 1, per: 1d, burst: 10 }")
    .key("t1", "T")
    .key("t3", "T");
    let gw = Gateway::start_with_env(&cfg.yaml(), &[("TG_TEST_JWT", JWT_SECRET)]);
    let http = http();
    let url = gw.url("/obs");
    let token = jwt_for("t2");

    // t1 (API key): 10 admitted, then 1 limited.
    for i in 0..11 {
        let r = http
            .get(&url)
            .header("x-api-key", key("t1"))
            .header("x-request-id", format!("obs-t1-{i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), if i < 10 { 200 } else { 429 });
    }
    // t2 (JWT): 2 admitted. t3 (API key): 1 admitted, beyond the 2 tenants with own series.
    for i in 0..2 {
        let r = http
            .get(&url)
            .bearer_auth(&token)
            .header("x-request-id", format!("obs-t2-{i}"))
            .send()
            .await
            .unwrap();
        let st = r.status();
        assert_eq!(st, 200, "{}", r.text().await.unwrap());
    }
    assert_eq!(get(&http, &url, Some("t3")).await.status, 200);
    // An unknown key: 401 at the identity layer.
    let r = http
        .get(&url)
        .header("x-api-key", "not-a-configured-key")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Request counters and access log lines are written in the logging phase, just after the
    // client got its answer: wait for the last one.
    fn route_0(class: &str) -> [(&str, &str); 2] {
        [("route", "routes[0]"), ("status_class", class)]
    }
    let logged = eventually(Duration::from_secs(10), || {
        metric_or_zero(&gw, REQUESTS, &route_0("4xx")) == 2.0
    })
    .await;
    assert!(logged, "{}", gw.metrics());
    let m = gw.metrics();
    let decisions = |layer: &str, outcome: &str, tier: &str| {
        let labels = [("layer", layer), ("outcome", outcome), ("tier", tier)];
        metric(&m, "tollgate_decisions_total", &labels)
    };
    assert_eq!(decisions("edge", "admitted", "-"), Some(15.0), "{m}");
    assert_eq!(decisions("identity", "admitted", "T"), Some(14.0), "{m}");
    assert_eq!(
        decisions("identity", "unauthenticated", "-"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(decisions("tenant", "admitted", "T"), Some(13.0), "{m}");
    assert_eq!(decisions("tenant", "limited", "T"), Some(1.0), "{m}");
    assert_eq!(metric(&m, REQUESTS, &route_0("2xx")), Some(13.0));
    assert_eq!(metric(&m, REQUESTS, &route_0("4xx")), Some(2.0));
    // Burst 10: admissions leaving 1 or 0 tokens (< 20 %) are near the limit: t1's last two.
    assert_eq!(
        metric(&m, "tollgate_tenant_near_limit_total", &[("tier", "T")]),
        Some(2.0)
    );
    // Opt-in per-tenant series, bounded to 2 tenants + "other".
    let tenant = |outcome: &str, t: &str| {
        let labels = [("tenant", t), ("outcome", outcome)];
        metric(&m, "tollgate_tenant_decisions_total", &labels)
    };
    assert_eq!(tenant("admitted", "t1"), Some(10.0), "{m}");
    assert_eq!(tenant("limited", "t1"), Some(1.0), "{m}");
    assert_eq!(tenant("admitted", "t2"), Some(2.0), "{m}");
    assert_eq!(tenant("admitted", "other"), Some(1.0), "{m}");
    assert!(!m.contains("tenant=\"t3\""), "bounded: {m}");

    // Reload counters and the success timestamp.
    assert_eq!(
        metric_value(&m, RELOADS_OK),
        Some(1.0),
        "the startup load counts"
    );
    let t0 = metric(&m, LAST_RELOAD, &[]).expect("last reload timestamp");
    assert!(t0 > 0.0);
    let next_second = eventually(Duration::from_secs(5), || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            >= t0 + 1.0
    })
    .await;
    assert!(next_second);
    gw.reload_ok(&cfg.yaml()).await;
    let t1 = gw.metric(LAST_RELOAD).unwrap();
    assert!(t1 > t0, "timestamp moves on success: {t0} → {t1}");
    reload_rejected(&gw, "listen: [").await;
    assert_eq!(gw.metric(LAST_RELOAD), Some(t1), "not on failure");

    // Access log: one JSON event per request with the decision's context.
    let all_logged = eventually(Duration::from_secs(10), || {
        access_events(&gw.log()).len() == 15
    })
    .await;
    assert!(
        all_logged,
        "one access event per request: {}",
        gw.log_tail(20)
    );
    let log = gw.log();
    let events = access_events(&log);
    let by_id = |id: &str| {
        events
            .iter()
            .find(|e| e["request_id"] == id)
            .unwrap_or_else(|| panic!("no access event {id}"))
            .clone()
    };
    let e = by_id("obs-t1-0");
    assert_eq!(e["route"], "routes[0]", "{e}");
    assert_eq!(e["client"], "127.0.0.1", "{e}");
    assert_eq!(e["tenant"], "t1", "{e}");
    assert_eq!(e["tier"], "T", "{e}");
    assert_eq!(e["layer"], "upstream", "{e}");
    assert_eq!(e["decision"], "admitted", "{e}");
    assert_eq!(e["status"], 200, "{e}");
    let e = by_id("obs-t1-10");
    assert_eq!(
        (&e["layer"], &e["decision"], &e["status"]),
        (
            &serde_json::json!("tenant"),
            &serde_json::json!("limited"),
            &serde_json::json!(429)
        ),
        "{e}"
    );
    let e = by_id("obs-t2-1");
    assert_eq!(
        (&e["tenant"], &e["status"]),
        (&serde_json::json!("t2"), &serde_json::json!(200))
    );
    // Credentials never reach the log.
    let signature = token.rsplit('.').next().unwrap();
    for secret in [
        key("t1"),
        key("t3"),
        "not-a-configured-key".to_string(),
        token.clone(),
        signature.to_string(),
        JWT_SECRET.to_string(),
    ] {
        assert!(!log.contains(&secret), "the log contains {secret:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Zero-downtime binary upgrade
// ---------------------------------------------------------------------------------------------

fn admitted(r: &Reply) -> Result<(), String> {
    if r.status == 200 {
        Ok(())
    } else {
        Err("expected 200".into())
    }
}

/// Zero-downtime binary upgrade under continuous load: `tollgate run --upgrade` takes the
/// listening sockets over from the running process on SIGQUIT; the old one finishes its
/// requests and exits.
///
/// Pingora's cleanup aborts keep-alive connections parked waiting for their next request; the
/// proxy drains briefly before it (`DrainingProxy` in src/server.rs), so no request is lost when
/// the old process stops accepting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_upgrade_hands_over_without_failing_a_request() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let mut cfg = base_config(&redis, &a)
        // Relative to the gateway's working directory (its private temp dir): unique per test.
        .server(
            "{ threads: 2, grace_period_s: 1, graceful_shutdown_timeout_s: 1, \
             upgrade_sock: \"upgrade.sock\" }",
        )
        .tier("T", "{ limit: 1, per: 1d, burst: 1000000 }");
    for i in 0..4 {
        cfg = cfg.key(&format!("up-{i}"), "T");
    }
    let mut old = Gateway::start(&cfg.yaml());

    let mut load = Load::new();
    for i in 0..4 {
        // Two tasks open a connection per request, two reuse keep-alive connections.
        let http = if i % 2 == 0 {
            http_no_keepalive()
        } else {
            http()
        };
        load.spawn(http, old.url("/up"), Some(format!("up-{i}")), admitted);
    }
    load.overlap(4).await;

    let mut new = old.start_upgrade();
    let sock = old.dir().join("upgrade.sock");
    let waiting = eventually(Duration::from_secs(10), || sock.exists()).await;
    assert!(
        waiting,
        "the new process never waited for the sockets; log:\n{}",
        new.log_tail(20)
    );
    old.signal("QUIT");
    let took_over = eventually(Duration::from_secs(15), || {
        new.log().contains("admin listener ready")
    })
    .await;
    assert!(
        took_over,
        "the new process did not start serving; new log:\n{}\nold log:\n{}",
        new.log_tail(20),
        old.log_tail(20)
    );
    let status = old.wait_exit(Duration::from_secs(30));
    assert!(
        status.is_some(),
        "the old process did not exit; log:\n{}",
        old.log_tail(20)
    );
    assert!(new.is_running(), "{}", new.log_tail(20));
    // Keep the load going on the new process alone for a moment.
    let served_before = new.log().matches("tollgate::access").count();
    load.overlap(4).await;
    let (sent, failures) = load.finish().await;

    assert!(
        failures.is_empty(),
        "{} of {sent} requests failed across the upgrade, e.g. {:#?}",
        failures.len(),
        failures.iter().take(5).map(|f| &f.what).collect::<Vec<_>>()
    );
    let served_after = eventually(Duration::from_secs(10), || {
        new.log().matches("tollgate::access").count() > served_before
    })
    .await;
    assert!(
        served_after,
        "the new process serves after the old one exited"
    );
    // The new process is a complete gateway: same limits, same Redis buckets, reloadable.
    let r = get(&http(), &new.url("/after"), Some("up-0")).await;
    assert_eq!((r.status, r.quota()), (200, 1000000));
    assert!(r.remaining() < 999_999, "the bucket carried on in Redis");
    assert_eq!(new.metric_or_zero(RELOADS_OK), 1.0);
    new.signal("HUP");
    assert!(
        eventually(Duration::from_secs(10), || new.metric_or_zero(RELOADS_OK)
            == 2.0)
        .await,
        "{}",
        new.log_tail(10)
    );
}

/// A config's warnings are logged once per content: a reload of the unchanged file repeats
/// none, a reload of changed content logs them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_warnings_are_logged_once_per_content() {
    let backend = Backend::start("w");
    let yaml = GatewayConfig::echo(&backend.addr(), "none")
        .edge("{ limit: 100, per: 1s, trusted_proxies: [\"10.0.0.0/8\"] }")
        .yaml();
    let gw = Gateway::start(&yaml);
    let warned = |gw: &Gateway| gw.log().matches("config warning").count();
    assert!(
        eventually(Duration::from_secs(10), || warned(&gw) == 1).await,
        "{}",
        gw.log_tail(20)
    );
    gw.reload_ok(&yaml).await;
    gw.reload_ok(&yaml).await;
    // Log lines are written by a background thread: let the reload lines land first.
    assert!(
        eventually(Duration::from_secs(10), || gw
            .log()
            .matches("config reloaded")
            .count()
            == 2)
        .await
    );
    assert_eq!(warned(&gw), 1, "{}", gw.log_tail(20));
    gw.reload_ok(&format!("{yaml}# changed\n")).await;
    assert!(
        eventually(Duration::from_secs(10), || warned(&gw) == 2).await,
        "{}",
        gw.log_tail(20)
    );
}
