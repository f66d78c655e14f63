//! The deny cache (docs/redis.md#deny-cache) against real gateways, `redis-server` and echo
//! backend: a remembered refusal never answers for a bucket that changed since, on this
//! instance or another one, and an empty bucket's refusals are still answered from memory.
//!
//! The tier refills one token per 20 minutes, so nothing refills during the test; the
//! assertions are on statuses, header values and Redis call counts, never on durations.

mod common;

use common::*;

const KEY: &str = "key-deny-0123456789";

/// The plain tier: every decision is one token bucket script call.
const PLAIN: &str = "{ limit: 3, per: 1h, burst: 3 }";
/// The same bucket leased one token at a time (a cost-3 request asks for 3).
const LEASED: &str = "{ limit: 3, per: 1h, burst: 3, lease: { tokens: 1, max_hold: 1m } }";

fn config(redis: &RedisServer, backend: &Backend) -> String {
    config_with(redis, backend, PLAIN)
}

fn config_with(redis: &RedisServer, backend: &Backend, tier: &str) -> String {
    GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier("T", tier)
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

/// Script calls Redis ran so far (every decision, lease call and give-back is one).
fn script_calls(redis: &RedisServer) -> u64 {
    redis.command_calls("evalsha") + redis.command_calls("eval")
}

/// Two gateways on one Redis, plain and leased tier: A is refused `/c3` with room left (r=2),
/// then B admits two `/x` for the same tenant and empties the bucket. A's next `/c3` must say
/// what Redis says now (r=0, three tokens' wait), not the r=2 and one token's wait of its
/// earlier refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_gateways_admissions_never_leave_a_stale_refusal() {
    for tier in [PLAIN, LEASED] {
        let redis = RedisServer::start();
        let backend = Backend::start("echo");
        let yaml = config_with(&redis, &backend, tier);
        let (a, b) = (Gateway::start(&yaml), Gateway::start(&yaml));
        let http = client();

        let x = get(&http, &a, "/x").await;
        assert_eq!((x.status, x.remaining()), (200, 2), "{tier}: {x:?}");
        let first = get(&http, &a, "/c3").await;
        assert_eq!(
            (first.status, first.remaining()),
            (429, 2),
            "{tier}: {first:?}"
        );
        assert!(
            retry_after(&first) <= 1200,
            "{tier}: one token's wait: {first:?}"
        );
        for left in [1, 0] {
            let x = get(&http, &b, "/x").await;
            assert_eq!((x.status, x.remaining()), (200, left), "{tier}: B {x:?}");
        }
        let after = get(&http, &a, "/c3").await;
        assert_eq!(after.status, 429, "{tier}: {after:?}");
        assert_eq!(
            after.remaining(),
            0,
            "{tier}: the bucket as it is now: {after:?}"
        );
        let wait = retry_after(&after);
        assert!(wait > 2400, "{tier}: three tokens' wait, not one: {wait}");
    }
}

/// The cache keeps its purpose: a tenant hammering an empty bucket is refused from memory.
/// Ten refusals of each cost on one gateway cost one script call per cost (two more at most
/// if the machine stalls past the 1 s trust period), each with the numbers Redis gave: r=0
/// and a wait that only counts down; another gateway asking Redis agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_buckets_refusals_are_answered_from_memory() {
    for tier in [PLAIN, LEASED] {
        let redis = RedisServer::start();
        let backend = Backend::start("echo");
        let yaml = config_with(&redis, &backend, tier);
        let (a, b) = (Gateway::start(&yaml), Gateway::start(&yaml));
        let http = client();

        for left in [2, 1, 0] {
            let x = get(&http, &a, "/x").await;
            assert_eq!((x.status, x.remaining()), (200, left), "{tier}: {x:?}");
        }
        let before = script_calls(&redis);
        for (path, least) in [("/x", 1000), ("/c3", 3000)] {
            let mut last = u64::MAX;
            for _ in 0..10 {
                let r = get(&http, &a, path).await;
                assert_eq!((r.status, r.remaining()), (429, 0), "{tier} {path}: {r:?}");
                let wait = retry_after(&r);
                assert!(
                    (least..=last).contains(&wait),
                    "{tier} {path}: {wait} after {last}"
                );
                last = wait;
            }
        }
        let calls = script_calls(&redis) - before;
        assert!(
            (2..=4).contains(&calls),
            "{tier}: 20 refusals cost {calls} script calls"
        );
        let truth = get(&http, &b, "/c3").await;
        assert_eq!(
            (truth.status, truth.remaining()),
            (429, 0),
            "{tier}: {truth:?}"
        );
        assert!(retry_after(&truth) > 3000, "{tier}: {truth:?}");
    }
}

/// An empty bucket's refusal of a costly request is trusted only until the next token is due:
/// from then on another gateway can admit a cheaper request. One token per 500 ms, burst 3:
/// A empties the bucket and is refused `/c3` (three tokens' wait, about 1.5 s); 600 ms later
/// (past the next token) B admits `/x` with that token; A's next `/c3` must be decided by
/// Redis (one script call), not answered from a refusal that predates B's admission. The
/// statuses and `r` values depend on how fast the machine runs; the call count does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_buckets_refusal_is_trusted_only_until_its_next_token() {
    let fast = [
        "{ limit: 2, per: 1s, burst: 3 }",
        "{ limit: 2, per: 1s, burst: 3, lease: { tokens: 1, max_hold: 1m } }",
    ];
    for tier in fast {
        let redis = RedisServer::start();
        let backend = Backend::start("echo");
        let yaml = config_with(&redis, &backend, tier);
        let (a, b) = (Gateway::start(&yaml), Gateway::start(&yaml));
        let http = client();

        for _ in 0..3 {
            assert_eq!(get(&http, &a, "/x").await.status, 200, "{tier}");
        }
        let first = get(&http, &a, "/c3").await;
        assert_eq!(first.status, 429, "{tier}: {first:?}");
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        let x = get(&http, &b, "/x").await;
        assert_eq!(x.status, 200, "{tier}: B {x:?}");
        let before = script_calls(&redis);
        let after = get(&http, &a, "/c3").await;
        let calls = script_calls(&redis) - before;
        assert_eq!(calls, 1, "{tier}: A asked Redis again: {after:?}");
    }
}
