//! API keys issued through the admin API (docs/live-state.md), black-box: one real
//! `redis-server`, the echo backend and two real `tollgate` gateways on that Redis.
//!
//! Propagation is waited for (polling, generous deadline), never timed. Tiers refill one token
//! an hour with a large burst, so limits never interfere.

mod common;

use common::admin::*;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

const TIERS: &str = "  free: { limit: 1, per: 1h, burst: 1000 }\n  \
    lenient: { limit: 1, per: 1h, burst: 1000, on_failure: open }\n";

/// How long a change may take to be seen in these tests (the contract is `store.propagation`,
/// 1 s by default; a loaded CI machine gets a wide margin).
const SEEN_WITHIN: Duration = Duration::from_secs(20);

fn yaml(redis: &RedisServer, backend: &Backend, store: &str) -> String {
    GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier_lines(TIERS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: {ADMIN_TOKEN_ENV} }}"
        ))
        .api_key(&api_key_of("filed"), "filed", "free")
        .raw(store)
        .yaml()
}

/// Two gateways on one Redis with `store` as their `store:` section.
fn pair(store: &str) -> Fleet {
    Fleet::start(
        |redis, backend| yaml(redis, backend, store),
        &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)],
    )
}

async fn call(gw: &Gateway, key: &str) -> Reply {
    try_get_with_key(&client(), &gw.url("/"), Some(key))
        .await
        .expect("proxied request")
}

async fn create(gw: &Gateway, body: Value) -> Value {
    admin_ok(gw.admin_addr(), "POST", "/v1/keys", Some(&body)).await
}

/// Revokes key `id` through `gw`'s admin API.
async fn revoke(gw: &Gateway, id: &str) {
    admin_ok(gw.admin_addr(), "DELETE", &format!("/v1/keys/{id}"), None).await;
}

/// Polls until `gw` answers `status` to `key`; whether it did within [`SEEN_WITHIN`].
async fn becomes(gw: &Gateway, key: &str, status: u16) -> bool {
    poll(SEEN_WITHIN, || call(gw, key), |r| r.status == status)
        .await
        .is_ok()
}

const STORE: &str = "store: { cache: { ttl: 1h, negative_ttl: 1h } }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_created_on_a_works_on_b_and_revoked_on_b_is_refused_on_a() {
    let rig = pair(STORE);
    let created = create(
        &rig.a,
        json!({"tenant": "acme-live", "tier": "free", "name": "ci"}),
    )
    .await;
    let secret = created["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("tg_") && secret.len() >= 46, "{secret}");
    let id = created["id"].as_str().unwrap().to_string();
    // Only the digest is stored.
    let stored = rig.redis.keys("*live*");
    assert!(stored.iter().all(|k| !k.contains(&secret)), "{stored:?}");
    assert!(stored.iter().any(|k| k.contains(&sha256_hex(&secret))));
    // Works on both, the tenant is the key's.
    for gw in [&rig.a, &rig.b] {
        let r = call(gw, &secret).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.body.contains("acme-live"), "{}", r.body);
    }
    // The file's keys keep working beside them.
    assert_eq!(call(&rig.a, &api_key_of("filed")).await.status, 200);
    // Both now hold the key in their cache (TTL 1h): only the change's propagation can end it.
    revoke(&rig.b, &id).await;
    assert!(becomes(&rig.b, &secret, 401).await);
    assert!(
        becomes(&rig.a, &secret, 401).await,
        "revoked on B, still admitted by A"
    );
    let got = admin(rig.a.admin_addr(), "GET", &format!("/v1/keys/{id}"), None).await;
    assert_eq!(got.expect_ok()["status"], "revoked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_unknown_to_b_is_found_once_created() {
    // B caches an unknown digest for an hour; the create's announcement ends that.
    let rig = pair(STORE);
    let created = create(
        &rig.a,
        json!({"tenant": "acme-live", "tier": "free", "name": "first"}),
    )
    .await;
    let secret = created["secret"].as_str().unwrap().to_string();
    assert!(becomes(&rig.b, &secret, 200).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_keeps_the_old_secret_for_the_grace_period_only() {
    let rig = pair(STORE);
    let created = create(
        &rig.a,
        json!({"tenant": "acme-live", "tier": "free", "name": "rot"}),
    )
    .await;
    let old = created["secret"].as_str().unwrap().to_string();
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(call(&rig.b, &old).await.status, 200);
    let path = format!("/v1/keys/{id}/rotate");
    let rotated = admin(
        rig.a.admin_addr(),
        "POST",
        &path,
        Some(&json!({"grace_s": 3600})),
    )
    .await;
    let new = rotated.expect_ok()["secret"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    for gw in [&rig.a, &rig.b] {
        assert!(becomes(gw, &new, 200).await);
        assert_eq!(
            call(gw, &old).await.status,
            200,
            "the old secret within its grace"
        );
    }
    // A second rotation without grace: only the newest secret works, on both.
    let again = admin(rig.b.admin_addr(), "POST", &path, None).await;
    let newest = again.expect_ok()["secret"].as_str().unwrap().to_string();
    for gw in [&rig.a, &rig.b] {
        assert!(becomes(gw, &newest, 200).await);
        assert!(becomes(gw, &new, 401).await);
        assert!(becomes(gw, &old, 401).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_keys_cost_at_most_one_lookup_each_per_negative_ttl() {
    let rig = pair(STORE);
    let http = client();
    let url = rig.a.url("/");
    let keys: Vec<String> = (0..10_000).map(|i| format!("tg_random_{i:05}_x")).collect();
    let send = |keys: Vec<String>| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let mut tasks = Vec::new();
            for chunk in keys.chunks(keys.len().div_ceil(16)) {
                let (http, url, chunk) = (http.clone(), url.clone(), chunk.to_vec());
                tasks.push(tokio::spawn(async move {
                    for k in chunk {
                        let r = try_get_with_key(&http, &url, Some(&k)).await.unwrap();
                        assert_eq!(r.status, 401, "{r:?}");
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
    };
    let calls = || rig.redis.command_calls("evalsha") + rig.redis.command_calls("eval");
    rig.redis.reset_stats();
    send(keys.clone()).await;
    // One lookup per key; the rest (under 1 %) is the gateways' own background calls (the
    // version check every second, lease sweeps).
    let first = calls();
    assert!(
        first >= keys.len() as u64 && first <= keys.len() as u64 * 101 / 100,
        "{first} script calls for {} distinct unknown keys",
        keys.len()
    );
    // A tenth of them again, within the negative TTL: no lookup at all.
    rig.redis.reset_stats();
    send(keys.iter().step_by(10).cloned().collect()).await;
    let again = calls();
    assert!(
        again < 100,
        "{again} script calls for 1000 keys cached as unknown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_cached_keys_follow_their_tier_policy_new_keys_are_503() {
    let mut rig = pair(STORE);
    let body = |tier: &str, name: &str| json!({"tenant": "acme-live", "tier": tier, "name": name});
    let lenient = create(&rig.a, body("lenient", "l")).await["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let strict = create(&rig.a, body("free", "s")).await["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let unseen = create(&rig.a, body("free", "u")).await["secret"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(call(&rig.a, &lenient).await.status, 200);
    assert_eq!(call(&rig.a, &strict).await.status, 200);
    rig.redis.kill();
    // Cached: identified, then the tier's failure policy decides (open admits, closed refuses).
    assert_eq!(call(&rig.a, &lenient).await.status, 200);
    let r = call(&rig.a, &strict).await;
    assert_eq!(r.status, 503, "{r:?}");
    assert!(!r.body.contains("key store"), "{}", r.body);
    // Never seen on this instance: 503 with Retry-After, never admitted, never a 500.
    let r = call(&rig.a, &unseen).await;
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    assert!(r.body.contains("key store"), "{}", r.body);
    // The file's keys are not the store's: identified as always.
    let r = call(&rig.a, &api_key_of("filed")).await;
    assert!(!r.body.contains("key store"), "{}", r.body);
    let _ = &rig.b;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_subscription_still_converges_through_the_version_check() {
    let rig = pair(STORE);
    let created = create(
        &rig.a,
        json!({"tenant": "acme-live", "tier": "free", "name": "pubsub"}),
    )
    .await;
    let secret = created["secret"].as_str().unwrap().to_string();
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(call(&rig.a, &secret).await.status, 200);
    assert_eq!(call(&rig.b, &secret).await.status, 200);
    // Every subscriber's connection is cut; the revoke's message reaches none that is down.
    rig.redis.kill_pubsub_clients();
    revoke(&rig.a, &id).await;
    assert!(becomes(&rig.a, &secret, 401).await);
    assert!(becomes(&rig.b, &secret, 401).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_wins_a_digest_in_both() {
    let rig = pair(STORE);
    // A live record under the file key's digest, naming another tenant.
    let digest = sha256_hex(&api_key_of("filed"));
    let mut conn = rig.redis.conn();
    let record = json!({"id": "key_00000000000000aa", "tenant": "intruder", "tier": "free",
        "name": "x", "created_at": 1, "digest": digest});
    let _: () = redis::cmd("SET")
        .arg(format!("tollgate:{{live:store}}:key:{digest}"))
        .arg("key_00000000000000aa")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("tollgate:{live:store}:id:key_00000000000000aa")
        .arg(record.to_string())
        .query(&mut conn)
        .unwrap();
    let r = call(&rig.a, &api_key_of("filed")).await;
    assert_eq!(r.status, 200);
    assert!(
        r.body.contains("filed") && !r.body.contains("intruder"),
        "{}",
        r.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_naming_the_field_and_changes_nothing() {
    let rig = pair(STORE);
    let a = rig.a.admin_addr();
    let long = "n".repeat(10_000);
    let cases = [
        (
            json!({"tenant": "t", "tier": "gold", "name": "x"}),
            "tier",
            404,
        ),
        (
            json!({"tenant": "t", "tier": "free", "name": long}),
            "name",
            400,
        ),
        (
            json!({"tenant": "t", "tier": "free", "name": "a b"}),
            "name",
            400,
        ),
        (
            json!({"tenant": "t".repeat(65), "tier": "free", "name": "x"}),
            "tenant",
            400,
        ),
        (
            json!({"tenant": "", "tier": "free", "name": "x"}),
            "tenant",
            400,
        ),
        (
            json!({"tenant": "t", "tier": "free", "name": "x", "expires_in_s": -5}),
            "expires_in_s",
            400,
        ),
        (
            json!({"tenant": "t", "tier": "free", "name": "x", "expires_in_s": 0}),
            "expires_in_s",
            400,
        ),
        (
            json!({"tenant": "t", "tier": "free", "name": "x", "expires_in_s": 1e12}),
            "expires_in_s",
            400,
        ),
        (json!({"tenant": "t", "tier": "free"}), "name", 400),
        (
            json!({"tenant": "t", "tier": "free", "name": "x", "extra": 1}),
            "extra",
            400,
        ),
    ];
    for (body, field, status) in cases {
        let r = admin(a, "POST", "/v1/keys", Some(&body)).await;
        let p = r.expect_problem(status);
        assert!(
            p["detail"].as_str().unwrap().starts_with(field),
            "{field}: {p}"
        );
    }
    assert!(
        rig.redis.keys("*live*").is_empty(),
        "{:?}",
        rig.redis.keys("*")
    );
    // A duplicate name for one tenant.
    let ok = json!({"tenant": "t", "tier": "free", "name": "x"});
    admin(a, "POST", "/v1/keys", Some(&ok)).await.expect_ok();
    let before = rig.redis.keys("*live*");
    let p = admin(a, "POST", "/v1/keys", Some(&ok)).await;
    assert!(p.expect_problem(409)["detail"]
        .as_str()
        .unwrap()
        .starts_with("name"));
    assert_eq!(rig.redis.keys("*live*"), before);
    // Paged list by name.
    for n in ["b", "c"] {
        let body = json!({"tenant": "t", "tier": "free", "name": n});
        admin(a, "POST", "/v1/keys", Some(&body)).await.expect_ok();
    }
    let page = admin(a, "GET", "/v1/keys?tenant=t&limit=2", None).await;
    let page = page.expect_ok().clone();
    let names: Vec<&str> = page["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["b", "c"]);
    assert_eq!(page["next"], "c");
    let page = admin(a, "GET", "/v1/keys?tenant=t&limit=2&after=c", None).await;
    assert_eq!(page.expect_ok()["keys"][0]["name"], "x");
    assert!(
        !page.json.to_string().contains("tg_"),
        "secrets are shown once only"
    );
    admin(a, "GET", "/v1/keys?tenant=t&limit=0", None)
        .await
        .expect_problem(400);
    admin(a, "GET", "/v1/keys", None).await.expect_problem(400);
    admin(a, "GET", "/v1/keys/key_0000000000000000", None)
        .await
        .expect_problem(404);
}

/// With live keys beside JWT and no `identity.api_keys` in the file, the key is still a
/// credential the backend never sees, as a file key is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_key_never_reaches_the_backend() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let y = GatewayConfig::new()
        .redis(&redis.url(), STRICT_REDIS)
        .tier_lines(TIERS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: {ADMIN_TOKEN_ENV} }}"
        ))
        .upstream("echo", &backend.addr())
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .jwt("{ keys: [{ algorithm: HS256, secret_env: \"TG_TEST_JWT\" }] }")
        .raw(STORE)
        .yaml();
    assert!(!y.contains("api_keys"), "{y}");
    let env = [
        (ADMIN_TOKEN_ENV, ADMIN_TOKEN),
        ("TG_TEST_JWT", "a-secret-of-32-bytes-or-more-0123"),
    ];
    let gw = Gateway::start_with_env(&y, &env);
    let created = create(
        &gw,
        json!({"tenant": "acme-live", "tier": "free", "name": "ci"}),
    )
    .await;
    let secret = created["secret"].as_str().unwrap().to_string();
    let r = call(&gw, &secret).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body.contains("acme-live"), "{}", r.body);
    assert!(
        !r.body.contains(&secret),
        "the backend saw the key: {}",
        r.body
    );
}

/// A key issued through the admin API whose secret is then put in the file (an operator moving
/// a key into `identity.api_keys`): the file's entry wins, and the overlap is reported, as a
/// warning naming the key id, the gauge `tollgate_live_keys_shadowed`, and
/// `shadowed_by_file: true` on the key in the admin API. The other gateway, whose file does
/// not have it, reports nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_in_both_is_reported() {
    let rig = pair(STORE);
    let created = create(
        &rig.a,
        json!({"tenant": "issued", "tier": "free", "name": "moved"}),
    )
    .await;
    let (id, secret) = (
        created["id"].as_str().unwrap().to_string(),
        created["secret"].as_str().unwrap().to_string(),
    );
    assert!(becomes(&rig.a, &secret, 200).await);
    let shadowed = |gw: &Gateway| gw.metric_or_zero("tollgate_live_keys_shadowed");
    assert_eq!(shadowed(&rig.a), 0.0);
    let moved = GatewayConfig::new()
        .redis(&rig.redis.url(), STRICT_REDIS)
        .tier_lines(TIERS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: {ADMIN_TOKEN_ENV} }}"
        ))
        .api_key(&api_key_of("filed"), "filed", "free")
        .api_key(&secret, "pinned", "free")
        .upstream("echo", &rig.backend.addr())
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .raw(STORE)
        .yaml();
    rig.a.reload_ok(&moved).await;
    let r = call(&rig.a, &secret).await;
    assert_eq!(r.status, 200);
    assert!(
        r.body.contains("pinned") && !r.body.contains("issued"),
        "{}",
        r.body
    );
    let reported = eventually(SEEN_WITHIN, || shadowed(&rig.a) == 1.0).await;
    assert!(reported, "gauge: {}", shadowed(&rig.a));
    assert!(rig.a.log().contains(&id), "the warning names the key id");
    let view = admin(rig.a.admin_addr(), "GET", &format!("/v1/keys/{id}"), None).await;
    assert_eq!(view.expect_ok()["shadowed_by_file"], true);
    let list = admin(rig.a.admin_addr(), "GET", "/v1/keys?tenant=issued", None).await;
    assert_eq!(list.expect_ok()["keys"][0]["shadowed_by_file"], true);
    // B's file does not have the secret: its live key, nothing reported.
    let b = call(&rig.b, &secret).await;
    assert!(b.body.contains("issued"), "{}", b.body);
    assert_eq!(shadowed(&rig.b), 0.0);
    let view_b = admin(rig.b.admin_addr(), "GET", &format!("/v1/keys/{id}"), None).await;
    assert!(view_b.expect_ok().get("shadowed_by_file").is_none());
}
