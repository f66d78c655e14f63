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

/// Static split, burst 10 with shares eu:2 / us:1 / ap:2: eu enforces floor(10 × 2/5) = 4, us
/// floor(10 × 1/5) = 2, each against its own Redis; a tenant override (burst 20) is split too.
/// Headers show the regional `q` with `;region="<name>"` on the policy item.
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
        Some("\"t\";q=4;w=14400;region=\"eu\""),
        "{first:?}"
    );
    assert_eq!(first.header("tollgate-region"), Some("eu"));
    // Each region decided against its own Redis only.
    assert_eq!(us_redis.keys("*acme*").len(), 1);
    assert!(us_redis.keys("*big*").is_empty());
}
