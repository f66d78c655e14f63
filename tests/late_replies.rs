//! Script calls that got no reply within `redis.timeout_ms` (docs/redis.md#calls-that-time-out):
//! the request gets its failure-policy answer, then the call still runs in Redis once it
//! answers again. Its late reply is read, and what the script debited is given back, so the
//! tenant's state is as if the call never ran. Real `redis-server` frozen with SIGSTOP while one
//! request is decided, real gateway and echo backend; every limit refills one token a day, so
//! the counts are exact.
//!
//! Also: a call answered in time costs no extra Redis command (`INFO commandstats`).

mod common;

use common::*;
use std::time::Duration;

/// Fails open after 300 ms; the breaker stays closed through one failure.
const REDIS: &str = "timeout: 300ms, on_failure: open, circuit_breaker: { min_calls: 1000 }";
const KEY: &str = "key-k1-0123456789";
const COMPENSATED: &str = "tollgate_redis_late_replies_total{outcome=\"compensated\"}";

fn start(redis: &RedisServer, backend: &Backend, tier: &str, rules: Option<&str>) -> Gateway {
    let mut c = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), REDIS)
        .tier("T", tier)
        .api_keys_always()
        .api_key(KEY, "k1", "T");
    if let Some(rules) = rules {
        c = c.section("limits", &format!("\n{rules}"));
    }
    Gateway::start(&c.yaml())
}

async fn get(gw: &Gateway, path: &str) -> Reply {
    let resp = client()
        .get(gw.url(path))
        .header("x-api-key", KEY)
        .send()
        .await
        .expect("send");
    Reply::read(resp).await.expect("read")
}

/// One request while Redis is frozen: answered by the failure policy (`open`: 200). Then Redis
/// is thawed, and the gateway is waited for until it has given back `calls` late calls' debits.
async fn frozen_request(gw: &Gateway, redis: &RedisServer, path: &str, calls: f64) {
    redis.pause();
    let during = get(gw, path).await;
    redis.resume();
    assert_eq!(during.status, 200, "{}", during.body);
    assert!(
        during.header("ratelimit").is_none(),
        "decided by the failure policy, not by Redis: {during:?}"
    );
    let done = eventually(Duration::from_secs(10), || {
        gw.metric_or_zero(COMPENSATED) >= calls
    })
    .await;
    assert!(
        done,
        "late calls given back: {}\n{}",
        gw.metric_or_zero(COMPENSATED),
        gw.metrics()
    );
}

fn statuses(replies: &[Reply]) -> Vec<u16> {
    replies.iter().map(|r| r.status).collect()
}

/// An integer field of a hash, or a plain key's value (`field` empty).
fn read(redis: &RedisServer, key: &str, field: &str) -> Option<i64> {
    let mut con = redis.conn();
    let v: Option<String> = if field.is_empty() {
        redis::cmd("GET").arg(key).query(&mut con).expect("GET")
    } else {
        common::key_field(&mut con, key, field)
    };
    v.map(|v| v.parse().expect("integer"))
}

/// A token bucket tier (burst 3): the frozen request's debit is given back, so after one
/// request answered by Redis the bucket holds 2 tokens, exactly as before the frozen one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bucket_debit_that_timed_out_is_given_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(&redis, &backend, "{ limit: 1, per: 1d, burst: 3 }", None);
    assert_eq!(get(&gw, "/").await.remaining(), 2);
    frozen_request(&gw, &redis, "/", 1.0).await;
    let level = read(&redis, "tollgate:{k1}:tb", "l").expect("bucket");
    assert_eq!(level / 86_400_000, 2, "whole tokens left");
    let mut after = vec![];
    for _ in 0..3 {
        after.push(get(&gw, "/").await);
    }
    assert_eq!(statuses(&after), [200, 200, 429]);
    assert_eq!(after[0].remaining(), 1);
}

/// Two rules on one route: GCRA keyed by tenant (decided with the tier, one call) and a fixed
/// window keyed by route (its own hash tag, a second call). Both calls time out while Redis is
/// frozen; both debits are given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_debits_that_timed_out_are_given_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules = "  - { name: per-tenant, match: { routes: [\"/r\"] }, key: [tenant], limit: 1, per: 1d, burst: 3, algorithm: gcra }\n  - { name: per-route, match: { routes: [\"/r\"] }, key: [route], limit: 3, per: 1d, algorithm: fixed_window }\n";
    let gw = start(
        &redis,
        &backend,
        "{ limit: 1, per: 1d, burst: 1000 }",
        Some(rules),
    );
    assert_eq!(get(&gw, "/r").await.status, 200);
    frozen_request(&gw, &redis, "/r", 2.0).await;
    let windows = redis.keys("tollgate:*per-route*");
    assert_eq!(windows.len(), 1, "{windows:?}");
    assert_eq!(
        read(&redis, &windows[0], "c"),
        Some(1),
        "fixed window count"
    );
    let mut after = vec![];
    for _ in 0..3 {
        after.push(get(&gw, "/r").await);
    }
    assert_eq!(statuses(&after), [200, 200, 429], "{:?}", after[2].body);
}

/// A calendar quota (3 a day) on a sliding-window-log tier: the day's counter and the log
/// are as if the frozen request had never been decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calendar_quota_debit_that_timed_out_is_given_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tier = "{ limit: 100, per: 1d, algorithm: sliding_window_log, quotas: [ { limit: 3, period: day } ] }";
    let gw = start(&redis, &backend, tier, None);
    assert_eq!(get(&gw, "/").await.status, 200);
    frozen_request(&gw, &redis, "/", 1.0).await;
    let day = redis.keys("tollgate:{k1}:q:day:*");
    assert_eq!(day.len(), 1, "{day:?}");
    assert_eq!(read(&redis, &day[0], ""), Some(1), "the day's count");
    let log: i64 = redis::cmd("LLEN")
        .arg("tollgate:{k1}:swl")
        .query(&mut redis.conn())
        .expect("LLEN");
    assert_eq!(log, 1, "entries in the log");
    let mut after = vec![];
    for _ in 0..3 {
        after.push(get(&gw, "/").await);
    }
    assert_eq!(statuses(&after), [200, 200, 429]);
}

/// A usage budget's reserve (100 of 1000 units, kept: the echo states no usage): the frozen
/// request's reserve is given back, so the budget holds 900 units after one request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_usage_reserve_that_timed_out_is_given_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tier = "{ limit: 1, per: 1d, burst: 1000, usage: { limit: 1, per: 1d, burst: 1000, \
                max: 500, from: { openai: true }, reserve: { from_json: max_tokens, default: 100 } } }";
    let gw = start(&redis, &backend, tier, None);
    let settled = "tollgate_usage_settlements_total{tier=\"T\",outcome=\"missing\"}";
    assert_eq!(get(&gw, "/").await.status, 200);
    assert!(
        eventually(Duration::from_secs(10), || gw.metric_or_zero(settled)
            >= 1.0)
        .await
    );
    let level = || read(&redis, "tollgate:{k1}:u:tokens", "l").map(|l| l / 86_400_000);
    assert_eq!(level(), Some(900));
    frozen_request(&gw, &redis, "/", 1.0).await;
    assert_eq!(level(), Some(900), "the frozen request's reserve is back");
}

/// Calls answered in time cost nothing more: five requests are five EVALSHA, each running only
/// the token bucket's own commands (commands run by scripts count in `INFO commandstats`), and
/// the tenant's bucket is the only key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_answered_in_time_cost_no_extra_command() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = start(&redis, &backend, "{ limit: 1, per: 1d, burst: 100 }", None);
    // Loads the script (SCRIPT LOAD after NOSCRIPT) before counting.
    assert_eq!(get(&gw, "/").await.status, 200);
    redis.reset_stats();
    for _ in 0..5 {
        assert_eq!(get(&gw, "/").await.status, 200);
    }
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut redis.conn())
        .expect("INFO");
    let mut calls: Vec<(String, u64)> = info
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cmdstat_")?.split_once(':'))
        .map(|(name, _)| (name.to_string(), parse_command_calls(&info, name)))
        .filter(|(name, _)| name != "info" && name != "config|resetstat")
        .collect();
    calls.sort();
    // The script's own commands, once a call: nothing written or read besides the bucket.
    let expected: Vec<(String, u64)> = ["evalsha", "get", "set", "time"]
        .iter()
        .map(|c| (c.to_string(), 5))
        .collect();
    assert_eq!(calls, expected, "{info}");
    let keys = redis.keys("*");
    assert_eq!(keys, ["tollgate:{k1}:tb"]);
    assert_eq!(gw.metric_or_zero(COMPENSATED), 0.0);
}

/// A burst pool (a tenant's share: 2 tokens): the tenant's own bucket (1 token) refuses, and
/// the refusal is remembered, so the frozen request's only Redis call is the pool's. Its debit
/// of the pool and of the share is given back: the share still admits one more request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_pool_debit_that_timed_out_is_given_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tier =
        "{ limit: 1, per: 1d, burst: 1, pool: { limit: 1, per: 1d, burst: 4, max_share: 0.5 } }";
    let gw = start(&redis, &backend, tier, None);
    let before: Vec<u16> = statuses(&[get(&gw, "/").await, get(&gw, "/").await]);
    assert_eq!(before, [200, 200], "own bucket, then the pool");
    redis.pause();
    let during = get(&gw, "/").await;
    redis.resume();
    assert_eq!(
        during.status, 429,
        "the pool could not be asked: {}",
        during.body
    );
    let done = eventually(Duration::from_secs(10), || {
        gw.metric_or_zero(COMPENSATED) >= 1.0
    })
    .await;
    assert!(done, "{}", gw.metrics());
    let pool = read(&redis, "tollgate:{pool:T}:tb", "l").expect("pool");
    assert_eq!(pool / 86_400_000, 3, "pool tokens left");
    let after = statuses(&[get(&gw, "/").await, get(&gw, "/").await]);
    assert_eq!(after, [200, 429], "the share's second token, then none");
}

/// A leased tier (5 tokens a lease, bucket of 10): the lease call made while Redis is frozen is
/// granted once Redis answers; that grant is given back to the bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_grant_that_timed_out_is_given_back() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let tier = "{ limit: 1, per: 1d, burst: 10, lease: { tokens: 5, max_hold: 1m } }";
    let gw = start(&redis, &backend, tier, None);
    // The first request leases 5 tokens; the next 4 are admitted from them.
    for _ in 0..5 {
        assert_eq!(get(&gw, "/").await.status, 200);
    }
    let level = || read(&redis, "tollgate:{k1}:tb", "l").map(|l| l / 86_400_000);
    assert_eq!(level(), Some(5));
    frozen_request(&gw, &redis, "/", 1.0).await;
    assert_eq!(level(), Some(5), "the late grant is back in the bucket");
    let mut after = vec![];
    for _ in 0..6 {
        after.push(get(&gw, "/").await);
    }
    assert_eq!(statuses(&after), [200, 200, 200, 200, 200, 429]);
}
