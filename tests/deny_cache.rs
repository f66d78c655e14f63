//! The deny cache (docs/redis.md#deny-cache) against a real gateway, `redis-server` and echo
//! backend: a remembered refusal never answers for a bucket the instance has changed since.
//!
//! The tier refills one token per 20 minutes, so nothing refills during the test; the
//! assertions are on statuses and header values, never on durations.

mod common;

use common::*;

const KEY: &str = "key-deny-0123456789";

fn config(redis: &RedisServer, backend: &Backend) -> String {
    GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier("T", "{ limit: 3, per: 1h, burst: 3 }")
        .api_key(KEY, "deny", "T")
        .route("{ path_prefix: \"/c3\", upstream: echo, auth: required, cost: 3 }")
        .route("{ path_prefix: \"/r\", upstream: echo, auth: required }")
        .section(
            "limits",
            "\n  - { name: wide, match: { routes: [\"/r\"] }, key: [tenant], limit: 100, per: 1s }",
        )
        .yaml()
}

async fn get(http: &reqwest::Client, gw: &Gateway, path: &str) -> Reply {
    let resp = http
        .get(gw.url(path))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    Reply::read(resp).await.expect("reply")
}

fn retry_after(r: &Reply) -> u64 {
    r.header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {r:?}"))
        .parse()
        .expect("Retry-After seconds")
}

/// `/x` (cost 1) leaves 2 tokens; `/c3` (cost 3) is refused for one token's wait (1200 s) with
/// r=2, and that refusal is remembered; two more `/x` empty the bucket; `/c3` again must tell
/// the truth (r=0, three tokens' wait: about 3600 s), not the remembered r=2 and 1200 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_refusal_never_describes_a_bucket_changed_since() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start(&config(&redis, &backend));
    let http = client();

    let x = get(&http, &gw, "/x").await;
    assert_eq!((x.status, x.remaining()), (200, 2));
    let first = get(&http, &gw, "/c3").await;
    assert_eq!((first.status, first.remaining()), (429, 2), "{first:?}");
    let wait = retry_after(&first);
    assert!((1..=1200).contains(&wait), "one token's wait: {wait}");
    // The same refusal again, from memory or from Redis: the same bucket, the same numbers.
    let again = get(&http, &gw, "/c3").await;
    assert_eq!((again.status, again.remaining()), (429, 2), "{again:?}");
    assert!(retry_after(&again) <= wait);

    for left in [1, 0] {
        let x = get(&http, &gw, "/x").await;
        assert_eq!((x.status, x.remaining()), (200, left), "{x:?}");
    }
    let after = get(&http, &gw, "/c3").await;
    assert_eq!(after.status, 429, "{after:?}");
    assert_eq!(after.remaining(), 0, "the bucket as it is now: {after:?}");
    let wait = retry_after(&after);
    assert!(wait > 2400, "three tokens' wait, not one: {wait}");
    let x = get(&http, &gw, "/x").await;
    assert_eq!(x.status, 429, "{x:?}");
    assert!(retry_after(&x) > 1000, "{x:?}");
}

/// The same through the other path that debits the tier's bucket: a request a limit rule
/// applies to is decided by the policy script, and its admissions drop the refusal the plain
/// path remembered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_through_a_limit_rule_drops_the_remembered_refusal() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start(&config(&redis, &backend));
    let http = client();

    let x = get(&http, &gw, "/x").await;
    assert_eq!((x.status, x.remaining()), (200, 2));
    let first = get(&http, &gw, "/c3").await;
    assert_eq!((first.status, first.remaining()), (429, 2), "{first:?}");
    for _ in 0..2 {
        assert_eq!(get(&http, &gw, "/r").await.status, 200);
    }
    let after = get(&http, &gw, "/c3").await;
    assert_eq!(after.status, 429, "{after:?}");
    assert_eq!(after.remaining(), 0, "the bucket as it is now: {after:?}");
    assert!(retry_after(&after) > 2400, "{after:?}");
}
