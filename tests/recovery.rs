//! Recovery from a Redis outage of 2.5 windows under steady load (docs/redis.md#when-redis-is-slow-or-down-failure-policy):
//! the `local` policy's overshoot stays within its documented bound at both ends of the outage
//! (one local burst when it starts; what the local fallback admitted is carried into Redis when it
//! ends, in each algorithm's own terms, so Redis hands out no fresh burst or window on top),
//! traffic from before the outage (calls stuck in a frozen Redis, coalesced batches) is not
//! charged to the windows after it, and
//! concurrency leases taken during the outage do not outlive `lease_ttl`. The same for a region
//! cut off from its Redis and from `global` under `multi_region` sync.
//!
//! Real `redis-server` frozen with SIGSTOP (or cut off behind a TCP relay), real gateway and echo
//! backend, one paced client per loaded tenant. Windows of 2 s (a tier of 20 tokens per 2 s,
//! burst 20: a 5 s outage is 2.5 windows, in which the Redis bucket refills completely). Counts,
//! never times: every allowance is derived from the elapsed time the client measured, with the
//! documented bound and a few tokens of slack for the clocks.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// `local` policy, one instance; the breaker opens after 3 failed calls of a second and probes
/// once every 2 s; concurrency leases expire 2 s after their last renewal.
const REDIS: &str = "timeout: 200ms, fleet_size: 1, on_failure: local, lease_ttl: 2s, \
                     circuit_breaker: { min_calls: 3, failure_ratio: 0.5, window: 1s, break: 2s, probes: 1 }";
/// 20 tokens per 2 s window, burst 20.
const LIMIT_PER_S: f64 = 10.0;
const BURST: f64 = 20.0;
/// Offered load, requests per second: 2.5 times the limit.
const LOAD_PER_S: u64 = 25;
/// Healthy, then unreachable for 2.5 windows, then healthy again.
const OUTAGE_AT: Duration = Duration::from_secs(2);
const OUTAGE: Duration = Duration::from_secs(5);
const END: Duration = Duration::from_secs(11);
/// Tokens of slack for the clocks (the client's elapsed time against Redis's and the gateway's),
/// and for the late calls of the outage whose give-back may land after the carry (3 calls before
/// the breaker opened and a probe or two; docs/redis.md#calls-that-time-out).
const SLACK: f64 = 8.0;

fn key(tenant: &str) -> String {
    format!("key-{tenant}-0123456789")
}

/// One answer of [`drive`].
#[derive(Debug, Clone, Copy)]
struct Answer {
    at: Duration,
    admitted: bool,
    /// Decided by the failure policy (`Tollgate-Degraded`), not by Redis.
    degraded: bool,
}

/// Paced GETs of `path` with `tenant`'s key from `start` until `END`, one at a time; every
/// answer must be 200 or 429 (a 5xx would hide as a count).
async fn drive(url: String, tenant: &'static str, start: Instant) -> Vec<Answer> {
    let http = http();
    let gap = Duration::from_micros(1_000_000 / LOAD_PER_S);
    let mut next = start;
    let mut out = Vec::new();
    while next < start + END {
        tokio::time::sleep_until(next.into()).await;
        next += gap;
        let reply = try_get_with_key(&http, &url, Some(&key(tenant)))
            .await
            .unwrap_or_else(|e| panic!("request to {url}: {e}"));
        assert!(
            reply.status == 200 || reply.status == 429,
            "unexpected {}: {}",
            reply.status,
            reply.body
        );
        out.push(Answer {
            at: start.elapsed(),
            admitted: reply.status == 200,
            degraded: reply.header("tollgate-degraded").is_some(),
        });
        let now = Instant::now();
        if next < now {
            next = now;
        }
    }
    out
}

/// What a run of [`drive`] admitted, against the allowance of a limiter that never lost Redis.
struct Run {
    answers: Vec<Answer>,
    elapsed_s: f64,
}

impl Run {
    fn admitted(&self) -> f64 {
        self.answers.iter().filter(|a| a.admitted).count() as f64
    }

    /// When Redis decided again after the outage: the first answer after it not degraded.
    fn back_at(&self) -> Duration {
        let outage_seen = self
            .answers
            .iter()
            .position(|a| a.degraded)
            .expect("no answer was decided by the local policy");
        self.answers[outage_seen..]
            .iter()
            .find(|a| !a.degraded)
            .expect("Redis never decided again")
            .at
    }

    /// Checks both ends of the outage against the documented bound of `local` (one instance):
    /// over the whole run at most one local burst over burst + limit × elapsed; from the first
    /// answer Redis decided again, at most the limit × the time since (plus the slack), which a
    /// Redis bucket refilled during the outage and not charged with the local admissions would
    /// exceed by a burst.
    fn check(&self, scenario: &str, rate_per_s: f64, local_burst: f64) {
        let allowance = BURST + rate_per_s * self.elapsed_s;
        let back = self.back_at();
        let after = self
            .answers
            .iter()
            .filter(|a| a.admitted && a.at >= back)
            .count() as f64;
        let after_s = self.elapsed_s - back.as_secs_f64();
        let degraded = self.answers.iter().filter(|a| a.degraded).count();
        println!(
            "[{scenario}] elapsed {:.2} s, admitted {} (allowance {allowance:.1}, bound +{:.1}), \
             {degraded} answers degraded; after Redis decided again at {:.2} s: {after} admitted in {after_s:.2} s \
             (at most {:.1})",
            self.elapsed_s,
            self.admitted(),
            local_burst + SLACK,
            back.as_secs_f64(),
            rate_per_s * after_s + SLACK,
        );
        assert!(
            self.admitted() <= allowance + local_burst + SLACK,
            "[{scenario}] admitted {} over {:.2} s: more than burst + limit x elapsed ({allowance:.1}) \
             + one local burst ({local_burst}) + slack",
            self.admitted(),
            self.elapsed_s
        );
        assert!(
            after <= rate_per_s * after_s + SLACK,
            "[{scenario}] {after} admitted in the {after_s:.2} s after Redis decided again: the \
             local admissions were not charged to Redis (a fresh burst on top of them)"
        );
        assert!(
            after >= 0.5 * rate_per_s * after_s - SLACK,
            "[{scenario}] only {after} admitted in the {after_s:.2} s after Redis decided again: \
             the next windows were pre-debited"
        );
    }
}

/// Drives `tenant` on `url` for the whole run while `outage` runs beside it.
async fn run_with(url: String, tenant: &'static str, outage: impl std::future::Future) -> Run {
    let started = Instant::now();
    let (answers, _) = tokio::join!(drive(url, tenant, started), outage);
    Run {
        answers,
        elapsed_s: started.elapsed().as_secs_f64(),
    }
}

/// An integer field of a hash.
fn hget(redis: &RedisServer, key: &str, field: &str) -> Option<i64> {
    let v: Option<String> = common::key_field(&mut redis.conn(), key, field);
    v.map(|v| v.parse().expect("integer"))
}

/// Concurrency leases of `tenant` not expired now (score = expiry on Redis TIME, ms).
fn live_leases(redis: &RedisServer, tenant: &str) -> u64 {
    let mut con = redis.conn();
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut con).expect("TIME");
    let now_ms = s * 1000 + us / 1000;
    redis::cmd("ZCOUNT")
        .arg(format!("tollgate:{{{tenant}}}:inflight"))
        .arg(format!("({now_ms}"))
        .arg("+inf")
        .query(&mut con)
        .expect("ZCOUNT")
}

/// `local` policy, exact token bucket. "steady" sends 2.5 times its limit for 2 s, through a
/// 5 s SIGSTOP of Redis (2.5 windows) and 4 s after it. "before", a tier that fails open and
/// never refills, has spent 4 of 10 tokens; three of its requests, coalesced into one call, are
/// stuck in the frozen Redis and run when it thaws: their debit is given back, so its bucket
/// holds exactly 6 tokens afterwards, not 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_policy_through_a_frozen_redis_overshoots_one_local_burst_at_most() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), REDIS)
        .tier("T", "{ limit: 20, per: 2s, burst: 20 }")
        .tier("B", "{ limit: 1, per: 1d, burst: 10, on_failure: open }")
        .api_keys_always()
        .api_key(&key("steady"), "steady", "T")
        .api_key(&key("before"), "before", "B")
        .yaml();
    let gw = Gateway::start(&yaml);
    let http = http();
    for _ in 0..4 {
        let r = try_get_with_key(&http, &gw.url("/"), Some(&key("before")))
            .await
            .expect("before");
        assert_eq!(r.status, 200);
    }
    let level =
        |redis: &RedisServer| hget(redis, "tollgate:{before}:tb", "l").map(|l| l / 86_400_000);
    assert_eq!(level(&redis), Some(6));

    let url = gw.url("/");
    let outage = async {
        tokio::time::sleep(OUTAGE_AT).await;
        redis.pause();
        let stuck: Vec<_> = (0..3)
            .map(|_| {
                let (http, url) = (http.clone(), url.clone());
                tokio::spawn(
                    async move { try_get_with_key(&http, &url, Some(&key("before"))).await },
                )
            })
            .collect();
        for s in stuck {
            let r = s.await.expect("join").expect("before during the outage");
            assert_eq!(r.status, 200, "fails open: {}", r.body);
            assert!(r.header("ratelimit").is_none(), "decided without Redis");
        }
        tokio::time::sleep(OUTAGE).await;
        redis.resume();
    };
    let run = run_with(url.clone(), "steady", outage).await;
    run.check("local, Redis frozen 2.5 windows", LIMIT_PER_S, BURST);

    // The stuck batch ran when Redis thawed; its debit is given back, nothing else is charged.
    assert!(
        eventually(Duration::from_secs(10), || level(&redis) == Some(6)).await,
        "before's bucket: {:?} tokens, not the 6 it had before the outage\n{}",
        level(&redis),
        gw.metrics()
    );
    let after = try_get_with_key(&http, &url, Some(&key("before")))
        .await
        .expect("before after");
    assert_eq!((after.status, after.remaining()), (200, 5));
}

/// The same outage on a leased tier with a fleet-wide concurrency cap: the local policy's bound
/// holds with leasing as without, and every concurrency lease (taken before, during or after the
/// outage; the acquires stuck in the frozen Redis run when it thaws) is back once the requests
/// ended: none outlives `lease_ttl`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_tier_through_a_frozen_redis_keeps_the_bound_and_leases_come_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), REDIS)
        .tier(
            "L",
            "{ limit: 20, per: 2s, burst: 20, lease: { tokens: 4, max_hold: 250ms }, max_in_flight: 3 }",
        )
        .api_keys_always()
        .api_key(&key("leased"), "leased", "L")
        .yaml();
    let gw = Gateway::start(&yaml);
    let outage = async {
        tokio::time::sleep(OUTAGE_AT).await;
        redis.pause();
        tokio::time::sleep(OUTAGE).await;
        redis.resume();
    };
    let run = run_with(gw.url("/s?delay_ms=20"), "leased", outage).await;
    run.check("leased, Redis frozen 2.5 windows", LIMIT_PER_S, BURST);
    // No request runs now: no lease may be live (one renewed for a request long gone would
    // never expire).
    assert!(
        eventually(Duration::from_secs(2), || live_leases(&redis, "leased")
            == 0)
        .await,
        "{} concurrency leases still live after the load ended\n{}",
        live_leases(&redis, "leased"),
        gw.metrics()
    );
}

/// Region eu of two (`multi_region` sync, shares 1:1, all load in eu) is cut off for 2.5
/// windows: its own Redis and `global` both behind relays that refuse connections. eu decides
/// locally at its last share and keeps its leases in check; when the cut ends, Redis decides
/// again with eu's local admissions charged, sync with `global` works again, and no concurrency
/// lease outlives the requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_cut_off_under_sync_recovers_within_the_bound() {
    let global = RedisServer::start();
    let backend = Backend::start("echo");
    let regions = ["eu", "us"].map(|name| {
        let redis = RedisServer::start();
        let to_redis = TcpRelay::start(&redis.addr());
        let to_global = TcpRelay::start(&global.addr());
        let multi = format!(
            "{{ region: {name}, shares: {{ eu: 1, us: 1 }}, mode: sync, \
             global: {{ url: \"{}\" }}, sync_interval: 500ms }}",
            to_global.url()
        );
        let yaml = GatewayConfig::echo(&backend.addr(), "required")
            .redis(&to_redis.url(), REDIS)
            .tier("T", "{ limit: 20, per: 2s, burst: 20, max_in_flight: 4 }")
            .section("multi_region", &multi)
            .api_keys_always()
            .api_key(&key("roamer"), "roamer", "T")
            .yaml();
        (redis, to_redis, to_global, Gateway::start(&yaml))
    });
    let (eu_redis, eu_to_redis, eu_to_global, eu) = &regions[0];
    let cut = async {
        tokio::time::sleep(OUTAGE_AT).await;
        eu_to_redis.cut();
        eu_to_global.cut();
        tokio::time::sleep(OUTAGE).await;
        eu_to_redis.restore();
        eu_to_global.restore();
    };
    let run = run_with(eu.url("/s?delay_ms=20"), "roamer", cut).await;
    // With all demand in eu its share is 0.95 (the floor of 1/20 stays with us): eu's local
    // bucket holds at most 19 tokens; the whole budget's rate bounds eu's.
    run.check("region eu cut off 2.5 windows", LIMIT_PER_S, 19.0);
    assert!(
        eventually(Duration::from_secs(5), || {
            eu.metric_or_zero("tollgate_region_sync_age_seconds") == 0.0
        })
        .await,
        "sync with global did not recover\n{}",
        eu.metrics()
    );
    assert!(
        eu.metric_or_zero("tollgate_region_sync_failures_total") >= 1.0,
        "the cut was not seen by the sync"
    );
    assert!(
        eventually(Duration::from_secs(2), || live_leases(eu_redis, "roamer")
            == 0)
        .await,
        "{} concurrency leases still live in eu after the load ended",
        live_leases(eu_redis, "roamer")
    );
}

/// Tiers decided by the policy script, one tenant each, near-zero refill (10 tokens per hour,
/// burst 10: every window algorithm's window is the hour), and one whose calendar quota is the
/// tight limit (15 a day, its rate roomy).
const POLICY_TIERS: [(&str, &str); 7] = [
    (
        "tb_quota",
        "{ limit: 10, per: 1h, burst: 10, quotas: [{ limit: 1000, period: day }] }",
    ),
    ("gcra", "{ algorithm: gcra, limit: 10, per: 1h, burst: 10 }"),
    (
        "fixed_window",
        "{ algorithm: fixed_window, limit: 10, per: 1h, burst: 10 }",
    ),
    (
        "sliding_window_log",
        "{ algorithm: sliding_window_log, limit: 10, per: 1h, burst: 10 }",
    ),
    (
        "sliding_window_counter",
        "{ algorithm: sliding_window_counter, limit: 10, per: 1h, burst: 10 }",
    ),
    (
        "leaky_bucket",
        "{ algorithm: leaky_bucket, limit: 10, per: 1h, burst: 10 }",
    ),
    (
        "day_quota",
        "{ limit: 1000, per: 1s, burst: 1000, quotas: [{ limit: 15, period: day }] }",
    ),
];

/// `n` requests of `tenant` one after another: (admitted, decided by the failure policy).
async fn burst_of(http: &reqwest::Client, url: &str, tenant: &str, n: usize) -> (u64, u64) {
    let (mut admitted, mut degraded) = (0, 0);
    for _ in 0..n {
        let r = try_get_with_key(http, url, Some(&key(tenant)))
            .await
            .unwrap_or_else(|e| panic!("{tenant}: {e}"));
        assert!(
            r.status == 200 || r.status == 429,
            "{tenant}: {} {}",
            r.status,
            r.body
        );
        admitted += u64::from(r.status == 200);
        degraded += u64::from(r.header("tollgate-degraded").is_some());
    }
    (admitted, degraded)
}

/// `local` policy through a frozen Redis, for every algorithm the policy script decides (and a
/// calendar quota), on a route without limit rules and on one with a rule (the tier decided
/// with it in one call): each tenant spends 3 tokens in Redis, sends 15 requests while Redis is
/// frozen (its local bucket, full at the outage's start, admits its burst of 10; quotas are not
/// enforced locally: all 15), and 15 once Redis decides again. What the local fallback admitted
/// is carried into its Redis state (debt, window counts, log entries, the day's counter) by its
/// first call there, so Redis admits nothing more: 13 in all (18 for the quota: 15 counted and
/// the local admissions over it), the documented bound of one local burst at the outage's start
/// and nothing at its end. Without the carry each got 7 more (12 for the quota). A prober
/// tenant that fails open opens the breaker and makes the probe that closes it, so every count
/// is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_policy_carries_every_algorithms_local_admissions_into_redis() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let mut cfg = GatewayConfig::new()
        .upstream("echo", &backend.addr())
        .route_lines(
            "  - { path_prefix: \"/r\", upstream: echo, auth: required }\n  - { path_prefix: \"/\", upstream: echo, auth: required }\n",
        )
        .section(
            "limits",
            "\n  - { name: roomy, match: { routes: [\"/r\"] }, key: [tenant], limit: 1000, per: 1s, burst: 1000 }\n",
        )
        .redis(
            &redis.url(),
            "timeout: 200ms, fleet_size: 1, on_failure: local, \
             circuit_breaker: { min_calls: 3, failure_ratio: 0.5, window: 1s, break: 5s, probes: 1 }",
        )
        .tier("P", "{ limit: 1000, per: 1s, burst: 1000, on_failure: open }")
        .api_keys_always()
        .api_key(&key("prober"), "prober", "P");
    // Per tier: a tenant on the route without rules, one on the route with the rule.
    let tenants: Vec<(&str, String, String)> = POLICY_TIERS
        .iter()
        .flat_map(|(tier, _)| {
            [
                (*tier, tier.to_string(), "/"),
                (*tier, format!("r_{tier}"), "/r"),
            ]
        })
        .map(|(tier, tenant, path)| (tier, tenant, path.to_string()))
        .collect();
    for (name, tier) in POLICY_TIERS {
        cfg = cfg.tier(name, tier);
    }
    for (tier, tenant, _) in &tenants {
        cfg = cfg.api_key(&key(tenant), tenant, tier);
    }
    let gw = Gateway::start(&cfg.yaml());
    let (http, url) = (http(), gw.url("/"));
    // Every count must fall in one hour (the windows) and one day (the quotas) of Redis's clock.
    let now_ms = |redis: &RedisServer| {
        let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut redis.conn()).expect("TIME");
        s * 1000 + us / 1000
    };
    let into_hour = now_ms(&redis) % 3_600_000;
    if into_hour > 3_600_000 - 60_000 {
        tokio::time::sleep(Duration::from_millis(3_600_000 - into_hour + 1_000)).await;
    }
    let hour = now_ms(&redis) / 3_600_000;

    for (_, tenant, path) in &tenants {
        let got = burst_of(&http, &gw.url(path), tenant, 3).await;
        assert_eq!(got, (3, 0), "{tenant} before");
    }
    redis.pause();
    let open = eventually(Duration::from_secs(10), || {
        gw.metric_or_zero("tollgate_redis_breaker_state") == 1.0
    });
    let prober = async {
        loop {
            let _ = try_get_with_key(&http, &url, Some(&key("prober"))).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let opened = tokio::select! { o = open => o, _ = prober => unreachable!() };
    assert!(opened, "the breaker did not open\n{}", gw.metrics());
    let mut local = Vec::new();
    for (_, tenant, path) in &tenants {
        local.push(burst_of(&http, &gw.url(path), tenant, 15).await);
    }
    redis.resume();
    let back = eventually(Duration::from_secs(20), || {
        gw.metric_or_zero("tollgate_redis_breaker_state") == 0.0
    });
    let prober = async {
        loop {
            let _ = try_get_with_key(&http, &url, Some(&key("prober"))).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let closed = tokio::select! { c = back => c, _ = prober => unreachable!() };
    assert!(closed, "the breaker did not close\n{}", gw.metrics());
    let mut after = Vec::new();
    for (_, tenant, path) in &tenants {
        after.push(burst_of(&http, &gw.url(path), tenant, 15).await);
    }
    assert_eq!(
        now_ms(&redis) / 3_600_000,
        hour,
        "the hour changed during the test"
    );
    let report: Vec<String> = tenants
        .iter()
        .zip(local.iter().zip(&after))
        .map(|((_, t, _), (l, a))| format!("{t}: 3 + {} local + {} after", l.0, a.0))
        .collect();
    println!("{}", report.join("; "));
    let wrong: Vec<String> = tenants
        .iter()
        .zip(local.iter().zip(&after))
        .filter(|((tier, _, _), (l, a))| {
            let local_burst = if *tier == "day_quota" { 15 } else { 10 };
            **l != (local_burst, 15) || **a != (0, 0)
        })
        .map(|((_, t, _), (l, a))| format!("{t}: {l:?} locally, {a:?} after"))
        .collect();
    assert!(
        wrong.is_empty(),
        "(admitted, degraded) of 15 requests: the local burst (10; 15 for the quota) while \
         Redis was frozen, then nothing once Redis decides again (a tenant admitting more did \
         not get its local admissions carried): {wrong:?}"
    );
}
