//! Admin tokens with scopes and the audit of writes (docs/admin-api.md#tokens-and-scopes),
//! black-box: a real `redis-server`, the echo backend and the `tollgate` binary.
//!
//! The tier refills one token an hour, so "nothing was reset" is an exact count.

mod common;

use common::admin::*;
use common::*;
use serde_json::json;

const TIERS: &str = "  free: { limit: 1, per: 1h, burst: 5 }\n";
const READ_ENV: &str = "TOLLGATE_TEST_READ_TOKEN";
const READ_TOKEN: &str = "read-token-4b1d2e";
const OPS_ENV: &str = "TOLLGATE_TEST_OPS_TOKEN";
const OPS_TOKEN: &str = "ops-token-93ac5f";

/// A gateway with `token_env` (write), a read token named `dashboard` and a write token
/// named `ops`.
fn start() -> (RedisServer, Backend, Gateway) {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::new()
        .redis(&redis.url(), STRICT_REDIS)
        .tier_lines(TIERS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: {ADMIN_TOKEN_ENV}, tokens: [\
             {{ token_env: {READ_ENV}, scope: read, name: dashboard }}, \
             {{ token_env: {OPS_ENV}, scope: write, name: ops }}] }}"
        ))
        .api_key(&api_key_of("acme"), "acme", "free")
        .upstream("echo", &backend.addr())
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .yaml();
    let gw = Gateway::start_with_env(
        &yaml,
        &[
            (ADMIN_TOKEN_ENV, ADMIN_TOKEN),
            (READ_ENV, READ_TOKEN),
            (OPS_ENV, OPS_TOKEN),
        ],
    );
    (redis, backend, gw)
}

async fn remaining(gw: &Gateway) -> u64 {
    let http = client();
    try_get_with_key(&http, &gw.url("/"), Some(&api_key_of("acme")))
        .await
        .expect("proxied request")
        .remaining()
}

fn writes(gw: &Gateway, outcome: &str) -> f64 {
    metric(
        gw,
        "tollgate_admin_writes_total",
        &[("operation", "tenant_reset"), ("outcome", outcome)],
    )
    .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_token_reads_but_its_write_is_403_and_changes_nothing() {
    let (_redis, _backend, gw) = start();
    let read = format!("Bearer {READ_TOKEN}");
    let a = gw.admin_addr();
    for (method, path, body) in [
        ("GET", "/v1/config", None),
        ("GET", "/v1/tenants/acme", None),
        ("GET", "/v1/openapi.json", None),
        (
            "POST",
            "/v1/explain",
            Some(json!({"path": "/", "client_ip": "127.0.0.1"})),
        ),
    ] {
        let r = admin_call(a, method, path, Some(&read), body.as_ref()).await;
        assert_eq!(r.status(), 200, "{method} {path}: {:?}", r.reply);
    }
    assert_eq!(remaining(&gw).await, 4);
    let r = admin_call(a, "POST", "/v1/tenants/acme/reset", Some(&read), None).await;
    let p = r.expect_problem(403);
    assert!(p["detail"].as_str().unwrap().contains("dashboard"), "{p}");
    // Nothing was reset: the bucket goes on from where it was.
    assert_eq!(remaining(&gw).await, 3);
    assert_eq!(writes(&gw, "forbidden"), 1.0);
    assert_eq!(writes(&gw, "ok"), 0.0);
    // A write token (named `ops`) and the bare token_env (write) may.
    let ops = format!("Bearer {OPS_TOKEN}");
    admin_call(a, "POST", "/v1/tenants/acme/reset", Some(&ops), None)
        .await
        .expect_ok();
    assert_eq!(remaining(&gw).await, 4);
    admin(a, "POST", "/v1/tenants/acme/reset", None)
        .await
        .expect_ok();
    assert_eq!(remaining(&gw).await, 4);
    assert_eq!(writes(&gw, "ok"), 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_is_one_audit_line_with_the_token_name_never_the_token() {
    let (_redis, _backend, gw) = start();
    let a = gw.admin_addr();
    assert_eq!(remaining(&gw).await, 4);
    let ops = format!("Bearer {OPS_TOKEN}");
    admin_call(a, "POST", "/v1/tenants/acme/reset", Some(&ops), None)
        .await
        .expect_ok();
    let read = format!("Bearer {READ_TOKEN}");
    admin_call(a, "POST", "/v1/tenants/acme/reset", Some(&read), None)
        .await
        .expect_problem(403);
    // Reads are not audited.
    admin_call(a, "GET", "/v1/config", Some(&read), None)
        .await
        .expect_ok();
    assert!(gw.wait_for_log("dashboard", std::time::Duration::from_secs(10)));
    let log = gw.log();
    let audit: Vec<&str> = log.lines().filter(|l| l.contains("admin write")).collect();
    assert_eq!(audit.len(), 2, "{audit:#?}");
    assert!(audit[0].contains("ops") && audit[0].contains("tenant_reset"));
    assert!(audit[0].contains("outcome=\"ok\"") || audit[0].contains("outcome=ok"));
    assert!(audit[0].contains("acme"), "{}", audit[0]);
    assert!(audit[1].contains("dashboard") && audit[1].contains("forbidden"));
    for secret in [OPS_TOKEN, READ_TOKEN, ADMIN_TOKEN] {
        assert!(!log.contains(secret), "{secret} logged");
    }
}

#[test]
fn scoped_tokens_are_validated() {
    let base = "listen: [\"127.0.0.1:8080\"]\n\
        upstreams: { a: { backends: [\"127.0.0.1:9001\"] } }\n\
        routes: [{ path_prefix: \"/\", upstream: a }]\n";
    let ok = format!(
        "{base}admin: {{ listen: \"127.0.0.1:9090\", tokens: [{{ token_env: R, scope: read }}] }}\n"
    );
    let out = check_config(&ok);
    assert!(out.status.success(), "{}", out.all());
    for (tokens, field) in [
        ("[{ token_env: R, scope: admin }]", "admin.tokens"),
        (
            "[{ token_env: \"1R\", scope: read }]",
            "admin.tokens[0].token_env",
        ),
        (
            "[{ token_env: R, scope: read }, { token_env: R, scope: write }]",
            "admin.tokens[1].token_env",
        ),
        (
            "[{ token_env: R, scope: read, name: x }, { token_env: W, scope: write, name: x }]",
            "admin.tokens[1].name",
        ),
    ] {
        let yaml = format!("{base}admin: {{ listen: \"127.0.0.1:9090\", tokens: {tokens} }}\n");
        let out = check_config(&yaml);
        assert!(
            !out.status.success() && out.all().contains(field),
            "{tokens}: {}",
            out.all()
        );
    }
}
