//! Usage cost (`tiers.<name>.usage`, docs/DESIGN.md 4e "Usage cost", docs/usage-cost.md) through
//! real gateways, a real `redis-server` and the echo backend's OpenAI-compatible mode
//! (`/v1/chat/completions`; the usage it states is set per request with `x-echo-usage`).
//!
//! The usage bucket refills one unit a day, so a test's few seconds cannot change a count; the
//! bucket's level is read from Redis (`tollgate:{<tenant>}:u:tokens`, in 1/86 400 000 units).

mod common;

use common::*;
use std::time::Duration;
use tokio::task::JoinSet;

const PER_MS: i64 = 86_400_000;
const REDIS: &str = "timeout_ms: 2000, on_failure: closed";

fn api_key(tenant: &str) -> String {
    format!("key-{tenant}-0123456789")
}

/// A gateway config: tier `T` with the usage budget `usage` (flow-map fields after the common
/// ones) and API keys of `tenants`.
fn config(redis: &RedisServer, backend: &Backend, usage: &str, tenants: &[&str]) -> String {
    let mut c = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), REDIS)
        .tier(
            "T",
            &format!(
                "{{ limit: 1, per: 1h, burst: 1000, usage: {{ limit: 1, per: 1d, burst: 1000, \
                 from: {{ openai: true }}, {usage} }} }}"
            ),
        )
        .api_keys_always();
    for t in tenants {
        c = c.api_key(&api_key(t), t, "T");
    }
    c.yaml()
}

/// Whole units in the tenant's usage bucket (floor; `None` when the key is absent: full).
fn level(redis: &RedisServer, tenant: &str) -> Option<i64> {
    let l: Option<String> = common::key_field(
        &mut redis.conn(),
        &format!("tollgate:{{{tenant}}}:u:tokens"),
        "l",
    );
    l.map(|l| l.parse::<i64>().expect("level").div_euclid(PER_MS))
}

/// Settlements counted by every gateway with `outcome`.
fn settlements(gws: &[&Gateway], outcome: &str) -> f64 {
    let series = format!("tollgate_usage_settlements_total{{tier=\"T\",outcome=\"{outcome}\"}}");
    gws.iter().map(|g| g.metric_or_zero(&series)).sum()
}

/// POSTs a chat completion (`stream`: SSE with usage) for `tenant`, stating `usage`.
fn completion(
    http: &reqwest::Client,
    url: &str,
    tenant: &str,
    usage: &str,
    stream: bool,
) -> reqwest::RequestBuilder {
    let body = serde_json::json!({
        "model": "echo",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        "stream_options": {"include_usage": true},
    });
    http.post(url)
        .header("x-api-key", api_key(tenant))
        .header("x-echo-usage", usage)
        .json(&body)
}

/// Twelve concurrent streams over three gateways, each reserving 100 of a 1000-unit budget and
/// reporting 150: at most ten are admitted, the bucket ends exactly at 1000 − 150 × admitted
/// (below zero: a debt), the overshoot is at most the admitted streams' shortfall (50 each),
/// and no gateway admits another request while the debt stands, each answering with the
/// Retry-After the debt implies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_settle_concurrent_streams_exactly() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = config(&redis, &backend, "reserve: 100, max: 1000", &["k1"]);
    let gws = [
        Gateway::start(&yaml),
        Gateway::start(&yaml),
        Gateway::start(&yaml),
    ];
    let http = client();
    let mut set = JoinSet::new();
    for i in 0..12 {
        let url = gws[i % 3].url("/v1/chat/completions?chunks=3&chunk_delay_ms=500");
        let req = completion(&http, &url, "k1", "150", true);
        set.spawn(async move {
            Reply::read(req.send().await.expect("send"))
                .await
                .expect("read")
        });
    }
    let mut replies = Vec::new();
    while let Some(r) = set.join_next().await {
        replies.push(r.expect("task"));
    }
    let admitted = replies.iter().filter(|r| r.status == 200).count() as i64;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert!((1..=10).contains(&admitted), "{statuses:?}");
    assert_eq!(
        replies.iter().filter(|r| r.status == 429).count() as i64,
        12 - admitted
    );
    for r in replies.iter().filter(|r| r.status == 200) {
        assert!(r.body.contains("\"total_tokens\":150"), "{}", r.body);
        let policy = r.header("ratelimit-policy").expect("RateLimit-Policy");
        assert!(policy.contains("\"T.tokens\";q=1000;w=86400"), "{policy}");
    }
    let refs: Vec<&Gateway> = gws.iter().collect();
    let all_settled = eventually(Duration::from_secs(10), || {
        settlements(&refs, "settled") == admitted as f64
    })
    .await;
    assert!(all_settled, "settled: {}", settlements(&refs, "settled"));
    let left = level(&redis, "k1").expect("usage bucket");
    assert_eq!(left, 1000 - 150 * admitted);
    let overshoot = 150 * admitted - 1000;
    assert!(overshoot <= 50 * admitted, "overshoot {overshoot}");
    if left < 100 {
        for gw in &gws {
            let req = completion(&http, &gw.url("/v1/chat/completions"), "k1", "1", false);
            let r = Reply::read(req.send().await.expect("send"))
                .await
                .expect("read");
            assert_eq!(r.status, 429, "{}", r.body);
            assert!(r.body.contains("T.tokens"), "{}", r.body);
            // The debt and the reserve, refilled at one unit a day.
            let wait: i64 = r
                .header("retry-after")
                .expect("Retry-After")
                .parse()
                .unwrap();
            let expected = (100 - left) * 86_400;
            assert!(
                (expected - 100..=expected).contains(&wait),
                "{wait} vs {expected}"
            );
        }
    }
    assert_eq!(backend.stats().requests as i64, admitted);
}

/// A 5xx answer gives the whole reserve back with `refund_on: [backend_5xx]`; without it the
/// reported count is settled as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_answer_refunds_the_reserve() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = config(
        &redis,
        &backend,
        "reserve: 100, refund_on: [backend_5xx]",
        &["k1"],
    );
    let gw = Gateway::start(&yaml);
    let http = client();
    let url = gw.url("/v1/chat/completions?status=503");
    let r = completion(&http, &url, "k1", "300", false)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 503);
    r.text().await.expect("body");
    assert!(
        eventually(Duration::from_secs(10), || settlements(&[&gw], "refunded")
            == 1.0)
        .await
    );
    // Full again: the key expires at once (a missing key is a full bucket).
    let full = level(&redis, "k1");
    assert!(matches!(full, None | Some(1000)), "{full:?}");
    let ok = completion(&http, &gw.url("/v1/chat/completions"), "k1", "300", false);
    assert_eq!(ok.send().await.expect("send").status().as_u16(), 200);
    assert!(
        eventually(Duration::from_secs(10), || settlements(&[&gw], "settled")
            == 1.0)
        .await
    );
    assert_eq!(level(&redis, "k1"), Some(700));
}

/// Reads `resp`'s body until `until` appears in it, then drops the connection.
async fn read_until_then_leave(resp: reqwest::Response, until: &str) {
    let mut resp = resp;
    let mut seen = String::new();
    while let Some(chunk) = resp.chunk().await.expect("chunk") {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if seen.contains(until) {
            return;
        }
    }
    panic!("the stream ended before {until:?}: {seen}");
}

/// A client that leaves a stream before its usage chunk is charged `uncounted` (leaving just
/// before the count must not make the stream cheaper); one that leaves after the usage chunk
/// (before `[DONE]`) is settled from the usage seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_stream_is_charged_uncounted_or_settles_what_was_seen() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = config(
        &redis,
        &backend,
        "reserve: 100, max: 500, uncounted: 300",
        &["early", "late"],
    );
    let gw = Gateway::start(&yaml);
    let http = client();
    let url = gw.url("/v1/chat/completions?chunks=3&chunk_delay_ms=700");
    let early = completion(&http, &url, "early", "40", true)
        .send()
        .await
        .expect("send");
    assert_eq!(early.status().as_u16(), 200);
    read_until_then_leave(early, "tok0").await;
    let gone = || settlements(&[&gw], "uncounted") == 1.0;
    assert!(eventually(Duration::from_secs(15), gone).await);
    assert_eq!(level(&redis, "early"), Some(700));

    let late = completion(&http, &url, "late", "40", true)
        .send()
        .await
        .expect("send");
    read_until_then_leave(late, "\"total_tokens\":40").await;
    let settled = || settlements(&[&gw], "settled") == 1.0;
    assert!(eventually(Duration::from_secs(15), settled).await);
    assert_eq!(level(&redis, "late"), Some(960));
}

/// Each bad count: negative, non-numeric, NaN and a string keep the reserve (`invalid`); no
/// count keeps it (`missing`), or in a stream is charged `max` (`uncounted`); a huge count is
/// clamped at `max` (`clamped`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_counts_keep_the_reserve_or_clamp() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let cases = [
        ("neg", "-5", "invalid", 900),
        ("word", "abc", "invalid", 900),
        ("nan", "NaN", "invalid", 900),
        ("text", "\"12\"", "invalid", 900),
        ("frac", "12.5", "invalid", 900),
        ("huge", "99999999999999999999999999", "clamped", 700),
        ("big", "301", "clamped", 700),
        // A stream without a count is charged `uncounted` (default: max); a JSON answer
        // without one keeps the reserve.
        ("none", "", "uncounted", 700),
        ("nojson", "", "missing", 900),
    ];
    let tenants: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let yaml = config(&redis, &backend, "reserve: 100, max: 300", &tenants);
    let gw = Gateway::start(&yaml);
    let http = client();
    for (i, (tenant, usage, outcome, left)) in cases.iter().enumerate() {
        let stream = i % 2 == 1;
        let mut req = completion(
            &http,
            &gw.url("/v1/chat/completions"),
            tenant,
            usage,
            stream,
        );
        if usage.is_empty() {
            // The usage goes to a header the budget does not read: the body states none.
            req = req.header("x-echo-usage-in", "header");
        }
        let r = Reply::read(req.send().await.expect("send"))
            .await
            .expect("read");
        assert_eq!(r.status, 200, "{tenant}: {}", r.body);
        // Every settlement so far with this outcome, this one included (a count of 1 could be
        // an earlier case's, and the level read before this one's call lands).
        let want = cases[..=i].iter().filter(|c| c.2 == *outcome).count() as f64;
        let counted = || settlements(&[&gw], outcome) >= want;
        assert!(
            eventually(Duration::from_secs(10), counted).await,
            "{tenant}"
        );
        assert_eq!(level(&redis, tenant), Some(*left), "{tenant}");
    }
    let total: f64 = ["invalid", "clamped", "missing", "uncounted"]
        .iter()
        .map(|o| settlements(&[&gw], o))
        .sum();
    assert_eq!(total, cases.len() as f64);
}

/// A count in a response header (`from: { header: x-usage-tokens }`) is settled; the same
/// field sent by the client is never read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_count_is_read_from_the_response_only() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), REDIS)
        .tier(
            "T",
            "{ limit: 1, per: 1h, burst: 1000, usage: { limit: 1, per: 1d, burst: 1000, \
             reserve: 100, from: { header: X-Usage-Tokens } } }",
        )
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .yaml();
    let gw = Gateway::start(&yaml);
    let http = client();
    let req = completion(&http, &gw.url("/v1/chat/completions"), "k1", "250", false)
        .header("x-echo-usage-in", "header")
        .header("x-usage-tokens", "1");
    let r = Reply::read(req.send().await.expect("send"))
        .await
        .expect("read");
    assert_eq!(r.header("x-usage-tokens"), Some("250"));
    assert!(
        eventually(Duration::from_secs(10), || settlements(&[&gw], "settled")
            == 1.0)
        .await
    );
    assert_eq!(level(&redis, "k1"), Some(750));
}

/// The venv's python with OpenAI's client (`demo/openai/requirements.txt`, installed by
/// `scripts/venv.sh`; PyPI is needed once).
fn openai_python() -> String {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let reqs = std::fs::read_to_string(root.join("demo/openai/requirements.txt")).expect("reqs");
    let out = std::process::Command::new(root.join("scripts/venv.sh"))
        .args(reqs.split_whitespace())
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run scripts/venv.sh");
    assert!(
        out.status.success(),
        "scripts/venv.sh could not install openai"
    );
    format!(
        "{}/bin/python",
        String::from_utf8(out.stdout).unwrap().trim()
    )
}

/// One completion by OpenAI's own client (`demo/openai/chat.py`): its JSON report.
fn openai_chat(python: &str, base_url: &str, usage: &str) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/openai/chat.py");
    let out = std::process::Command::new(python)
        .args([script, base_url, &api_key("k1"), usage, "--stream"])
        .output()
        .expect("run chat.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.lines().last().expect("a line")).expect("json")
}

/// OpenAI's Python client through tollgate (`response.headers: [ietf, openai]`): the first
/// completion overspends the budget (reserve 50, reported 250 of a 100-token bucket refilling
/// 25/s); the second is refused once with `retry-after-ms`, and the client's built-in retry
/// waits what that field says (not its own backoff of at most 0.5 s on a first retry) and gets
/// through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_client_waits_as_told_and_gets_through() {
    let python = openai_python();
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), REDIS)
        .tier(
            "T",
            "{ limit: 1, per: 1h, burst: 1000, usage: { limit: 25, per: 1s, burst: 100, \
             reserve: 50, max: 1000, from: { openai: true } } }",
        )
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .section("response", "{ headers: [ietf, openai] }")
        .yaml();
    let gw = Gateway::start(&yaml);
    let base = gw.url("/v1");
    let first = openai_chat(&python, &base, "250");
    assert_eq!(first["ok"], true, "{first}");
    assert_eq!(first["total_tokens"], 250);
    assert_eq!(first["retries_taken"], 0);
    assert_eq!(first["headers"]["x-ratelimit-limit-tokens"], "100");
    assert_eq!(first["headers"]["x-ratelimit-remaining-tokens"], "50");
    assert!(
        eventually(Duration::from_secs(10), || settlements(&[&gw], "settled")
            == 1.0)
        .await
    );
    let second = openai_chat(&python, &base, "10");
    assert_eq!(second["ok"], true, "{second}");
    assert_eq!(second["retries_taken"], 1, "{second}");
    let waits = second["waits_s"].as_array().expect("waits");
    assert_eq!(waits.len(), 1, "{second}");
    // The debt (150) and the reserve (50) at 25/s (8 s), less what refilled since the
    // settlement: the margin leaves the client 7.5 s to start on a loaded machine.
    let wait = waits[0].as_f64().unwrap();
    assert!(wait > 0.5 && wait <= 8.0, "{second}");
    let limited = r#"tollgate_decisions_total{layer="tenant",outcome="limited",tier="T"}"#;
    assert_eq!(gw.metric_or_zero(limited), 1.0);
    assert_eq!(backend.stats().requests, 2);
}

/// Two limit rules with a usage budget, keyed by a header alone (its own hash tag, decided in
/// the rule's slot group) and by tenant and header (decided in the tenant's call): tier `T` has
/// no budget of its own; refunds on 5xx.
fn rules_config(redis: &RedisServer, backend: &Backend) -> String {
    rules_gateway(redis, backend).yaml()
}

/// [`rules_config`], to be added to.
fn rules_gateway(redis: &RedisServer, backend: &Backend) -> GatewayConfig {
    let usage = "usage: { limit: 1, per: 1d, burst: 1000, reserve: 100, \
                 from: { openai: true }, refund_on: [backend_5xx] }";
    GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), REDIS)
        .tier("T", "{ limit: 1, per: 1h, burst: 1000 }")
        .api_keys_always()
        .api_key(&api_key("k1"), "k1", "T")
        .section(
            "limits",
            &format!(
                "\n  - {{ name: per_user, key: [\"header:x-user\"], limit: 1000, per: 1h, {usage} }}\
                 \n  - {{ name: tenant_user, key: [tenant, \"header:x-user\"], limit: 1000, per: 1h, {usage} }}"
            ),
        )
}

/// Whole units in the one usage bucket whose key matches `pattern` (`None`: no such key).
fn level_of(redis: &RedisServer, pattern: &str) -> Option<i64> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query(&mut redis.conn())
        .expect("KEYS");
    assert!(keys.len() <= 1, "{keys:?}");
    let l: Option<String> = common::key_field(&mut redis.conn(), keys.first()?, "l");
    l.map(|l| l.parse::<i64>().expect("level").div_euclid(PER_MS))
}

/// A rule's usage budget is reserved with the other policies, settled exactly from the
/// backend's count (per rule: `tollgate_usage_settlements_total{tier="<rule>"}`), named
/// `"<rule>.tokens"` in the headers, refunded on a 5xx, and refuses once spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_usage_budgets_settle_exactly_and_refund() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start(&rules_config(&redis, &backend));
    let http = client();
    let count = |outcome: &str| -> f64 {
        ["per_user", "tenant_user"]
            .iter()
            .map(|rule| {
                let labels = format!("tier=\"{rule}\",outcome=\"{outcome}\"");
                gw.metric_or_zero(&format!("tollgate_usage_settlements_total{{{labels}}}"))
            })
            .sum()
    };
    // A completion by `user` reporting `usage`, at `query`: (status, RateLimit-Policy, body).
    let ask = |user: &'static str, usage: &'static str, query: &'static str| {
        let req = completion(
            &http,
            &gw.url(&format!("/v1/chat/completions{query}")),
            "k1",
            usage,
            false,
        )
        .header("x-user", user);
        async move {
            let r = Reply::read(req.send().await.expect("send"))
                .await
                .expect("read");
            let policy = r.header("ratelimit-policy").unwrap_or_default().to_string();
            (r.status, policy, r.body)
        }
    };
    let (status, policy, _) = ask("alice", "150", "").await;
    assert_eq!(status, 200);
    assert!(policy.contains("\"per_user.tokens\";q=1000"), "{policy}");
    assert!(policy.contains("\"tenant_user.tokens\";q=1000"), "{policy}");
    assert!(eventually(Duration::from_secs(10), || count("settled") == 2.0).await);
    let own_tag = "tollgate:{r:per_user:*}:u:tokens";
    let tenant_tag = "tollgate:{k1}:r:tenant_user:u:tokens:*";
    assert_eq!(level_of(&redis, own_tag), Some(850));
    assert_eq!(level_of(&redis, tenant_tag), Some(850));
    // A 5xx gives both reserves back.
    assert_eq!(ask("alice", "400", "?status=503").await.0, 503);
    assert!(eventually(Duration::from_secs(10), || count("refunded") == 2.0).await);
    assert_eq!(level_of(&redis, own_tag), Some(850));
    assert_eq!(level_of(&redis, tenant_tag), Some(850));
    // Spend the rest (800 reported against 100 reserved): 50 left, less than a reserve.
    assert_eq!(ask("alice", "800", "").await.0, 200);
    assert!(eventually(Duration::from_secs(10), || count("settled") == 4.0).await);
    assert_eq!(level_of(&redis, own_tag), Some(50));
    assert_eq!(level_of(&redis, tenant_tag), Some(50));
    let (status, _, body) = ask("alice", "1", "").await;
    assert_eq!(status, 429);
    // The tenant's call is asked first and refuses, so the rule's own call is never asked.
    assert!(
        body.contains("\"violated-policies\":[\"tenant_user.tokens\"]"),
        "{body}"
    );
    // Another user has budgets of their own.
    assert_eq!(ask("bob", "10", "").await.0, 200);
}

/// `POST /v1/explain` shows each applied rule's usage budget for the request's key (its
/// reserve, what is left, whether it would admit), reads it without debiting, and says
/// `limited` once a budget holds less than the reserve, as the proxy then answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_each_rules_usage_budget() {
    use common::admin::{admin, ADMIN_TOKEN, ADMIN_TOKEN_ENV};
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = rules_gateway(&redis, &backend)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\" }}"
        ))
        .yaml();
    let gw = Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
    let http = client();
    let explain = |user: &'static str| {
        let req = serde_json::json!({
            "method": "POST",
            "path": "/v1/chat/completions",
            "headers": {"x-api-key": api_key("k1"), "x-user": user, "content-type": "application/json"},
            "client_ip": "127.0.0.1",
            "body": "{}",
        });
        let admin_addr = gw.admin_addr().to_string();
        async move {
            admin(&admin_addr, "POST", "/v1/explain", Some(&req))
                .await
                .expect_ok()
                .clone()
        }
    };
    // The rules' budgets among `e`'s tenant policies: (name, remaining, would_admit, reserve).
    let budgets = |e: &serde_json::Value| -> Vec<(String, i64, bool, i64)> {
        let layers = e["layers"].as_array().expect("layers");
        let tenant = layers
            .iter()
            .find(|l| l["layer"] == "tenant")
            .expect("tenant layer");
        let policies = tenant["policies"].as_array().expect("policies");
        let budgets = policies.iter().filter(|r| r["usage_budget"] == true);
        budgets
            .map(|r| {
                let name = r["name"].as_str().expect("name");
                let rule = r["rule"].as_str().expect("the rule's name");
                assert_eq!(name, format!("{rule}.tokens"), "{r}");
                (
                    name.to_string(),
                    r["remaining"].as_i64().expect("remaining"),
                    r["would_admit"].as_bool().expect("would_admit"),
                    r["reserve"].as_i64().expect("reserve"),
                )
            })
            .collect()
    };
    let full = |left: i64, admits: bool| {
        vec![
            ("per_user.tokens".to_string(), left, admits, 100),
            ("tenant_user.tokens".to_string(), left, admits, 100),
        ]
    };
    let e = explain("alice").await;
    assert_eq!(budgets(&e), full(1000, true), "{e}");
    explanation_fits_the_document(&e);
    assert_eq!(e["outcome"]["status"], 200, "{e}");
    let own_tag = "tollgate:{r:per_user:*}:u:tokens";
    assert_eq!(level_of(&redis, own_tag), None, "explain debits nothing");
    let ask = |usage: &'static str| {
        let req = completion(&http, &gw.url("/v1/chat/completions"), "k1", usage, false)
            .header("x-user", "alice");
        async move { req.send().await.expect("send").status().as_u16() }
    };
    let settled = || {
        ["per_user", "tenant_user"]
            .iter()
            .map(|rule| {
                let labels = format!("tier=\"{rule}\",outcome=\"settled\"");
                gw.metric_or_zero(&format!("tollgate_usage_settlements_total{{{labels}}}"))
            })
            .sum::<f64>()
    };
    assert_eq!(ask("950").await, 200);
    assert!(eventually(Duration::from_secs(10), || settled() == 2.0).await);
    let e = explain("alice").await;
    assert_eq!(budgets(&e), full(50, false), "{e}");
    explanation_fits_the_document(&e);
    assert_eq!(e["outcome"]["decision"], "limited", "{e}");
    assert_eq!(
        level_of(&redis, own_tag),
        Some(50),
        "explain debits nothing"
    );
    assert_eq!(ask("1").await, 429, "the proxy refuses as explain said");
    // Another user's budgets are their own.
    assert_eq!(budgets(&explain("bob").await), full(1000, true));
}

/// Asserts that `e` is an `Explanation` of the admin API's OpenAPI document (docs/openapi.json).
fn explanation_fits_the_document(e: &serde_json::Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
    let text = std::fs::read_to_string(path).expect("docs/openapi.json");
    let mut schema: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    schema["$ref"] = serde_json::json!("#/components/schemas/Explanation");
    let validator = jsonschema::validator_for(&schema).expect("the document compiles");
    let errors: Vec<String> = validator.iter_errors(e).map(|x| x.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}\n{e}");
}

/// Redis frozen when the response ends: the settlement fails and is counted (`store_failed`),
/// the client still gets the whole stream, and the reserve stays debited (the kept
/// reserve is the bound on what a failed settlement can cost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_redis_cannot_take_is_counted_and_never_holds_the_response() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let mut yaml = config(&redis, &backend, "reserve: 100", &["k1"]);
    yaml = yaml.replace(REDIS, "timeout_ms: 300, on_failure: closed");
    assert!(yaml.contains("timeout_ms: 300"), "{yaml}");
    let gw = Gateway::start(&yaml);
    let http = client();
    let url = gw.url("/v1/chat/completions?chunks=3&chunk_delay_ms=700");
    let mut resp = completion(&http, &url, "k1", "40", true)
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status().as_u16(), 200);
    // Admitted (the reserve is in Redis); freeze Redis for the rest of the stream.
    redis.pause();
    let mut body = String::new();
    while let Some(chunk) = resp.chunk().await.expect("chunk") {
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(body.contains("\"total_tokens\":40"), "{body}");
    assert!(body.contains("[DONE]"), "{body}");
    let failed = || settlements(&[&gw], "store_failed") == 1.0;
    let counted = eventually(Duration::from_secs(15), failed).await;
    redis.resume();
    assert!(
        counted,
        "store_failed: {}",
        settlements(&[&gw], "store_failed")
    );
    assert_eq!(settlements(&[&gw], "settled"), 0.0);
    assert_eq!(level(&redis, "k1"), Some(900));
}

/// Every settlement any outcome counted by `gw` (tier `T`).
fn all_settlements(gw: &Gateway) -> f64 {
    [
        "settled",
        "clamped",
        "invalid",
        "missing",
        "refunded",
        "client_gone",
        "uncounted",
        "unreadable",
        "store_failed",
    ]
    .iter()
    .map(|o| settlements(&[gw], o))
    .sum()
}

/// Sends `n` requests one after the other (each built by `req`), waiting for each admitted
/// one's settlement before the next: how many were admitted (200).
async fn admitted_of(
    gw: &Gateway,
    n: usize,
    req: impl Fn() -> reqwest::RequestBuilder,
) -> (usize, Vec<String>) {
    let (mut admitted, mut bodies) = (0, Vec::new());
    for _ in 0..n {
        let r = req().send().await.expect("send");
        let status = r.status().as_u16();
        let bytes = r.bytes().await.expect("body");
        if status == 200 {
            admitted += 1;
            bodies.push(String::from_utf8_lossy(&bytes).into_owned());
            let settled = || all_settlements(gw) >= admitted as f64;
            assert!(eventually(Duration::from_secs(10), settled).await);
        } else {
            assert_eq!(status, 429, "{}", String::from_utf8_lossy(&bytes));
        }
    }
    (admitted, bodies)
}

/// A backend that gzips its answers (`tollgate-echo --gzip`, as nginx's gzip or Starlette's
/// GZipMiddleware would) for a client that accepts gzip: the count is read through the coding,
/// JSON and SSE alike, so the budget holds exactly as without compression (3 of 30 admitted at
/// 400 units each on 1000, the bucket at −200); the client gets the coded bytes untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_answer_is_counted_through_its_coding() {
    let redis = RedisServer::start();
    let backend = Backend::start_with_args("echo", &["--gzip"]);
    let yaml = config(&redis, &backend, "reserve: 100, max: 500", &["json", "sse"]);
    let gw = Gateway::start(&yaml);
    let http = client();
    let url = gw.url("/v1/chat/completions");
    for (tenant, stream) in [("json", false), ("sse", true)] {
        let before = settlements(&[&gw], "settled");
        let (admitted, bodies) = admitted_of(&gw, 30, || {
            completion(&http, &url, tenant, "400", stream).header("accept-encoding", "gzip")
        })
        .await;
        assert_eq!(admitted, 3, "{tenant}");
        assert_eq!(settlements(&[&gw], "settled") - before, 3.0, "{tenant}");
        assert_eq!(level(&redis, tenant), Some(-200), "{tenant}");
        // Gzip's magic bytes: the client got the body as the backend coded it.
        assert!(
            bodies[0].starts_with("\u{1f}\u{fffd}"),
            "{tenant}: {:?}",
            &bodies[0][..8]
        );
    }
    assert_eq!(settlements(&[&gw], "missing"), 0.0);
}

/// A body whose coding cannot be read (a coding not decoded, here labelled `compress`) is
/// counted as `unreadable` and charged `uncounted` (default: `max`), never left at the reserve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_body_is_charged_max() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = config(&redis, &backend, "reserve: 100, max: 500", &["k1"]);
    let gw = Gateway::start(&yaml);
    let http = client();
    let url = gw.url("/v1/chat/completions");
    let (admitted, _) = admitted_of(&gw, 5, || {
        completion(&http, &url, "k1", "40", false).header("x-echo-content-encoding", "compress")
    })
    .await;
    assert_eq!(admitted, 2);
    assert_eq!(settlements(&[&gw], "unreadable"), 2.0);
    assert_eq!(level(&redis, "k1"), Some(0));
}

/// A streamed request without `stream_options.include_usage` is sent to the backend with it
/// (on by default with `from: { openai: true }`), so its stream states the count and is settled
/// exactly: 3 of 15 admitted at 400 units each, as for a request that asked itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_asked_for_its_usage() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = config(&redis, &backend, "reserve: 100, max: 500", &["k1"]);
    let gw = Gateway::start(&yaml);
    let http = client();
    let url = gw.url("/v1/chat/completions");
    let body = serde_json::json!({
        "model": "echo",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": true,
    });
    let (admitted, bodies) = admitted_of(&gw, 15, || {
        http.post(&url)
            .header("x-api-key", api_key("k1"))
            .header("x-echo-usage", "400")
            .json(&body)
    })
    .await;
    assert_eq!(admitted, 3);
    assert_eq!(settlements(&[&gw], "settled"), 3.0);
    assert_eq!(level(&redis, "k1"), Some(-200));
    assert!(bodies[0].contains("\"total_tokens\":400"), "{}", bodies[0]);
    assert!(bodies[0].contains("[DONE]"), "{}", bodies[0]);
}

/// With `include_usage: false` the request goes as the client sent it; a stream that ends
/// without a count is charged the declared `uncounted` (here 300), never left at the reserve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_a_count_is_charged_uncounted() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let mut yaml = config(
        &redis,
        &backend,
        "reserve: 100, max: 500, uncounted: 300",
        &["k1"],
    );
    yaml = yaml.replace(
        "from: { openai: true }",
        "from: { openai: true, include_usage: false }",
    );
    assert!(yaml.contains("include_usage: false"), "{yaml}");
    let gw = Gateway::start(&yaml);
    let http = client();
    let url = gw.url("/v1/chat/completions");
    let body = serde_json::json!({"model": "echo", "stream": true});
    let (admitted, bodies) = admitted_of(&gw, 15, || {
        http.post(&url)
            .header("x-api-key", api_key("k1"))
            .header("x-echo-usage", "40")
            .json(&body)
    })
    .await;
    assert!(!bodies[0].contains("total_tokens"), "{}", bodies[0]);
    assert_eq!(admitted, 4);
    assert_eq!(settlements(&[&gw], "uncounted"), 4.0);
    assert_eq!(level(&redis, "k1"), Some(1000 - 4 * 300));
}
