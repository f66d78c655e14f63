//! Issue 15, a tier's burst pool (`tiers.<name>.pool`), black-box with real redis, backend and
//! gateway: consulted only after the tenant's own bucket refused, admits with headers naming
//! `"<tier>.pool"`, and one tenant cannot drain more than `max_share` of it.

mod common;

use common::*;

fn yaml(redis: &RedisServer, backend: &Backend) -> String {
    let mut config = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), "timeout_ms: 2000")
        .tier(
            "pro",
            "{ limit: 1, per: 1h, burst: 1, \
             pool: { limit: 1, per: 1h, burst: 4, max_share: 0.5 } }",
        );
    for t in ["a", "b", "c"] {
        config = config.api_key(&format!("key-{t}"), t, "pro");
    }
    config.yaml()
}

async fn call(gw: &Gateway, http: &reqwest::Client, tenant: &str) -> Reply {
    try_get_with_key(http, &gw.url("/x"), Some(&format!("key-{tenant}")))
        .await
        .unwrap()
}

/// Own bucket first (the pool untouched), then the pool up to the tenant's half, then 429; a
/// second tenant drains the other half; a third finds the pool empty. Headers say which bucket
/// admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_admits_after_own_bucket_and_caps_each_tenants_share() {
    let redis = RedisServer::start();
    let backend = Backend::start("pool");
    let gw = Gateway::start(&yaml(&redis, &backend));
    let http = client();
    let own = "\"pro\";q=1;w=3600";
    // w = seconds to refill the burst: 4 tokens at 1 per hour.
    let both = "\"pro\";q=1;w=3600, \"pro.pool\";q=4;w=14400";

    let r = call(&gw, &http, "a").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("ratelimit-policy"), Some(own));
    assert!(
        redis.keys("*pool*").is_empty(),
        "the pool is not consulted while the own bucket admits"
    );

    for want_r in [3, 2] {
        let r = call(&gw, &http, "a").await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("ratelimit-policy"), Some(both), "{r:?}");
        let rl = r.header("ratelimit").unwrap_or_default().to_string();
        assert!(rl.starts_with(&format!("\"pro.pool\";r={want_r};")), "{rl}");
    }
    // Tenant a has taken max_share (0.5) of the 4-token pool: refused, with its own headers.
    let r = call(&gw, &http, "a").await;
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.header("ratelimit-policy"), Some(own));

    assert_eq!(call(&gw, &http, "b").await.status, 200);
    for want_r in [1, 0] {
        let r = call(&gw, &http, "b").await;
        assert_eq!(r.status, 200, "{r:?}");
        let rl = r.header("ratelimit").unwrap_or_default().to_string();
        assert!(rl.starts_with(&format!("\"pro.pool\";r={want_r};")), "{rl}");
    }
    assert_eq!(call(&gw, &http, "b").await.status, 429);
    // Tenant c has its own token, and finds the pool empty after that.
    assert_eq!(call(&gw, &http, "c").await.status, 200);
    assert_eq!(call(&gw, &http, "c").await.status, 429);

    let mut keys = redis.keys("*pool*");
    keys.sort();
    assert_eq!(
        keys,
        [
            "tollgate:{pool:pro}:share:a",
            "tollgate:{pool:pro}:share:b",
            "tollgate:{pool:pro}:tb"
        ]
    );
    for k in &keys {
        assert!(redis.pttl(k) > 0, "{k} has a TTL");
    }
    assert_eq!(backend.stats().requests, 7);
}
