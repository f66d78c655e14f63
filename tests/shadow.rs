//! Issue 16 point 1, shadow mode (docs/DESIGN.md 4c "Shadow"): `mode: shadow` on a tier, on the
//! edge and on a route takes the decision, debits as enforcement would, counts it as
//! `outcome="shadow_limited"`, logs it, sends its headers and lets the request go on; a reload
//! switches enforce ↔ shadow without touching bucket state.
//!
//! Black-box: a real `redis-server`, a real `tollgate-echo` backend and the real gateway per
//! test. Buckets refill ~never (`limit: 1, per: 1h`), so every count is exact.

mod common;

use common::*;
use std::time::Duration;
fn decisions(layer: &str, outcome: &str, tier: &str) -> String {
    format!("tollgate_decisions_total{{layer=\"{layer}\",outcome=\"{outcome}\",tier=\"{tier}\"}}")
}

/// One upstream `echo` (`max_concurrency: 1`), API key `acme-key` → tenant `acme` in tier `T`,
/// the given `edge` flow map (empty: none), `tier` spec and route lines.
fn config(redis: &RedisServer, backend: &Backend, edge: &str, tier: &str, routes: &str) -> String {
    let mut config = GatewayConfig::new()
        .redis(&redis.url(), "timeout_ms: 1000")
        .api_key("acme-key", "acme", "T")
        .tier("T", tier)
        .upstream_with("echo", &backend.addr(), "max_concurrency: 1")
        .route_lines(routes)
        .section("observability", "{ tenant_metrics: 10 }");
    if !edge.is_empty() {
        config = config.edge(edge);
    }
    config.yaml()
}

const CATCH_ALL: &str = "  - { path_prefix: \"/\", upstream: echo, auth: optional }\n";

async fn get(http: &reqwest::Client, url: &str, key: Option<&str>) -> Reply {
    try_get_with_key(http, url, key)
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

#[tokio::test]
async fn shadow_tier_admits_all_counts_eight_of_ten_and_enforces_right_after_reload() {
    let redis = RedisServer::start();
    let backend = Backend::start("b");
    let shadow = config(
        &redis,
        &backend,
        "",
        "{ limit: 1, per: 1h, burst: 2, mode: shadow }",
        CATCH_ALL,
    );
    let gw = Gateway::start(&shadow);
    let http = client();
    let url = gw.url("/x");
    let mut replies = Vec::new();
    for _ in 0..10 {
        replies.push(get(&http, &url, Some("acme-key")).await);
    }
    assert!(replies.iter().all(|r| r.status == 200), "{replies:?}");
    assert_eq!(
        backend.stats().requests,
        10,
        "the backend saw every request"
    );
    assert_eq!(
        gw.metric_or_zero(&decisions("tenant", "shadow_limited", "T")),
        8.0
    );
    assert_eq!(
        gw.metric_or_zero(&decisions("tenant", "admitted", "T")),
        2.0
    );
    assert_eq!(gw.metric_or_zero(&decisions("tenant", "limited", "T")), 0.0);
    let per_tenant = "tollgate_tenant_decisions_total{outcome=\"shadow_limited\",tenant=\"acme\"}";
    assert_eq!(gw.metric_or_zero(per_tenant), 8.0);
    // The headers of the decision that would have refused, without a Retry-After (the
    // request was served).
    let last = replies.last().unwrap();
    assert_eq!(last.remaining(), 0);
    assert!(last
        .header("ratelimit-policy")
        .unwrap()
        .starts_with("\"T\";q=2"));
    assert_eq!(last.header("retry-after"), None);
    assert_eq!(replies[0].remaining(), 1);
    let logged = eventually(Duration::from_secs(5), || {
        gw.log().contains("would have been refused")
    })
    .await;
    assert!(logged, "no shadow log line:\n{}", gw.log_tail(20));

    // Enforce by reload: the bucket is what shadow left (empty), so the next request is refused.
    gw.reload_ok(&shadow.replace(", mode: shadow", "")).await;
    let refused = get(&http, &url, Some("acme-key")).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert!(refused.header("retry-after").is_some());
    assert_eq!(backend.stats().requests, 10);

    // And back to shadow: still the same (empty) bucket, counted as shadow_limited.
    gw.reload_ok(&shadow).await;
    let r = get(&http, &url, Some("acme-key")).await;
    assert_eq!((r.status, r.remaining()), (200, 0));
    assert_eq!(
        gw.metric_or_zero(&decisions("tenant", "shadow_limited", "T")),
        9.0
    );
}

#[tokio::test]
async fn shadow_edge_admits_and_counts_then_enforces_after_reload() {
    let redis = RedisServer::start();
    let backend = Backend::start("b");
    let edge = "{ limit: 1, per: 1h, burst: 2, mode: shadow }";
    let yaml = config(
        &redis,
        &backend,
        edge,
        "{ limit: 1, per: 1h, burst: 100 }",
        CATCH_ALL,
    );
    let gw = Gateway::start(&yaml);
    let http = client();
    for _ in 0..5 {
        assert_eq!(get(&http, &gw.url("/x"), None).await.status, 200);
    }
    assert_eq!(backend.stats().requests, 5);
    assert_eq!(
        gw.metric_or_zero(&decisions("edge", "shadow_limited", "-")),
        3.0
    );
    assert_eq!(gw.metric_or_zero(&decisions("edge", "admitted", "-")), 2.0);
    assert_eq!(gw.metric_or_zero(&decisions("edge", "limited", "-")), 0.0);

    gw.reload_ok(&yaml.replace(", mode: shadow", "")).await;
    let r = get(&http, &gw.url("/x"), None).await;
    assert_eq!(r.status, 429, "the edge bucket survived the reload: {r:?}");
    assert_eq!(problem(&r.body)["violated-policies"][0], "edge");
}

#[tokio::test]
async fn shadow_route_makes_the_tenant_and_edge_layers_shadow_for_it_only() {
    let redis = RedisServer::start();
    let backend = Backend::start("b");
    let routes = "  - { path_prefix: \"/shadow\", upstream: echo, auth: optional, mode: shadow }\n  - { path_prefix: \"/\", upstream: echo, auth: optional }\n";
    let edge = "{ limit: 1, per: 1h, burst: 4 }";
    let yaml = config(
        &redis,
        &backend,
        edge,
        "{ limit: 1, per: 1h, burst: 2 }",
        routes,
    );
    let gw = Gateway::start(&yaml);
    let http = client();
    let (enforced, shadowed) = (gw.url("/enforced"), gw.url("/shadow/x"));
    // Tenant bucket: 2 admitted on the enforced route, then refused there.
    assert_eq!(get(&http, &enforced, Some("acme-key")).await.status, 200);
    assert_eq!(get(&http, &enforced, Some("acme-key")).await.status, 200);
    assert_eq!(get(&http, &enforced, Some("acme-key")).await.status, 429);
    // The shadow route: the same empty bucket refuses in shadow only.
    let r = get(&http, &shadowed, Some("acme-key")).await;
    assert_eq!((r.status, r.remaining()), (200, 0), "{r:?}");
    assert_eq!(
        gw.metric_or_zero(&decisions("tenant", "shadow_limited", "T")),
        1.0
    );
    assert_eq!(gw.metric_or_zero(&decisions("tenant", "limited", "T")), 1.0);
    // Edge (burst 4, spent by the four requests above): enforced on `/`, shadow on /shadow.
    let r = get(&http, &enforced, Some("acme-key")).await;
    assert_eq!(r.status, 429);
    assert_eq!(problem(&r.body)["violated-policies"][0], "edge");
    let r = get(&http, &shadowed, Some("acme-key")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        gw.metric_or_zero(&decisions("edge", "shadow_limited", "-")),
        1.0
    );
    assert_eq!(gw.metric_or_zero(&decisions("edge", "limited", "-")), 1.0);
    assert_eq!(backend.stats().requests, 4);
}

#[tokio::test]
async fn shadow_route_lets_a_request_past_a_full_upstream_without_a_slot() {
    let redis = RedisServer::start();
    let backend = Backend::start("b");
    let routes = "  - { path_prefix: \"/shadow\", upstream: echo, auth: none, mode: shadow }\n  - { path_prefix: \"/\", upstream: echo, auth: none }\n";
    let yaml = config(
        &redis,
        &backend,
        "",
        "{ limit: 1, per: 1h, burst: 2 }",
        routes,
    );
    let gw = Gateway::start(&yaml);
    let http = client();
    // One slow request holds the only slot (max_concurrency: 1).
    let slow = {
        let (http, url) = (http.clone(), gw.url("/held?delay_ms=3000"));
        tokio::spawn(async move { get(&http, &url, None).await })
    };
    let busy = eventually(Duration::from_secs(5), || backend.stats().in_flight == 1).await;
    assert!(busy, "the slow request never reached the backend");
    let r = get(&http, &gw.url("/enforced"), None).await;
    assert_eq!(r.status, 503, "{r:?}");
    let r = get(&http, &gw.url("/shadow/x"), None).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(slow.await.unwrap().status, 200);
    assert_eq!(
        gw.metric_or_zero(&decisions("upstream", "shadow_limited", "-")),
        1.0
    );
    assert_eq!(
        gw.metric_or_zero(&decisions("upstream", "limited", "-")),
        1.0
    );
    assert_eq!(
        backend.stats().peak_in_flight,
        2,
        "the shadowed request went on"
    );
}
