//! The decision service's HTTP face (docs/decision-service.md "Workers: the HTTP check"):
//! `POST /v1/check` and `POST /v1/report` asked over HTTP/1.1 of the real gateway on a real
//! `redis-server`: admission then refusal with exact counts, all or nothing across descriptors
//! (checked in Redis), `dry_run` debiting nothing (the bucket's hash read before and after),
//! `report` driving a bucket into debt, the Bearer token, bad input, and each rule's
//! `on_failure` with Redis stopped; and both operations checked against
//! `docs/decision-openapi.json` by schemathesis.
//!
//! Buckets barely refill (`per: 1h`), so counts are exact.

mod common;

use common::*;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Stdio};

const TOKEN_ENV: &str = "TOLLGATE_DECISION_TOKEN";
const TOKEN: &str = "decide-s3cret";

/// A gateway on `redis` (a `redis:` flow map) with the decision HTTP API on a free port and
/// the `limits:` items `rules`.
struct Rig {
    gw: Gateway,
    base: String,
    _backend: Backend,
}

impl Rig {
    fn start(redis: &str, rules: &str) -> Rig {
        Self::start_with(redis, rules, |c| c)
    }

    /// [`start`](Self::start) with more of the config set by `more`.
    fn start_with(
        redis: &str,
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
                &format!("{{ http: {{ listen: \"{addr}\", token_env: {TOKEN_ENV} }} }}"),
            )
            .yaml();
        let gw = Gateway::start_with_env(&yaml, &[(TOKEN_ENV, TOKEN)]);
        wait_listening(&addr);
        Rig {
            gw,
            base: format!("http://{addr}"),
            _backend: backend,
        }
    }

    /// `POST path` with `body` (raw bytes) and `auth` (the whole Authorization value).
    async fn post_raw(&self, path: &str, body: Vec<u8>, auth: Option<&str>) -> Answer {
        let mut req = client()
            .post(format!("{}{path}", self.base))
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        let resp = req.send().await.expect("send");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        Answer {
            status,
            headers,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        }
    }

    async fn post(&self, path: &str, body: Value) -> Answer {
        let auth = format!("Bearer {TOKEN}");
        self.post_raw(path, body.to_string().into_bytes(), Some(&auth))
            .await
    }
}

/// Waits until `addr` accepts connections.
fn wait_listening(addr: &str) {
    for _ in 0..500 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{addr} never listened");
}

#[derive(Debug)]
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    fn remaining(&self, i: usize) -> i64 {
        self.body["statuses"][i]["limit_remaining"]
            .as_i64()
            .unwrap_or_else(|| panic!("no limit_remaining {i}: {self:?}"))
    }
    fn detail(&self) -> &str {
        self.body["detail"].as_str().unwrap_or_default()
    }
}

fn strict(redis: &RedisServer) -> String {
    format!("{{ url: \"{}\", {STRICT_REDIS} }}", redis.url())
}

/// A call body: `descriptors` as (entries, hits; 0 = none).
fn call(domain: &str, descriptors: &[(&[(&str, &str)], u64)], extra: Value) -> Value {
    let ds: Vec<Value> = descriptors
        .iter()
        .map(|(entries, h)| {
            let entries: Vec<Value> = entries
                .iter()
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect();
            let mut d = json!({ "entries": entries });
            if *h > 0 {
                d["hits_addend"] = json!(h);
            }
            d
        })
        .collect();
    let mut body = json!({ "domain": domain, "descriptors": ds });
    if let Value::Object(m) = extra {
        for (k, v) in m {
            body[k] = v;
        }
    }
    body
}

/// The whole tokens of a token bucket hash (`l` in units of 1/`s` token).
fn level(redis: &RedisServer, key: &str) -> i64 {
    let h = redis.hgetall(key);
    let get = |f: &str| {
        h.iter()
            .find(|(k, _)| k == f)
            .and_then(|(_, v)| v.parse::<i64>().ok())
            .unwrap_or_else(|| panic!("{key} has no {f}: {h:?}"))
    };
    get("l").div_euclid(get("s"))
}

fn only_key(redis: &RedisServer, pattern: &str) -> String {
    let keys = redis.keys(pattern);
    assert_eq!(keys.len(), 1, "{pattern}: {keys:?}");
    keys[0].clone()
}

const TWO_RULES: &str = "  - { name: per-user, match: { domain: api, descriptors: [user] }, key: [\"descriptor:user\"], limit: 5, per: 1h }\n  - { name: per-plan, match: { domain: api, descriptors: [plan] }, key: [\"descriptor:plan\"], limit: 1, per: 1h }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_admits_then_refuses_all_or_nothing() {
    let redis = RedisServer::start();
    let rig = Rig::start(&strict(&redis), TWO_RULES);
    let both: &[(&[(&str, &str)], u64)] = &[(&[("user", "u1")], 0), (&[("plan", "free")], 0)];
    let first = rig.post("/v1/check", call("api", both, json!({}))).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.body["allowed"], true);
    assert_eq!(first.body["overall_code"], "OK");
    assert_eq!((first.remaining(0), first.remaining(1)), (4, 0));
    assert_eq!(
        first.body["statuses"][0]["current_limit"]["name"],
        "per-user"
    );
    assert_eq!(
        first.body["statuses"][0]["current_limit"]["requests_per_unit"],
        5
    );
    assert_eq!(first.body["statuses"][0]["current_limit"]["unit"], "HOUR");
    let policy = first.header("RateLimit-Policy").unwrap_or_default();
    assert!(policy.contains("q=1"), "the tightest policy: {policy}");
    assert!(first.header("RateLimit").is_some(), "{first:?}");
    assert!(first.header("Retry-After").is_none());
    let user_key = only_key(&redis, "*per-user*");
    assert_eq!(level(&redis, &user_key), 4);

    let refused = rig.post("/v1/check", call("api", both, json!({}))).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.body["allowed"], false);
    assert_eq!(refused.body["overall_code"], "OVER_LIMIT");
    assert_eq!(refused.body["statuses"][0]["code"], "OK");
    assert_eq!(refused.body["statuses"][1]["code"], "OVER_LIMIT");
    assert_eq!(refused.remaining(0), 4, "the sibling's room, undebited");
    assert!(refused.body["statuses"][0]["retry_after_s"].is_null());
    let retry: u64 = refused
        .header("Retry-After")
        .and_then(|s| s.parse().ok())
        .expect("Retry-After");
    // 1 token per hour: the next one in at most 3600 s, and surely more than 3500 s.
    assert!((3500..=3600).contains(&retry), "{retry}");
    assert_eq!(refused.body["retry_after_s"], retry);
    assert_eq!(refused.body["statuses"][1]["retry_after_s"], retry);
    assert_eq!(
        level(&redis, &user_key),
        4,
        "a refused call debits no descriptor (in Redis)"
    );
    let alone = rig
        .post(
            "/v1/check",
            call("api", &[(&[("user", "u1")], 3)], json!({})),
        )
        .await;
    assert_eq!((alone.status, alone.remaining(0)), (200, 1));
    let over = rig
        .post(
            "/v1/check",
            call("api", &[(&[("user", "u1")], 2)], json!({})),
        )
        .await;
    assert_eq!((over.status, over.remaining(0)), (429, 1));
    let unmatched = rig
        .post(
            "/v1/check",
            call("api", &[(&[("other", "x")], 0)], json!({})),
        )
        .await;
    assert_eq!(unmatched.status, 200, "{unmatched:?}");
    assert!(unmatched.body["statuses"][0]["current_limit"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_debits_nothing() {
    let redis = RedisServer::start();
    let rule = "  - { name: dry, match: { domain: d, descriptors: [k] }, key: [\"descriptor:k\"], limit: 2, per: 1h }\n";
    let rig = Rig::start(&strict(&redis), rule);
    let one: &[(&[(&str, &str)], u64)] = &[(&[("k", "a")], 0)];
    let dry = json!({"dry_run": true});
    let looked = rig.post("/v1/check", call("d", one, dry.clone())).await;
    assert_eq!((looked.status, looked.remaining(0)), (200, 1), "{looked:?}");
    assert_eq!(looked.body["dry_run"], true);
    assert!(looked.header("RateLimit").is_some());
    assert!(redis.keys("*dry*").is_empty(), "a dry run writes no key");
    let real = rig.post("/v1/check", call("d", one, json!({}))).await;
    assert_eq!((real.status, real.remaining(0)), (200, 1));
    let key = only_key(&redis, "*dry*");
    let before = redis.hgetall(&key);
    for _ in 0..3 {
        let looked = rig.post("/v1/check", call("d", one, dry.clone())).await;
        assert_eq!((looked.status, looked.remaining(0)), (200, 0), "{looked:?}");
    }
    let too_many = rig
        .post("/v1/check", call("d", &[(&[("k", "a")], 2)], dry.clone()))
        .await;
    assert_eq!(too_many.status, 429, "{too_many:?}");
    assert!(too_many.header("Retry-After").is_some());
    assert_eq!(redis.hgetall(&key), before, "dry runs changed the bucket");
    let real = rig.post("/v1/check", call("d", one, json!({}))).await;
    assert_eq!(
        (real.status, real.remaining(0)),
        (200, 0),
        "the real room was kept"
    );
    let looked = rig.post("/v1/check", call("d", one, dry)).await;
    assert_eq!(looked.status, 429);
    let counted = |outcome: &str| {
        rig.gw.metric_or_zero(&format!(
            "tollgate_rule_decisions_total{{outcome=\"{outcome}\",rule=\"dry\"}}"
        ))
    };
    assert_eq!(
        (counted("admitted"), counted("limited")),
        (2.0, 0.0),
        "only the real checks are counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_drives_the_bucket_into_debt() {
    let redis = RedisServer::start();
    let rules = "  - { name: spend, match: { domain: w, descriptors: [tenant] }, key: [\"descriptor:tenant\"], limit: 10, per: 1h }\n  - { name: windowed, match: { domain: w, descriptors: [job] }, key: [\"descriptor:job\"], limit: 10, per: 1h, algorithm: fixed_window }\n";
    let rig = Rig::start(&strict(&redis), rules);
    let t: &[(&[(&str, &str)], u64)] = &[(&[("tenant", "acme")], 0)];
    let first = rig.post("/v1/check", call("w", t, json!({}))).await;
    assert_eq!((first.status, first.remaining(0)), (200, 9));
    let reported = rig
        .post("/v1/report", call("w", t, json!({"hits_addend": 15})))
        .await;
    assert_eq!(reported.status, 200, "{reported:?}");
    assert_eq!(reported.remaining(0), -6, "{reported:?}");
    assert_eq!(
        reported.body["statuses"][0]["current_limit"]["name"],
        "spend"
    );
    let key = only_key(&redis, "*spend*");
    assert_eq!(level(&redis, &key), -6, "the debt is in Redis");
    let refused = rig.post("/v1/check", call("w", t, json!({}))).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    let retry: u64 = refused
        .header("Retry-After")
        .and_then(|s| s.parse().ok())
        .expect("Retry-After");
    // 7 tokens short (6 owed + the 1 asked) at 10 per hour: 2520 s, less what refilled meanwhile.
    assert!((2500..=2520).contains(&retry), "{retry}");
    assert_eq!(level(&redis, &key), -6, "a refusal debits nothing");
    let other = rig
        .post("/v1/report", call("w", &[(&[("job", "j")], 0)], json!({})))
        .await;
    assert_eq!(other.status, 422, "{other:?}");
    assert!(other.detail().contains("windowed"), "{other:?}");
    let unmatched = rig
        .post(
            "/v1/report",
            call("w", &[(&[("nobody", "x")], 0)], json!({})),
        )
        .await;
    assert_eq!(unmatched.status, 200);
    assert!(unmatched.body["statuses"][0]["limit_remaining"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_and_bad_input_get_problems() {
    let redis = RedisServer::start();
    let rule = "  - { name: h, match: { domain: d, descriptors: [k] }, key: [\"descriptor:k\"], limit: 10, per: 1h }\n";
    let rig = Rig::start(&strict(&redis), rule);
    let good = call("d", &[(&[("k", "a")], 0)], json!({}))
        .to_string()
        .into_bytes();
    let wrong = format!("Bearer {TOKEN}x");
    for (path, auth, realm_error) in [
        ("/v1/check", None, false),
        ("/v1/check", Some(wrong.as_str()), true),
        ("/v1/report", None, false),
        ("/v1/report", Some("Basic Zm9vOmJhcg=="), false),
    ] {
        let a = rig.post_raw(path, good.clone(), auth).await;
        assert_eq!(a.status, 401, "{path} {auth:?}: {a:?}");
        let www = a.header("WWW-Authenticate").unwrap_or_default();
        assert!(www.starts_with("Bearer realm="), "{www}");
        assert_eq!(www.contains("invalid_token"), realm_error, "{www}");
        assert_eq!(a.header("Content-Type"), Some("application/problem+json"));
    }
    assert!(
        redis.keys("*").is_empty(),
        "nothing was decided without the token"
    );
    let big = vec![b' '; 70 * 1024];
    let a = rig.post_raw("/v1/check", big.clone(), None).await;
    assert_eq!(a.status, 401, "the token decides before the size");
    let auth = format!("Bearer {TOKEN}");
    let a = rig.post_raw("/v1/check", big, Some(&auth)).await;
    assert_eq!(a.status, 413, "{a:?}");
    assert_eq!(a.body["status"], 413);

    let bad = |body: &str| rig.post_raw("/v1/check", body.as_bytes().to_vec(), Some(&auth));
    for (body, field) in [
        ("{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"value\":5}]}]}", "descriptors[0].entries[0].value"),
        ("{\"descriptors\":[]}", "domain"),
        ("{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"value\":\"a\"}],\"hits_addend\":0}]}", "descriptors[0].hits_addend"),
        ("{\"domain\":\"d\",\"descriptors\":[],\"hits_addend\":-1}", "hits_addend"),
        ("{\"domain\":\"d\",\"descriptors\":[]}", "descriptors"),
        ("{\"domain\":\"\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"value\":\"a\"}]}]}", "domain"),
        ("{\"domain\":\"nope\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"value\":\"a\"}]}]}", "unknown domain"),
        ("{\"domain\":\"d\",\"descriptors\":[{\"entries\":[]}]}", "descriptors[0]"),
        ("{\"domain\":\"d\",\"descriptors\":[],\"extra\":1}", "extra"),
        ("not json", "body"),
    ] {
        let a = bad(body).await;
        assert_eq!(a.status, 400, "{body}: {a:?}");
        assert!(a.detail().contains(field), "{body}: {field} not in {:?}", a.detail());
        assert_eq!(a.header("Content-Type"), Some("application/problem+json"));
    }
    let a = rig
        .post_raw("/v1/elsewhere", good.clone(), Some(&auth))
        .await;
    assert_eq!(a.status, 404, "{a:?}");
    let get = client()
        .get(format!("{}/v1/check", rig.base))
        .send()
        .await
        .expect("GET");
    assert_eq!(get.status().as_u16(), 405);
    assert_eq!(
        get.headers().get("Allow").map(|v| v.as_bytes()),
        Some(&b"POST"[..])
    );
    assert!(redis.keys("*").is_empty(), "bad input debited nothing");
    let ok = rig.post_raw("/v1/check", good, Some(&auth)).await;
    assert_eq!(ok.status, 200, "still serving: {ok:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_follows_each_rules_on_failure() {
    let mut redis = RedisServer::start();
    let rules = "  - { name: op, match: { domain: d, descriptors: [o] }, key: [\"descriptor:o\"], limit: 1, per: 1h, on_failure: open }\n  - { name: cl, match: { domain: d, descriptors: [c] }, key: [\"descriptor:c\"], limit: 1, per: 1h, on_failure: closed }\n  - { name: lo, match: { domain: d, descriptors: [l] }, key: [\"descriptor:l\"], limit: 1, per: 1h, burst: 2, on_failure: local }\n";
    let spec = format!(
        "{{ url: \"{}\", timeout_ms: 300, fleet_size: 1, on_failure: open }}",
        redis.url()
    );
    let rig = Rig::start(&spec, rules);
    let one = |k: &'static str| call("d", &[(&[(k, "x")], 0)], json!({}));
    assert_eq!(rig.post("/v1/check", one("o")).await.status, 200);
    redis.kill();
    for _ in 0..3 {
        let open = rig.post("/v1/check", one("o")).await;
        assert_eq!(open.status, 200, "{open:?}");
    }
    let closed = rig.post("/v1/check", one("c")).await;
    assert_eq!(closed.status, 429, "{closed:?}");
    assert!(closed.header("Retry-After").is_some(), "{closed:?}");
    let mut local = Vec::new();
    for _ in 0..3 {
        local.push(rig.post("/v1/check", one("l")).await.status);
    }
    assert_eq!(local, [200, 200, 429], "a fresh local bucket of burst 2");
    let dry = rig
        .post(
            "/v1/check",
            call("d", &[(&[("o", "x")], 0)], json!({"dry_run": true})),
        )
        .await;
    assert_eq!(dry.status, 503, "a dry run cannot read: {dry:?}");
    let report = rig.post("/v1/report", one("o")).await;
    assert_eq!(report.status, 503, "{report:?}");
    assert_eq!(
        report.header("Content-Type"),
        Some("application/problem+json")
    );
}

/// Both operations against `docs/decision-openapi.json` with schemathesis (the admin API's
/// pinned venv): every answer documented, valid bodies accepted, invalid ones refused with a
/// 4xx, never a 5xx; without the token every answer is 401.
#[test]
fn schemathesis_checks_the_openapi_document() {
    let redis = RedisServer::start();
    let rules = "  - { name: per-tenant, match: { domain: workers, descriptors: [tenant] }, key: [\"descriptor:tenant\"], limit: 1000000, per: 1s }\n";
    let rig = Rig::start(&strict(&redis), rules);
    let doc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/decision-openapi.json");
    let venv = venv_with("tests/openapi/requirements.txt");
    let dir = test_dir("tollgate-decision-openapi-");
    let run = |checks: &str, extra: &[&str]| {
        let out = Command::new(venv.join("bin/schemathesis"))
            .current_dir(dir.path())
            .arg("run")
            .arg(&doc)
            .args(["--url", &rig.base])
            .args(["--checks", checks])
            .args(["--phases", "examples,coverage,fuzzing"])
            .args([
                "--max-examples",
                "60",
                "--seed",
                "20261206",
                "--workers",
                "1",
            ])
            .args(["--generation-database", "none", "--no-shrink", "--no-color"])
            .args(["--request-timeout", "20", "--max-failures", "20"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("run schemathesis");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "schemathesis failed:\n{text}");
        text
    };
    let bearer = format!("Authorization: Bearer {TOKEN}");
    run(
        "not_a_server_error,status_code_conformance,content_type_conformance,\
         response_headers_conformance,response_schema_conformance,\
         negative_data_rejection,unsupported_method,allow_header_conformance,ignored_auth",
        &["-H", &bearer],
    );
    run(
        "not_a_server_error,status_code_conformance,content_type_conformance,\
         response_schema_conformance",
        &[],
    );
}

/// A rule with `block_for` blocks its key in the decision service as on the proxy's path: the
/// refusal that starts the block says the block's hour (not the bucket's half hour), a refilled
/// bucket stays refused until the block ends (a dry run sees it too), and the block's end frees
/// the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_penalty_box_holds_in_the_decision_service() {
    let redis = RedisServer::start();
    let rules = "  - { name: abuse, match: { domain: api, descriptors: [user] }, key: [\"descriptor:user\"], limit: 2, per: 1h, block_for: 1h }\n";
    let rig = Rig::start(&strict(&redis), rules);
    let one: &[(&[(&str, &str)], u64)] = &[(&[("user", "u1")], 0)];
    let retry = |a: &Answer| -> u64 {
        a.header("Retry-After")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("Retry-After: {a:?}"))
    };
    for _ in 0..2 {
        let a = rig.post("/v1/check", call("api", one, json!({}))).await;
        assert_eq!(a.status, 200, "{a:?}");
    }
    let refused = rig.post("/v1/check", call("api", one, json!({}))).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert!(
        (3500..=3600).contains(&retry(&refused)),
        "the block's hour: {refused:?}"
    );
    let block = only_key(&redis, "*abuse*:blk");
    // The bucket refills (deleted here): the block still refuses, and says how long.
    for k in redis.keys("*abuse*") {
        if !k.ends_with(":blk") {
            let _: () = redis::cmd("DEL").arg(&k).query(&mut redis.conn()).unwrap();
        }
    }
    let dry = rig
        .post("/v1/check", call("api", one, json!({"dry_run": true})))
        .await;
    assert_eq!(
        (dry.status, dry.body["overall_code"].clone()),
        (429, json!("OVER_LIMIT"))
    );
    let blocked = rig.post("/v1/check", call("api", one, json!({}))).await;
    assert_eq!(blocked.status, 429, "{blocked:?}");
    assert_eq!(blocked.body["statuses"][0]["code"], "OVER_LIMIT");
    assert!((3500..=3600).contains(&retry(&blocked)), "{blocked:?}");
    assert!(
        redis.keys("*abuse*").iter().all(|k| k.ends_with(":blk")),
        "nothing debited"
    );
    let _: () = redis::cmd("DEL")
        .arg(&block)
        .query(&mut redis.conn())
        .unwrap();
    let free = rig.post("/v1/check", call("api", one, json!({}))).await;
    assert_eq!(free.status, 200, "{free:?}");
}

/// A rule per client address, and a domain where the other block types are tried.
const ADDRESS_RULE: &str = "  - { name: per-address, match: { domain: edge, descriptors: [remote_address] }, key: [\"descriptor:remote_address\"], limit: 5, per: 1h }\n";

/// Polls `/v1/check` with `body` until it answers `status` (a block set on another gateway
/// reaches this one within `store.propagation`; a wide margin for a loaded machine).
async fn check_becomes(rig: &Rig, body: &Value, status: u16) -> Answer {
    let within = std::time::Duration::from_secs(20);
    poll(
        within,
        || rig.post("/v1/check", body.clone()),
        |a| a.status == status,
    )
    .await
    .unwrap_or_else(|last| last)
}

/// Blocks set through the admin API of another gateway on the same Redis refuse a check whose
/// descriptors carry the blocked address (`remote_address`), tenant (`tenant`) or key id
/// (`key_id`): 429, `OVER_LIMIT`, `Retry-After` the block's remaining time (none for a block
/// without expiry), `blocked` naming it, and nothing debited. Removed, the address is decided
/// by its rule again, with the room it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_refuse_checks_that_carry_the_blocked_address_tenant_or_key() {
    let redis = RedisServer::start();
    let live = |c: GatewayConfig| {
        c.tier_lines("  free: { limit: 1, per: 1h, burst: 10 }\n")
            .raw("store: {}\n")
    };
    let rig = Rig::start_with(&strict(&redis), ADDRESS_RULE, live);
    let backend = Backend::start("echo");
    let tiers = "  free: { limit: 1, per: 1h, burst: 10 }\n";
    let other = common::admin::admin_gateway(
        &redis.url(),
        &backend.addr(),
        tiers,
        &[("filed", "free")],
        "store: {}\n",
    );
    let address = call(
        "edge",
        &[(&[("remote_address", "203.0.113.9")], 0)],
        json!({}),
    );
    let first = rig.post("/v1/check", address.clone()).await;
    assert_eq!((first.status, first.remaining(0)), (200, 4), "{first:?}");
    let put = |path: &'static str, body: Value| {
        let admin = other.admin_addr().to_string();
        async move { common::admin::admin_ok(&admin, "PUT", path, Some(&body)).await }
    };
    put(
        "/v1/blocks/ip/203.0.113.0%2F24",
        json!({"reason": "scanner", "expires_in_s": 600}),
    )
    .await;
    put("/v1/blocks/tenant/acme", json!({"reason": "unpaid"})).await;
    put(
        "/v1/blocks/key/key_0123456789abcdef",
        json!({"reason": "leaked", "expires_in_s": 900}),
    )
    .await;

    let shut = check_becomes(&rig, &address, 429).await;
    assert_eq!(shut.status, 429, "{shut:?}");
    assert_eq!(shut.body["allowed"], false);
    assert_eq!(shut.body["overall_code"], "OVER_LIMIT");
    assert_eq!(shut.body["statuses"][0]["code"], "OVER_LIMIT");
    assert_eq!(shut.body["blocked"]["type"], "ip", "{shut:?}");
    assert_eq!(shut.body["blocked"]["value"], "203.0.113.0/24");
    assert_eq!(shut.body["blocked"]["reason"], "scanner");
    let retry: u64 = shut
        .header("Retry-After")
        .and_then(|s| s.parse().ok())
        .expect("Retry-After");
    assert!((1..=600).contains(&retry), "{retry}");
    assert_eq!(shut.body["retry_after_s"], retry);
    let user_key = only_key(&redis, "*per-address*");
    assert_eq!(level(&redis, &user_key), 4, "a blocked call debits nothing");

    // A tenant block (no expiry: no Retry-After) and a key block, in a call of two
    // descriptors: the other descriptor is OK, the call OVER_LIMIT.
    let tenant = call(
        "edge",
        &[
            (&[("remote_address", "198.51.100.1")], 0),
            (&[("tenant", "acme"), ("path", "/x")], 0),
        ],
        json!({}),
    );
    let t = check_becomes(&rig, &tenant, 429).await;
    assert_eq!(t.status, 429, "{t:?}");
    assert_eq!(t.body["statuses"][0]["code"], "OK");
    assert_eq!(t.body["statuses"][1]["code"], "OVER_LIMIT");
    assert_eq!(t.body["blocked"]["type"], "tenant");
    assert!(t.header("Retry-After").is_none(), "{t:?}");
    let key = call(
        "edge",
        &[(&[("key_id", "key_0123456789abcdef")], 0)],
        json!({}),
    );
    let k = check_becomes(&rig, &key, 429).await;
    assert_eq!(k.body["blocked"]["type"], "key", "{k:?}");
    let retry: u64 = k
        .header("Retry-After")
        .and_then(|s| s.parse().ok())
        .expect("Retry-After");
    assert!((1..=900).contains(&retry), "{retry}");
    // A dry run reports the block too.
    let mut dry = address.clone();
    dry["dry_run"] = json!(true);
    assert_eq!(rig.post("/v1/check", dry).await.status, 429);
    // Another address is decided by its rule.
    let free = call(
        "edge",
        &[(&[("remote_address", "198.51.100.1")], 0)],
        json!({}),
    );
    assert_eq!(rig.post("/v1/check", free).await.status, 200);

    common::admin::admin_ok(
        other.admin_addr(),
        "DELETE",
        "/v1/blocks/ip/203.0.113.0%2F24",
        None,
    )
    .await;
    let again = check_becomes(&rig, &address, 200).await;
    assert_eq!((again.status, again.remaining(0)), (200, 3), "{again:?}");
}
