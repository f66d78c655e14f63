//! Issue 13 black-box: every algorithm and calendar quotas through real gateways, a real
//! `redis-server` and the real echo backend (docs/DESIGN.md 4b/4c "Policies").
//!
//! Counts are exact with tiers that barely refill (`limit: 1, per: 1h`); where time matters the
//! assertions are lower bounds or waits of whole `Retry-After` seconds (never upper bounds on a
//! duration).

mod common;

use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::task::JoinSet;

fn api_key(tenant: &str) -> String {
    format!("key-{tenant}-0123456789")
}

/// A gateway config: `tiers` lines (indented two spaces) and `(tenant, tier)` API keys.
fn yaml(redis: &RedisServer, backend: &Backend, tiers: &str, keys: &[(String, String)]) -> String {
    yaml_with(redis, backend, tiers, keys, STRICT_REDIS)
}

/// [`yaml`] with other `redis:` options after the URL.
fn yaml_with(
    redis: &RedisServer,
    backend: &Backend,
    tiers: &str,
    keys: &[(String, String)],
    redis_opts: &str,
) -> String {
    let mut config = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), redis_opts)
        .tier_lines(tiers)
        .api_keys_always();
    for (tenant, tier) in keys {
        config = config.api_key(&api_key(tenant), tenant, tier);
    }
    config.yaml()
}

async fn send(http: &reqwest::Client, url: &str, tenant: &str) -> Reply {
    let resp = http
        .get(url)
        .header("x-api-key", api_key(tenant))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    Reply::read(resp).await.expect("read reply")
}

/// `n` requests released together, round robin over `urls`.
async fn burst(http: &reqwest::Client, urls: &[String], tenant: &str, n: usize) -> Vec<Reply> {
    let gate = Arc::new(tokio::sync::Barrier::new(n));
    let mut set = JoinSet::new();
    for i in 0..n {
        let (http, url, tenant, gate) = (
            http.clone(),
            urls[i % urls.len()].clone(),
            tenant.to_string(),
            gate.clone(),
        );
        set.spawn(async move {
            gate.wait().await;
            send(&http, &url, &tenant).await
        });
    }
    let mut out = vec![];
    while let Some(r) = set.join_next().await {
        out.push(r.expect("request task"));
    }
    out
}

fn count(replies: &[Reply], status: u16) -> usize {
    replies.iter().filter(|r| r.status == status).count()
}

fn retry_after(r: &Reply) -> u64 {
    r.header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {r:?}"))
        .parse()
        .expect("Retry-After seconds")
}

fn violated(r: &Reply) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(&r.body).expect("problem+json");
    serde_json::from_value(v["violated-policies"].clone()).expect("violated-policies")
}

/// One tier per algorithm, `A_<algorithm>: <spec>, algorithm: <algorithm>`, and one tenant in each.
fn per_algorithm(spec: &str, tenant_prefix: &str) -> (String, Vec<(String, String)>) {
    let mut tiers = String::new();
    let mut keys = vec![];
    for alg in ALGORITHMS {
        tiers.push_str(&format!("  A_{alg}: {{ {spec}, algorithm: {alg} }}\n"));
        keys.push((format!("{tenant_prefix}{alg}"), format!("A_{alg}")));
    }
    (tiers, keys)
}

/// 50 concurrent requests of one tenant at burst 5 are exactly 5 admissions, for every
/// algorithm; every admitted one reports a distinct `r`, every refusal names the tier and has a
/// `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_at_burst_five_admit_exactly_five_for_every_algorithm() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let (tiers, keys) = per_algorithm("limit: 1, per: 1h, burst: 5", "c-");
    let gw = Gateway::start(&yaml(&redis, &backend, &tiers, &keys));
    let http = client();
    for (tenant, tier) in &keys {
        let replies = burst(&http, &[gw.url("/")], tenant, 50).await;
        assert_eq!(
            count(&replies, 200),
            5,
            "{tier}: {:?}",
            replies.iter().map(|r| r.status).collect::<Vec<_>>()
        );
        assert_eq!(count(&replies, 429), 45, "{tier}");
        let mut r: Vec<u64> = replies
            .iter()
            .filter(|r| r.status == 200)
            .map(Reply::remaining)
            .collect();
        r.sort_unstable();
        assert_eq!(r, [0, 1, 2, 3, 4], "{tier}");
        for refused in replies.iter().filter(|r| r.status == 429) {
            assert_eq!(violated(refused), std::slice::from_ref(tier));
            assert!(retry_after(refused) >= 1);
            assert_eq!(
                refused.header("ratelimit-policy"),
                Some(format!("\"{tier}\";q=5;w=18000").as_str())
            );
        }
    }
    assert_eq!(backend.stats().requests, 30);
    // Each algorithm's key, under the tenant's hash tag, with a TTL.
    for (alg, suffix) in ALGORITHMS
        .iter()
        .zip(["tb", "gcra", "fw", "swl", "swc", "lb"])
    {
        let key = format!("tollgate:{{c-{alg}}}:{suffix}");
        assert!(redis.pttl(&key) > 0, "{key}: {}", redis.pttl(&key));
    }
}

/// Three gateways on one Redis enforce one limit for every algorithm: 60 concurrent requests
/// spread round robin at burst 20 are exactly 20 admissions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_on_one_redis_admit_exactly_the_burst_for_every_algorithm() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let (tiers, keys) = per_algorithm("limit: 1, per: 1h, burst: 20", "g-");
    let y = yaml(&redis, &backend, &tiers, &keys);
    let gws: Vec<Gateway> = (0..3).map(|_| Gateway::start(&y)).collect();
    let urls: Vec<String> = gws.iter().map(|g| g.url("/")).collect();
    let http = client();
    for (tenant, tier) in &keys {
        let replies = burst(&http, &urls, tenant, 60).await;
        assert_eq!(count(&replies, 200), 20, "{tier}");
        assert_eq!(count(&replies, 429), 40, "{tier}");
    }
}

/// For every algorithm: a refused client that waits exactly `Retry-After` is admitted, and an
/// `r > 0` on an admitted answer means the next request is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_retry_after_is_admitted_and_r_above_zero_is_kept_for_every_algorithm() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    // 2 per 4 s: Retry-After is at most a few seconds for every algorithm.
    let (tiers, keys) = per_algorithm("limit: 2, per: 4s", "w-");
    let gw = Gateway::start(&yaml(&redis, &backend, &tiers, &keys));
    let http = client();
    let mut set = JoinSet::new();
    for (tenant, tier) in keys {
        let (http, url) = (http.clone(), gw.url("/"));
        set.spawn(async move {
            let mut waited = 0;
            for _ in 0..8 {
                let r = send(&http, &url, &tenant).await;
                match r.status {
                    200 => {
                        if r.remaining() > 0 {
                            let next = send(&http, &url, &tenant).await;
                            assert_eq!(next.status, 200, "{tier}: r > 0 then refused");
                        }
                    }
                    429 => {
                        let s = retry_after(&r);
                        assert!((1..=8).contains(&s), "{tier}: Retry-After {s}");
                        tokio::time::sleep(Duration::from_secs(s)).await;
                        let again = send(&http, &url, &tenant).await;
                        assert_eq!(again.status, 200, "{tier}: waited Retry-After {s} s");
                        waited += 1;
                    }
                    other => panic!("{tier}: status {other}"),
                }
            }
            assert!(waited >= 2, "{tier}: never refused");
        });
    }
    while let Some(r) = set.join_next().await {
        r.expect("algorithm task");
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A daily quota and the main limit are one decision: a request refused by the quota debits
/// neither the main limit nor another quota, a request refused by the main limit debits no
/// quota, and the headers list every policy, report the tightest and the longest wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_and_main_limit_are_all_or_nothing_with_every_policy_in_the_headers() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tiers = "  Q: { limit: 1, per: 1h, burst: 5, quotas: [ { limit: 3, period: day }, { limit: 50, period: month } ] }\n\
                 \x20 M: { limit: 1, per: 1h, burst: 2, algorithm: gcra, quotas: [ { limit: 10, period: hour } ] }\n";
    let keys = [
        ("q".to_string(), "Q".to_string()),
        ("m".to_string(), "M".to_string()),
    ];
    let gw = Gateway::start(&yaml(&redis, &backend, tiers, &keys));
    let http = client();
    let url = gw.url("/");
    let mut statuses = vec![];
    for _ in 0..5 {
        statuses.push(send(&http, &url, "q").await);
    }
    assert_eq!(
        statuses.iter().map(|r| r.status).collect::<Vec<_>>(),
        [200, 200, 200, 429, 429]
    );
    let first = &statuses[0];
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"Q\";q=5;w=18000, \"Q.day\";q=3;w=86400, \"Q.month\";q=50;w=2592000")
    );
    assert_eq!(
        first.header("ratelimit").unwrap().split(';').next(),
        Some("\"Q.day\"")
    );
    assert_eq!(first.remaining(), 2);
    let refused = &statuses[3];
    assert_eq!(violated(refused), ["Q.day"]);
    assert_eq!(refused.remaining(), 0);
    // Retry-After counts to the next UTC midnight.
    let to_midnight = (86_400_000 - now_ms() % 86_400_000).div_ceil(1000);
    let ra = retry_after(refused);
    assert!(
        ra.abs_diff(to_midnight) <= 5,
        "Retry-After {ra} vs {to_midnight}"
    );
    // Neither refusal debited the main limit (3 of 5 used) nor the month (3 counted).
    let main = redis.hgetall("tollgate:{q}:tb");
    let level: u64 = main
        .iter()
        .find(|(k, _)| k == "l")
        .map(|(_, v)| v.parse().unwrap())
        .expect("level");
    // Two whole tokens (plus what refilled meanwhile at 1 token/h, far below a third).
    assert_eq!(level / 3_600_000, 2, "{main:?}");
    let month = redis.keys("tollgate:{q}:q:month:*");
    assert_eq!(month.len(), 1);
    let mut con = redis.conn();
    let counted: u64 = redis::cmd("GET").arg(&month[0]).query(&mut con).unwrap();
    assert_eq!(counted, 3);
    assert!(redis.pttl(&month[0]) > 0);

    // The other way round: the main limit (burst 2) refuses, the hour quota is not debited.
    let mut m = vec![];
    for _ in 0..3 {
        m.push(send(&http, &url, "m").await);
    }
    assert_eq!(
        m.iter().map(|r| r.status).collect::<Vec<_>>(),
        [200, 200, 429]
    );
    assert_eq!(violated(&m[2]), ["M"]);
    let hour = redis.keys("tollgate:{m}:q:hour:*");
    let counted: u64 = redis::cmd("GET").arg(&hour[0]).query(&mut con).unwrap();
    assert_eq!(counted, 2);
}

/// A quota at its calendar boundary: a full counter of the previous hour does not count in the
/// current one, a full counter of the current hour refuses until the next UTC hour boundary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hourly_quota_window_is_the_utc_hour() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tiers = "  H: { limit: 100, per: 1s, algorithm: sliding_window_counter, quotas: [ { limit: 5, period: hour } ] }\n";
    let keys = [
        ("h".to_string(), "H".to_string()),
        ("k".to_string(), "H".to_string()),
    ];
    let gw = Gateway::start(&yaml(&redis, &backend, tiers, &keys));
    let http = client();
    let mut con = redis.conn();
    let hour = now_ms() / 3_600_000 * 3_600_000;
    // A margin around the boundary: skip when the hour turns within the next 30 s.
    if now_ms() + 30_000 > hour + 3_600_000 {
        tokio::time::sleep(Duration::from_secs(31)).await;
    }
    let hour = now_ms() / 3_600_000 * 3_600_000;
    let set = |tenant: &str, start: u64, n: u64, con: &mut redis::Connection| {
        let key = format!("tollgate:{{{tenant}}}:q:hour:{start}");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(n)
            .arg("PX")
            .arg(7_200_000)
            .query(con)
            .unwrap();
    };
    set("h", hour - 3_600_000, 5, &mut con);
    assert_eq!(send(&http, &gw.url("/"), "h").await.status, 200);
    set("k", hour, 5, &mut con);
    let r = send(&http, &gw.url("/"), "k").await;
    assert_eq!(r.status, 429);
    assert_eq!(violated(&r), ["H.hour"]);
    let to_next = (hour + 3_600_000 - now_ms()).div_ceil(1000);
    assert!(
        retry_after(&r).abs_diff(to_next) <= 5,
        "{} vs {to_next}",
        retry_after(&r)
    );
}

/// Reloading a tier from one algorithm to another uses the new algorithm's own key: the old
/// state is not read as the new one, and switching back finds the old state intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_between_algorithms_never_misreads_the_old_state() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let keys = [("r".to_string(), "R".to_string())];
    let conf = |alg: &str| {
        yaml(
            &redis,
            &backend,
            &format!("  R: {{ limit: 1, per: 1h, burst: 3, algorithm: {alg} }}\n"),
            &keys,
        )
    };
    let gw = Gateway::start(&conf("fixed_window"));
    let http = client();
    let url = gw.url("/");
    let mut s = vec![];
    for _ in 0..4 {
        s.push(send(&http, &url, "r").await.status);
    }
    assert_eq!(s, [200, 200, 200, 429]);
    let fw_before = redis.hgetall("tollgate:{r}:fw");
    let reloads = |gw: &Gateway| gw.metric_or_zero("tollgate_config_reloads_total{result=\"ok\"}");
    for (alg, fresh) in [
        ("gcra", true),
        ("sliding_window_log", true),
        ("fixed_window", false),
    ] {
        let before = reloads(&gw);
        gw.reload(&conf(alg));
        assert!(
            wait_until(Duration::from_secs(10), || reloads(&gw) > before),
            "reload to {alg}"
        );
        let first = send(&http, &url, "r").await;
        assert_eq!(first.status == 200, fresh, "{alg}: {first:?}");
        if fresh {
            assert_eq!(first.remaining(), 2, "{alg} starts from a full limit");
        }
    }
    assert_eq!(redis.hgetall("tollgate:{r}:fw"), fw_before);
}

/// `leaky_bucket` shapes: of 8 concurrent requests at 1/s, burst 1 and max_delay 2.5 s, one
/// passes at once, two are delayed to their slots (1 s and 2 s later) and five are refused
/// (the next slot is 3 s away: a margin of 0.5 s for the requests' arrival spread); delays are at
/// least the slot (a timer never fires early).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_bucket_delays_up_to_max_delay_then_refuses() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tiers =
        "  L: { limit: 1, per: 1s, burst: 1, algorithm: leaky_bucket, max_delay: 2500ms }\n";
    let keys = [("l".to_string(), "L".to_string())];
    let gw = Gateway::start(&yaml(&redis, &backend, tiers, &keys));
    let http = client();
    let started = Instant::now();
    let gate = Arc::new(tokio::sync::Barrier::new(8));
    let mut set = JoinSet::new();
    for _ in 0..8 {
        let (http, url, gate) = (http.clone(), gw.url("/"), gate.clone());
        set.spawn(async move {
            gate.wait().await;
            let r = send(&http, &url, "l").await;
            (r, started.elapsed())
        });
    }
    let mut done = vec![];
    while let Some(r) = set.join_next().await {
        done.push(r.expect("task"));
    }
    let mut admitted: Vec<Duration> = done
        .iter()
        .filter(|(r, _)| r.status == 200)
        .map(|(_, t)| *t)
        .collect();
    admitted.sort();
    assert_eq!(
        admitted.len(),
        3,
        "{:?}",
        done.iter().map(|(r, _)| r.status).collect::<Vec<_>>()
    );
    assert_eq!(done.iter().filter(|(r, _)| r.status == 429).count(), 5);
    assert!(admitted[1] >= Duration::from_millis(900), "{admitted:?}");
    assert!(admitted[2] >= Duration::from_millis(1_900), "{admitted:?}");
    for (r, _) in done.iter().filter(|(r, _)| r.status == 429) {
        assert_eq!(violated(r), ["L"]);
        assert!(retry_after(r) >= 1);
    }
}

/// A tenant's requests are served in order: a request sent after another is never answered
/// before it, with both delayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_bucket_never_reorders_a_tenants_requests() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tiers = "  L: { limit: 1, per: 1s, burst: 1, algorithm: leaky_bucket, max_delay: 10s }\n";
    let keys = [("o".to_string(), "L".to_string())];
    let gw = Gateway::start(&yaml(&redis, &backend, tiers, &keys));
    let http = client();
    let order = Arc::new(parking_lot::Mutex::new(vec![]));
    let mut set = JoinSet::new();
    for i in 0..5 {
        let (http, url, order) = (http.clone(), gw.url("/"), order.clone());
        set.spawn(async move {
            let r = send(&http, &url, "o").await;
            assert_eq!(r.status, 200, "request {i}");
            order.lock().push(i);
        });
        // Sent 300 ms apart; slots are 1 s apart, so each one is delayed.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    while let Some(r) = set.join_next().await {
        r.expect("task");
    }
    assert_eq!(*order.lock(), [0, 1, 2, 3, 4]);
}

/// A client that disconnects while delayed gives its slot back: the bucket's state returns to
/// what it was before that request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_bucket_disconnect_while_delayed_gives_the_slot_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tiers = "  L: { limit: 1, per: 2s, burst: 1, algorithm: leaky_bucket, max_delay: 10s }\n";
    let keys = [("d".to_string(), "L".to_string())];
    let gw = Gateway::start(&yaml(&redis, &backend, tiers, &keys));
    let http = client();
    assert_eq!(send(&http, &gw.url("/"), "d").await.status, 200);
    let after_first = redis.hgetall("tollgate:{d}:lb");
    // The second request is delayed ~2 s; its client gives up after 300 ms.
    let impatient = client_builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let gave_up = impatient
        .get(gw.url("/"))
        .header("x-api-key", api_key("d"))
        .send()
        .await;
    assert!(
        gave_up.is_err(),
        "delayed request answered early: {gave_up:?}"
    );
    let restored = wait_until(Duration::from_secs(5), || {
        redis.hgetall("tollgate:{d}:lb") == after_first
    });
    assert!(
        restored,
        "{:?} vs {after_first:?}",
        redis.hgetall("tollgate:{d}:lb")
    );
    assert_eq!(
        backend.stats().requests,
        1,
        "the abandoned request reached the backend"
    );
}

/// `edge.algorithm: gcra` limits each client address like the token bucket does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_gcra_limits_each_client() {
    let backend = Backend::start("echo");
    let y = GatewayConfig::echo(&backend.addr(), "none")
        .edge("{ limit: 1, per: 1h, burst: 3, algorithm: gcra }")
        .yaml();
    let gw = Gateway::start(&y);
    let a = client_from(ip("127.0.0.2"));
    let b = client_from(ip("127.0.0.3"));
    let mut got = vec![];
    for _ in 0..4 {
        got.push(a.get(gw.url("/")).send().await.unwrap().status().as_u16());
    }
    assert_eq!(got, [200, 200, 200, 429]);
    assert_eq!(
        b.get(gw.url("/")).send().await.unwrap().status().as_u16(),
        200
    );
}

/// With Redis down and `on_failure: local`, every algorithm still decides, in memory, at its
/// local share (burst 4 / fleet_size 2 = 2, 1 token per hour), and every answer says it is
/// degraded. The Retry-After of the first refusal shows which algorithm decided: the bucket family
/// waits for one token (1 h), the log for its oldest entry (W = 2 h), the fixed window for the end
/// of its 2 h window (aligned to the gateway's start), the sliding counter until half of the
/// current window's weight has slid out of the next one (2 h + 1 h).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_fallback_runs_each_tiers_algorithm_in_memory() {
    let mut redis = RedisServer::start();
    let backend = Backend::start("echo");
    let (tiers, keys) = per_algorithm("limit: 1, per: 1h, burst: 4", "f-");
    let opts = "timeout_ms: 200, fleet_size: 2, on_failure: local";
    let gw = Gateway::start(&yaml_with(&redis, &backend, &tiers, &keys, opts));
    redis.kill();
    let http = client();
    for (tenant, tier) in &keys {
        let mut replies = vec![];
        for _ in 0..5 {
            let r = send(&http, &gw.url("/"), tenant).await;
            assert_eq!(
                r.header("tollgate-degraded"),
                Some("redis"),
                "{tier}: {r:?}"
            );
            replies.push(r);
        }
        let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [200, 200, 429, 429, 429], "{tier}");
        let wait = retry_after(&replies[2]);
        let want = match tier.as_str() {
            "A_sliding_window_log" => 7_200..=7_200,
            "A_fixed_window" => 7_000..=7_200,
            "A_sliding_window_counter" => 10_600..=10_800,
            _ => 3_600..=3_600,
        };
        assert!(
            want.contains(&wait),
            "{tier}: Retry-After {wait}, expected {want:?}"
        );
    }
}
