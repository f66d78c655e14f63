//! How the gateway gets its Lua scripts run on servers that do not keep or load them: a server
//! that refuses `SCRIPT LOAD` (an ACL without `script|load`, as some managed services set up)
//! and a script cache flushed under the gateway. Real `redis-server` (or Valkey, the second
//! pass of `scripts/test.sh`), backend and gateway.

mod common;
#[path = "common/redis_topology.rs"]
mod redis_topology;

use common::*;
use redis_topology::*;

/// A burst of 5 that does not refill within the test; `closed`, so any failed call is a 503.
const TIER: &str = "  t: { limit: 1, per: 1d, burst: 5, on_failure: closed }\n";

/// With `SCRIPT LOAD` forbidden to the gateway's user, every decision is still made by the
/// server (EVAL with the source after NOSCRIPT, never a failed call), exactly the burst is
/// admitted, and a `SCRIPT FLUSH` meanwhile changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_script_load_decides_every_request_by_eval() {
    const SECRET: &str = "scr1pt-Pass-7d2b";
    let redis = RedisNode::start(&[]);
    redis.acl_user("gw", SECRET, &["-script|load"]);
    let backend = Backend::start("echo");
    let config = ha_gateway_yaml(
        &format!(
            "url: \"{}\", username_env: TG_REDIS_USER, password_env: TG_REDIS_PASSWORD, \
             timeout: 2000ms",
            redis.url()
        ),
        TIER,
        &[("acme".to_string(), "t"), ("beta".to_string(), "t")],
        &backend.addr(),
    );
    let gw = Gateway::start_with_env(
        &config,
        &[("TG_REDIS_USER", "gw"), ("TG_REDIS_PASSWORD", SECRET)],
    );
    let http = http();
    let mut seen = Vec::new();
    for tenant in ["acme", "beta"] {
        for i in 0..7 {
            if i == 3 {
                redis.cmd(&["SCRIPT", "FLUSH"]);
            }
            let (v, r) = ask(&http, &gw.url("/x"), tenant).await;
            seen.push((tenant, v));
            let want = if i < 5 {
                Verdict::RedisAdmitted
            } else {
                Verdict::RedisRejected
            };
            assert_eq!(v, want, "{tenant} request {i}: {r:?}\n{}", gw.log_tail(20));
        }
    }
    let failed_loads = redis.info("commandstats");
    assert!(
        failed_loads.contains("cmdstat_eval:"),
        "the scripts ran by EVAL: {failed_loads}"
    );
    println!("verdicts: {seen:?}");
}

/// A tier of 60 tokens that does not refill within the test, `closed`.
const LOADED_TIER: &str = "  t: { limit: 1, per: 1d, burst: 60, on_failure: closed }\n";
const TENANTS: [&str; 4] = ["acme", "beta", "gamma", "delta"];

/// Tokens spent from `tenant`'s token bucket in `redis` (burst less the level left).
fn spent(redis: &RedisNode, tenant: &str, burst: i64) -> i64 {
    let v = redis.cmd(&["GET", &format!("tollgate:{{{tenant}}}:tb")]);
    let raw: Option<String> = redis::from_redis_value(v).expect("GET bucket");
    let pairs = raw.map(|r| common::bucket_pairs(&r)).unwrap_or_default();
    let field = |f: &str| -> Option<i64> {
        let v = pairs.iter().find(|(n, _)| n == f)?;
        Some(v.1.parse().expect("integer"))
    };
    match (field("l"), field("s")) {
        (Some(l), Some(s)) => burst - l / s,
        _ => 0,
    }
}

/// Sends requests for every tenant from `per_tenant` concurrent loops until `stop`, or until
/// each loop has sent `max` requests, each loop pausing `pause` after each request (so the load
/// lasts at least `max` pauses however fast the gateway answers); returns every verdict per
/// tenant.
async fn load(
    url: String,
    per_tenant: usize,
    max: usize,
    pause: std::time::Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::collections::HashMap<&'static str, Vec<Verdict>> {
    let http = http();
    let mut tasks = tokio::task::JoinSet::new();
    for tenant in TENANTS {
        for _ in 0..per_tenant {
            let (http, url, stop) = (http.clone(), url.clone(), stop.clone());
            tasks.spawn(async move {
                let mut seen = Vec::new();
                while seen.len() < max && !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    seen.push(ask(&http, &url, tenant).await.0);
                    tokio::time::sleep(pause).await;
                }
                (tenant, seen)
            });
        }
    }
    let mut out: std::collections::HashMap<&'static str, Vec<Verdict>> = Default::default();
    while let Some(r) = tasks.join_next().await {
        let (tenant, seen) = r.expect("load task");
        out.entry(tenant).or_default().extend(seen);
    }
    out
}

/// Every verdict a decision by Redis, and per tenant the tokens Redis shows spent equal to the
/// admissions (a script run twice would spend more than was admitted).
fn assert_decided_once(
    redis: &RedisNode,
    verdicts: &std::collections::HashMap<&'static str, Vec<Verdict>>,
    burst: i64,
) {
    for (tenant, seen) in verdicts {
        let odd: Vec<_> = seen
            .iter()
            .filter(|v| !matches!(v, Verdict::RedisAdmitted | Verdict::RedisRejected))
            .collect();
        assert!(odd.is_empty(), "{tenant}: failed decisions {odd:?}");
        let admitted = seen
            .iter()
            .filter(|v| **v == Verdict::RedisAdmitted)
            .count() as i64;
        assert_eq!(
            spent(redis, tenant, burst),
            admitted,
            "{tenant}: tokens spent in Redis against admissions ({} requests)",
            seen.len()
        );
    }
}

/// `SCRIPT FLUSH` four times a second while four tenants send concurrently: no decision fails
/// (each NOSCRIPT is loaded and retried within the call) and no script runs twice (the tokens
/// each bucket lost are exactly the requests it admitted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flushes_under_load_fail_no_decision_and_debit_once() {
    let redis = RedisNode::start(&[]);
    let backend = Backend::start("echo");
    let keys: Vec<_> = TENANTS.iter().map(|t| (t.to_string(), "t")).collect();
    let config = ha_gateway_yaml(
        &format!(
            "url: \"{}\", timeout: 2000ms, circuit_breaker: {{ min_calls: 100000 }}",
            redis.url()
        ),
        LOADED_TIER,
        &keys,
        &backend.addr(),
    );
    let gw = Gateway::start(&config);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flusher = {
        let (stop, url) = (stop.clone(), redis.url());
        std::thread::spawn(move || {
            let client = redis::Client::open(url).expect("url");
            let mut con = client.get_connection().expect("connect");
            let mut flushes = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query::<()>(&mut con)
                    .expect("SCRIPT FLUSH");
                flushes += 1;
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            flushes
        })
    };
    // 30 requests 40 ms apart per loop: the load lasts over a second, several flushes.
    let pause = std::time::Duration::from_millis(40);
    let verdicts = load(gw.url("/x"), 4, 30, pause, stop.clone()).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flushes = flusher.join().expect("flusher");
    let loads = redis.info("commandstats");
    println!("{flushes} flushes; {loads}");
    assert!(flushes >= 2, "{flushes} flushes during the load");
    assert!(
        loads.contains("cmdstat_script|load:"),
        "NOSCRIPT was met: {loads}"
    );
    assert_decided_once(&redis, &verdicts, 60);
    for (tenant, seen) in &verdicts {
        let admitted = seen
            .iter()
            .filter(|v| **v == Verdict::RedisAdmitted)
            .count();
        assert_eq!(
            admitted, 60,
            "{tenant}: 120 requests admit exactly the burst"
        );
    }
}

/// A failover under load to a replica whose script cache is empty: the old master's writes are
/// held (`CLIENT PAUSE WRITE`) until the replica has them all, the replica is promoted and its
/// scripts flushed, the address moves and the old master is killed. No decision fails and the
/// new master's buckets show exactly the tokens admitted, before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_to_a_replica_without_the_script_fails_no_decision_and_debits_once() {
    let mut old = RedisNode::start(&[]);
    let new = RedisNode::start(&["--replicaof", "127.0.0.1", &old.port.to_string()]);
    let relay = TcpRelay::start(&old.addr());
    let backend = Backend::start("echo");
    let keys: Vec<_> = TENANTS.iter().map(|t| (t.to_string(), "t")).collect();
    let config = ha_gateway_yaml(
        &format!(
            "url: \"{}\", timeout: 3000ms, circuit_breaker: {{ min_calls: 100000 }}",
            relay.url()
        ),
        "  t: { limit: 1, per: 1d, burst: 1000, on_failure: closed }\n",
        &keys,
        &backend.addr(),
    );
    let gw = Gateway::start(&config);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let traffic = tokio::spawn(load(
        gw.url("/x"),
        3,
        10_000,
        std::time::Duration::ZERO,
        stop.clone(),
    ));
    // Some decisions on the old master first.
    assert!(
        wait_until(std::time::Duration::from_secs(20), || {
            TENANTS.iter().all(|t| spent(&old, t, 1000) >= 5)
        }),
        "traffic reached the old master"
    );
    old.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]);
    assert!(
        wait_replica_caught_up(&old, &new, std::time::Duration::from_secs(10)),
        "the replica has every write"
    );
    new.cmd(&["REPLICAOF", "NO", "ONE"]);
    new.cmd(&["SCRIPT", "FLUSH"]);
    relay.point_to(&new.addr());
    old.kill();
    // Decisions on the new master, then stop.
    let before: Vec<i64> = TENANTS.iter().map(|t| spent(&new, t, 1000)).collect();
    assert!(
        wait_until(std::time::Duration::from_secs(20), || {
            TENANTS
                .iter()
                .zip(&before)
                .all(|(t, b)| spent(&new, t, 1000) >= b + 5)
        }),
        "traffic reached the new master; log:\n{}",
        gw.log_tail(20)
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let verdicts = traffic.await.expect("traffic");
    let loads = new.info("commandstats");
    assert!(
        loads.contains("cmdstat_script|load:") || loads.contains("cmdstat_eval:"),
        "the new master was sent the script: {loads}"
    );
    assert_decided_once(&new, &verdicts, 1000);
}
