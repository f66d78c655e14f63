//! Limit rules (`limits:`, docs/DESIGN.md 4e "Rules", "Keys") through the real gateway, a real
//! `redis-server` (and a real Redis Cluster) and the real echo backend: buckets keyed by method,
//! JWT claim, route and request values; several rules and the tier decided all or nothing, in
//! one script call per hash tag; keys that cannot alias; missing parts; shadow rules; the local
//! fallback; reload.
//!
//! Counts are exact with buckets that barely refill (`per: 1h`).

mod common;
#[path = "common/redis_topology.rs"]
mod redis_topology;

use common::admin::{admin, ADMIN_TOKEN, ADMIN_TOKEN_ENV};
use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use redis_topology::RedisCluster;
use serde_json::{json, Value};

const SECRET: &str = "rules-test-secret-0123456789abcdef";

fn api_key(tenant: &str) -> String {
    format!("key-{tenant}-0123456789")
}

/// A gateway config on `redis` (`redis:` options as given) with tier `T` (big unless `tier` is
/// given), API keys for `tenants` and the `limits:` block `rules` (lines of YAML list items).
fn config(redis: &str, backend: &Backend, tier: &str, tenants: &[&str], rules: &str) -> String {
    let mut c = GatewayConfig::echo(&backend.addr(), "required")
        .redis_spec(redis)
        .tier("T", tier)
        .api_keys_always()
        .jwt("{ keys: [{ kid: h1, algorithm: HS256, secret_env: \"TOLLGATE_RULES_SECRET\" }] }")
        .default_tier("T")
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\" }}"
        ))
        .section("limits", &format!("\n{rules}"));
    for t in tenants {
        c = c.api_key(&api_key(t), t, "T");
    }
    c.yaml()
}

fn standalone(redis: &RedisServer) -> String {
    format!("{{ url: \"{}\", {STRICT_REDIS} }}", redis.url())
}

/// `redis:` options for `cluster`, failing closed.
fn cluster_spec(cluster: &RedisCluster) -> String {
    let urls: Vec<String> = cluster.urls().iter().map(|u| format!("\"{u}\"")).collect();
    format!(
        "{{ mode: cluster, urls: [{}], timeout_ms: 2000, on_failure: closed }}",
        urls.join(", ")
    )
}

const BIG: &str = "{ limit: 1, per: 1h, burst: 1000 }";

fn start(yaml: &str) -> Gateway {
    let env = [
        ("TOLLGATE_RULES_SECRET", SECRET),
        (ADMIN_TOKEN_ENV, ADMIN_TOKEN),
    ];
    Gateway::start_with_env(yaml, &env)
}

fn token(tenant: &str, extra: Value) -> String {
    let mut claims = json!({ "sub": tenant, "exp": 4_000_000_000u64 });
    for (k, v) in extra.as_object().expect("object") {
        claims[k] = v.clone();
    }
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("h1".into());
    let key = EncodingKey::from_secret(SECRET.as_bytes()).expect("key");
    jsonwebtoken::encode(&header, &claims, &key).expect("encode")
}

async fn send(req: reqwest::RequestBuilder) -> Reply {
    Reply::read(req.send().await.expect("send"))
        .await
        .expect("read")
}

async fn keyed(http: &reqwest::Client, method: &str, url: &str, tenant: &str) -> Reply {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    send(http.request(m, url).header("x-api-key", api_key(tenant))).await
}

fn violated(r: &Reply) -> Vec<String> {
    let v: Value = serde_json::from_str(&r.body).expect("problem+json");
    serde_json::from_value(v["violated-policies"].clone()).expect("violated-policies")
}

fn statuses(replies: &[Reply]) -> Vec<u16> {
    replies.iter().map(|r| r.status).collect()
}

/// POST and GET on one route have buckets of their own; the tier and the rule are both in the
/// headers, the rule's refusal names it and debits neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_method_buckets() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules = "  - { name: charges, match: { routes: [\"/charges\"] }, key: [tenant, method], limit: 1, per: 1h, burst: 2 }\n";
    let gw = start(&config(&standalone(&redis), &backend, BIG, &["k1"], rules));
    let http = client();
    let url = gw.url("/charges");
    let mut posts = Vec::new();
    for _ in 0..3 {
        posts.push(keyed(&http, "POST", &url, "k1").await);
    }
    assert_eq!(statuses(&posts), [200, 200, 429]);
    assert_eq!(violated(&posts[2]), ["charges"]);
    assert_eq!(
        posts[0].header("ratelimit-policy"),
        Some("\"T\";q=1000;w=3600000, \"charges\";q=2;w=7200")
    );
    assert_eq!(posts[0].header("ratelimit"), Some("\"charges\";r=1;t=3600"));
    assert_eq!(posts[2].header("retry-after"), Some("3600"));
    let gets = [
        keyed(&http, "GET", &url, "k1").await,
        keyed(&http, "GET", &url, "k1").await,
    ];
    assert_eq!(statuses(&gets), [200, 200]);
    // Another route is not matched by the rule.
    for _ in 0..3 {
        assert_eq!(
            keyed(&http, "POST", &gw.url("/other"), "k1").await.status,
            200
        );
    }
    assert_eq!(backend.stats().requests, 7);
    // The tier was debited once per admitted request: 7, not 8.
    let tier = redis.hgetall("tollgate:{k1}:tb");
    let level: u64 = tier
        .iter()
        .find(|(f, _)| f == "l")
        .unwrap()
        .1
        .parse()
        .unwrap();
    assert_eq!(level / 3_600_000, 1000 - 7, "tier level {tier:?}");
    let key = "tollgate:{k1}:r:charges:tb:tenant=2.k1:method=4.POST";
    assert!(redis.pttl(key) > 0, "{key}: {:?}", redis.keys("*"));
}

/// A rule keyed by a JWT claim: each end user of one tenant gets a bucket of their own;
/// a token without the claim (and an API key) skips the rule, or is refused with
/// `missing: refuse`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_claim_rule_inside_a_tenant() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules = "  - { name: per-user, match: { routes: [\"/u\"] }, key: [tenant, \"claim:user\"], limit: 1, per: 1h, burst: 2 }\n  - { name: strict, match: { routes: [\"/strict\"] }, key: [\"claim:user\"], limit: 1, per: 1h, missing: refuse }\n";
    let gw = start(&config(&standalone(&redis), &backend, BIG, &["k1"], rules));
    let http = client();
    let ask = |user: Option<&str>, path: &str| {
        let extra = user.map_or(json!({}), |u| json!({ "user": u }));
        http.get(gw.url(path)).bearer_auth(token("acme", extra))
    };
    let mut alice = Vec::new();
    for _ in 0..3 {
        alice.push(send(ask(Some("alice"), "/u")).await);
    }
    assert_eq!(statuses(&alice), [200, 200, 429]);
    assert_eq!(violated(&alice[2]), ["per-user"]);
    let bob = [
        send(ask(Some("bob"), "/u")).await,
        send(ask(Some("bob"), "/u")).await,
    ];
    assert_eq!(
        statuses(&bob),
        [200, 200],
        "another user of the same tenant"
    );
    for _ in 0..3 {
        assert_eq!(
            send(ask(None, "/u")).await.status,
            200,
            "no claim: rule skipped"
        );
        assert_eq!(keyed(&http, "GET", &gw.url("/u"), "k1").await.status, 200);
    }
    let refused = send(ask(None, "/strict")).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let body: Value = serde_json::from_str(&refused.body).unwrap();
    assert_eq!(body["reason"], "missing-limit-key");
    assert_eq!(body["key-part"], "claim:user");
    assert_eq!(send(ask(Some("carol"), "/strict")).await.status, 200);
    assert_eq!(send(ask(Some("carol"), "/strict")).await.status, 429);
}

/// A route limit shared by every tenant next to a per-tenant one: a refusal by either debits
/// neither (nor the tier), whichever is asked first. `get` reads a token bucket's hash.
async fn shared_and_per_tenant_all_or_nothing(
    redis_spec: String,
    get: impl Fn(&str) -> Vec<(String, String)>,
) {
    let taken = |key: &str, burst: u64| tokens_taken(&get(key), burst);
    let backend = Backend::start("echo");
    let rules = "  - { name: export-all, match: { routes: [\"/export\"] }, key: [route], limit: 1, per: 1h, burst: 3 }\n  - { name: export-tenant, match: { routes: [\"/export\"] }, key: [tenant], limit: 1, per: 1h, burst: 2 }\n";
    let gw = start(&config(&redis_spec, &backend, BIG, &["k1", "k2"], rules));
    let http = client();
    let url = gw.url("/export");
    let mut k1 = Vec::new();
    for _ in 0..3 {
        k1.push(keyed(&http, "GET", &url, "k1").await);
    }
    assert_eq!(statuses(&k1), [200, 200, 429]);
    assert_eq!(violated(&k1[2]), ["export-tenant"]);
    // k1's refusal took nothing from the shared bucket: one token is left for k2.
    let k2 = [
        keyed(&http, "GET", &url, "k2").await,
        keyed(&http, "GET", &url, "k2").await,
    ];
    assert_eq!(statuses(&k2), [200, 429], "{}", k2[1].body);
    assert_eq!(violated(&k2[1]), ["export-all"]);
    assert_eq!(backend.stats().requests, 3);
    // k2's second request was debited from its tenant bucket and tier, then given back when
    // the shared bucket refused: one token taken from each, not two.
    assert_eq!(taken("tollgate:{k2}:r:export-tenant:tb:tenant=2.k2", 2), 1);
    assert_eq!(taken("tollgate:{k2}:tb", 1000), 1);
    assert_eq!(taken("tollgate:{r:export-all:tb:route=2.%2A%2F}", 3), 3);
}

fn tokens_taken(hash: &[(String, String)], burst: u64) -> u64 {
    let field = |n: &str| -> u64 {
        hash.iter()
            .find(|(f, _)| f == n)
            .unwrap_or_else(|| panic!("no {n} in {hash:?}"))
            .1
            .parse()
            .unwrap()
    };
    burst - field("l") / field("s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_route_limit_next_to_per_tenant_one_debits_neither_on_refusal() {
    let redis = RedisServer::start();
    let spec = standalone(&redis);
    let get = |key: &str| {
        let hash = redis.hgetall(key);
        assert!(!hash.is_empty(), "no {key} among {:?}", redis.keys("*"));
        hash
    };
    shared_and_per_tenant_all_or_nothing(spec, get).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_route_limit_next_to_per_tenant_one_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let spec = cluster_spec(&cluster);
    let get = |key: &str| -> Vec<(String, String)> {
        let slot = redis_topology::keyslot(&cluster.nodes[0], key);
        let node = &cluster.nodes[cluster.master_of_slot(slot)];
        if node.cmd_text(&["TYPE", key]) == "string" {
            return common::bucket_pairs(&node.cmd_text(&["GET", key]));
        }
        redis::from_redis_value(node.cmd(&["HGETALL", key])).expect("HGETALL")
    };
    shared_and_per_tenant_all_or_nothing(spec, get).await;
}

/// The tier and five rules keyed by `tenant` are one script call per request; a rule keyed
/// without `tenant` adds one call on its own tag (docs/rules.md "How one request is decided").
/// `calls` reads the script calls Redis ran since `reset`; requests go one at a time, so no
/// two share a call.
async fn script_calls_follow_hash_tags(
    redis_spec: String,
    reset: impl Fn(),
    calls: impl Fn() -> u64,
) {
    let backend = Backend::start("echo");
    let mut rules = String::new();
    for (name, key) in [
        ("t-all", "[tenant]"),
        ("t-method", "[tenant, method]"),
        ("t-route", "[tenant, route]"),
        ("t-user", "[tenant, \"header:x-user\"]"),
        ("t-model", "[tenant, \"query:model\"]"),
    ] {
        rules += &format!("  - {{ name: {name}, match: {{ routes: [\"/five\", \"/six\"] }}, key: {key}, limit: 1, per: 1h, burst: 100 }}\n");
    }
    rules += "  - { name: shared, match: { routes: [\"/six\"] }, key: [route], limit: 1, per: 1h, burst: 100 }\n";
    let gw = start(&config(&redis_spec, &backend, BIG, &["k1"], &rules));
    let http = client();
    let get = |path: &str| {
        let req = http
            .get(gw.url(path))
            .header("x-api-key", api_key("k1"))
            .header("x-user", "u1");
        send(req)
    };
    // First requests take script loading (on every node a call goes to) out of the count.
    for path in ["/five", "/six"] {
        assert_eq!(get(&format!("{path}?model=m")).await.status, 200);
    }
    for (path, rules_applied, calls_per_request) in [("/five", 5, 1), ("/six", 6, 2)] {
        reset();
        for _ in 0..4 {
            let r = get(&format!("{path}?model=m")).await;
            assert_eq!(r.status, 200, "{path}: {}", r.body);
            let policy = r.header("ratelimit-policy").unwrap_or_default();
            assert_eq!(
                policy.split(", ").count(),
                1 + rules_applied,
                "{path}: {policy}"
            );
        }
        assert_eq!(
            calls(),
            4 * calls_per_request,
            "{path}: script calls for 4 requests"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tier_and_tenant_rules_are_one_script_call() {
    let redis = RedisServer::start();
    script_calls_follow_hash_tags(
        standalone(&redis),
        || redis.reset_stats(),
        || redis.command_calls("evalsha") + redis.command_calls("eval"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tier_and_tenant_rules_are_one_script_call_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let spec = cluster_spec(&cluster);
    let reset = || {
        for node in &cluster.nodes {
            node.cmd(&["CONFIG", "RESETSTAT"]);
        }
    };
    let calls = || -> u64 {
        let info = |n: &redis_topology::RedisNode| n.info("commandstats");
        cluster
            .nodes
            .iter()
            .map(|n| {
                parse_command_calls(&info(n), "evalsha") + parse_command_calls(&info(n), "eval")
            })
            .sum()
    };
    script_calls_follow_hash_tags(spec, reset, calls).await;
}

/// Values that look alike never share a bucket: separators, braces, `%`, its own encoding,
/// binary bytes, a 10 KB value and the same text in another part each get their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_never_alias() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules = "  - { name: by-query, key: [tenant, \"query:a\", \"query:b\"], limit: 1, per: 1h, burst: 1 }\n";
    let gw = start(&config(&standalone(&redis), &backend, BIG, &["k1"], rules));
    let http = client();
    let long = "x".repeat(10 * 1024);
    let binary: String = (1..=255u8).map(|b| format!("%{b:02X}")).collect();
    // Every case sends both parameters (a missing one skips the rule).
    let cases = [
        "a=x:y&b=z".to_string(),
        "a=x%253Ay&b=z".to_string(),
        "a=x&b=y".to_string(),
        "a=y&b=x".to_string(),
        "a=&b=xy".to_string(),
        "a=xy&b=".to_string(),
        "a=%7Bx%7D&b=z".to_string(),
        "a=%257Bx%257D&b=z".to_string(),
        "a=x%3Aquery%253Ab%3D1.y&b=".to_string(),
        format!("a={long}&b=z"),
        format!("a=x{long}&b=z"),
        format!("a={binary}&b=z"),
        format!("a={}&b=z", &binary[3..]),
        format!("a={}&b=z", binary.replace("%FF", "%FE")),
        "a=%C3%A9&b=z".to_string(),
        "a=%25C3%25A9&b=z".to_string(),
    ];
    for (i, q) in cases.iter().enumerate() {
        let r = keyed(&http, "GET", &gw.url(&format!("/p?{q}")), "k1").await;
        assert_eq!(
            r.status, 200,
            "case {i} shares a bucket with an earlier one: {}",
            r.body
        );
    }
    for (i, q) in cases.iter().enumerate() {
        let r = keyed(&http, "GET", &gw.url(&format!("/p?{q}")), "k1").await;
        assert_eq!(r.status, 429, "case {i} second time");
    }
    // Every key under the tenant's tag, none longer than the prefix, tag, rule and 128 bytes.
    let keys = redis.keys("tollgate:{k1}:r:*");
    assert_eq!(keys.len(), cases.len(), "{keys:?}");
    for k in &keys {
        assert!(k.len() <= "tollgate:{k1}:r:by-query:tb:".len() + 128, "{k}");
    }
    // With neither parameter the rule is skipped (missing: skip).
    for _ in 0..3 {
        assert_eq!(keyed(&http, "GET", &gw.url("/p"), "k1").await.status, 200);
    }
}

/// A shadow rule is decided and counted but never refuses, and is not in the headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_rule_counts_and_never_refuses() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules =
        "  - { name: watch, key: [client_ip], limit: 1, per: 1h, burst: 1, mode: shadow }\n";
    let gw = start(&config(&standalone(&redis), &backend, BIG, &["k1"], rules));
    let http = client();
    for _ in 0..3 {
        let r = keyed(&http, "GET", &gw.url("/"), "k1").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("ratelimit-policy"), Some("\"T\";q=1000;w=3600000"));
    }
    let limited = "tollgate_rule_decisions_total{outcome=\"shadow_limited\",rule=\"watch\"}";
    let admitted = "tollgate_rule_decisions_total{outcome=\"admitted\",rule=\"watch\"}";
    assert_eq!(gw.metric_or_zero(limited), 2.0, "{}", gw.metrics());
    assert_eq!(gw.metric_or_zero(admitted), 1.0);
}

/// Redis down: a rule with `on_failure: local` is enforced at its local share; one with
/// `closed` answers 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_follow_their_failure_policy() {
    let mut redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules = "  - { name: loc, match: { routes: [\"/l\"] }, key: [tenant], limit: 1, per: 1h, burst: 2, on_failure: local }\n  - { name: shut, match: { routes: [\"/c\"] }, key: [tenant], limit: 1, per: 1h, burst: 2, on_failure: closed }\n";
    let spec = format!(
        "{{ url: \"{}\", timeout_ms: 300, fleet_size: 1, on_failure: open }}",
        redis.url()
    );
    let gw = start(&config(
        &spec,
        &backend,
        "{ limit: 1, per: 1h, burst: 1000, on_failure: open }",
        &["k1"],
        rules,
    ));
    let http = client();
    assert_eq!(keyed(&http, "GET", &gw.url("/l"), "k1").await.status, 200);
    redis.kill();
    let mut local = Vec::new();
    for _ in 0..3 {
        local.push(keyed(&http, "GET", &gw.url("/l"), "k1").await);
    }
    assert_eq!(
        statuses(&local),
        [200, 200, 429],
        "fresh local bucket of burst 2"
    );
    assert_eq!(local[0].header("tollgate-degraded"), Some("redis"));
    assert_eq!(violated(&local[2]), ["loc"]);
    let closed = keyed(&http, "GET", &gw.url("/c"), "k1").await;
    assert_eq!(closed.status, 503, "{}", closed.body);
    assert!(closed.header("retry-after").is_some());
}

/// A reload keeps a rule's state while its key is unchanged and applies new sizes at once; a
/// changed key starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_keeps_rule_state_and_applies_new_numbers() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rule = |burst: u64, key: &str| {
        format!("  - {{ name: r, key: [{key}], limit: 1, per: 1h, burst: {burst} }}\n")
    };
    let spec = standalone(&redis);
    let gw = start(&config(&spec, &backend, BIG, &["k1"], &rule(2, "tenant")));
    let http = client();
    let url = gw.url("/");
    for _ in 0..2 {
        assert_eq!(keyed(&http, "GET", &url, "k1").await.status, 200);
    }
    assert_eq!(keyed(&http, "GET", &url, "k1").await.status, 429);
    // Burst 2 → 3: the bucket keeps its state (empty, so still refused) and shows the new
    // size at once.
    gw.reload_ok(&config(&spec, &backend, BIG, &["k1"], &rule(3, "tenant")))
        .await;
    let r = keyed(&http, "GET", &url, "k1").await;
    assert_eq!(r.status, 429, "state kept across the reload");
    let policy = r.header("ratelimit-policy").unwrap_or_default();
    assert!(policy.ends_with("\"r\";q=3;w=10800"), "{policy}");
    // Keyed by the client address instead: a new bucket.
    gw.reload_ok(&config(
        &spec,
        &backend,
        BIG,
        &["k1"],
        &rule(3, "client_ip"),
    ))
    .await;
    assert_eq!(keyed(&http, "GET", &url, "k1").await.status, 200);
}

/// The admin API shows the rules that apply and their state, debiting nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_tenant_view_show_rules_without_debiting() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules = "  - { name: charges, match: { methods: [POST] }, key: [tenant, method], limit: 1, per: 1h, burst: 2 }\n  - { name: per-tenant, key: [tenant], limit: 1, per: 1h, burst: 5 }\n";
    let gw = start(&config(&standalone(&redis), &backend, BIG, &["k1"], rules));
    let http = client();
    assert_eq!(keyed(&http, "POST", &gw.url("/c"), "k1").await.status, 200);
    let body = json!({"method": "POST", "path": "/c", "headers": {"x-api-key": api_key("k1")}, "client_ip": "127.0.0.1"});
    for _ in 0..3 {
        let e = admin(gw.admin_addr(), "POST", "/v1/explain", Some(&body)).await;
        let v = e.expect_ok();
        let tenant = v["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["layer"] == "tenant")
            .unwrap();
        assert_eq!(tenant["decision"], "admitted", "{v}");
        let charges = &tenant["rules"][0];
        assert_eq!(charges["name"], "charges");
        assert_eq!(charges["remaining"], 1, "{charges}");
        assert_eq!(charges["would_admit"], true);
        assert_eq!(
            charges["key"],
            "tollgate:{k1}:r:charges:tb:tenant=2.k1:method=4.POST"
        );
        assert_eq!(tenant["rules"][1]["remaining"], 4);
        assert_eq!(v["debited"], false);
    }
    assert_eq!(keyed(&http, "POST", &gw.url("/c"), "k1").await.status, 200);
    let e = admin(gw.admin_addr(), "POST", "/v1/explain", Some(&body)).await;
    let v = e.expect_ok();
    assert_eq!(v["outcome"]["decision"], "limited", "{v}");
    assert_eq!(v["outcome"]["status"], 429);
    // GET is not matched by `charges`.
    let get = json!({"method": "GET", "path": "/c", "headers": {"x-api-key": api_key("k1")}});
    let v = admin(gw.admin_addr(), "POST", "/v1/explain", Some(&get)).await;
    let tenant = v.expect_ok()["layers"][3].clone();
    assert_eq!(tenant["rules"].as_array().unwrap().len(), 1, "{tenant}");
    let t = admin(gw.admin_addr(), "GET", "/v1/tenants/k1", None).await;
    let t = t.expect_ok();
    let rules = t["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 2, "{t}");
    assert_eq!(rules[0]["key_parts"], json!(["tenant", "method"]));
    assert!(rules[0].get("remaining").is_none());
    assert_eq!(rules[1]["remaining"], 3, "{t}");
    assert_eq!(keyed(&http, "POST", &gw.url("/c"), "k1").await.status, 429);
    // A reset gives the tenant-keyed rule its whole burst back.
    let r = admin(gw.admin_addr(), "POST", "/v1/tenants/k1/reset", None).await;
    r.expect_ok();
    let t = admin(gw.admin_addr(), "GET", "/v1/tenants/k1", None).await;
    assert_eq!(t.expect_ok()["rules"][1]["remaining"], 5);
}

/// Under `multi_region:` a rule gets this region's share, as a tier does: a static half of
/// burst 4 is 2 here, for a rule keyed by the tenant and for a shared one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_get_the_regional_share() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules = "  - { name: mine, match: { routes: [\"/m\"] }, key: [tenant], limit: 1, per: 1h, burst: 4 }\n  - { name: ours, match: { routes: [\"/o\"] }, key: [route], limit: 1, per: 1h, burst: 4 }\n";
    let mut yaml = config(&standalone(&redis), &backend, BIG, &["k1"], rules);
    yaml.push_str("multi_region: { region: eu, shares: { eu: 1, us: 1 }, mode: static }\n");
    let gw = start(&yaml);
    let http = client();
    for path in ["/m", "/o"] {
        let mut replies = Vec::new();
        for _ in 0..3 {
            replies.push(keyed(&http, "GET", &gw.url(path), "k1").await);
        }
        assert_eq!(statuses(&replies), [200, 200, 429], "{path}");
        let policy = replies[0].header("ratelimit-policy").unwrap_or_default();
        assert!(policy.contains(";q=2;"), "{path}: {policy}");
    }
}

/// Identical rule decisions in flight together share one policy-script call (request
/// coalescing) and stay exact: with Redis frozen, 30 requests of one tenant arrive and queue
/// behind the first one's call; thawed, exactly the rule's burst is admitted, from a few script
/// calls, not 30.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_rule_decisions_share_a_call_and_stay_exact() {
    const REQUESTS: usize = 30;
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules = "  - { name: burst12, match: { routes: [\"/c\"] }, key: [tenant], limit: 1, per: 1h, burst: 12 }\n";
    let spec = format!(
        "{{ url: \"{}\", timeout_ms: 30000, circuit_breaker: {{ min_calls: 1000 }}, on_failure: closed }}",
        redis.url()
    );
    let gw = start(&config(&spec, &backend, BIG, &["k1"], rules));
    let http = client();
    let url = gw.url("/c");
    // A first request takes the connection and script loading out of the way.
    assert_eq!(keyed(&http, "GET", &url, "k1").await.status, 200);
    redis.reset_stats();
    redis.pause();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..REQUESTS {
        let (http, url) = (http.clone(), url.clone());
        set.spawn(async move { keyed(&http, "GET", &url, "k1").await });
    }
    // Time for every request to reach the gateway (not asserted: a straggler makes one more
    // call, which the bound below allows).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    redis.resume();
    let mut replies = Vec::new();
    while let Some(r) = set.join_next().await {
        replies.push(r.expect("task"));
    }
    let admitted = replies.iter().filter(|r| r.status == 200).count();
    let refused: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
    assert_eq!((admitted, refused.len()), (11, REQUESTS - 11));
    assert!(refused.iter().all(|r| violated(r) == ["burst12"]));
    assert_eq!(backend.stats().requests, 12);
    let calls = redis.command_calls("evalsha") + redis.command_calls("eval");
    assert!(
        (1..=4).contains(&calls),
        "{calls} script calls for {REQUESTS} requests"
    );
}

/// A named route (`routes[].name`) labels its metrics, problem bodies and explain; a rule's
/// refusal of a request its tier admitted is counted under the rule
/// (`tollgate_rule_decisions_total`) and as `rule_limited`, not as the tier's `limited`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_route_labels_everything_and_a_rule_refusal_is_the_rules() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let rules = "  - { name: per-tenant, key: [tenant], limit: 1, per: 1h, burst: 1 }\n";
    let yaml = config(&standalone(&redis), &backend, BIG, &["k1"], rules).replacen(
        "{ path_prefix: \"/\", upstream: echo",
        "{ name: orders, path_prefix: \"/\", upstream: echo",
        1,
    );
    let gw = start(&yaml);
    let http = client();
    assert_eq!(keyed(&http, "GET", &gw.url("/"), "k1").await.status, 200);
    let r = keyed(&http, "GET", &gw.url("/"), "k1").await;
    assert_eq!(r.status, 429, "{}", r.body);
    let p: Value = serde_json::from_str(&r.body).expect("problem+json");
    assert_eq!(p["route"], "orders", "{p}");
    let tenant = |outcome: &str| {
        format!("tollgate_decisions_total{{layer=\"tenant\",outcome=\"{outcome}\",tier=\"T\"}}")
    };
    let rule = r#"tollgate_rule_decisions_total{outcome="limited",rule="per-tenant"}"#;
    assert_eq!(
        (
            gw.metric_or_zero(rule),
            gw.metric_or_zero(&tenant("rule_limited")),
            gw.metric_or_zero(&tenant("limited")),
        ),
        (1.0, 1.0, 0.0),
        "{}",
        gw.metrics()
    );
    let requests = |class: &str| {
        format!("tollgate_requests_total{{route=\"orders\",status_class=\"{class}\"}}")
    };
    assert!(
        eventually(std::time::Duration::from_secs(5), || {
            gw.metric_or_zero(&requests("2xx")) == 1.0 && gw.metric_or_zero(&requests("4xx")) == 1.0
        })
        .await,
        "{}",
        gw.metrics()
    );
    let body = json!({"method": "GET", "host": "example.com", "path": "/",
        "headers": {"x-api-key": api_key("k1")}, "client_ip": "127.0.0.1"});
    let e = admin(gw.admin_addr(), "POST", "/v1/explain", Some(&body)).await;
    let layers = e.expect_ok()["layers"].as_array().expect("layers").clone();
    let route = layers
        .iter()
        .find(|l| l["layer"] == "route")
        .expect("route layer");
    assert_eq!(route["route"], "orders", "{route}");
}
