//! State written under one clock and read under another (issue 11, fault 2), black-box: a
//! tenant bucket in Redis whose stored refill stamp is ahead of Redis `TIME` (Redis restored from
//! a snapshot of a machine with a faster clock, a promoted replica, an operator's clock step).
//!
//! The rule (docs/configuration.md#clocks-tenant-ids-and-config-bounds): a stamp in the future counts as now;
//! the bucket keeps its level and refills from now on, so `Retry-After` stays truthful. Real
//! `redis-server`, real backend, real gateway; the stamp is set relative to Redis `TIME`.

mod common;

use common::*;
use std::time::Duration;

const KEY_A: &str = "clock-steps-key-a-0123456789";
const KEY_B: &str = "clock-steps-key-b-0123456789";

fn yaml(redis: &RedisServer, backend: &Backend) -> String {
    GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier("T", "{ limit: 1, per: 1s, burst: 2 }")
        .api_key(KEY_A, "ta", "T")
        .api_key(KEY_B, "tb", "T")
        .yaml()
}

fn redis_time_ms(con: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con).expect("TIME");
    s * 1000 + us / 1000
}

/// Writes `tollgate:{tenant}:tb` as the script would have: `tokens` whole tokens at scale 1000
/// (per 1s), stamped `ahead_ms` after the current Redis `TIME`.
fn write_future_bucket(redis: &RedisServer, tenant: &str, tokens: u64, ahead_ms: u64) {
    let mut con = redis.conn();
    let stamp = redis_time_ms(&mut con) + ahead_ms;
    let key = format!("tollgate:{{{tenant}}}:tb");
    common::set_bucket(&mut con, &key, (tokens * 1000) as i64, 1000, stamp);
}

fn retry_after_s(r: &Reply) -> u64 {
    r.header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("429 without a numeric Retry-After: {r:?}"))
}

/// Issue 11 fault 2 reproduction: stamp = TIME + 30 s, one token, burst 2, 1 token/s. The tenant
/// spends its token, is told `Retry-After: 1`, waits exactly that, and must be admitted (before
/// the fix it stayed refused until Redis `TIME` passed the stamp, 30 s later). A second tenant
/// starts with an empty bucket stamped in the future: its first answer is already a refusal, and
/// waiting it out must admit too (the rebase must be stored even on a rejection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_stamped_bucket_admits_after_retry_after() {
    let redis = RedisServer::start();
    let backend = Backend::start("clock");
    let gw = Gateway::start(&yaml(&redis, &backend));
    let http = client();
    let url = gw.url("/x");
    write_future_bucket(&redis, "ta", 1, 30_000);
    write_future_bucket(&redis, "tb", 0, 30_000);

    let first = try_get_with_key(&http, &url, Some(KEY_A)).await.unwrap();
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.remaining(), 0);
    let refused = try_get_with_key(&http, &url, Some(KEY_A)).await.unwrap();
    assert_eq!(refused.status, 429, "{refused:?}");
    let wait_a = retry_after_s(&refused);
    assert_eq!(wait_a, 1, "1 token/s, at most 1 s to wait: {refused:?}");

    let refused_b = try_get_with_key(&http, &url, Some(KEY_B)).await.unwrap();
    assert_eq!(refused_b.status, 429, "{refused_b:?}");
    let wait_b = retry_after_s(&refused_b);
    assert_eq!(wait_b, 1, "{refused_b:?}");

    // Both waits started after Redis computed them; sleeping the advertised seconds is enough.
    tokio::time::sleep(Duration::from_secs(wait_a.max(wait_b))).await;
    let after_a = try_get_with_key(&http, &url, Some(KEY_A)).await.unwrap();
    assert_eq!(
        after_a.status, 200,
        "tenant ta told Retry-After {wait_a}: {after_a:?}"
    );
    let after_b = try_get_with_key(&http, &url, Some(KEY_B)).await.unwrap();
    assert_eq!(
        after_b.status, 200,
        "tenant tb told Retry-After {wait_b}: {after_b:?}"
    );

    // The stored stamps are no longer in the future: the buckets were rebased to Redis TIME.
    let mut con = redis.conn();
    let now = redis_time_ms(&mut con);
    for tenant in ["ta", "tb"] {
        let key = format!("tollgate:{{{tenant}}}:tb");
        let t: u64 = common::key_field(&mut con, &key, "t")
            .expect("t")
            .parse()
            .expect("stamp");
        assert!(t <= now, "{tenant}: stamp {t} still ahead of TIME {now}");
    }
}
