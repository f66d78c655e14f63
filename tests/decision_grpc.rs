//! The decision service's gRPC face (docs/decision-service.md): Envoy's rate limit service v3
//! (`ShouldRateLimit`) asked by a real `grpcio` client (`tests/rls/client.py`) of the real
//! gateway on a real `redis-server`: descriptors matched to `limits:` rules, all or nothing
//! (a refusal debits no sibling), `hits_addend`, every algorithm, the draft-11 header fields,
//! unmatched descriptors, shadow rules, failure policies with Redis gone, and bad input.
//!
//! Buckets barely refill (`per: 1h`), so counts are exact.

mod common;
#[path = "common/rls.rs"]
mod rls;

use common::*;
use rls::Rls;
use serde_json::{json, Value};

/// A gateway on `redis` (a `redis:` flow map) with the decision service on a free port
/// (`decision.grpc` extra settings `grpc`) and the `limits:` items `rules`.
struct Rig {
    gw: Gateway,
    grpc: String,
    _backend: Backend,
}

impl Rig {
    fn start(redis: &str, grpc: &str, rules: &str) -> Rig {
        Self::start_with(redis, grpc, rules, |c| c)
    }

    /// [`start`](Self::start) with more of the config set by `more`.
    fn start_with(
        redis: &str,
        grpc: &str,
        rules: &str,
        more: impl FnOnce(GatewayConfig) -> GatewayConfig,
    ) -> Rig {
        let backend = Backend::start("echo");
        let addr = free_addr();
        let yaml = more(GatewayConfig::echo(&backend.addr(), "optional"))
            .redis_spec(redis)
            .section("limits", &format!("\n{rules}"))
            .section(
                "decision",
                &format!("{{ grpc: {{ listen: \"{addr}\"{grpc} }} }}"),
            )
            .yaml();
        let gw = Gateway::start(&yaml);
        Rig {
            gw,
            grpc: addr,
            _backend: backend,
        }
    }

    fn client(&self) -> Rls {
        Rls::connect(&self.grpc)
    }
}

fn strict(redis: &RedisServer) -> String {
    format!("{{ url: \"{}\", {STRICT_REDIS} }}", redis.url())
}

fn overall(v: &Value) -> &str {
    assert_eq!(v["code"], "OK", "call failed: {v}");
    v["response"]["overall_code"].as_str().unwrap_or_default()
}

fn status(v: &Value, i: usize) -> &Value {
    &v["response"]["statuses"][i]
}

fn remaining(v: &Value, i: usize) -> u64 {
    status(v, i)["limit_remaining"].as_u64().unwrap_or(0)
}

fn header<'a>(v: &'a Value, name: &str) -> Option<&'a str> {
    v["response"]["response_headers_to_add"]
        .as_array()?
        .iter()
        .find(|h| {
            h["key"]
                .as_str()
                .is_some_and(|k| k.eq_ignore_ascii_case(name))
        })
        .and_then(|h| h["value"].as_str())
}

const TWO_RULES: &str = "  - { name: per-user, match: { domain: api, descriptors: [user] }, key: [\"descriptor:user\"], limit: 5, per: 1h }\n  - { name: per-plan, match: { domain: api, descriptors: [plan] }, key: [\"descriptor:plan\"], limit: 1, per: 1h }\n";

/// A call refused by one descriptor debits none of the others (unlike envoyproxy/ratelimit):
/// the sibling's bucket in Redis keeps its count.
#[test]
fn a_refusal_debits_no_sibling() {
    let redis = RedisServer::start();
    let rig = Rig::start(&strict(&redis), "", TWO_RULES);
    let mut c = rig.client();
    let both: &[(&[(&str, &str)], u64)] = &[(&[("user", "u1")], 0), (&[("plan", "free")], 0)];
    let first = c.call("api", both, 0);
    assert_eq!(overall(&first), "OK");
    assert_eq!((remaining(&first, 0), remaining(&first, 1)), (4, 0));
    let refused = c.call("api", both, 0);
    assert_eq!(overall(&refused), "OVER_LIMIT");
    assert_eq!(status(&refused, 0)["code"], "OK");
    assert_eq!(status(&refused, 1)["code"], "OVER_LIMIT");
    assert_eq!(
        remaining(&refused, 0),
        4,
        "the sibling reports its room, undebited"
    );
    // In Redis: the user's bucket still holds 4 (the next call alone leaves 3).
    let keys = redis.keys("*per-user*");
    assert_eq!(keys.len(), 1, "{keys:?}");
    let alone = c.call("api", &[(&[("user", "u1")], 0)], 0);
    assert_eq!(overall(&alone), "OK");
    assert_eq!(remaining(&alone, 0), 3);
    assert_eq!(status(&alone, 0)["current_limit"]["name"], "per-user");
    assert_eq!(status(&alone, 0)["current_limit"]["requests_per_unit"], 5);
    assert_eq!(status(&alone, 0)["current_limit"]["unit"], "HOUR");
}

/// `hits_addend` at request level applies to descriptors without their own; 0 means 1.
#[test]
fn hits_addend_at_request_and_descriptor_level() {
    let redis = RedisServer::start();
    let rule = "  - { name: h, match: { domain: d, descriptors: [k] }, key: [\"descriptor:k\"], limit: 10, per: 1h }\n";
    let rig = Rig::start(&strict(&redis), "", rule);
    let mut c = rig.client();
    let r = c.call("d", &[(&[("k", "a")], 0)], 0);
    assert_eq!(remaining(&r, 0), 9, "0 means 1");
    let r = c.call("d", &[(&[("k", "a")], 0)], 3);
    assert_eq!(remaining(&r, 0), 6, "request-level 3");
    let r = c.call("d", &[(&[("k", "a")], 2)], 3);
    assert_eq!(remaining(&r, 0), 4, "descriptor-level 2 wins");
    let r = c.call("d", &[(&[("k", "a")], 5)], 0);
    assert_eq!(overall(&r), "OVER_LIMIT", "5 > 4 left: refused whole");
    let r = c.call("d", &[(&[("k", "a")], 4)], 0);
    assert_eq!((overall(&r), remaining(&r, 0)), ("OK", 0));
}

/// Every algorithm decides through the service, with draft-11 fields and `Retry-After`.
#[test]
fn every_algorithm_through_the_service() {
    let redis = RedisServer::start();
    let algorithms = ALGORITHMS;
    let rules: String = algorithms
        .iter()
        .map(|a| format!("  - {{ name: {a}, match: {{ domain: algo, descriptors: [{{ algorithm: {a} }}, user] }}, key: [\"descriptor:user\"], limit: 2, per: 1h, algorithm: {a} }}\n"))
        .collect();
    let rig = Rig::start(&strict(&redis), "", &rules);
    let mut c = rig.client();
    for a in algorithms {
        let d: &[(&str, &str)] = &[("algorithm", a), ("user", "u")];
        let answers: Vec<Value> = (0..3).map(|_| c.call("algo", &[(d, 0)], 0)).collect();
        let codes: Vec<&str> = answers.iter().map(overall).collect();
        assert_eq!(codes, ["OK", "OK", "OVER_LIMIT"], "{a}: {answers:?}");
        let policy = header(&answers[0], "RateLimit-Policy").unwrap_or_default();
        assert!(
            policy.starts_with(&format!("\"{a}\";q=2;w=")),
            "{a}: {policy}"
        );
        let now = header(&answers[0], "RateLimit").unwrap_or_default();
        assert!(now.starts_with(&format!("\"{a}\";r=1;t=")), "{a}: {now}");
        let retry: u64 = header(&answers[2], "Retry-After")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{a}: no Retry-After in {}", answers[2]));
        assert!(retry > 0, "{a}");
        assert!(header(&answers[1], "Retry-After").is_none(), "{a}");
    }
}

/// A descriptor no rule matches is OK without a limit, beside one that is limited; a shadow
/// rule answers OK, is counted and never refuses.
#[test]
fn unmatched_descriptors_and_shadow_rules() {
    let redis = RedisServer::start();
    let rules = "  - { name: hard, match: { domain: d, descriptors: [k] }, key: [\"descriptor:k\"], limit: 1, per: 1h }\n  - { name: soft, match: { domain: d, descriptors: [s] }, key: [\"descriptor:s\"], limit: 1, per: 1h, mode: shadow }\n";
    let rig = Rig::start(&strict(&redis), "", rules);
    let mut c = rig.client();
    let r = c.call("d", &[(&[("other", "x")], 0), (&[("k", "a")], 0)], 0);
    assert_eq!(overall(&r), "OK");
    assert_eq!(status(&r, 0)["code"], "OK");
    assert!(status(&r, 0)["current_limit"].is_null(), "{r}");
    assert_eq!(status(&r, 1)["current_limit"]["name"], "hard");
    for _ in 0..3 {
        let r = c.call("d", &[(&[("s", "a")], 0)], 0);
        assert_eq!(overall(&r), "OK", "{r}");
        assert_eq!(status(&r, 0)["code"], "OK");
    }
    let shadowed = rig
        .gw
        .metric_or_zero("tollgate_rule_decisions_total{outcome=\"shadow_limited\",rule=\"soft\"}");
    assert_eq!(shadowed, 2.0);
}

/// With Redis gone each rule follows its `on_failure` (open: OK; closed: OVER_LIMIT with a
/// retry delay; local: decided in memory), or, with `on_failure: unavailable`, the call is
/// answered UNAVAILABLE for the caller's failure mode to decide.
#[test]
fn failure_policies_with_redis_stopped() {
    let mut redis = RedisServer::start();
    let rules = "  - { name: op, match: { domain: d, descriptors: [o] }, key: [\"descriptor:o\"], limit: 1, per: 1h, on_failure: open }\n  - { name: cl, match: { domain: d, descriptors: [c] }, key: [\"descriptor:c\"], limit: 1, per: 1h, on_failure: closed }\n  - { name: lo, match: { domain: d, descriptors: [l] }, key: [\"descriptor:l\"], limit: 1, per: 1h, burst: 2, on_failure: local }\n";
    let spec = format!(
        "{{ url: \"{}\", timeout_ms: 300, fleet_size: 1, on_failure: open }}",
        redis.url()
    );
    let rules_rig = Rig::start(&spec, "", rules);
    let unavailable_rig = Rig::start(&spec, ", on_failure: unavailable", rules);
    let mut c = rules_rig.client();
    let mut u = unavailable_rig.client();
    assert_eq!(overall(&c.call("d", &[(&[("o", "x")], 0)], 0)), "OK");
    redis.kill();
    for _ in 0..3 {
        let open = c.call("d", &[(&[("o", "x")], 0)], 0);
        assert_eq!(overall(&open), "OK", "{open}");
    }
    let closed = c.call("d", &[(&[("c", "x")], 0)], 0);
    assert_eq!(overall(&closed), "OVER_LIMIT", "{closed}");
    assert!(header(&closed, "Retry-After").is_some(), "{closed}");
    let local: Vec<String> = (0..3)
        .map(|_| overall(&c.call("d", &[(&[("l", "x")], 0)], 0)).to_string())
        .collect();
    assert_eq!(
        local,
        ["OK", "OK", "OVER_LIMIT"],
        "a fresh local bucket of burst 2"
    );
    for d in ["o", "c", "l", "l", "l"] {
        let r = u.call("d", &[(&[(d, "x")], 0)], 0);
        assert_eq!(r["code"], "UNAVAILABLE", "{d}: {r}");
    }
    // Answered UNAVAILABLE, the `local` rule's bucket in memory was not debited either.
    let local = unavailable_rig
        .gw
        .metric_or_zero("tollgate_rule_decisions_total{outcome=\"fallback\",rule=\"lo\"}");
    assert_eq!(local, 0.0);
}

/// Bad input gets a clear status and the service keeps serving: empty or unknown domain, no
/// descriptors, 1 000 entries, a 64 KiB value, a huge `hits_addend`, malformed protobuf, and
/// 10 000 calls at once on one connection.
#[test]
fn bad_input_gets_a_clear_status() {
    let redis = RedisServer::start();
    let rule = "  - { name: h, match: { domain: d, descriptors: [k] }, key: [\"descriptor:k\"], limit: 10, per: 1h }\n";
    let mut rig = Rig::start(&strict(&redis), "", rule);
    let mut c = rig.client();
    let code = |v: Value| v["code"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        code(c.call("", &[(&[("k", "a")], 0)], 0)),
        "INVALID_ARGUMENT"
    );
    let unknown = c.call("nope", &[(&[("k", "a")], 0)], 0);
    assert_eq!(code(unknown.clone()), "INVALID_ARGUMENT");
    assert!(unknown["details"]
        .as_str()
        .unwrap_or_default()
        .contains("unknown domain"));
    assert_eq!(code(c.call("d", &[], 0)), "INVALID_ARGUMENT");
    let many: Vec<(String, String)> = (0..1000).map(|i| (format!("k{i}"), "v".into())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(code(c.call("d", &[(&many, 0)], 0)), "INVALID_ARGUMENT");
    let value = "v".repeat(64 * 1024);
    assert_eq!(
        code(c.call("d", &[(&[("k", &value)], 0)], 0)),
        "OUT_OF_RANGE"
    );
    let value = "v".repeat(2048);
    assert_eq!(
        code(c.call("d", &[(&[("k", &value)], 0)], 0)),
        "INVALID_ARGUMENT"
    );
    assert_eq!(
        code(c.call("d", &[(&[("k", "a")], 1 << 40)], 0)),
        "INVALID_ARGUMENT"
    );
    // A field 2 (descriptors) whose length runs past the end.
    let malformed = c.send(json!({ "raw": "0a01641205ffff" }));
    assert_ne!(code(malformed.clone()), "OK", "{malformed}");
    assert_ne!(code(malformed.clone()), "UNKNOWN", "{malformed}");
    let flood = c.send(json!({
        "streams": 10000,
        "domain": "d",
        "descriptors": [{ "entries": [["unmatched", "x"]] }],
    }));
    let codes = flood["codes"].as_object().expect("codes");
    let total: u64 = codes.values().filter_map(Value::as_u64).sum();
    assert_eq!(total, 10000, "{flood}");
    assert!(rig.gw.is_running(), "the gateway survives");
    let after = c.call("d", &[(&[("k", "a")], 0)], 0);
    assert_eq!(overall(&after), "OK");
    assert_eq!(remaining(&after, 0), 9);
}

/// Limit rules without any tier are decided too, on the proxy path as through the service: the
/// quota store exists whenever rules do (it used to need a tier, and such rules never refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_without_tiers_are_decided_on_the_proxy_path() {
    let redis = RedisServer::start();
    let rules = "  - { name: per-ip, key: [client_ip], limit: 1, per: 1h, burst: 2 }\n  - { name: rls, match: { domain: d, descriptors: [k] }, key: [\"descriptor:k\"], limit: 1, per: 1h }\n";
    let rig = Rig::start(&strict(&redis), "", rules);
    let http = client();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let r = http.get(rig.gw.url("/")).send().await.expect("send");
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);
}

/// A request that is not a gRPC call gets the HTTP answer gRPC over HTTP/2 prescribes, not a
/// decision: another method 405 with `Allow: POST`, another content-type 415.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_is_not_grpc_is_refused_over_http() {
    let redis = RedisServer::start();
    let rule = "  - { name: h, match: { domain: d, descriptors: [k] }, key: [\"descriptor:k\"], limit: 10, per: 1h }\n";
    let rig = Rig::start(&strict(&redis), "", rule);
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let url = format!(
        "http://{}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
        rig.grpc
    );
    let get = h2.get(&url).send().await.unwrap();
    assert_eq!(get.status(), 405);
    assert_eq!(get.headers()["allow"], "POST");
    let json = h2
        .post(&url)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(json.status(), 415);
    let mut c = rig.client();
    assert_eq!(overall(&c.call("d", &[(&[("k", "a")], 0)], 0)), "OK");
}

/// A block set through the admin API of another gateway on the same Redis refuses a call whose
/// descriptor carries the blocked address in Envoy's `remote_address` entry: `OVER_LIMIT`,
/// `Retry-After` and `duration_until_reset` the block's remaining time, nothing debited; a
/// tenant block (entry `tenant`) refuses its descriptor alone within the call.
#[test]
fn blocks_refuse_calls_that_carry_the_blocked_address_or_tenant() {
    let redis = RedisServer::start();
    let tiers = "  free: { limit: 1, per: 1h, burst: 10 }\n";
    let rules = "  - { name: per-address, match: { domain: edge, descriptors: [remote_address] }, key: [\"descriptor:remote_address\"], limit: 5, per: 1h }\n";
    let rig = Rig::start_with(&strict(&redis), "", rules, |c| {
        c.tier_lines(tiers).raw("store: {}\n")
    });
    let backend = Backend::start("echo");
    let other = common::admin::admin_gateway(
        &redis.url(),
        &backend.addr(),
        tiers,
        &[("filed", "free")],
        "store: {}\n",
    );
    let mut c = rig.client();
    let address: &[(&[(&str, &str)], u64)] = &[(&[("remote_address", "2001:db8::7")], 0)];
    let first = c.call("edge", address, 0);
    assert_eq!((overall(&first), remaining(&first, 0)), ("OK", 4));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    for (path, body) in [
        (
            "/v1/blocks/ip/2001:db8::%2F32",
            json!({"reason": "scanner", "expires_in_s": 600}),
        ),
        ("/v1/blocks/tenant/acme", json!({"reason": "unpaid"})),
    ] {
        rt.block_on(common::admin::admin_ok(
            other.admin_addr(),
            "PUT",
            path,
            Some(&body),
        ));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let shut = loop {
        let v = c.call("edge", address, 0);
        if overall(&v) == "OVER_LIMIT" || std::time::Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(overall(&shut), "OVER_LIMIT", "{shut}");
    assert_eq!(status(&shut, 0)["code"], "OVER_LIMIT");
    let retry: u64 = header(&shut, "Retry-After")
        .and_then(|s| s.parse().ok())
        .expect("Retry-After");
    assert!((1..=600).contains(&retry), "{retry}");
    // int64 seconds: JSON text in the client's rendering.
    let seconds = &status(&shut, 0)["duration_until_reset"]["seconds"];
    let reset = seconds
        .as_str()
        .and_then(|s| s.parse::<u64>().ok())
        .or(seconds.as_u64())
        .unwrap_or_else(|| panic!("duration_until_reset: {shut}"));
    assert!((1..=600).contains(&reset), "{shut}");
    let user_key = redis.keys("*per-address*");
    assert_eq!(user_key.len(), 1, "{user_key:?}");
    let after = c.call("edge", &[(&[("remote_address", "2001:db9::7")], 0)], 0);
    assert_eq!(overall(&after), "OK");
    let tenant: &[(&[(&str, &str)], u64)] = &[
        (&[("remote_address", "2001:db9::7")], 0),
        (&[("tenant", "acme")], 0),
    ];
    let t = c.call("edge", tenant, 0);
    assert_eq!(overall(&t), "OVER_LIMIT", "{t}");
    assert_eq!(status(&t, 0)["code"], "OK");
    assert_eq!(status(&t, 1)["code"], "OVER_LIMIT");
    assert!(header(&t, "Retry-After").is_none(), "{t}");
    // Nothing was debited for the refused calls: the other address has 4 left after one call.
    let again = c.call("edge", &[(&[("remote_address", "2001:db9::7")], 0)], 0);
    assert_eq!(remaining(&again, 0), 3, "{again}");
}
