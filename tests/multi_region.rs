//! Multi-region budgets (docs/DESIGN.md 4b/4c `multi_region`), black-box: real Redis per region,
//! a real `global` Redis behind latency-injecting relays, a real gateway per region.
//!
//! Counts, not wall-clock: the global allowance of a run is derived from its measured elapsed
//! time (burst + limit × elapsed), and the assertions compare admitted counts against it with the
//! documented bound. Run with `--nocapture` to see the measured figures.

mod common;
#[path = "common/regions.rs"]
mod regions;

use common::*;
use regions::*;
use std::time::{Duration, Instant};

/// Static split, burst 10 with shares eu:2 / us:1 / ap:2: eu enforces floor(10 × 2/5) = 4, us
/// floor(10 × 1/5) = 2, each against its own Redis; a tenant override (burst 20) is split too.
/// Headers show the regional `q` and `w` (4 tokens at 0.4 per hour: 10 h) with
/// `;region="<name>"` on the policy item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_split_enforces_exactly_the_regional_share() {
    let backend = Backend::start("echo");
    let (eu_redis, us_redis) = (RedisServer::start(), RedisServer::start());
    let shares = "{ eu: 2, us: 1, ap: 2 }";
    let tier = "{ limit: 1, per: 1h, burst: 10 }";
    let tenants = ["acme", "big"];
    let extra = "tenants:\n  big: { burst: 20 }\n";
    let gw = |redis: &RedisServer, region: &str| {
        Gateway::start(&region_yaml(
            &redis.url(),
            &backend.addr(),
            tier,
            &tenants,
            &format!("{{ region: {region}, shares: {shares}, mode: static }}"),
            extra,
        ))
    };
    let (eu, us) = (gw(&eu_redis, "eu"), gw(&us_redis, "us"));
    let http = http();
    let mut first = None;
    for (gateway, tenant, expected) in [(&eu, "acme", 4), (&us, "acme", 2), (&eu, "big", 8)] {
        let mut admitted = 0;
        for _ in 0..25 {
            let r = try_get_with_key(&http, &gateway.url("/"), Some(&region_key(tenant)))
                .await
                .unwrap();
            assert!(r.status == 200 || r.status == 429, "{r:?}");
            admitted += (r.status == 200) as u64;
            first.get_or_insert(r);
        }
        assert_eq!(admitted, expected, "{tenant} at {}", gateway.url("/"));
    }
    let first = first.unwrap();
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"t\";q=4;w=36000;region=\"eu\""),
        "{first:?}"
    );
    assert_eq!(first.header("tollgate-region"), Some("eu"));
    // Each region decided against its own Redis only.
    assert_eq!(us_redis.keys("*acme*").len(), 1);
    assert!(us_redis.keys("*big*").is_empty());
}

/// Every `RateLimit-Policy` item that is a regional share carries `region="<name>"`: the tier's
/// main limit, its calendar quota and a limit rule, not only the last item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_regional_policy_item_is_marked() {
    let backend = Backend::start("echo");
    let redis = RedisServer::start();
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier(
            "free",
            "{ limit: 10, per: 1h, burst: 10, quotas: [{ limit: 12, period: day }] }",
        )
        .section(
            "multi_region",
            "{ region: eu, shares: { eu: 1, us: 1 }, mode: static }",
        )
        .section(
            "limits",
            "\n  - { name: per-ip, key: [client_ip, tenant], limit: 8, per: 1h, burst: 8 }\n",
        )
        .api_keys_always()
        .api_key(&region_key("acme"), "acme", "free")
        .yaml();
    let gw = Gateway::start(&yaml);
    let r = try_get_with_key(&http(), &gw.url("/"), Some(&region_key("acme")))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("ratelimit-policy"),
        Some(
            "\"free\";q=5;w=3600;region=\"eu\", \"free.day\";q=6;w=86400;region=\"eu\", \
             \"per-ip\";q=4;w=3600;region=\"eu\""
        ),
        "{r:?}"
    );
    assert_eq!(r.header("tollgate-region"), Some("eu"));
}

/// `n` GETs with `key` to `url` at once, each held `delay_ms` by the backend: how many were
/// admitted, and a refusal's `RateLimit-Policy`. Any status but 200 or 429 panics.
async fn slow_burst(url: &str, key: &str, n: usize, delay_ms: u64) -> (usize, Option<String>) {
    let http = http();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (http, url, key) = (
            http.clone(),
            format!("{url}?delay_ms={delay_ms}"),
            key.to_string(),
        );
        set.spawn(async move { try_get_with_key(&http, &url, Some(&key)).await.unwrap() });
    }
    let (mut admitted, mut policy) = (0, None);
    while let Some(r) = set.join_next().await {
        let r = r.unwrap();
        assert!(r.status == 200 || r.status == 429, "{r:?}");
        admitted += (r.status == 200) as usize;
        if r.status == 429 {
            policy = r.header("ratelimit-policy").map(str::to_string);
        }
    }
    (admitted, policy)
}

/// A regional gateway with a concurrency-capped tier `t` (`max_in_flight: 4`, tenant `acme`),
/// an uncapped tier `r` (tenant `bob`) and a concurrency rule `uploads` (`max_in_flight: 2`
/// per tenant on `/upload`); `multi_region` verbatim.
fn capped_yaml(redis: &RedisServer, backend: &Backend, multi_region: &str) -> String {
    GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier("t", "{ limit: 1, per: 1h, burst: 1000, max_in_flight: 4 }")
        .tier("r", "{ limit: 1, per: 1h, burst: 1000 }")
        .section("multi_region", multi_region)
        .section(
            "limits",
            "\n  - { name: uploads, match: { routes: [\"/upload\"] }, key: [tenant], max_in_flight: 2 }\n",
        )
        .api_keys_always()
        .api_key(&region_key("acme"), "acme", "t")
        .api_key(&region_key("bob"), "bob", "r")
        .yaml()
}

/// Concurrency caps are divided like rates (`floor(max × share)`, at least 1): two regions with
/// shares 1:1, each on its own Redis, five slow requests to each region: the tier's cap of 4
/// admits 2 + 2 and the rule's cap of 2 admits 1 + 1, each refusal saying its region's part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_split_divides_concurrency_caps() {
    let backend = Backend::start("echo");
    let (eu_redis, us_redis) = (RedisServer::start(), RedisServer::start());
    let multi =
        |region: &str| format!("{{ region: {region}, shares: {{ eu: 1, us: 1 }}, mode: static }}");
    let eu = Gateway::start(&capped_yaml(&eu_redis, &backend, &multi("eu")));
    let us = Gateway::start(&capped_yaml(&us_redis, &backend, &multi("us")));
    let (acme, bob) = (region_key("acme"), region_key("bob"));
    let bursts = [
        (eu.url("/"), &acme, 2, "\"t.concurrency\";q=2;region=\"eu\""),
        (us.url("/"), &acme, 2, "\"t.concurrency\";q=2;region=\"us\""),
        (
            eu.url("/upload"),
            &bob,
            1,
            "\"uploads.concurrency\";q=1;region=\"eu\"",
        ),
        (
            us.url("/upload"),
            &bob,
            1,
            "\"uploads.concurrency\";q=1;region=\"us\"",
        ),
    ];
    let (a, b, c, d) = tokio::join!(
        slow_burst(&bursts[0].0, bursts[0].1, 5, 3000),
        slow_burst(&bursts[1].0, bursts[1].1, 5, 3000),
        slow_burst(&bursts[2].0, bursts[2].1, 5, 3000),
        slow_burst(&bursts[3].0, bursts[3].1, 5, 3000),
    );
    for ((url, _, admitted, policy), (got, refused)) in bursts.iter().zip([a, b, c, d]) {
        assert_eq!(got, *admitted, "{url}");
        assert_eq!(refused.as_deref(), Some(*policy), "{url}");
    }
}

/// In sync mode the cap follows the tenant's synced share: all demand in eu (of eu and us)
/// gives eu 95 % (`1 − floor`), so the tier's cap of 4 admits floor(3.8) = 3 there, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_share_divides_the_concurrency_cap() {
    let backend = Backend::start("echo");
    let (global, eu_redis) = (RedisServer::start(), RedisServer::start());
    let multi = format!(
        "{{ region: eu, shares: {{ eu: 1, us: 1 }}, mode: sync, global: {{ url: \"{}\" }}, \
         sync_interval: 1s }}",
        global.url()
    );
    let eu = Gateway::start(&capped_yaml(&eu_redis, &backend, &multi));
    let (http, key) = (http(), region_key("acme"));
    // Demand here only: once synced, eu holds 950 of the 1000 burst (static: 500). Each request
    // is demand, so the share stays through the burst below whenever the next exchange runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = try_get_with_key(&http, &eu.url("/"), Some(&key))
            .await
            .unwrap();
        let policy = r.header("ratelimit-policy").unwrap_or_default().to_string();
        if policy.starts_with("\"t\";q=950;") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "eu never got its synced share: {policy}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (admitted, policy) = slow_burst(&eu.url("/"), &key, 5, 3000).await;
    assert_eq!(admitted, 3);
    assert_eq!(
        policy.as_deref(),
        Some("\"t.concurrency\";q=3;region=\"eu\"")
    );
}

// ---------------------------------------------------------------------------------------------
// mode: sync, three regions
// ---------------------------------------------------------------------------------------------

/// The sync scenarios each start 4 Redis servers and 3 gateways and drive paced load: one at a
/// time, so they do not compete for the machine's two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Tier of the sync scenarios: 20 tokens per second, burst 20.
const SYNC_TIER: &str = "{ limit: 20, per: 1s, burst: 20 }";
const LIMIT_PER_S: f64 = 20.0;
const BURST: f64 = 20.0;
/// Offered load per loaded region, requests per second (3× the whole limit).
const LOAD_PER_S: u64 = 60;

/// The documented overshoot bound (docs/multi-region.md#overshoot-bound-and-why): one burst (regions that start
/// a tenant cold hold at most their static parts of it) + limit × (sync_interval + slowest
/// exchange round trip) × regions, + 2 tokens per region of rounding ("at least 1").
fn overshoot_bound() -> f64 {
    let regions = WAN_DELAYS_MS.len() as f64;
    let slowest_rtt_s = 2.0 * WAN_DELAYS_MS.iter().map(|d| d.1).max().unwrap() as f64 / 1000.0;
    let interval_s = SYNC_INTERVAL_MS as f64 / 1000.0;
    BURST + LIMIT_PER_S * (interval_s + slowest_rtt_s) * regions + 2.0 * regions
}

/// What a run admitted against the global allowance (burst + limit × elapsed).
struct Figures {
    scenario: &'static str,
    elapsed_s: f64,
    admitted: u64,
    allowance: f64,
}

impl Figures {
    fn new(scenario: &'static str, answers: &[&[Answer]], started: Instant) -> Self {
        let elapsed_s = started.elapsed().as_secs_f64();
        let admitted = answers
            .iter()
            .map(|a| a.iter().filter(|x| x.admitted).count() as u64)
            .sum();
        Figures {
            scenario,
            elapsed_s,
            admitted,
            allowance: BURST + LIMIT_PER_S * elapsed_s,
        }
    }

    /// Prints the figures and checks the overshoot bound.
    fn check(&self) {
        let over = self.admitted as f64 - self.allowance;
        println!(
            "[{}] elapsed {:.2} s, admitted {}, global allowance {:.1}, overshoot {:.1} ({:+.1}%), undershoot {:.1} ({:.1}%), bound {:.1}",
            self.scenario,
            self.elapsed_s,
            self.admitted,
            self.allowance,
            over.max(0.0),
            100.0 * over.max(0.0) / self.allowance,
            (-over).max(0.0),
            100.0 * (-over).max(0.0) / self.allowance,
            overshoot_bound()
        );
        assert!(
            over <= overshoot_bound(),
            "[{}] admitted {} exceeds the allowance {:.1} by more than the bound {:.1}",
            self.scenario,
            self.admitted,
            self.allowance,
            overshoot_bound()
        );
    }
}

/// Static split of the same tier in one of three equal regions over `elapsed_s`.
fn static_allowance(elapsed_s: f64) -> f64 {
    (BURST + LIMIT_PER_S * elapsed_s) / 3.0
}

/// Time to rebalance: from `from` to the start of the last one-second window (starting at an
/// answer, ending before the last answer) that admitted fewer than `needed`; zero when none did.
/// After it, every such window admitted at least `needed`: the region holds its new share.
fn rebalanced_after(answers: &[Answer], from: Duration, needed: u64) -> Duration {
    let end = answers.last().map(|a| a.at).unwrap_or_default();
    answers
        .iter()
        .filter(|a| a.at >= from && a.at + Duration::from_secs(1) <= end)
        .filter(|a| admitted_between(answers, a.at, a.at + Duration::from_secs(1)) < needed)
        .map(|a| a.at - from)
        .next_back()
        .unwrap_or_default()
}

/// All load in one region (eu) for 8 s: eu's share grows to almost the whole budget within a
/// few sync intervals, so it admits far more than its static third, and never more than the
/// global allowance plus the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_all_load_in_one_region_gets_the_budget() {
    let _serial = SERIAL.lock().await;
    let world = ThreeRegions::start(SYNC_TIER, &["solo"]);
    let http = http();
    let started = Instant::now();
    let eu = drive(
        &http,
        &world.region("eu").gateway.url("/"),
        &region_key("solo"),
        LOAD_PER_S,
        started,
        Duration::ZERO,
        Duration::from_secs(8),
    )
    .await;
    let f = Figures::new("all load in eu", &[&eu], started);
    f.check();
    let rebalanced = rebalanced_after(&eu, Duration::ZERO, (0.8 * LIMIT_PER_S) as u64);
    println!("[all load in eu] at ≥ 80% of the limit for good after {rebalanced:?}");
    assert!(
        f.admitted as f64 > 1.5 * static_allowance(f.elapsed_s),
        "eu admitted {} of {:.1}: the sync did not move the budget to the busy region (static third {:.1})",
        f.admitted,
        f.allowance,
        static_allowance(f.elapsed_s)
    );
}

/// Load moves from eu (0–6 s) to us (6–12 s): us takes over the budget (in its last 3 s it
/// admits well above its static third), eu's share falls back, and the run stays within the
/// allowance plus the bound. Prints the time to rebalance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_load_moving_between_regions_rebalances() {
    let _serial = SERIAL.lock().await;
    let world = ThreeRegions::start(SYNC_TIER, &["mover"]);
    let http = http();
    let key = region_key("mover");
    let started = Instant::now();
    let phase = Duration::from_secs(6);
    let (eu_url, us_url) = (
        world.region("eu").gateway.url("/"),
        world.region("us").gateway.url("/"),
    );
    let (eu, us) = tokio::join!(
        drive(
            &http,
            &eu_url,
            &key,
            LOAD_PER_S,
            started,
            Duration::ZERO,
            phase
        ),
        drive(&http, &us_url, &key, LOAD_PER_S, started, phase, phase),
    );
    let f = Figures::new("load eu → us", &[&eu, &us], started);
    f.check();
    let rebalanced = rebalanced_after(&us, phase, (0.8 * LIMIT_PER_S) as u64);
    println!("[load eu → us] us at ≥ 80% of the limit for good {rebalanced:?} after the shift");
    let last3 = admitted_between(&us, phase + Duration::from_secs(3), phase * 2);
    println!("[load eu → us] us admitted {last3} in its last 3 s (limit 60, static third 20)");
    assert!(
        last3 as f64 >= 0.6 * LIMIT_PER_S * 3.0,
        "us admitted only {last3} in its last 3 s: the budget did not follow the load"
    );
}

/// eu loses `global` for 10 s (its relay cut) while all load is in eu: eu keeps its last share
/// (admits well above its static third during the partition), counts the failed exchanges,
/// reports the age of its last sync, and recovers when the relay is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_region_losing_global_keeps_its_last_share() {
    let _serial = SERIAL.lock().await;
    let world = ThreeRegions::start(SYNC_TIER, &["cut"]);
    let http = http();
    let eu = world.region("eu");
    let started = Instant::now();
    let cut_at = Duration::from_secs(3);
    let restore_at = Duration::from_secs(13);
    let (url, key) = (eu.gateway.url("/"), region_key("cut"));
    let load = drive(
        &http,
        &url,
        &key,
        LOAD_PER_S,
        started,
        Duration::ZERO,
        Duration::from_secs(16),
    );
    let partition = async {
        tokio::time::sleep_until((started + cut_at).into()).await;
        let failures_before = eu
            .gateway
            .metric_or_zero("tollgate_region_sync_failures_total");
        eu.relay.cut();
        tokio::time::sleep_until((started + restore_at - Duration::from_millis(500)).into()).await;
        let failures = eu
            .gateway
            .metric_or_zero("tollgate_region_sync_failures_total");
        let age = eu
            .gateway
            .metric_or_zero("tollgate_region_sync_age_seconds");
        eu.relay.restore();
        tokio::time::sleep_until((started + Duration::from_secs(16)).into()).await;
        let age_after = eu
            .gateway
            .metric_or_zero("tollgate_region_sync_age_seconds");
        (failures - failures_before, age, age_after)
    };
    let (answers, (failures, age, age_after)) = tokio::join!(load, partition);
    let f = Figures::new("eu cut from global 10 s", &[&answers], started);
    f.check();
    let during = admitted_between(&answers, cut_at + Duration::from_secs(1), restore_at);
    println!(
        "[eu cut from global 10 s] admitted {during} in the 9 s of partition (limit 180, static third 60); \
         {failures} failed exchanges, sync age {age} s at the end of the partition, {age_after} s after"
    );
    assert!(failures >= 3.0, "failed exchanges not counted: {failures}");
    assert!(
        age >= 3.0,
        "sync age did not grow during the partition: {age}"
    );
    assert!(
        age_after <= 2.0,
        "sync did not recover after the partition: age {age_after}"
    );
    assert!(
        during as f64 >= 0.6 * LIMIT_PER_S * 9.0,
        "eu admitted only {during} during the partition: it did not keep its last share"
    );
}

/// The price of a partition: eu (all load so far) loses `global` for 10 s while load starts in
/// us. us no longer sees eu's demand (its key expires) and takes the budget, while eu keeps its
/// last share: both admit at most of the limit, so the excess grows with the partition, by at
/// most (last share − floor) × limit per second of partition (docs/multi-region.md#overshoot-bound-and-why).
/// Measured and checked against that bound; after the partition the shares converge again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_partition_with_load_elsewhere_stays_within_the_partition_bound() {
    let _serial = SERIAL.lock().await;
    let world = ThreeRegions::start(SYNC_TIER, &["split"]);
    let http = http();
    let (eu, us) = (world.region("eu"), world.region("us"));
    let (eu_url, us_url, key) = (
        eu.gateway.url("/"),
        us.gateway.url("/"),
        region_key("split"),
    );
    let started = Instant::now();
    let cut_at = Duration::from_secs(3);
    let partition = Duration::from_secs(10);
    let end = Duration::from_secs(18);
    let cut = async {
        tokio::time::sleep_until((started + cut_at).into()).await;
        eu.relay.cut();
        tokio::time::sleep_until((started + cut_at + partition).into()).await;
        eu.relay.restore();
    };
    let (eu_answers, us_answers, ()) = tokio::join!(
        drive(
            &http,
            &eu_url,
            &key,
            LOAD_PER_S,
            started,
            Duration::ZERO,
            end
        ),
        drive(
            &http,
            &us_url,
            &key,
            LOAD_PER_S,
            started,
            cut_at,
            end - cut_at
        ),
        cut
    );
    let f = Figures::new(
        "eu cut 10 s, load in eu and us",
        &[&eu_answers, &us_answers],
        started,
    );
    let regions = WAN_DELAYS_MS.len() as u64;
    let floor = 1.0 / (10.0 * regions as f64);
    let last_share = 1.0 - (regions as f64 - 1.0) * floor;
    let partition_bound =
        overshoot_bound() + (last_share - floor) * LIMIT_PER_S * partition.as_secs_f64();
    let over = f.admitted as f64 - f.allowance;
    let after = cut_at + partition + Duration::from_secs(2);
    let tail =
        admitted_between(&eu_answers, after, end) + admitted_between(&us_answers, after, end);
    println!(
        "[eu cut 10 s, load in eu and us] elapsed {:.2} s, admitted {}, global allowance {:.1}, \
         overshoot {:.1} ({:+.1}%), partition bound {:.1}; after the partition {} admitted in {:.1} s",
        f.elapsed_s,
        f.admitted,
        f.allowance,
        over.max(0.0),
        100.0 * over.max(0.0) / f.allowance,
        partition_bound,
        tail,
        (end - after).as_secs_f64()
    );
    assert!(
        over <= partition_bound,
        "admitted {} exceeds the allowance {:.1} by more than the partition bound {partition_bound:.1}",
        f.admitted,
        f.allowance
    );
    // Converged again: the two loaded regions together stay near the limit, not at twice it.
    let tail_s = (end - after).as_secs_f64();
    assert!(
        (tail as f64) <= LIMIT_PER_S * tail_s * 1.25 + 2.0 * regions as f64,
        "after the partition eu and us admitted {tail} in {tail_s:.1} s: the shares did not converge"
    );
}
