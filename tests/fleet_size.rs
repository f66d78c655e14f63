//! Issue 14, point 7: `redis.fleet_size: auto`. Instances heartbeat into a membership key in
//! Redis, learn the live fleet size, and size the `local` fallback by the last size seen.
//! Four real gateways share one real Redis; Redis is killed, each falls back to `burst / 4`;
//! two gateways are killed, Redis comes back, the survivors learn the fleet is two, Redis is
//! killed again and each falls back to `burst / 2`. Tiers never refill, so counts are exact.

mod common;
#[path = "common/redis_topology.rs"]
mod redis_topology;

use common::*;
use redis_topology::*;
use std::time::Duration;

const TIER: &str = "  t: { limit: 1, per: 1d, burst: 40, on_failure: local }\n";
const FLEET: &str = "tollgate_fleet_size";

/// Requests as `tenant` until the local fallback rejects one; returns how many it admitted.
async fn local_admits(http: &reqwest::Client, gw: &Gateway, tenant: &str) -> usize {
    let mut admitted = 0;
    for _ in 0..100 {
        let (v, r) = ask(http, &gw.url("/x"), tenant).await;
        match v {
            Verdict::LocalAdmitted => admitted += 1,
            Verdict::LocalRejected => return admitted,
            other => panic!("{other:?} while Redis is down: {r:?}"),
        }
    }
    panic!("the local fallback never rejected");
}

async fn wait_fleet(gws: &[&Gateway], size: f64) {
    for gw in gws {
        let seen = eventually(Duration::from_secs(20), || gw.metric_or_zero(FLEET) == size).await;
        assert!(
            seen,
            "fleet size {} instead of {size}: {}",
            gw.metric_or_zero(FLEET),
            gw.log_tail(10)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_fallback_follows_the_live_fleet_size() {
    let mut redis = RedisServer::start();
    let backend = Backend::start("echo");
    let keys = vec![("a".to_string(), "t"), ("b".to_string(), "t")];
    let yaml = ha_gateway_yaml(
        &format!(
            "url: \"{}\", fleet_size: auto, timeout_ms: 200",
            redis.url()
        ),
        TIER,
        &keys,
        &backend.addr(),
    );
    let mut gws: Vec<Gateway> = (0..4).map(|_| Gateway::start(&yaml)).collect();
    let http = http();

    // Four live instances: each sees four, and Redis holds four members.
    wait_fleet(&gws.iter().collect::<Vec<_>>(), 4.0).await;
    let members: i64 = redis::cmd("ZCARD")
        .arg("tollgate:{fleet}:members")
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(members, 4);

    // Redis down: each instance admits burst / 4 = 10 of tenant a on its own.
    redis.kill();
    for gw in &gws {
        assert_eq!(local_admits(&http, gw, "a").await, 10);
        assert_eq!(gw.metric_or_zero(FLEET), 4.0, "the last size seen stays");
    }

    // Scale in to two, Redis back: the survivors learn the fleet is two once the two killed
    // instances' heartbeats are older than the member TTL.
    gws[3].kill();
    gws[2].kill();
    gws.truncate(2);
    redis.restart();
    wait_fleet(&gws.iter().collect::<Vec<_>>(), 2.0).await;

    // Redis down again: each admits burst / 2 = 20 of tenant b.
    redis.kill();
    for gw in &gws {
        assert_eq!(local_admits(&http, gw, "b").await, 20);
    }
}
