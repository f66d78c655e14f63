//! Limits set live through the admin API (`/v1/tenants/{id}/limits`, docs/live-state.md#live-limit-overrides),
//! black-box: one real `redis-server`, the echo backend and two real `tollgate` gateways on that
//! Redis. Every change is written on gateway A and observed on gateway B.
//!
//! Margins: every tier refills 3 tokens a day, so the seconds the test takes never refill a
//! token and every count is exact. Propagation is waited for by polling a probe tenant whose
//! override is written last (B reads the whole set of overrides at once, so when it sees the
//! probe's it sees every earlier one), never timed.

mod common;
#[path = "common/rls.rs"]
mod rls;

use common::admin::*;
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How long a change may take to be seen (the contract is `store.propagation`, 1 s by default;
/// a loaded CI machine gets a wide margin).
const SEEN_WITHIN: Duration = Duration::from_secs(20);

const READ_ENV: &str = "TOLLGATE_TEST_READ_TOKEN";
const READ_TOKEN: &str = "read-token-51be07";

fn yaml(redis: &RedisServer, backend: &Backend) -> String {
    let mut c = GatewayConfig::new()
        .redis(&redis.url(), STRICT_REDIS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: {ADMIN_TOKEN_ENV}, tokens: [\
             {{ token_env: {READ_ENV}, scope: read, name: dashboard }}] }}"
        ))
        .upstream("echo", &backend.addr())
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .raw("store: { cache: { ttl: 1h, negative_ttl: 1h } }\n");
    for alg in ALGORITHMS {
        let tier = format!("T_{alg}");
        c = c.tier(
            &tier,
            &format!("{{ limit: 3, per: 1d, burst: 3, algorithm: {alg} }}"),
        );
        for role in ["raise", "lower"] {
            let t = format!("{role}-{alg}");
            c = c.api_key(&api_key_of(&t), &t, &tier);
        }
    }
    c.tier(
        "Q",
        "{ limit: 100, per: 1d, burst: 100, quotas: [{ limit: 3, period: month }] }",
    )
    .api_key(&api_key_of("quota"), "quota", "Q")
    .api_key(&api_key_of("probe"), "probe", "Q")
    .api_key(&api_key_of("held"), "held", "Q")
    .api_key(&api_key_of("expiring"), "expiring", "T_token_bucket")
    .api_key(&api_key_of("filed"), "filed", "T_gcra")
    .tenant("filed", "{ burst: 2 }")
    .tier(
        "U",
        "{ limit: 100, per: 1d, burst: 100, usage: { limit: 1, per: 1d, burst: 3, reserve: 1, \
         from: { header: x-usage-count } } }",
    )
    .api_key(&api_key_of("u-raise"), "u-raise", "U")
    .api_key(&api_key_of("u-lower"), "u-lower", "U")
    .api_key(&api_key_of("both"), "both", "T_gcra")
    .tier(
        "V",
        "{ limit: 100, per: 1d, burst: 100, quotas: [{ limit: 50, period: month }], \
         usage: { limit: 1, per: 1d, burst: 30, reserve: 1, from: { header: x-usage-count } } }",
    )
    .api_key(&api_key_of("v-main"), "v-main", "V")
    .api_key(&api_key_of("v-quota"), "v-quota", "V")
    .api_key(&api_key_of("v-usage"), "v-usage", "V")
    .api_key(&api_key_of("v-rule"), "v-rule", "R")
    .tier("R", "{ limit: 1000, per: 1d, burst: 1000 }")
    .api_key(&api_key_of("ruler"), "ruler", "R")
    .section("limits", &format!("\n{RULES}"))
    .yaml()
}

/// Limit rules whose keys are overridden: one per algorithm tried (`/r/<alg>`, keyed by the
/// `x-user` header), one keyed by the tenant (`/t`), one by the client address, a concurrency
/// rule, and a decision-service rule keyed by a descriptor. 3 a day each.
const RULES: &str = "  - { name: rk-token_bucket, match: { routes: [/r/token_bucket] }, key: [\"header:x-user\"], limit: 3, per: 1d, burst: 3, algorithm: token_bucket }
  - { name: rk-gcra, match: { routes: [/r/gcra] }, key: [\"header:x-user\"], limit: 3, per: 1d, burst: 3, algorithm: gcra }
  - { name: rk-fixed_window, match: { routes: [/r/fixed_window] }, key: [\"header:x-user\"], limit: 3, per: 1d, burst: 3, algorithm: fixed_window }
  - { name: per-tenant, match: { routes: [/t] }, key: [tenant], limit: 5, per: 1d, burst: 5, algorithm: gcra }
  - { name: by-ip, match: { routes: [/ip] }, key: [client_ip], limit: 3, per: 1d }
  - { name: held-rule, match: { routes: [/c] }, key: [tenant], max_in_flight: 2 }
  - { name: desc-user, match: { domain: api, descriptors: [user] }, key: [\"descriptor:user\"], limit: 3, per: 1d, burst: 3 }
";

/// The algorithms the rule-key overrides are tried with: a token bucket, GCRA, a window.
const RULE_ALGORITHMS: [&str; 3] = ["token_bucket", "gcra", "fixed_window"];

/// Two gateways on one Redis, and the probe overrides written so far.
struct Rig {
    fleet: Fleet,
    probes: u64,
}

impl std::ops::Deref for Rig {
    type Target = Fleet;
    fn deref(&self) -> &Fleet {
        &self.fleet
    }
}

impl std::ops::DerefMut for Rig {
    fn deref_mut(&mut self) -> &mut Fleet {
        &mut self.fleet
    }
}

impl Rig {
    fn start() -> Rig {
        let env = [(ADMIN_TOKEN_ENV, ADMIN_TOKEN), (READ_ENV, READ_TOKEN)];
        Rig {
            fleet: Fleet::start(yaml, &env),
            probes: 0,
        }
    }

    /// Writes a new probe override on A and waits until B applies it: then B applies every
    /// change written on A before it.
    async fn synced(&mut self) {
        self.probes += 1;
        let burst = 100 + self.probes;
        put(&self.a, "probe", json!({ "burst": burst })).await;
        let want = format!("q={burst};");
        let deadline = Instant::now() + SEEN_WITHIN;
        loop {
            let r = call(&self.b, "probe").await;
            if policy(&r).contains(&want) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "B never applied the probe's burst {burst}: {r:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `tollgate limits ARGS` against the admin API at `url` with the write token: exit code,
/// stdout, stderr.
fn cli(url: &str, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(GATEWAY_BIN)
        .arg("limits")
        .args(args)
        .args(["--admin-url", url, "--token", ADMIN_TOKEN])
        .output()
        .expect("run tollgate limits");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

async fn call(gw: &Gateway, tenant: &str) -> Reply {
    try_get_with_key(&client(), &gw.url("/"), Some(&api_key_of(tenant)))
        .await
        .expect("proxied request")
}

/// A request of `tenant` to `path` as user `user` (the `x-user` header).
async fn call_as(gw: &Gateway, tenant: &str, path: &str, user: &str) -> Reply {
    let r = client()
        .get(gw.url(path))
        .header("x-api-key", api_key_of(tenant))
        .header("x-user", user)
        .send()
        .await
        .expect("proxied request");
    Reply::read(r).await.expect("proxied reply")
}

/// Calls of `tenant` to `path` as `user` until the first refusal (at most `max` admissions).
async fn admitted_as(
    gw: &Gateway,
    tenant: &str,
    path: &str,
    user: &str,
    max: usize,
) -> (usize, Reply) {
    for n in 0..=max {
        let r = call_as(gw, tenant, path, user).await;
        if r.status != 200 {
            return (n, r);
        }
    }
    panic!("{path} as {user}: more than {max} admitted");
}

/// `PUT /v1/rules/{rule}/keys/{key}/limits` on `gw` (`key` as it goes in the path).
async fn put_rule_key(gw: &Gateway, rule: &str, key: &str, body: Value) -> Value {
    let path = format!("/v1/rules/{rule}/keys/{key}/limits");
    admin(gw.admin_addr(), "PUT", &path, Some(&body))
        .await
        .expect_ok()
        .clone()
}

fn policy(r: &Reply) -> String {
    r.header("ratelimit-policy").unwrap_or_default().to_string()
}

async fn put(gw: &Gateway, tenant: &str, body: Value) -> Value {
    let path = format!("/v1/tenants/{tenant}/limits");
    admin(gw.admin_addr(), "PUT", &path, Some(&body))
        .await
        .expect_ok()
        .clone()
}

/// The statuses of `n` calls in a row.
async fn statuses(gw: &Gateway, tenant: &str, n: usize) -> Vec<u16> {
    let mut s = vec![];
    for _ in 0..n {
        s.push(call(gw, tenant).await.status);
    }
    s
}

/// Calls until the first refusal (at most `max` admissions); the admissions and the refusal.
async fn admitted_until_refused(gw: &Gateway, tenant: &str, max: usize) -> (usize, Reply) {
    for n in 0..=max {
        let r = call(gw, tenant).await;
        if r.status != 200 {
            return (n, r);
        }
    }
    panic!("{tenant}: more than {max} admitted");
}

/// Asserts a refusal names `name` (a tier or a rule) with `q` in `RateLimit-Policy`, and its
/// problem detail contains `detail`.
fn names_limit_as(r: &Reply, name: &str, q: u64, detail: &str, who: &str) {
    assert_eq!(r.status, 429, "{who}: {r:?}");
    let p = policy(r);
    assert!(
        p.contains(&format!("\"{name}\";q={q};")),
        "{who}: RateLimit-Policy {p:?} does not name q={q}"
    );
    let problem: Value = serde_json::from_str(&r.body).expect("problem JSON");
    let d = problem["detail"].as_str().unwrap_or_default();
    assert!(d.contains(detail), "{who}: detail {d:?} does not name {q}");
}

/// Asserts a refusal names `tier` with `q` in `RateLimit-Policy` and the tokens in its detail.
fn names_limit(r: &Reply, tier: &str, q: u64, who: &str) {
    names_limit_as(r, tier, q, &format!("of {q} tokens"), who);
}

/// Every algorithm and a calendar quota, on two gateways: a raised limit admits at once what
/// the new numbers allow beyond what was spent, exactly; a lowered one never admits more than
/// the new numbers allow; every refusal names the override's numbers; DELETE restores the
/// file's; an override lands on the file's `tenants:` entry field by field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raised_and_lowered_limits_apply_to_live_buckets_on_every_instance() {
    let mut rig = Rig::start();
    // Spent on B under the file's numbers (3 a day).
    for alg in ALGORITHMS {
        let t = format!("raise-{alg}");
        assert_eq!(statuses(&rig.b, &t, 4).await, [200, 200, 200, 429], "{t}");
        let t = format!("lower-{alg}");
        assert_eq!(statuses(&rig.b, &t, 1).await, [200], "{t}");
    }
    let q = statuses(&rig.b, "quota", 4).await;
    assert_eq!(q, [200, 200, 200, 429], "quota");
    assert_eq!(statuses(&rig.b, "filed", 3).await, [200, 200, 429], "filed");

    // Written on A.
    for alg in ALGORITHMS {
        let v = put(
            &rig.a,
            &format!("raise-{alg}"),
            json!({"limit": 6, "burst": 6}),
        )
        .await;
        let o = &v["override"];
        assert_eq!(
            (o["limit"].clone(), o["burst"].clone()),
            (json!(6), json!(6))
        );
        put(
            &rig.a,
            &format!("lower-{alg}"),
            json!({"limit": 2, "burst": 2}),
        )
        .await;
    }
    put(&rig.a, "quota", json!({"quotas": {"month": 5}})).await;
    // A fleet-wide concurrency cap where the tier has none.
    put(&rig.a, "held", json!({"max_in_flight": 1})).await;
    // Only `limit` set: the file's `burst: 2` for this tenant stays.
    put(&rig.a, "filed", json!({"limit": 5})).await;
    rig.synced().await;

    for alg in ALGORITHMS {
        let tier = format!("T_{alg}");
        // Raised from 3 to 6 after spending 3: the spent 3 carry over, 3 more now. The token
        // bucket carries its level (0 tokens left), refilled at the new rate.
        let t = format!("raise-{alg}");
        let (n, refusal) = admitted_until_refused(&rig.b, &t, 6).await;
        let want = if alg == "token_bucket" { 0 } else { 3 };
        assert_eq!(n, want, "{t}: admitted after the raise");
        names_limit(&refusal, &tier, 6, &t);
        // Lowered from 3 to 2 after spending 1: one more (the token bucket: its 2 tokens left,
        // at most the new burst).
        let t = format!("lower-{alg}");
        let (n, refusal) = admitted_until_refused(&rig.b, &t, 3).await;
        let want = if alg == "token_bucket" { 2 } else { 1 };
        assert_eq!(n, want, "{t}: admitted after the lowering");
        names_limit(&refusal, &tier, 2, &t);
    }
    let (n, refusal) = admitted_until_refused(&rig.b, "quota", 5).await;
    assert_eq!(n, 2, "quota raised from 3 to 5 after 3 used");
    assert_eq!(refusal.status, 429);
    let p = policy(&refusal);
    assert!(p.contains("\"Q.month\";q=5;"), "quota refusal names {p:?}");
    assert!(
        refusal.body.contains("(0 of 5 left)"),
        "quota refusal's detail: {}",
        refusal.body
    );
    let filed = call(&rig.b, "filed").await;
    names_limit(&filed, "T_gcra", 2, "filed (burst from the file)");
    assert!(policy(&filed).contains("q=2;"));

    // One slow request of `held` in flight on B: a second one is refused by the override's cap.
    let slow_url = rig.b.url("/s?delay_ms=3000");
    let slow = tokio::spawn(async move {
        try_get_with_key(&client(), &slow_url, Some(&api_key_of("held")))
            .await
            .expect("slow request")
    });
    let holding = || {
        redis::cmd("ZCARD")
            .arg("tollgate:{held}:inflight")
            .query::<u64>(&mut rig.redis.conn())
            .expect("ZCARD")
            == 1
    };
    assert!(
        eventually(SEEN_WITHIN, holding).await,
        "the slow request holds no lease"
    );
    let second = call(&rig.b, "held").await;
    assert_eq!(second.status, 429, "{second:?}");
    assert_eq!(policy(&second), "\"Q.concurrency\";q=1");
    assert_eq!(slow.await.expect("slow task").status, 200);

    // Removed on A: the file's numbers apply again on B.
    for alg in ALGORITHMS {
        let path = format!("/v1/tenants/raise-{alg}/limits");
        let v = admin(rig.a.admin_addr(), "DELETE", &path, None).await;
        assert_eq!(v.expect_ok()["removed"], true);
    }
    rig.synced().await;
    for alg in ALGORITHMS {
        let t = format!("raise-{alg}");
        let r = call(&rig.b, &t).await;
        names_limit(&r, &format!("T_{alg}"), 3, &format!("{t} after DELETE"));
    }
    let path = "/v1/tenants/raise-gcra/limits";
    let got = admin(rig.a.admin_addr(), "GET", path, None).await;
    assert_eq!(got.expect_ok()["override"], Value::Null);
    let again = admin(rig.a.admin_addr(), "DELETE", path, None).await;
    assert_eq!(again.expect_ok()["removed"], false);
}

/// An override with an expiry stops applying on every instance when it expires; reads need
/// the read scope, writes the write scope; bad input is a 400 naming the field and changes
/// nothing; every write is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_scopes_and_bad_input() {
    let rig = Rig::start();
    // Lowered to 1 for two seconds: 1 admitted, refused naming 1; once expired, the file's 3.
    let v = put(
        &rig.a,
        "expiring",
        json!({"limit": 1, "burst": 1, "expires_in_s": 2}),
    )
    .await;
    assert!(v["override"]["expires_at"].is_string(), "{v}");
    let deadline = Instant::now() + SEEN_WITHIN;
    let mut saw_override = false;
    loop {
        let r = call(&rig.b, "expiring").await;
        let p = policy(&r);
        if p.contains("q=1;") {
            saw_override = true;
        }
        if saw_override && p.contains("q=3;") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "override seen: {saw_override}; last answer {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let path = "/v1/tenants/expiring/limits";
    let got = admin(rig.a.admin_addr(), "GET", path, None).await;
    assert_eq!(got.expect_ok()["override"], Value::Null, "expired");

    // Scopes: the read token reads, its writes are 403 and change nothing.
    put(&rig.a, "scoped", json!({"burst": 9})).await;
    let read = format!("Bearer {READ_TOKEN}");
    let path = "/v1/tenants/scoped/limits";
    let got = admin_call(rig.b.admin_addr(), "GET", path, Some(&read), None).await;
    assert_eq!(got.expect_ok()["override"]["burst"], 9);
    let body = json!({"burst": 1});
    admin_call(rig.b.admin_addr(), "PUT", path, Some(&read), Some(&body))
        .await
        .expect_problem(403);
    admin_call(rig.b.admin_addr(), "DELETE", path, Some(&read), None)
        .await
        .expect_problem(403);
    let got = admin(rig.a.admin_addr(), "GET", path, None).await;
    assert_eq!(got.expect_ok()["override"]["burst"], 9);

    // Bad input: 400 naming the field; the stored override is unchanged.
    let long = "t".repeat(10_000);
    let cases: Vec<(String, Value, &str)> = vec![
        (path.into(), json!({"limit": -1}), "limit"),
        (path.into(), json!({"burst": 0}), "burst"),
        (path.into(), json!({"limit": 1e300}), "limit"),
        (
            path.into(),
            json!({"burst": 9_000_000_000_000_000_000u64}),
            "burst",
        ),
        (path.into(), json!({"burst": 10_001}), "burst"),
        (path.into(), json!({"limit": null}), "limit"),
        (path.into(), json!({"per": "soon"}), "per"),
        (path.into(), json!({"per": "0s"}), "per"),
        (path.into(), json!({"limit": 1, "bogus": 1}), "bogus"),
        (path.into(), json!({}), "body"),
        (
            path.into(),
            json!({"burst": 1, "expires_in_s": 0}),
            "expires_in_s",
        ),
        (
            path.into(),
            json!({"burst": 1, "expires_in_s": -60}),
            "expires_in_s",
        ),
        (
            path.into(),
            json!({"quotas": {"fortnight": 5}}),
            "quotas.fortnight",
        ),
        (path.into(), json!({"quotas": {"day": 0}}), "quotas.day"),
        (path.into(), json!({"quotas": []}), "quotas"),
        (path.into(), json!({"max_in_flight": -3}), "max_in_flight"),
        (
            path.into(),
            json!({"max_in_flight": 1u64 << 40}),
            "max_in_flight",
        ),
        (
            format!("/v1/tenants/{long}/limits"),
            json!({"burst": 1}),
            "tenant",
        ),
        (
            "/v1/tenants/ip:nonsense/limits".into(),
            json!({"burst": 1}),
            "tenant",
        ),
    ];
    for (p, body, field) in cases {
        let r = admin(rig.a.admin_addr(), "PUT", &p, Some(&body)).await;
        let problem = r.expect_problem(400);
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    let got = admin(rig.a.admin_addr(), "GET", path, None).await;
    let got = &got.expect_ok()["override"];
    assert_eq!((got["burst"].clone(), got.get("limit")), (json!(9), None));

    // The command line: set on A, read on B, clear; exit codes a script can use.
    let a_url = format!("http://{}", rig.a.admin_addr());
    let b_url = format!("http://{}", rig.b.admin_addr());
    let (code, out, _) = cli(
        &a_url,
        &[
            "set", "cli-t", "--limit", "5", "--burst", "5", "--quota", "month=7",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("limit 5") && out.contains("month=7"), "{out}");
    let (code, out, _) = cli(&b_url, &["get", "cli-t", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).expect("--json prints the API's JSON");
    assert_eq!(v["override"]["burst"], 5);
    let (code, _, err) = cli(&a_url, &["set", "cli-t", "--burst", "0"]);
    assert_eq!(code, 1, "an API error");
    assert!(err.contains("burst"), "{err}");
    let (code, _, _) = cli(&a_url, &["set", "cli-t", "--quota", "month"]);
    assert_eq!(code, 2, "a usage error");
    let (code, _, _) = cli("http://127.0.0.1:9", &["get", "cli-t"]);
    assert_eq!(code, 3, "the admin API unreachable");
    let (code, out, _) = cli(&a_url, &["clear", "cli-t"]);
    assert_eq!(code, 0);
    assert!(out.contains("removed"), "{out}");
    let (_, out, _) = cli(&b_url, &["get", "cli-t"]);
    assert!(out.contains("no live override"), "{out}");

    // Every write counted by operation and outcome.
    let ok = metric(
        &rig.a,
        "tollgate_admin_writes_total",
        &[("operation", "limits_set"), ("outcome", "ok")],
    );
    assert_eq!(ok, Some(3.0));
    let refused = metric(
        &rig.a,
        "tollgate_admin_writes_total",
        &[("operation", "limits_set"), ("outcome", "refused")],
    );
    assert_eq!(refused, Some(20.0));
    let forbidden = metric(
        &rig.b,
        "tollgate_admin_writes_total",
        &[("operation", "limits_clear"), ("outcome", "forbidden")],
    );
    assert_eq!(forbidden, Some(1.0));
}

/// A refusal by rule `rule` naming `q` in `RateLimit-Policy` and the tokens in its detail.
fn names_rule(r: &Reply, rule: &str, q: u64, who: &str) {
    names_limit_as(r, rule, q, &format!("\"{rule}\" (0 of {q} left)"), who);
}

/// One key of a limit rule raised and lowered live, on two gateways, for a token bucket, GCRA
/// and a fixed window: exact counts after the change, refusals naming the override's numbers,
/// other keys of the same rule untouched; a rule key's override beats the tenant's (each
/// governs its own bucket); a tier's usage budget raised and lowered; DELETE restores the
/// file's numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_key_and_usage_overrides_apply_on_every_instance() {
    let mut rig = Rig::start();
    // Spent on B under the file's numbers (3 a day per key).
    for alg in RULE_ALGORITHMS {
        let path = format!("/r/{alg}");
        for (user, n) in [("raise", 3), ("lower", 1), ("other", 3)] {
            for i in 0..n {
                let r = call_as(&rig.b, "ruler", &path, user).await;
                assert_eq!(r.status, 200, "{path} as {user}, call {i}: {r:?}");
            }
        }
    }
    // The usage budget (3 units, 1 a request): `u-lower` spends 1.
    assert_eq!(statuses(&rig.b, "u-lower", 1).await, [200]);

    for alg in RULE_ALGORITHMS {
        let rule = format!("rk-{alg}");
        let v = put_rule_key(&rig.a, &rule, "raise", json!({"limit": 6, "burst": 6})).await;
        assert_eq!(v["rule"], rule.as_str());
        assert_eq!(v["key"], json!(["raise"]));
        assert_eq!(
            (
                v["override"]["limit"].clone(),
                v["override"]["burst"].clone()
            ),
            (json!(6), json!(6))
        );
        put_rule_key(&rig.a, &rule, "lower", json!({"limit": 2, "burst": 2})).await;
    }
    // The tenant's tier bucket raised to 10, its key of `per-tenant` (5 a day) lowered to 2.
    put(&rig.a, "both", json!({"limit": 10, "burst": 10})).await;
    put_rule_key(
        &rig.a,
        "per-tenant",
        "both",
        json!({"limit": 2, "burst": 2}),
    )
    .await;
    // The usage budget: raised to 5 for a tenant that spent nothing, lowered to 1 for one that
    // spent 1 of 3.
    let v = put(&rig.a, "u-raise", json!({"usage": {"burst": 5}})).await;
    assert_eq!(v["override"]["usage"], json!({"burst": 5}));
    put(
        &rig.a,
        "u-lower",
        json!({"usage": {"limit": 1, "burst": 1}}),
    )
    .await;
    rig.synced().await;

    for alg in RULE_ALGORITHMS {
        let (path, rule) = (format!("/r/{alg}"), format!("rk-{alg}"));
        // Raised from 3 to 6 after spending 3: 3 more (the token bucket carries its level, 0).
        let (n, refusal) = admitted_as(&rig.b, "ruler", &path, "raise", 6).await;
        let want = if alg == "token_bucket" { 0 } else { 3 };
        assert_eq!(n, want, "{rule} raise: admitted after the raise");
        names_rule(&refusal, &rule, 6, &format!("{rule} raise"));
        // Lowered from 3 to 2 after spending 1: one more (the token bucket: 2 tokens left).
        let (n, refusal) = admitted_as(&rig.b, "ruler", &path, "lower", 3).await;
        let want = if alg == "token_bucket" { 2 } else { 1 };
        assert_eq!(n, want, "{rule} lower: admitted after the lowering");
        names_rule(&refusal, &rule, 2, &format!("{rule} lower"));
        // Another key of the same rule keeps the rule's own numbers.
        let r = call_as(&rig.b, "ruler", &path, "other").await;
        names_rule(&r, &rule, 3, &format!("{rule} other"));
    }
    // Rule key beats tenant: the tenant's raised tier bucket (10) would admit more, the
    // rule's bucket for this tenant admits 2 and its refusal names 2.
    let (n, refusal) = admitted_as(&rig.b, "both", "/t", "x", 10).await;
    assert_eq!(n, 2, "the rule key's override governs the rule's bucket");
    names_rule(&refusal, "per-tenant", 2, "per-tenant both");
    // The tenant's own override still governs its tier bucket: 10 on another path.
    let (n, refusal) = admitted_until_refused(&rig.b, "both", 10).await;
    assert_eq!(n, 8, "10 of the tier bucket, 2 spent on /t");
    names_limit(&refusal, "T_gcra", 10, "both tier");
    // Usage: raised to 5 (fresh: 5 admitted); lowered to 1 after spending 1 (1 left).
    let (n, refusal) = admitted_until_refused(&rig.b, "u-raise", 6).await;
    assert_eq!(n, 5, "usage raised from 3 to 5");
    assert!(
        policy(&refusal).contains("\"U.tokens\";q=5;"),
        "{refusal:?}"
    );
    assert!(
        refusal.body.contains("of 5 "),
        "usage refusal's detail: {}",
        refusal.body
    );
    let (n, refusal) = admitted_until_refused(&rig.b, "u-lower", 3).await;
    assert_eq!(n, 1, "usage lowered from 3 to 1 after spending 1");
    assert!(
        policy(&refusal).contains("\"U.tokens\";q=1;"),
        "{refusal:?}"
    );

    // Removed on A: the rule's own numbers apply again on B.
    for alg in RULE_ALGORITHMS {
        let path = format!("/v1/rules/rk-{alg}/keys/raise/limits");
        let v = admin(rig.a.admin_addr(), "DELETE", &path, None).await;
        assert_eq!(v.expect_ok()["removed"], true);
    }
    rig.synced().await;
    for alg in RULE_ALGORITHMS {
        let r = call_as(&rig.b, "ruler", &format!("/r/{alg}"), "raise").await;
        names_rule(
            &r,
            &format!("rk-{alg}"),
            3,
            &format!("rk-{alg} after DELETE"),
        );
    }
    let path = "/v1/rules/rk-gcra/keys/raise/limits";
    let got = admin(rig.a.admin_addr(), "GET", path, None).await;
    assert_eq!(got.expect_ok()["override"], Value::Null);
    let again = admin(rig.a.admin_addr(), "DELETE", path, None).await;
    assert_eq!(again.expect_ok()["removed"], false);
}

/// A descriptor rule's key overridden on gateway A is in force in the decision service of a
/// third gateway on the same Redis, over HTTP (`POST /v1/check`) and gRPC (`ShouldRateLimit`),
/// with exact counts; other keys keep the rule's numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_key_override_applies_in_the_decision_service() {
    const TOKEN_ENV: &str = "TOLLGATE_DECISION_TOKEN";
    let rig = Rig::start();
    let (addr, grpc) = (free_addr(), free_addr());
    let yaml = format!(
        "{}decision: {{ http: {{ listen: \"{addr}\", token_env: {TOKEN_ENV} }}, grpc: {{ listen: \"{grpc}\" }} }}\n",
        rig.yaml
    );
    let env = [
        (ADMIN_TOKEN_ENV, ADMIN_TOKEN),
        (READ_ENV, READ_TOKEN),
        (TOKEN_ENV, "d"),
    ];
    let c = Gateway::start_with_env(&yaml, &env);
    let check = |user: &str, dry: bool| {
        let body = json!({
            "domain": "api",
            "descriptors": [{"entries": [{"key": "user", "value": user}]}],
            "dry_run": dry,
        });
        let url = format!("http://{addr}/v1/check");
        async move {
            let r = client()
                .post(url)
                .header("Authorization", "Bearer d")
                .json(&body)
                .send()
                .await
                .expect("check");
            let status = r.status().as_u16();
            let policy = r
                .headers()
                .get("ratelimit-policy")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let v: Value = r.json().await.expect("check JSON");
            (status, policy, v)
        }
    };
    let v = put_rule_key(&rig.a, "desc-user", "vip", json!({"limit": 5, "burst": 5})).await;
    assert_eq!(v["key"], json!(["vip"]));
    // Seen by C (a dry run debits nothing).
    let seen = poll(
        SEEN_WITHIN,
        || check("vip", true),
        |(_, _, v)| v["statuses"][0]["current_limit"]["requests_per_unit"] == 5,
    )
    .await;
    assert!(seen.is_ok(), "C never applied the override: {seen:?}");
    let mut admitted = 0;
    let refusal = loop {
        let (status, policy, v) = check("vip", false).await;
        if status != 200 {
            break (status, policy, v);
        }
        admitted += 1;
        assert!(admitted <= 6, "more than 6 admitted");
    };
    assert_eq!(admitted, 5, "the overridden key admits 5");
    assert_eq!(refusal.0, 429);
    assert!(refusal.1.contains("\"desc-user\";q=5;"), "{refusal:?}");
    let mut admitted = 0;
    loop {
        let (status, policy, _) = check("plain", false).await;
        if status != 200 {
            assert!(policy.contains("\"desc-user\";q=3;"), "{policy}");
            break;
        }
        admitted += 1;
        assert!(admitted <= 4, "more than 4 admitted");
    }
    assert_eq!(admitted, 3, "another key keeps the rule's 3");

    // Through gRPC (Envoy's rate limit service), the same override: the key's 5 are spent, and
    // a key overridden to 4 admits exactly 4.
    put_rule_key(
        &rig.a,
        "desc-user",
        "grpc-vip",
        json!({"limit": 4, "burst": 4}),
    )
    .await;
    let seen = poll(
        SEEN_WITHIN,
        || check("grpc-vip", true),
        |(_, _, v)| v["statuses"][0]["current_limit"]["requests_per_unit"] == 4,
    )
    .await;
    assert!(
        seen.is_ok(),
        "C never applied the second override: {seen:?}"
    );
    let mut client = rls::Rls::connect(&grpc);
    let mut ask = |user: &str| client.call("api", &[(&[("user", user)], 0)], 0);
    let mut answers = vec![ask("vip")];
    answers.extend((0..5).map(|_| ask("grpc-vip")));
    let code = |v: &Value| {
        v["response"]["overall_code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let limit =
        |v: &Value| v["response"]["statuses"][0]["current_limit"]["requests_per_unit"].clone();
    assert_eq!(code(&answers[0]), "OVER_LIMIT", "{}", answers[0]);
    assert_eq!(limit(&answers[0]), 5, "{}", answers[0]);
    let codes: Vec<String> = answers[1..].iter().map(code).collect();
    assert_eq!(codes, ["OK", "OK", "OK", "OK", "OVER_LIMIT"], "{answers:?}");
    assert_eq!(limit(&answers[5]), 4, "{}", answers[5]);
    drop(c);
}

/// A rule key's override with an expiry stops applying when it expires; the read token reads
/// and its writes are 403; bad input is a 400 (404 for an unknown rule) naming the field and
/// changes nothing; the command line sets, reads and clears a rule key's override.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_key_expiry_scopes_and_bad_input() {
    let rig = Rig::start();
    put_rule_key(
        &rig.a,
        "by-ip",
        "127.0.0.1",
        json!({"limit": 1, "burst": 1, "expires_in_s": 2}),
    )
    .await;
    let deadline = Instant::now() + SEEN_WITHIN;
    let mut saw_override = false;
    loop {
        let r = call_as(&rig.b, "ruler", "/ip", "x").await;
        let p = policy(&r);
        if p.contains("\"by-ip\";q=1;") {
            saw_override = true;
        }
        if saw_override && p.contains("\"by-ip\";q=3;") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "override seen: {saw_override}; last {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let path = "/v1/rules/by-ip/keys/127.0.0.1/limits";
    let got = admin(rig.a.admin_addr(), "GET", path, None).await;
    assert_eq!(got.expect_ok()["override"], Value::Null, "expired");

    // Scopes.
    let path = "/v1/rules/rk-gcra/keys/scoped/limits";
    put_rule_key(&rig.a, "rk-gcra", "scoped", json!({"burst": 9})).await;
    let read = format!("Bearer {READ_TOKEN}");
    let got = admin_call(rig.b.admin_addr(), "GET", path, Some(&read), None).await;
    assert_eq!(got.expect_ok()["override"]["burst"], 9);
    let body = json!({"burst": 1});
    admin_call(rig.b.admin_addr(), "PUT", path, Some(&read), Some(&body))
        .await
        .expect_problem(403);
    admin_call(rig.b.admin_addr(), "DELETE", path, Some(&read), None)
        .await
        .expect_problem(403);

    // Bad input: a problem naming the field; the stored override is unchanged.
    let long = "k".repeat(10_000);
    let cases: Vec<(String, Value, u16, &str)> = vec![
        (
            "/v1/rules/nope/keys/scoped/limits".into(),
            json!({"burst": 1}),
            404,
            "rule",
        ),
        (path.into(), json!({"limit": -1}), 400, "limit"),
        (path.into(), json!({"burst": 0}), 400, "burst"),
        (path.into(), json!({"burst": 10_001}), 400, "burst"),
        (path.into(), json!({"limit": 1e300}), 400, "limit"),
        (path.into(), json!({"per": "0s"}), 400, "per"),
        (path.into(), json!({"quotas": {"day": 1}}), 400, "quotas"),
        (path.into(), json!({}), 400, "body"),
        (
            path.into(),
            json!({"burst": 1, "expires_in_s": 0}),
            400,
            "expires_in_s",
        ),
        (
            format!("/v1/rules/rk-gcra/keys/{long}/limits"),
            json!({"burst": 1}),
            400,
            "key",
        ),
        // A key no request of the rule can have names no bucket: 404.
        (
            "/v1/rules/per-tenant/keys/%20x/limits".into(),
            json!({"burst": 1}),
            404,
            "key",
        ),
        (
            "/v1/rules/rk-gcra/keys/a,b/limits".into(),
            json!({"burst": 1}),
            404,
            "key",
        ),
        (
            "/v1/rules/by-ip/keys/not-an-ip/limits".into(),
            json!({"burst": 1}),
            404,
            "key",
        ),
        (
            "/v1/rules/held-rule/keys/acme/limits".into(),
            json!({"burst": 1}),
            400,
            "rule",
        ),
        (path.into(), json!({"limit": 50_000_001}), 400, "limit"),
        (
            path.into(),
            json!({"limit": 1, "max_in_flight": 1}),
            400,
            "max_in_flight",
        ),
    ];
    for (p, body, status, field) in cases {
        let r = admin(rig.a.admin_addr(), "PUT", &p, Some(&body)).await;
        let problem = r.expect_problem(status);
        assert_eq!(problem["field"], field, "{p} {body}: {problem}");
    }
    let got = admin(rig.a.admin_addr(), "GET", path, None).await;
    let got = &got.expect_ok()["override"];
    assert_eq!((got["burst"].clone(), got.get("limit")), (json!(9), None));
    // A tenant's usage override: bad fields named under `usage.`.
    let tenant = "/v1/tenants/u-raise/limits";
    for (body, field) in [
        (json!({"usage": {"burst": 0}}), "usage.burst"),
        (json!({"usage": {"limit": -1}}), "usage.limit"),
        (json!({"usage": {"per": "forever"}}), "usage.per"),
        (json!({"usage": {"bogus": 1}}), "usage.bogus"),
        (json!({"usage": {}}), "usage"),
    ] {
        let r = admin(rig.a.admin_addr(), "PUT", tenant, Some(&body)).await;
        assert_eq!(r.expect_problem(400)["field"], field, "{body}");
    }
    let got = admin(rig.a.admin_addr(), "GET", tenant, None).await;
    assert_eq!(got.expect_ok()["override"], Value::Null);

    // The command line: a rule key's override set on A, read on B, cleared.
    let a_url = format!("http://{}", rig.a.admin_addr());
    let b_url = format!("http://{}", rig.b.admin_addr());
    let key = ["--rule", "rk-fixed_window", "--key", "cli-user"];
    let (code, out, err) = cli(
        &a_url,
        &[&["set"], &key[..], &["--limit", "4", "--burst", "4"]].concat(),
    );
    assert_eq!(code, 0, "{out} {err}");
    assert!(
        out.contains("rule rk-fixed_window key cli-user: limit 4"),
        "{out}"
    );
    let (code, out, _) = cli(&b_url, &[&["get", "--json"], &key[..]].concat());
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).expect("--json prints the API's JSON");
    assert_eq!(v["override"]["burst"], 4);
    let (code, _, err) = cli(&a_url, &[&["set"], &key[..], &["--burst", "0"]].concat());
    assert_eq!(code, 1, "an API error");
    assert!(err.contains("burst"), "{err}");
    let (code, _, _) = cli(
        &a_url,
        &[&["set"], &key[..], &["--max-in-flight", "2"]].concat(),
    );
    assert_eq!(code, 2, "a tenant-only flag");
    let (code, _, _) = cli(&a_url, &["get", "--rule", "rk-gcra"]);
    assert_eq!(code, 2, "--rule without --key");
    let (code, out, _) = cli(
        &a_url,
        &[&["set", "u-raise", "--usage-burst", "4"][..]].concat(),
    );
    assert_eq!(code, 0);
    assert!(out.contains("usage burst 4"), "{out}");
    let (code, out, _) = cli(&a_url, &[&["clear"], &key[..]].concat());
    assert_eq!(code, 0);
    assert!(out.contains("removed"), "{out}");
    let (_, out, _) = cli(&b_url, &[&["get"], &key[..]].concat());
    assert!(out.contains("no live override"), "{out}");
}

/// `GET /v1/tenants/{tenant}` on `gw`.
async fn tenant_view(gw: &Gateway, tenant: &str) -> Value {
    admin_ok(
        gw.admin_addr(),
        "GET",
        &format!("/v1/tenants/{tenant}"),
        None,
    )
    .await
}

/// `POST /v1/explain` on `gw` of a GET of `path` by `tenant`: its tenant layer.
async fn explained_tenant(gw: &Gateway, tenant: &str, path: &str) -> Value {
    let body = json!({"method": "GET", "host": "example.com", "path": path,
        "headers": {"x-api-key": api_key_of(tenant)}, "client_ip": "127.0.0.1"});
    let v = admin_ok(gw.admin_addr(), "POST", "/v1/explain", Some(&body)).await;
    let layers = v["layers"].as_array().cloned().unwrap_or_default();
    let layer = layers.into_iter().find(|l| l["layer"] == "tenant");
    layer.unwrap_or_else(|| panic!("no tenant layer in {v}"))
}

/// The entry named `name` of `list` (a view's `policies` or `rules`).
fn entry<'a>(list: &'a Value, name: &str) -> &'a Value {
    let found = list
        .as_array()
        .and_then(|l| l.iter().find(|p| p["name"] == name));
    found.unwrap_or_else(|| panic!("no {name} in {list}"))
}

/// Asserts `e`'s `limit`, `burst` and `source` (`override` with the fields set, or `config`).
fn shows(e: &Value, limit: u64, burst: u64, set: Option<Value>, who: &str) {
    assert_eq!(
        (&e["limit"], &e["burst"]),
        (&json!(limit), &json!(burst)),
        "{who}: {e}"
    );
    match set {
        Some(o) => {
            assert_eq!(e["source"], "override", "{who}: {e}");
            assert_eq!(e["override"], o, "{who}: {e}");
        }
        None => {
            assert_eq!(e["source"], "config", "{who}: {e}");
            assert!(e.get("override").is_none(), "{who}: {e}");
        }
    }
}

/// The admin views (`GET /v1/tenants/{id}` and `POST /v1/explain`) show the numbers a live
/// override puts in force, marked as the override's, for every field one can change (the
/// tier's limit and burst, a quota, `max_in_flight`, the usage budget, a rule key's bucket);
/// a real request is refused at exactly those numbers; after DELETE the views show the file's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_views_show_the_overrides_in_force() {
    let mut rig = Rig::start();
    let main = json!({"limit": 4, "burst": 4, "quotas": {"month": 6}, "max_in_flight": 1,
        "usage": {"limit": 2, "burst": 9}});
    put(&rig.a, "v-main", main).await;
    put(&rig.a, "v-quota", json!({"quotas": {"month": 2}})).await;
    put(&rig.a, "v-usage", json!({"usage": {"burst": 2}})).await;
    put_rule_key(
        &rig.a,
        "per-tenant",
        "v-rule",
        json!({"limit": 2, "burst": 2}),
    )
    .await;
    rig.synced().await;

    // Both views of B, before any request: the override's numbers, marked.
    let view = tenant_view(&rig.b, "v-main").await;
    let layer = explained_tenant(&rig.b, "v-main", "/").await;
    for (who, v) in [("view", &view), ("explain", &layer)] {
        let p = &v["policies"];
        shows(
            entry(p, "V"),
            4,
            4,
            Some(json!({"limit": 4, "burst": 4})),
            who,
        );
        shows(entry(p, "V.month"), 6, 6, Some(json!({"limit": 6})), who);
        let usage = entry(p, "V.tokens");
        shows(usage, 2, 9, Some(json!({"limit": 2, "burst": 9})), who);
        assert_eq!(
            (&usage["remaining"], &usage["reserve"]),
            (&json!(9), &json!(1)),
            "{who}"
        );
        let held = &v["in_flight"];
        assert_eq!(
            (&held["max"], &held["source"]),
            (&json!(1), &json!("override")),
            "{who}"
        );
        assert_eq!(held["override"], json!({"max": 1}), "{who}: {held}");
    }
    assert_eq!(layer["decision"], "admitted", "{layer}");
    let view = tenant_view(&rig.b, "v-rule").await;
    let rule = json!({"limit": 2, "burst": 2});
    shows(
        entry(&view["rules"], "per-tenant"),
        2,
        2,
        Some(rule.clone()),
        "view",
    );
    let layer = explained_tenant(&rig.b, "v-rule", "/t").await;
    shows(
        entry(&layer["rules"], "per-tenant"),
        2,
        2,
        Some(rule),
        "explain",
    );

    // Real requests are refused at exactly those numbers, and explain says so beforehand.
    let (n, refusal) = admitted_until_refused(&rig.b, "v-main", 5).await;
    assert_eq!(n, 4, "the overridden burst");
    names_limit(&refusal, "V", 4, "v-main");
    let v = tenant_view(&rig.b, "v-main").await;
    assert_eq!(entry(&v["policies"], "V.tokens")["remaining"], 5, "{v}");
    assert_eq!(entry(&v["policies"], "V.month")["remaining"], 2, "{v}");
    let (n, refusal) = admitted_until_refused(&rig.b, "v-quota", 3).await;
    assert_eq!(n, 2, "the overridden quota");
    assert!(policy(&refusal).contains("\"V.month\";q=2;"), "{refusal:?}");
    let (n, refusal) = admitted_until_refused(&rig.b, "v-usage", 3).await;
    assert_eq!(n, 2, "the overridden usage budget");
    assert!(
        policy(&refusal).contains("\"V.tokens\";q=2;"),
        "{refusal:?}"
    );
    for (tenant, name) in [("v-quota", "V.month"), ("v-usage", "V.tokens")] {
        let layer = explained_tenant(&rig.b, tenant, "/").await;
        assert_eq!(layer["decision"], "limited", "{tenant}: {layer}");
        let e = entry(&layer["policies"], name);
        assert_eq!(
            (&e["burst"], &e["would_admit"]),
            (&json!(2), &json!(false)),
            "{e}"
        );
    }
    let (n, refusal) = admitted_as(&rig.b, "v-rule", "/t", "x", 3).await;
    assert_eq!(n, 2, "the overridden rule key");
    names_rule(&refusal, "per-tenant", 2, "v-rule");
    let layer = explained_tenant(&rig.b, "v-rule", "/t").await;
    assert_eq!(layer["decision"], "limited", "{layer}");

    // The concurrency cap: one slow request held, explain says limited, a second is refused.
    put(&rig.a, "v-rule", json!({"max_in_flight": 1})).await;
    rig.synced().await;
    let slow_url = rig.b.url("/s?delay_ms=3000");
    let slow = tokio::spawn(async move {
        try_get_with_key(&client(), &slow_url, Some(&api_key_of("v-rule")))
            .await
            .expect("slow request")
    });
    let holding = || {
        redis::cmd("ZCARD")
            .arg("tollgate:{v-rule}:inflight")
            .query::<u64>(&mut rig.redis.conn())
            .expect("ZCARD")
            == 1
    };
    assert!(eventually(SEEN_WITHIN, holding).await, "no lease held");
    let layer = explained_tenant(&rig.b, "v-rule", "/").await;
    assert_eq!(layer["in_flight"]["held"], 1, "{layer}");
    assert_eq!(layer["decision"], "limited", "{layer}");
    let second = call(&rig.b, "v-rule").await;
    assert_eq!(second.status, 429, "{second:?}");
    assert_eq!(policy(&second), "\"R.concurrency\";q=1");
    assert_eq!(slow.await.expect("slow task").status, 200);

    // Removed: the views show the file's numbers again.
    for tenant in ["v-main", "v-quota", "v-usage", "v-rule"] {
        let path = format!("/v1/tenants/{tenant}/limits");
        admin_ok(rig.a.admin_addr(), "DELETE", &path, None).await;
    }
    let path = "/v1/rules/per-tenant/keys/v-rule/limits";
    admin_ok(rig.a.admin_addr(), "DELETE", path, None).await;
    rig.synced().await;
    let view = tenant_view(&rig.b, "v-main").await;
    let layer = explained_tenant(&rig.b, "v-main", "/").await;
    for (who, v) in [("view", &view), ("explain", &layer)] {
        let p = &v["policies"];
        shows(entry(p, "V"), 100, 100, None, who);
        shows(entry(p, "V.month"), 50, 50, None, who);
        shows(entry(p, "V.tokens"), 1, 30, None, who);
        assert_eq!(v["in_flight"], Value::Null, "{who}: {v}");
    }
    let view = tenant_view(&rig.b, "v-rule").await;
    shows(entry(&view["rules"], "per-tenant"), 5, 5, None, "view");
    let layer = explained_tenant(&rig.b, "v-rule", "/t").await;
    shows(entry(&layer["rules"], "per-tenant"), 5, 5, None, "explain");
}
