//! A per-tenant override escaping the range checks (issue 11, fault 3), black-box: the effective
//! (tier merged with `tenants:`) rate of every tenant is validated with the one bound check used
//! for tiers, at `tollgate check` and at reload; the headers of the largest accepted override are
//! exact. Real `redis-server`, backend and gateway.

mod common;

use common::*;
use std::time::Duration;

const KEY: &str = "config-bounds-key-0123456789";

/// Tier `T` (1 token per day, burst 5) and tenant `t1` with `override_fields`.
fn config(redis_url: &str, backend: &str, override_fields: &str) -> GatewayConfig {
    GatewayConfig::echo(backend, "required")
        .redis(redis_url, STRICT_REDIS)
        .tier("T", "{ limit: 1, per: 1d, burst: 5 }")
        .tenant("t1", &format!("{{ {override_fields} }}"))
        .api_key(KEY, "t1", "T")
}

/// [`config`] as YAML text.
fn yaml(redis_url: &str, backend: &str, override_fields: &str) -> String {
    config(redis_url, backend, override_fields).yaml()
}

/// The reproduction: `check` accepted it; now it names the override's field.
#[test]
fn check_refuses_an_out_of_range_override_at_its_field() {
    let out = check_config(&yaml(
        "redis://127.0.0.1:1",
        "127.0.0.1:9",
        "burst: 5000000000000",
    ));
    assert_ne!(out.code(), Some(0), "{}", out.all());
    assert!(
        out.all()
            .contains("tenants.t1.burst: burst × per is too large"),
        "{}",
        out.all()
    );
    // A `per` override that makes the tier's own burst too large blames `per`.
    let out = check_config(
        &config("redis://127.0.0.1:1", "127.0.0.1:9", "per: 1d")
            .tier("T", "{ limit: 1, per: 1s, burst: 100000000 }")
            .yaml(),
    );
    assert_ne!(out.code(), Some(0), "{}", out.all());
    assert!(out.all().contains("tenants.t1.per: "), "{}", out.all());
    // The largest override in range passes.
    let out = check_config(&yaml(
        "redis://127.0.0.1:1",
        "127.0.0.1:9",
        "burst: 52000000",
    ));
    assert_eq!(out.code(), Some(0), "{}", out.all());
}

/// Burst 52 000 000 per day (close to the 2^52 token·ms bound): the headers carry the exact
/// values (`w` = 52e6 × 86400 s, and one token short of full is `t=86400`), and a reload to the
/// issue's out-of-range override is rejected, keeping the running config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_override_headers_are_exact_and_bad_reload_keeps_config() {
    let redis = RedisServer::start();
    let backend = Backend::start("bounds");
    let good = yaml(&redis.url(), &backend.addr(), "burst: 52000000");
    let gw = Gateway::start(&good);
    let http = client();
    let first = try_get_with_key(&http, &gw.url("/x"), Some(KEY))
        .await
        .unwrap();
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"T\";q=52000000;w=4492800000000")
    );
    assert_eq!(first.header("ratelimit"), Some("\"T\";r=51999999;t=86400"));

    gw.reload(&yaml(&redis.url(), &backend.addr(), "burst: 5000000000000"));
    assert!(
        gw.wait_for_log("tenants.t1.burst", Duration::from_secs(10)),
        "{}",
        gw.log_tail(20)
    );
    assert!(
        gw.log().contains("config reload rejected"),
        "{}",
        gw.log_tail(20)
    );
    let after = try_get_with_key(&http, &gw.url("/x"), Some(KEY))
        .await
        .unwrap();
    assert_eq!(after.status, 200, "{after:?}");
    assert_eq!(
        after.header("ratelimit-policy"),
        Some("\"T\";q=52000000;w=4492800000000")
    );
    assert_eq!(after.header("ratelimit"), Some("\"T\";r=51999998;t=172800"));
}
