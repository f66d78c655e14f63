//! Tenant quota stage, black-box (docs/DESIGN.md section 2): one token bucket per tenant in Redis,
//! decided by one Lua script, with truthful `RateLimit` / `Retry-After` headers.
//!
//! Every test owns a `redis-server`, a `tollgate-echo` backend and one or more gateways. Tiers
//! with ~no refill (`limit: 1, per: 1d`) keep counts exact on a noisy machine; where time matters
//! the margins are wide (at least 0.5 s around every boundary). Unless a test says otherwise the
//! Redis timeout is generous and the failure policy is `closed`, so a Redis hiccup shows up as a
//! 503 (a visible failure) instead of a silently different count from a local fallback bucket.

mod common;

use common::*;
use reqwest::header::HeaderMap;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

/// One API key of the config: the key itself, its tenant and optional explicit tier.
#[derive(Clone, Debug)]
struct Key {
    key: String,
    tenant: String,
    tier: Option<String>,
}

/// Key `key-<tenant>` of `tenant` in `tier`.
fn key(tenant: &str, tier: &str) -> Key {
    Key {
        key: format!("key-{tenant}-0123456789"),
        tenant: tenant.to_string(),
        tier: Some(tier.to_string()),
    }
}

/// Key of `tenant` without an explicit tier (resolved through `tenants:` or `default_tier`).
fn untiered_key(tenant: &str) -> Key {
    Key {
        tier: None,
        ..key(tenant, "-")
    }
}

/// `n` fresh tenants `<prefix>0..` in `tier`.
fn keys(prefix: &str, n: usize, tier: &str) -> Vec<Key> {
    (0..n).map(|i| key(&format!("{prefix}{i}"), tier)).collect()
}

/// Upstream `echo` → `backend` behind one catch-all `auth: required` route, [`STRICT_REDIS`],
/// the `tiers:` lines `tiers` (`"  T: { .. }\n"`) and `keys`.
fn conf(redis: &RedisServer, backend: &Backend, tiers: &str, keys: Vec<Key>) -> GatewayConfig {
    let mut c = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier_lines(tiers);
    for k in &keys {
        c = c.api_key_with(&k.key, &k.tenant, k.tier.as_deref());
    }
    c
}

/// One catch-all route on which identity is optional (anonymous requests allowed).
const OPTIONAL_AUTH_ROUTE: &str = "{ path_prefix: \"/\", upstream: echo, auth: optional }";

/// The processes of one test.
struct Rig {
    redis: RedisServer,
    backend: Backend,
    gw: Gateway,
    http: reqwest::Client,
}

impl Rig {
    /// Starts Redis, the echo backend and a gateway whose config `conf` builds.
    fn start(conf: impl FnOnce(&RedisServer, &Backend) -> GatewayConfig) -> Self {
        let redis = RedisServer::start();
        let backend = Backend::start("echo");
        let yaml = conf(&redis, &backend).yaml();
        let gw = Gateway::start(&yaml);
        Rig {
            redis,
            backend,
            gw,
            http: client(),
        }
    }

    /// `start` with the default [`conf`]: these tiers and API keys, nothing else.
    fn with_tiers(tiers: &str, keys: Vec<Key>) -> Self {
        Rig::start(|r, b| conf(r, b, tiers, keys))
    }

    async fn get(&self, path: &str, key: Option<&Key>) -> Reply {
        send(&self.http, &self.gw.url(path), key.map(|k| k.key.as_str())).await
    }

    /// Statuses and `RateLimit` remaining values of `n` sequential requests.
    async fn sequence(&self, n: usize, k: &Key) -> Vec<Reply> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.get("/", Some(k)).await);
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

/// A structured field like `"T";r=4;t=86400`: the quoted item and its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Field {
    name: String,
    params: BTreeMap<String, String>,
}

impl Field {
    fn parse(text: &str) -> Field {
        let mut parts = text.split(';');
        let first = parts.next().unwrap_or_default().trim();
        assert!(
            first.len() >= 2 && first.starts_with('"') && first.ends_with('"'),
            "structured field item is not a quoted string: {text:?}"
        );
        let params = parts
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (k.trim().to_string(), v.trim().to_string())
            })
            .collect();
        Field {
            name: first[1..first.len() - 1].to_string(),
            params,
        }
    }

    fn num(&self, param: &str) -> u64 {
        self.params
            .get(param)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("parameter {param} missing or not an integer: {self:?}"))
    }
}

/// Everything a test looks at in one answer.
#[derive(Debug, Clone)]
struct Reply {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("visible ASCII header").to_string())
    }

    fn count(&self, name: &str) -> usize {
        self.headers.get_all(name).iter().count()
    }

    fn has(&self, name: &str) -> bool {
        self.count(name) > 0
    }

    /// Parsed `RateLimit` (panics when absent).
    fn ratelimit(&self) -> Field {
        Field::parse(
            &self
                .header("ratelimit")
                .unwrap_or_else(|| panic!("no RateLimit header: {self:?}")),
        )
    }

    /// Parsed `RateLimit-Policy` (panics when absent).
    fn policy(&self) -> Field {
        Field::parse(
            &self
                .header("ratelimit-policy")
                .unwrap_or_else(|| panic!("no RateLimit-Policy header: {self:?}")),
        )
    }

    /// `r` of `RateLimit`.
    fn remaining(&self) -> u64 {
        self.ratelimit().num("r")
    }

    /// `Retry-After` as an integer; panics when it is present but not one.
    fn retry_after(&self) -> Option<u64> {
        self.header("retry-after").map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("Retry-After {v:?} is not delta-seconds"))
        })
    }

    /// Whether the decision came from the local fallback bucket.
    fn degraded(&self) -> bool {
        self.has("tollgate-degraded")
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }

    /// Asserts a quota-exceeded problem+json with `status` naming `tier`; returns the body.
    fn assert_quota_problem(&self, status: u16, tier: &str) -> Value {
        assert_eq!(self.status, status, "{self:?}");
        let ct = self.header("content-type").unwrap_or_default();
        assert!(ct.starts_with("application/problem+json"), "{self:?}");
        let p = problem(&self.body);
        assert_eq!(p["type"], QUOTA_EXCEEDED, "{p}");
        assert_eq!(p["status"].as_u64(), Some(status as u64), "{p}");
        assert_eq!(p["violated-policies"], serde_json::json!([tier]), "{p}");
        assert!(
            p["detail"].as_str().is_some_and(|d| d.contains(tier)),
            "detail names the tier: {p}"
        );
        p
    }
}

async fn send(http: &reqwest::Client, url: &str, api_key: Option<&str>) -> Reply {
    let mut req = http.get(url);
    if let Some(k) = api_key {
        req = req.header("x-api-key", k);
    }
    let resp = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.text().await.unwrap_or_default();
    Reply {
        status,
        headers,
        body,
    }
}

/// Fires `n` requests at `urls[i % urls.len()]` (round robin) all at once (released together by
/// a barrier) and returns the replies in completion order.
async fn burst(http: &reqwest::Client, urls: &[String], api_key: &str, n: usize) -> Vec<Reply> {
    let gate = Arc::new(tokio::sync::Barrier::new(n));
    let mut set = JoinSet::new();
    for i in 0..n {
        let http = http.clone();
        let url = urls[i % urls.len()].clone();
        let k = api_key.to_string();
        let gate = gate.clone();
        set.spawn(async move {
            gate.wait().await;
            send(&http, &url, Some(&k)).await
        });
    }
    let mut out = Vec::with_capacity(n);
    while let Some(r) = set.join_next().await {
        out.push(r.expect("request task"));
    }
    out
}

fn statuses(replies: &[Reply]) -> Vec<u16> {
    replies.iter().map(|r| r.status).collect()
}

fn count_status(replies: &[Reply], status: u16) -> usize {
    replies.iter().filter(|r| r.status == status).count()
}

/// Asserts no reply is anything but 200 or 429.
fn assert_only_200_429(replies: &[Reply], what: &str) {
    for r in replies {
        assert!(
            r.status == 200 || r.status == 429,
            "{what}: unexpected status {}: {r:?}",
            r.status
        );
    }
}

/// Asserts `got` is within `[want - slack, want]`: a `t` / `Retry-After` value counting down
/// from `want` seconds, allowing `slack` seconds of scheduling delay on a noisy machine.
fn assert_countdown(got: u64, want: u64, slack: u64, what: &str) {
    assert!(
        got <= want && got + slack >= want,
        "{what}: {got} is not within [{}, {want}]",
        want.saturating_sub(slack)
    );
}

const DAY_S: u64 = 86_400;

// ---------------------------------------------------------------------------------------------
// Handed cases
// ---------------------------------------------------------------------------------------------

/// C01: 50 concurrent requests on one burst-5 bucket → exactly 5 admitted, with remaining 4..0
/// each once, one Retry-After for all 45 rejections, and 5 requests at the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c01_concurrent_burst_admits_exactly_the_burst() {
    let k1 = key("c01", "T");
    let rig = Rig::with_tiers("  T: { limit: 1, per: 1d, burst: 5 }\n", vec![k1.clone()]);
    let replies = burst(&rig.http, &[rig.gw.url("/")], &k1.key, 50).await;
    assert_eq!(count_status(&replies, 200), 5, "{:?}", statuses(&replies));
    assert_eq!(count_status(&replies, 429), 45, "{:?}", statuses(&replies));

    let mut remaining: Vec<u64> = replies
        .iter()
        .filter(|r| r.status == 200)
        .map(Reply::remaining)
        .collect();
    remaining.sort_unstable();
    assert_eq!(remaining, [0, 1, 2, 3, 4]);

    let retry: Vec<u64> = replies
        .iter()
        .filter(|r| r.status == 429)
        .map(|r| r.retry_after().expect("429 carries Retry-After"))
        .collect();
    assert!(
        retry.iter().all(|&s| s == retry[0]),
        "every 429 has the same Retry-After: {retry:?}"
    );
    assert_countdown(retry[0], DAY_S, 1, "Retry-After of one token at 1/day");
    for r in replies.iter().filter(|r| r.status == 429) {
        assert_eq!(r.remaining(), 0);
        r.assert_quota_problem(429, "T");
    }
    assert_eq!(rig.backend.stats().requests, 5);
}

/// C01, repeated: 20 fresh tenants, 50 concurrent requests each → 5 admitted every time, never 6.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c01_twenty_fresh_tenants_never_admit_six() {
    let tenants = keys("fresh", 20, "T");
    let rig = Rig::with_tiers("  T: { limit: 1, per: 1d, burst: 5 }\n", tenants.clone());
    let url = [rig.gw.url("/")];
    for k in &tenants {
        let replies = burst(&rig.http, &url, &k.key, 50).await;
        assert_only_200_429(&replies, &k.tenant);
        assert_eq!(
            count_status(&replies, 200),
            5,
            "tenant {}: {:?}",
            k.tenant,
            statuses(&replies)
        );
    }
    assert_eq!(rig.backend.stats().requests, 5 * 20);
}

/// C02: burst 2, refill 0.1/s. Retry-After is the computed wait (6 s, then 3 s), not the 10 s
/// refill interval; the request after the wait is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c02_retry_after_is_computed_not_the_window() {
    let k1 = key("c02", "T");
    let rig = Rig::with_tiers("  T: { limit: 6, per: 1m, burst: 2 }\n", vec![k1.clone()]);
    // t = 0 is taken just before the first request, so Redis decided it (the refill's start)
    // no earlier than t0. Each later request is sent at t0 + x and decided a little later; the
    // expected Retry-After values hold while that decision lands within ±0.5 s of t0 + x.
    let t0 = Instant::now();
    let first = rig.get("/", Some(&k1)).await;
    let second = rig.get("/", Some(&k1)).await;
    assert_eq!((first.status, first.remaining()), (200, 1));
    assert_eq!((second.status, second.remaining()), (200, 0));

    tokio::time::sleep_until((t0 + Duration::from_millis(4_500)).into()).await;
    let r = rig.get("/", Some(&k1)).await;
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.retry_after(), Some(6), "{r:?}");
    assert_eq!(r.remaining(), 0);

    tokio::time::sleep_until((t0 + Duration::from_millis(7_500)).into()).await;
    let r = rig.get("/", Some(&k1)).await;
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.retry_after(), Some(3), "{r:?}");

    tokio::time::sleep_until((t0 + Duration::from_millis(10_500)).into()).await;
    let r = rig.get("/", Some(&k1)).await;
    assert_eq!((r.status, r.remaining()), (200, 0), "{r:?}");
    assert_eq!(rig.backend.stats().requests, 3);
}

/// C03: burst 1, refill 0.4/s. Retry-After rounds 2.3 s up to 3, and waiting exactly the
/// Retry-After is always enough.
///
/// The case asks for 20 random rounds; this test runs 6 (each takes up to ~5.5 s of sleeping)
/// to keep the file's runtime bounded. The random delays are drawn fresh on every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c03_retry_after_rounds_up_and_waiting_it_out_works() {
    const ROUNDS: usize = 6;
    let k1 = key("c03", "T");
    let rig = Rig::with_tiers("  T: { limit: 24, per: 1m, burst: 1 }\n", vec![k1.clone()]);
    // t0 before the first request: Redis empties the bucket no earlier than t0, so the request
    // sent at t0 + 0.2 s sees at most the 0.2 s refill plus its own latency (< 0.5 s keeps
    // the needed wait above 2 s).
    let t0 = Instant::now();
    let r = rig.get("/", Some(&k1)).await;
    assert_eq!((r.status, r.remaining()), (200, 0));
    tokio::time::sleep_until((t0 + Duration::from_millis(200)).into()).await;
    let r = rig.get("/", Some(&k1)).await;
    assert_eq!(r.status, 429, "{r:?}");
    // 2.3 s are needed (up to ~2.2 s on a slow machine): 3, never 2.
    assert_eq!(r.retry_after(), Some(3), "{r:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = rig.get("/", Some(&k1)).await;
    assert_eq!(r.status, 200, "waited exactly Retry-After: {r:?}");

    let mut admitted_after_wait = 1;
    let mut rejections = 0;
    for round in 0..ROUNDS {
        let first = rig.get("/", Some(&k1)).await;
        let pause = rand::random_range(0..=2_400u64);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let second = rig.get("/", Some(&k1)).await;
        let mut last = None;
        for r in [&first, &second] {
            assert!(r.status == 200 || r.status == 429, "round {round}: {r:?}");
            if r.status == 429 {
                rejections += 1;
                let s = r.retry_after().expect("429 carries Retry-After");
                assert!((1..=3).contains(&s), "round {round}: Retry-After {s}");
                last = Some(s);
            } else {
                assert!(!r.has("retry-after"), "admitted with Retry-After: {r:?}");
            }
        }
        if second.status == 429 {
            let s = last.unwrap();
            tokio::time::sleep(Duration::from_secs(s)).await;
            let r = rig.get("/", Some(&k1)).await;
            assert_eq!(
                r.status, 200,
                "round {round}: waited {s} s after a {pause} ms pause: {r:?}"
            );
            admitted_after_wait += 1;
        }
    }
    // Right after an admission the bucket is empty, so every round's first request is a 429:
    // the loop above really exercised the Retry-After path.
    assert!(rejections >= ROUNDS, "only {rejections} rejections");
    assert!(admitted_after_wait > ROUNDS / 2, "{admitted_after_wait}");
}

/// C04: burst 3, ~no refill, 5 sequential requests: 200 ×3 then 429 ×2, remaining 2,1,0,0,0,
/// quota 3 on all five; rejections change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c04_remaining_never_goes_negative() {
    let k1 = key("c04", "T");
    let rig = Rig::with_tiers("  T: { limit: 1, per: 1d, burst: 3 }\n", vec![k1.clone()]);
    let replies = rig.sequence(5, &k1).await;
    assert_eq!(statuses(&replies), [200, 200, 200, 429, 429]);
    let remaining: Vec<u64> = replies.iter().map(Reply::remaining).collect();
    assert_eq!(remaining, [2, 1, 0, 0, 0]);
    for r in &replies {
        assert_eq!(r.policy().num("q"), 3, "{r:?}");
        assert_eq!(r.policy().name, "T");
    }
    // The rejections did not touch the stored level: still empty, not negative.
    let state = rig.redis.hgetall("tollgate:{c04}:tb");
    let level = state
        .iter()
        .find(|(f, _)| f == "l")
        .map(|(_, v)| v.parse::<i64>().unwrap())
        .expect("level field");
    assert!(
        (0..86_400_000).contains(&level),
        "stored level {level} is less than one token and not negative"
    );
    assert_eq!(rig.backend.stats().requests, 3);
}

// ---------------------------------------------------------------------------------------------
// Redis faults that must not turn into errors (item 6)
// ---------------------------------------------------------------------------------------------

/// `SCRIPT FLUSH` while traffic flows: every request still gets a Redis decision (the policy is
/// `closed`, so a failed call would be a 503), and exactly one token per admitted request is
/// spent (the NOSCRIPT retry never runs a decision twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_mid_run_causes_no_error_responses() {
    let k1 = key("flush", "T");
    let rig = Rig::with_tiers("  T: { limit: 1, per: 1d, burst: 100 }\n", vec![k1.clone()]);
    let warm = rig.sequence(5, &k1).await;
    assert_eq!(
        warm.iter().map(Reply::remaining).collect::<Vec<_>>(),
        [99, 98, 97, 96, 95]
    );
    rig.redis.reset_stats();

    // Four workers send 60 requests in total while the script cache is flushed 5 times.
    let url = rig.gw.url("/");
    let mut set = JoinSet::new();
    for _ in 0..4 {
        let (http, url, k) = (rig.http.clone(), url.clone(), k1.key.clone());
        set.spawn(async move {
            let mut out = Vec::new();
            for _ in 0..15 {
                out.push(send(&http, &url, Some(&k)).await);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            out
        });
    }
    for _ in 0..5 {
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query::<()>(&mut rig.redis.conn())
            .expect("SCRIPT FLUSH");
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let mut replies = Vec::new();
    while let Some(r) = set.join_next().await {
        replies.extend(r.expect("worker"));
    }
    // Once more after the last flush, sequentially.
    replies.extend(rig.sequence(5, &k1).await);

    assert_eq!(statuses(&replies), vec![200; 65], "{replies:?}");
    assert!(replies.iter().all(|r| !r.degraded()));
    let mut remaining: Vec<u64> = replies.iter().map(Reply::remaining).collect();
    remaining.sort_unstable();
    assert_eq!(
        remaining,
        (30..=94).collect::<Vec<u64>>(),
        "each admission spent exactly one token"
    );
    assert!(
        rig.redis.command_calls("script|load") >= 1,
        "the script was reloaded after SCRIPT FLUSH"
    );
    assert_eq!(rig.backend.stats().requests, 70);
}

/// A Redis restart (same port, no persistence) while traffic flows: only 200/429 answers, the
/// gateway reconnects on its own, and once Redis decides again the bucket is the fresh one the
/// empty Redis implies (a restart without persistence loses state: full buckets).
///
/// Policy `local` with `fleet_size: 1`: requests that meet the restart (connection dropped,
/// reconnect) are decided by the local bucket (marked `Tollgate-Degraded`), which is a 200 or a
/// 429, never an error. The measured requests are those after the first answer decided by Redis
/// again; they must show remaining 9, 8, 7 (burst 10). The breaker is set not to open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restart_mid_run_causes_no_error_responses() {
    let a = key("restart_a", "T");
    let b = key("restart_b", "B");
    let mut rig = Rig::start(|r, be| {
        conf(
            r,
            be,
            "  T: { limit: 1, per: 1d, burst: 10 }\n  B: { limit: 100, per: 1s, burst: 100 }\n",
            vec![a.clone(), b.clone()],
        )
        .redis_opts(
            "timeout_ms: 1000, fleet_size: 1, on_failure: local, \
             circuit_breaker: { min_calls: 1000, window_s: 10 }",
        )
    });
    let before = rig.sequence(3, &a).await;
    assert_eq!(
        before
            .iter()
            .map(|r| (r.status, r.remaining(), r.degraded()))
            .collect::<Vec<_>>(),
        [(200, 9, false), (200, 8, false), (200, 7, false)]
    );

    // Background traffic of tenant b spans the restart.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let background = {
        let (http, url, k, stop) = (
            rig.http.clone(),
            rig.gw.url("/"),
            b.key.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut out = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                out.push(send(&http, &url, Some(&k)).await);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            out
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::task::block_in_place(|| rig.redis.restart());

    // Tenant a until Redis decides again (bounded), then the measured requests.
    let mut during = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let first_redis = loop {
        let r = rig.get("/", Some(&a)).await;
        assert!(
            r.status == 200 || r.status == 429,
            "during reconnect: {r:?}"
        );
        if !r.degraded() {
            break r;
        }
        during.push(r);
        assert!(
            Instant::now() < deadline,
            "no Redis decision within 10 s of the restart; {} degraded answers",
            during.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let after = rig.sequence(2, &a).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let background = background.await.expect("background traffic");

    assert_eq!((first_redis.status, first_redis.remaining()), (200, 9));
    assert_eq!(
        after
            .iter()
            .map(|r| (r.status, r.remaining(), r.degraded()))
            .collect::<Vec<_>>(),
        [(200, 8, false), (200, 7, false)]
    );
    assert!(
        background.len() > 10,
        "background sent {}",
        background.len()
    );
    assert_only_200_429(&background, "background traffic across the restart");
    assert_eq!(
        count_status(&background, 200),
        background.len(),
        "tenant b has plenty of quota"
    );
    eprintln!(
        "restart: {} degraded answers for a, {} of {} background answers degraded",
        during.len(),
        background.iter().filter(|r| r.degraded()).count(),
        background.len()
    );
    // Tenant b's bucket (100/s) is full again within milliseconds, so only a's key remains.
    assert_eq!(rig.redis.keys("*"), ["tollgate:{restart_a}:tb"]);
}

/// After a Redis restart (same port, no persistence), the first request is decided by Redis
/// again, even under `on_failure: closed` where a failed call would be a 503: the gateway's
/// stale connection must not cost a request. Three restarts in a row, each checked with the
/// fresh bucket's remaining values (burst 10 → 9, 8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restart_first_request_after_it_is_decided_by_redis() {
    let a = key("restart_closed", "T");
    let mut rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 10 }\n",
            vec![a.clone()],
        )
        .redis_opts(
            "timeout_ms: 1000, on_failure: closed, \
             circuit_breaker: { min_calls: 1000 }",
        )
    });
    let before = rig.sequence(3, &a).await;
    assert_eq!(
        before.iter().map(|r| r.remaining()).collect::<Vec<_>>(),
        [9, 8, 7]
    );
    for round in 0..3 {
        // restart() returns once the new server answers PING.
        tokio::task::block_in_place(|| rig.redis.restart());
        let after = rig.sequence(2, &a).await;
        assert_eq!(
            after
                .iter()
                .map(|r| (r.status, r.remaining(), r.degraded()))
                .collect::<Vec<_>>(),
            [(200, 9, false), (200, 8, false)],
            "round {round}: {after:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Cost and per-tenant overrides (item 8)
// ---------------------------------------------------------------------------------------------

/// `c` with the routes `/` (cost 1), `/heavy` (cost 3) and `/huge` (cost 6), all `auth: required`.
fn cost_routes(c: GatewayConfig) -> GatewayConfig {
    c.no_routes()
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .route("{ path_prefix: \"/heavy\", upstream: echo, auth: required, cost: 3 }")
        .route("{ path_prefix: \"/huge\", upstream: echo, auth: required, cost: 6 }")
}

/// A route's `cost` is what one request takes from the bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_cost_is_taken_from_the_bucket() {
    let k1 = key("cost", "T");
    let rig = Rig::start(|r, b| {
        // `Big` keeps the /huge route (cost 6) valid for `check`; only tier T is used here.
        cost_routes(conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 5 }\n  Big: { limit: 1, per: 1d, burst: 10 }\n",
            vec![k1.clone()],
        ))
    });
    let r = rig.get("/heavy/x", Some(&k1)).await;
    assert_eq!((r.status, r.remaining()), (200, 2), "{r:?}");
    // 2 tokens left, the heavy route needs 3: rejected, with a truthful Retry-After (~1 day).
    let r = rig.get("/heavy/x", Some(&k1)).await;
    let p = r.assert_quota_problem(429, "T");
    assert_eq!(r.remaining(), 2);
    assert_countdown(
        r.retry_after().unwrap(),
        DAY_S,
        2,
        "Retry-After for 1 token",
    );
    assert!(p["detail"].as_str().unwrap().contains("costs 3"), "{p}");
    // The cheap route still fits twice.
    let rest = rig.sequence(3, &k1).await;
    assert_eq!(statuses(&rest), [200, 200, 429]);
    assert_eq!(rest[0].remaining(), 1);
    assert_eq!(rest[1].remaining(), 0);
    assert_eq!(rig.backend.stats().requests, 3);
}

/// A request costing more than the tier's burst can never be admitted: rejected, nothing
/// consumed, the detail says so, and there is no Retry-After (waiting would not help).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_above_burst_is_rejected_without_retry_after_and_consumes_nothing() {
    let k1 = key("toobig", "T");
    let rig = Rig::start(|r, b| {
        // A second, larger tier keeps the config valid (`check` refuses a cost above every burst).
        cost_routes(conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 5 }\n  Big: { limit: 1, per: 1d, burst: 10 }\n",
            vec![k1.clone()],
        ))
    });
    for _ in 0..3 {
        let r = rig.get("/huge", Some(&k1)).await;
        let p = r.assert_quota_problem(429, "T");
        assert!(!r.has("retry-after"), "no Retry-After: {r:?}");
        let detail = p["detail"].as_str().unwrap();
        assert!(
            detail.contains("costs 6") && detail.contains("more than") && detail.contains('5'),
            "detail explains the cost exceeds the burst: {detail}"
        );
        assert_eq!(r.remaining(), 5, "{r:?}");
        assert_eq!(r.policy().num("q"), 5);
    }
    assert!(rig.redis.keys("*").is_empty(), "{:?}", rig.redis.keys("*"));
    // The whole burst is still there.
    let r = rig.get("/", Some(&k1)).await;
    assert_eq!((r.status, r.remaining()), (200, 4));
    assert_eq!(rig.backend.stats().requests, 1);
}

/// `tenants:` overrides change the tenant's bucket: a burst override, and a tier assignment for
/// a key without its own tier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_overrides_change_the_bucket() {
    let small = key("small", "T");
    let plain = key("plain", "T");
    let vip = untiered_key("vip");
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 5 }\n  P: { limit: 1, per: 1d, burst: 8 }\n",
            vec![small.clone(), plain.clone(), vip.clone()],
        )
        .default_tier("T")
        .tenant("small", "{ burst: 2 }")
        .tenant("vip", "{ tier: P, burst: 4 }")
    });
    let s = rig.sequence(3, &small).await;
    assert_eq!(statuses(&s), [200, 200, 429]);
    assert_eq!(
        s.iter().map(|r| r.remaining()).collect::<Vec<_>>(),
        [1, 0, 0]
    );
    for r in &s {
        assert_eq!(r.policy().name, "T");
        assert_eq!(r.policy().num("q"), 2, "{r:?}");
        assert_eq!(r.policy().num("w"), 2 * DAY_S, "{r:?}");
    }
    // Same tier, no override: the tier's burst.
    let p = rig.get("/", Some(&plain)).await;
    assert_eq!((p.status, p.remaining(), p.policy().num("q")), (200, 4, 5));
    // Tier from `tenants:` plus a burst override on it.
    let v = rig.sequence(5, &vip).await;
    assert_eq!(statuses(&v), [200, 200, 200, 200, 429]);
    assert_eq!(v[0].policy().name, "P");
    assert_eq!(v[0].policy().num("q"), 4);
    assert_eq!(v[0].remaining(), 3);
}

// ---------------------------------------------------------------------------------------------
// Headers and the rejection body (item 9)
// ---------------------------------------------------------------------------------------------

/// Default header mode (`ietf`): exact `RateLimit-Policy` / `RateLimit` values on admitted and
/// rejected answers, `Retry-After` only on rejections, no legacy fields, problem+json body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ietf_headers_on_admitted_and_rejected_responses() {
    let k1 = key("ietf", "T");
    let rig = Rig::with_tiers("  T: { limit: 1, per: 1d, burst: 3 }\n", vec![k1.clone()]);
    let replies = rig.sequence(4, &k1).await;
    assert_eq!(statuses(&replies), [200, 200, 200, 429]);
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(r.count("ratelimit-policy"), 1, "{r:?}");
        assert_eq!(r.count("ratelimit"), 1, "{r:?}");
        assert_eq!(
            r.header("ratelimit-policy").unwrap(),
            format!("\"T\";q=3;w={}", 3 * DAY_S)
        );
        let rl = r.ratelimit();
        assert_eq!(rl.name, "T");
        assert_eq!(rl.params.keys().collect::<Vec<_>>(), ["r", "t"], "{rl:?}");
        let used = (i as u64 + 1).min(3);
        assert_eq!(rl.num("r"), 3 - used);
        // Seconds until full: one day per missing token, counting down from the first request.
        assert_countdown(rl.num("t"), used * DAY_S, 2, "RateLimit t");
        for legacy in [
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
        ] {
            assert!(!r.has(legacy), "{legacy} in ietf mode: {r:?}");
        }
    }
    for r in &replies[..3] {
        assert!(!r.has("retry-after"), "{r:?}");
        assert_eq!(echo_body(r)["path"], "/");
    }
    let rejected = &replies[3];
    assert_eq!(rejected.count("retry-after"), 1, "{rejected:?}");
    assert_countdown(rejected.retry_after().unwrap(), DAY_S, 2, "Retry-After");
    let p = rejected.assert_quota_problem(429, "T");
    assert!(p["title"].is_string(), "{p}");
    assert!(rejected.has("x-request-id"));
}

/// The echo JSON of an admitted answer.
fn echo_body(r: &Reply) -> Value {
    assert_eq!(r.status, 200, "{r:?}");
    r.json()
}

/// `response.headers: both`: the IETF fields plus `X-RateLimit-Limit/-Remaining/-Reset`, with
/// the same numbers (limit = burst, remaining = r, reset = t).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_header_mode_sends_ietf_and_legacy_fields_with_the_same_numbers() {
    let k1 = key("both", "T");
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 2 }\n",
            vec![k1.clone()],
        )
        .section("response", "{ headers: both }")
    });
    let replies = rig.sequence(3, &k1).await;
    assert_eq!(statuses(&replies), [200, 200, 429]);
    for (i, r) in replies.iter().enumerate() {
        let rl = r.ratelimit();
        assert_eq!(r.policy().num("q"), 2);
        assert_eq!(r.header("x-ratelimit-limit").as_deref(), Some("2"), "{r:?}");
        assert_eq!(
            r.header("x-ratelimit-remaining"),
            Some(rl.num("r").to_string()),
            "{r:?}"
        );
        assert_eq!(r.header("x-ratelimit-reset"), Some(rl.num("t").to_string()));
        assert_eq!(rl.num("r"), [1, 0, 0][i]);
    }
    assert_eq!(replies[2].count("retry-after"), 1);
    replies[2].assert_quota_problem(429, "T");
}

/// `response.headers: legacy`: only `X-RateLimit-*` (and Retry-After on the rejection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_header_mode_sends_only_x_ratelimit_fields() {
    let k1 = key("legacy", "T");
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 2 }\n",
            vec![k1.clone()],
        )
        .section("response", "{ headers: legacy }")
    });
    let replies = rig.sequence(3, &k1).await;
    assert_eq!(statuses(&replies), [200, 200, 429]);
    let expect = [("1", DAY_S), ("0", 2 * DAY_S), ("0", 2 * DAY_S)];
    for (r, (remaining, reset)) in replies.iter().zip(expect) {
        assert!(!r.has("ratelimit") && !r.has("ratelimit-policy"), "{r:?}");
        assert_eq!(r.header("x-ratelimit-limit").as_deref(), Some("2"));
        assert_eq!(
            r.header("x-ratelimit-remaining").as_deref(),
            Some(remaining)
        );
        let got: u64 = r.header("x-ratelimit-reset").unwrap().parse().unwrap();
        assert_countdown(got, reset, 2, "X-RateLimit-Reset");
    }
    assert!(!replies[0].has("retry-after"));
    assert_eq!(replies[2].count("retry-after"), 1, "{:?}", replies[2]);
    replies[2].assert_quota_problem(429, "T");
}

fn none_mode_rig(tenant: &str) -> (Rig, Key) {
    let k1 = key(tenant, "T");
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 1 }\n",
            vec![k1.clone()],
        )
        .section("response", "{ headers: none }")
    });
    (rig, k1)
}

/// `response.headers: none`: no quota fields at all, on admitted and rejected answers; the
/// rejection still says when to retry, and carries the problem body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn none_header_mode_sends_no_quota_fields() {
    let (rig, k1) = none_mode_rig("none");
    let replies = rig.sequence(2, &k1).await;
    assert_eq!(statuses(&replies), [200, 429]);
    for r in &replies {
        for h in [
            "ratelimit",
            "ratelimit-policy",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
        ] {
            assert!(!r.has(h), "{h} with headers: none: {r:?}");
        }
    }
    assert!(!replies[0].has("retry-after"));
    assert!(replies[1].has("retry-after"), "{:?}", replies[1]);
    for v in replies[1].headers.get_all("retry-after") {
        let s: u64 = v.to_str().unwrap().parse().unwrap();
        assert_countdown(s, DAY_S, 2, "Retry-After");
    }
    replies[1].assert_quota_problem(429, "T");
}

/// `response.headers: none`: the rejection carries exactly one `Retry-After` (RFC 9110 §10.2.3
/// defines a single value; clients that join repeated fields read "86400, 86400").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn none_header_mode_rejection_has_exactly_one_retry_after() {
    let (rig, k1) = none_mode_rig("none1");
    let replies = rig.sequence(2, &k1).await;
    assert_eq!(statuses(&replies), [200, 429]);
    assert_eq!(
        replies[1].count("retry-after"),
        1,
        "exactly one Retry-After: {:?}",
        replies[1].headers.get_all("retry-after")
    );
}

/// `response.status: 503` replaces 429 for tenant quota rejections (problem status too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_status_override_is_used_for_quota_rejections() {
    let k1 = key("s503", "T");
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 1 }\n",
            vec![k1.clone()],
        )
        .section("response", "{ status: 503 }")
    });
    let replies = rig.sequence(3, &k1).await;
    assert_eq!(statuses(&replies), [200, 503, 503]);
    for r in &replies[1..] {
        r.assert_quota_problem(503, "T");
        assert_eq!(r.count("retry-after"), 1);
        assert_eq!(r.remaining(), 0);
    }
    assert_eq!(rig.backend.stats().requests, 1);
}

/// A backend error answer (here 500 from the backend itself) after admission carries the
/// quota headers of the decision that admitted it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_error_answer_after_admission_carries_quota_headers() {
    let k1 = key("b500", "T");
    let rig = Rig::with_tiers("  T: { limit: 1, per: 1d, burst: 3 }\n", vec![k1.clone()]);
    let r = rig.get("/x?status=500", Some(&k1)).await;
    assert_eq!(r.status, 500, "{r:?}");
    assert_eq!(r.remaining(), 2);
    assert_eq!(r.policy().num("q"), 3);
}

/// A gateway error answer (502: the backend refuses connections) for a request the tenant
/// stage admitted still carries that decision's quota headers (docs/DESIGN.md section 2: "headers on
/// every response that passed the tenant stage"); the token it spent shows in them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_error_answer_after_admission_carries_quota_headers() {
    let k1 = key("b502", "T");
    let dead = free_addr();
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 3 }\n",
            vec![k1.clone()],
        )
        .upstream("echo", &dead)
    });
    let r = rig.get("/", Some(&k1)).await;
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(
        r.header("ratelimit-policy").as_deref(),
        Some("\"T\";q=3;w=259200"),
        "{r:?}"
    );
    assert_eq!(r.remaining(), 2, "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// Distributed: three gateways, one Redis (item 12)
// ---------------------------------------------------------------------------------------------

/// Three gateway processes sharing one Redis enforce one limit: 60 concurrent requests for a
/// burst-50 tenant are exactly 50 admissions, both spread evenly and spread 58/1/1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_sharing_redis_admit_exactly_the_burst() {
    let even = key("even", "T");
    let skewed = key("skewed", "T");
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = conf(
        &redis,
        &backend,
        "  T: { limit: 1, per: 1d, burst: 50 }\n",
        vec![even.clone(), skewed.clone()],
    )
    .yaml();
    let gws: Vec<Gateway> = (0..3).map(|_| Gateway::start(&yaml)).collect();
    let urls: Vec<String> = gws.iter().map(|g| g.url("/")).collect();
    let http = client();

    // Evenly: request i goes to gateway i % 3.
    let replies = burst(&http, &urls, &even.key, 60).await;
    assert_only_200_429(&replies, "even");
    assert_eq!(count_status(&replies, 200), 50, "{:?}", statuses(&replies));
    let mut remaining: Vec<u64> = replies
        .iter()
        .filter(|r| r.status == 200)
        .map(Reply::remaining)
        .collect();
    remaining.sort_unstable();
    assert_eq!(remaining, (0..50).collect::<Vec<u64>>());

    // 58 / 1 / 1.
    let mut skew_urls = vec![urls[0].clone(); 58];
    skew_urls.push(urls[1].clone());
    skew_urls.push(urls[2].clone());
    let replies = burst(&http, &skew_urls, &skewed.key, 60).await;
    assert_only_200_429(&replies, "skewed");
    assert_eq!(count_status(&replies, 200), 50, "{:?}", statuses(&replies));
    assert_eq!(backend.stats().requests, 100);
}

// ---------------------------------------------------------------------------------------------
// Tenant isolation (item 13)
// ---------------------------------------------------------------------------------------------

/// A tenant flooding at 10× its limit does not cost a calm tenant (at half its own limit) a
/// single 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_tenant_does_not_cause_429_for_a_calm_tenant() {
    let flood = key("flood", "S");
    let calm = key("calm", "T");
    let rig = Rig::with_tiers(
        "  S: { limit: 10, per: 1s, burst: 5 }\n  T: { limit: 20, per: 1s, burst: 5 }\n",
        vec![flood.clone(), calm.clone()],
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // 10 workers × one request per ≥100 ms: up to 100 requests/s, 10× tier S's 10/s.
    let mut flooders = JoinSet::new();
    for _ in 0..10 {
        let (http, url, k, stop) = (
            rig.http.clone(),
            rig.gw.url("/"),
            flood.key.clone(),
            stop.clone(),
        );
        flooders.spawn(async move {
            let mut out = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                out.push(send(&http, &url, Some(&k)).await.status);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            out
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Calm: 10 requests/s (one, then 100 ms of quiet) for 3 s: half of tier T's 20/s.
    let started = Instant::now();
    let mut calm_statuses = Vec::new();
    for _ in 0..30 {
        calm_statuses.push(rig.get("/", Some(&calm)).await.status);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let calm_elapsed = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut flood_statuses = Vec::new();
    while let Some(r) = flooders.join_next().await {
        flood_statuses.extend(r.expect("flooder"));
    }
    assert_eq!(calm_statuses, vec![200; 30], "calm tenant saw a rejection");
    let admitted = flood_statuses.iter().filter(|&&s| s == 200).count();
    let rejected = flood_statuses.iter().filter(|&&s| s == 429).count();
    assert_eq!(
        admitted + rejected,
        flood_statuses.len(),
        "{flood_statuses:?}"
    );
    assert!(
        rejected > admitted,
        "the flood really exceeded its limit: {admitted} admitted, {rejected} rejected"
    );
    // Tier S admits at most burst + 10/s over the flood's lifetime (with 1 s of slack).
    let lifetime = calm_elapsed.as_secs_f64() + 1.5;
    assert!(
        (admitted as f64) <= 5.0 + 10.0 * lifetime,
        "flood admitted {admitted} in ~{lifetime:.1} s"
    );
}

// ---------------------------------------------------------------------------------------------
// Truthfulness (item 14)
// ---------------------------------------------------------------------------------------------

/// A client told `remaining n > 0` is admitted on its next request, and a client that waits out
/// a Retry-After is admitted (with random think times over a refilling bucket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remaining_above_zero_and_retry_after_are_promises_kept() {
    let k1 = key("truth", "T");
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            // 1 token per 500 ms, burst 3.
            "  T: { limit: 120, per: 1m, burst: 3 }\n",
            vec![k1.clone()],
        )
    });
    let mut previous: Option<Reply> = None;
    let (mut promised_remaining, mut promised_retry) = (0, 0);
    for i in 0..40 {
        let r = rig.get("/", Some(&k1)).await;
        assert!(r.status == 200 || r.status == 429, "{r:?}");
        if let Some(p) = &previous {
            if p.status == 200 && p.remaining() > 0 {
                promised_remaining += 1;
                assert_eq!(
                    r.status,
                    200,
                    "request {i}: told remaining {}",
                    p.remaining()
                );
            }
        }
        if r.status == 429 {
            let s = r.retry_after().expect("Retry-After");
            assert!(s >= 1);
            promised_retry += 1;
            tokio::time::sleep(Duration::from_secs(s)).await;
            let again = rig.get("/", Some(&k1)).await;
            assert_eq!(again.status, 200, "request {i}: waited Retry-After {s}");
            previous = Some(again);
        } else {
            previous = Some(r);
        }
        // Mostly fast, sometimes a pause that refills a token.
        let pause = if rand::random_range(0..4) == 0 {
            rand::random_range(200..700)
        } else {
            rand::random_range(0..40)
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    assert!(promised_remaining >= 5, "{promised_remaining}");
    assert!(promised_retry >= 1, "{promised_retry}");
}

/// A rejection answered from the gateway's memory of an earlier Redis rejection (the deny
/// cache) must still carry a Retry-After that is long enough, also when that earlier Redis
/// reply was slow. Redis is paused for 0.7 s while it holds rejection A, so A's reply arrives
/// 0.7 s after it was sent; B follows and is answered without Redis. Waiting B's Retry-After
/// must be enough.
///
/// Timeline (burst 1, 0.4 tokens/s, the bucket empties at t=0 and is ready again at 2.5 s):
/// A sent at ~0.05 s, decided at ~0.75 s (Redis resumed); B at 1.1 s: 1.4 s are missing, so
/// Retry-After must be 2. Computed from A's *send* time the cache believes the bucket is ready
/// at ~1.8 s and says 1; a client obeying it comes back at ~2.1 s and is rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_served_without_redis_is_enough_after_a_slow_redis_reply() {
    let k1 = key("slowreply", "T");
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 24, per: 1m, burst: 1 }\n",
            vec![k1.clone()],
        )
        .redis_opts("timeout_ms: 5000, on_failure: closed, circuit_breaker: { min_calls: 1000 }")
    });
    let t0 = Instant::now();
    let r0 = rig.get("/", Some(&k1)).await;
    assert_eq!(r0.status, 200);
    rig.redis.pause();
    let a = {
        let (http, url, k) = (rig.http.clone(), rig.gw.url("/"), k1.key.clone());
        tokio::spawn(async move { send(&http, &url, Some(&k)).await })
    };
    tokio::time::sleep_until((t0 + Duration::from_millis(750)).into()).await;
    rig.redis.resume();
    let a = a.await.expect("request A");
    assert_eq!(a.status, 429, "{a:?}");
    tokio::time::sleep_until((t0 + Duration::from_millis(1_100)).into()).await;
    let b = rig.get("/", Some(&k1)).await;
    assert_eq!(b.status, 429, "{b:?}");
    let wait = b.retry_after().expect("Retry-After");
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let c = rig.get("/", Some(&k1)).await;
    assert_eq!(
        c.status,
        200,
        "waited B's Retry-After of {wait} s (A said {:?}): {c:?}",
        a.retry_after()
    );
}

// ---------------------------------------------------------------------------------------------
// Key expiry (item 15)
// ---------------------------------------------------------------------------------------------

/// Every key the gateway writes has a TTL (PEXPIRE = time until the bucket is full again),
/// and once every bucket would be full again its key is gone (expiry never changes a
/// decision: the next request sees a full bucket).
///
/// Tier F refills fast (10/s, burst 10: an emptied bucket is full after 1 s; the issue's
/// example of burst 5 leaves only 0.5 s to observe the TTLs, too little on a busy machine), so
/// its keys are gone after 2 s. Tier S (1/h) is checked for a TTL too and must outlive them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_has_a_ttl_and_all_are_gone_once_buckets_are_full() {
    let fast = keys("ttl", 3, "F");
    let slow = key("ttl_slow", "S");
    let mut all = fast.clone();
    all.push(slow.clone());
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  F: { limit: 1, per: 3s, burst: 10 }\n\
             \x20 S: { limit: 1, per: 1h, burst: 3 }\n\
             \x20 anonymous: { limit: 1, per: 3s, burst: 10 }\n",
            all.clone(),
        )
        .no_routes()
        .route(OPTIONAL_AUTH_ROUTE)
    });
    let check_ttl = |redis_key: &str, max_ms: i64| {
        let ttl = rig.redis.pttl(redis_key);
        assert!(
            ttl > 0 && ttl <= max_ms,
            "{redis_key}: PTTL {ttl} (must be in (0, {max_ms}]: time until the bucket is full)"
        );
    };
    // 5, 8 and 12 requests (the last empties the bucket and is rejected twice). One token per
    // 3 s: a busy machine neither refills a token during a sequence nor sees a key expire
    // before its TTL is read (at least 15 s each).
    for (k, n) in fast.iter().zip([5usize, 8, 12]) {
        let replies = rig.sequence(n, k).await;
        assert_only_200_429(&replies, &k.tenant);
        assert_eq!(count_status(&replies, 200), n.min(10));
        // Right after the last write: at most `missing tokens × 3 000 ms`.
        check_ttl(
            &format!("tollgate:{{{}}}:tb", k.tenant),
            3_000 * n.min(10) as i64,
        );
    }
    let s = rig.sequence(2, &slow).await;
    assert_eq!(statuses(&s), [200, 200]);
    check_ttl("tollgate:{ttl_slow}:tb", 2 * 3_600_000);
    for _ in 0..6 {
        let anon = rig.get("/", None).await;
        assert_eq!(anon.status, 200);
    }
    check_ttl("tollgate:{ip%3A127.0.0.1}:tb", 6 * 3_000);

    // Nothing else was written.
    let written = rig.redis.keys("*");
    for k in &written {
        assert!(
            k.starts_with("tollgate:{") && k.ends_with("}:tb"),
            "unexpected key {k}"
        );
        // -1 would be a key without expiry; -2 is a key that expired since KEYS.
        let ttl = rig.redis.pttl(k);
        assert!(ttl > 0 || ttl == -2, "{k}: PTTL {ttl}");
    }

    // Every fast bucket is full again within 30 s (10 missing tokens × 3 s), and its key is gone.
    let only_slow_left = eventually(Duration::from_secs(90), || {
        rig.redis.keys("*") == ["tollgate:{ttl_slow}:tb"]
    })
    .await;
    assert!(only_slow_left, "keys left: {:?}", rig.redis.keys("*"));
    // A full bucket after expiry, as if the key were still there.
    let r = rig.get("/", Some(&fast[2])).await;
    assert_eq!((r.status, r.remaining()), (200, 9));
}

// ---------------------------------------------------------------------------------------------
// Anonymous traffic
// ---------------------------------------------------------------------------------------------

/// With an `anonymous` tier, anonymous requests on an `auth: optional` route are limited per
/// client IP, as tenant `ip:<addr>`; an identified request on the same route uses its own tier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_tier_limits_each_client_ip_as_its_own_tenant() {
    let k1 = key("named", "T");
    let rig =
        Rig::start(|r, b| {
            conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 5 }\n  anonymous: { limit: 1, per: 1d, burst: 2 }\n",
            vec![k1.clone()],
        ).no_routes().route(OPTIONAL_AUTH_ROUTE)
        });
    let mut local = Vec::new();
    for _ in 0..3 {
        local.push(rig.get("/", None).await);
    }
    assert_eq!(statuses(&local), [200, 200, 429]);
    assert_eq!(
        local.iter().map(Reply::remaining).collect::<Vec<_>>(),
        [1, 0, 0]
    );
    for r in &local {
        assert_eq!(r.policy().name, "anonymous");
        assert_eq!(r.policy().num("q"), 2);
    }
    local[2].assert_quota_problem(429, "anonymous");
    assert_eq!(rig.redis.keys("*"), ["tollgate:{ip%3A127.0.0.1}:tb"]);

    // Another client address has its own bucket.
    let other = client_from(ip("127.0.0.2"));
    let r = send(&other, &rig.gw.url("/"), None).await;
    assert_eq!((r.status, r.remaining()), (200, 1), "{r:?}");
    assert!(rig
        .redis
        .keys("*")
        .contains(&"tollgate:{ip%3A127.0.0.2}:tb".to_string()));

    // An API key on the same route from the exhausted address: its tenant's tier.
    let r = rig.get("/", Some(&k1)).await;
    assert_eq!((r.status, r.remaining()), (200, 4), "{r:?}");
    assert_eq!(r.policy().name, "T");
    assert_eq!(rig.backend.stats().requests, 4);
}

/// Without an `anonymous` tier, anonymous traffic has no tenant limit (edge only): no quota
/// headers, no Redis key, never a 429; identified traffic on the route is still limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_anonymous_tier_anonymous_traffic_has_no_tenant_limit() {
    let k1 = key("named2", "T");
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 2 }\n",
            vec![k1.clone()],
        )
        .no_routes()
        .route(OPTIONAL_AUTH_ROUTE)
    });
    for _ in 0..10 {
        let r = rig.get("/", None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(!r.has("ratelimit") && !r.has("ratelimit-policy"), "{r:?}");
    }
    assert!(rig.redis.keys("*").is_empty(), "{:?}", rig.redis.keys("*"));
    let named = rig.sequence(3, &k1).await;
    assert_eq!(statuses(&named), [200, 200, 429]);
    assert_eq!(rig.redis.keys("*"), ["tollgate:{named2}:tb"]);
    assert_eq!(rig.backend.stats().requests, 12);
}

// ---------------------------------------------------------------------------------------------
// Identity headers to the backend
// ---------------------------------------------------------------------------------------------

/// The backend receives `X-Tollgate-Tenant` / `X-Tollgate-Tier` from the gateway; copies a
/// client sends are stripped (identified and anonymous requests alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_receives_tenant_and_tier_and_client_copies_are_stripped() {
    let k1 = key("acme", "T");
    let rig = Rig::start(|r, b| {
        conf(
            r,
            b,
            "  T: { limit: 1, per: 1d, burst: 10 }\n  gold: { limit: 1, per: 1d, burst: 99 }\n",
            vec![k1.clone()],
        )
        .no_routes()
        .route(OPTIONAL_AUTH_ROUTE)
    });
    let forged = |rb: reqwest::RequestBuilder| {
        rb.header("X-Tollgate-Tenant", "evil")
            .header("x-tollgate-tenant", "evil2")
            .header("X-Tollgate-Tier", "gold")
    };
    let resp = forged(rig.http.get(rig.gw.url("/who")))
        .header("x-api-key", &k1.key)
        .send()
        .await
        .unwrap();
    let v = echo_json(resp).await;
    assert_eq!(v["headers"]["x-tollgate-tenant"], "acme", "{v}");
    assert_eq!(v["headers"]["x-tollgate-tier"], "T", "{v}");

    let resp = forged(rig.http.get(rig.gw.url("/anon")))
        .send()
        .await
        .unwrap();
    let v = echo_json(resp).await;
    for h in ["x-tollgate-tenant", "x-tollgate-tier"] {
        let seen = v["headers"][h].as_str().unwrap_or("");
        assert!(
            !seen.contains("evil") && !seen.contains("gold"),
            "{h} from the client reached the backend: {v}"
        );
    }
    assert_eq!(rig.backend.stats().requests, 2);
}
