//! Admin API under `/v1` (docs/DESIGN.md 4c "Admin API", issue 16 points 2 and 5b), black-box:
//! a real `redis-server`, the echo backend and the `tollgate` binary, talked to over HTTP.
//!
//! Tiers refill one token an hour, so every count is exact; "nothing is debited" is checked by
//! the next proxied request's `RateLimit` remaining and by the Redis state itself.

mod common;

use common::admin::*;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

const TIERS: &str = "  free: { limit: 1, per: 1h, burst: 5 }\n  \
    metered: { algorithm: sliding_window_log, limit: 1, per: 1h, burst: 4, quotas: [{ limit: 3, period: month }] }\n  \
    tiny: { limit: 1, per: 1h, burst: 2 }\n";

struct Rig {
    redis: RedisServer,
    _backend: Backend,
    gw: Gateway,
    http: reqwest::Client,
}

impl Rig {
    /// A gateway with the admin API on (token in the environment), [`TIERS`] and these tenants.
    fn start(tenants: &[(&str, &str)], extra: &str) -> Self {
        let redis = RedisServer::start();
        let backend = Backend::start("echo");
        let yaml = admin_yaml(&redis.url(), &backend.addr(), TIERS, tenants, true, extra);
        let gw = Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
        Rig {
            redis,
            _backend: backend,
            gw,
            http: client(),
        }
    }

    async fn request(&self, path: &str, tenant: &str) -> Reply {
        try_get_with_key(&self.http, &self.gw.url(path), Some(&api_key_of(tenant)))
            .await
            .expect("proxied request")
    }

    async fn admin(&self, method: &str, path: &str, body: Option<&Value>) -> AdminReply {
        admin(self.gw.admin_addr(), method, path, body).await
    }

    async fn tenant(&self, id: &str) -> Value {
        self.admin("GET", &format!("/v1/tenants/{id}"), None)
            .await
            .expect_ok()
            .clone()
    }
}

fn explain_body(path: &str, tenant: Option<&str>) -> Value {
    let headers = match tenant {
        Some(t) => json!({ "x-api-key": api_key_of(t) }),
        None => json!({}),
    };
    json!({ "method": "GET", "host": "example.com", "path": path, "headers": headers, "client_ip": "127.0.0.1" })
}

fn layer<'a>(explained: &'a Value, name: &str) -> &'a Value {
    explained["layers"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["layer"] == name))
        .unwrap_or_else(|| panic!("no {name} layer in {explained}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_admin_api_answers_404_for_every_v1_path() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let off = admin_yaml(
        &redis.url(),
        &backend.addr(),
        TIERS,
        &[("acme", "free")],
        false,
        "",
    );
    let unset = admin_yaml(
        &redis.url(),
        &backend.addr(),
        TIERS,
        &[("acme", "free")],
        true,
        "",
    );
    // No token_env at all; token_env naming an unset variable.
    for (yaml, env) in [(off, vec![]), (unset, vec![("UNRELATED", "x")])] {
        let gw = Gateway::start_with_env(&yaml, &env);
        for (method, path) in [
            ("GET", "/v1/config"),
            ("GET", "/v1/tenants/acme"),
            ("POST", "/v1/tenants/acme/reset"),
            ("POST", "/v1/explain"),
            ("GET", "/v1/nope"),
        ] {
            let r = admin(gw.admin_addr(), method, path, Some(&json!({}))).await;
            r.expect_problem(404);
        }
        assert_eq!(gw.admin_get("/healthz").status, 200);
    }
    // The variable is read at every load: a reload that sets token_env turns the API on.
    let off = admin_yaml(
        &redis.url(),
        &backend.addr(),
        TIERS,
        &[("acme", "free")],
        false,
        "",
    );
    let gw = Gateway::start_with_env(&off, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
    admin(gw.admin_addr(), "GET", "/v1/config", None)
        .await
        .expect_problem(404);
    gw.reload(&admin_yaml(
        &redis.url(),
        &backend.addr(),
        TIERS,
        &[("acme", "free")],
        true,
        "",
    ));
    let mut status = 0;
    for _ in 0..100 {
        status = admin(gw.admin_addr(), "GET", "/v1/config", None)
            .await
            .status();
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "the reload did not enable the admin API");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_wrong_token_is_401_with_www_authenticate() {
    let rig = Rig::start(&[("acme", "free")], "");
    let admin_addr = rig.gw.admin_addr();
    let wrong = format!("Bearer {ADMIN_TOKEN}x");
    let short = "Bearer test-admin";
    for (method, path) in [
        ("GET", "/v1/config"),
        ("GET", "/v1/tenants/acme"),
        ("POST", "/v1/tenants/acme/reset"),
        ("POST", "/v1/explain"),
    ] {
        for auth in [
            None,
            Some(wrong.as_str()),
            Some(short),
            Some("Basic Zm9vOmJhcg=="),
        ] {
            let r = admin_call(admin_addr, method, path, auth, Some(&json!({}))).await;
            r.expect_problem(401);
            let challenge = r.reply.header("www-authenticate").unwrap_or_default();
            assert!(
                challenge.starts_with("Bearer"),
                "{method} {path} {auth:?}: {challenge}"
            );
        }
    }
    rig.admin("GET", "/v1/config", None).await.expect_ok();
    // A wrong-token reset deleted nothing: the tenant's bucket is untouched.
    assert_eq!(rig.request("/", "acme").await.remaining(), 4);
    assert_eq!(rig.request("/", "acme").await.remaining(), 3);
    // Without observability.tenant_metrics no tenant id becomes a label.
    assert!(!rig.gw.metrics().contains("tollgate_tenant_refused_share{"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_state_is_read_without_debiting() {
    let rig = Rig::start(
        &[("acme", "free"), ("bob", "metered"), ("team/a b", "free")],
        "",
    );
    for expected in [4, 3, 2] {
        let r = rig.request("/", "acme").await;
        assert_eq!((r.status, r.remaining()), (200, expected));
    }
    let key = "tollgate:{acme}:tb";
    let stored = rig.redis.hgetall(key);
    assert!(!stored.is_empty());

    let t = rig.tenant("acme").await;
    assert_eq!(t["tenant"], "acme");
    assert_eq!(t["tier"], "free");
    let main = &t["policies"][0];
    assert_eq!(main["name"], "free");
    assert_eq!(main["algorithm"], "token_bucket");
    assert_eq!(
        (
            main["limit"].as_u64(),
            main["per_ms"].as_u64(),
            main["burst"].as_u64()
        ),
        (Some(1), Some(3_600_000), Some(5))
    );
    assert_eq!(main["remaining"], 2, "burst 5 - 3 requests: {t}");
    let full = main["seconds_until_full"].as_u64().unwrap();
    assert!((10_700..=10_800).contains(&full), "3 tokens at 1/h: {full}");

    // Reading again, and explaining, debits nothing.
    for _ in 0..2 {
        assert_eq!(rig.tenant("acme").await["policies"][0]["remaining"], 2);
        let e = rig
            .admin(
                "POST",
                "/v1/explain",
                Some(&explain_body("/", Some("acme"))),
            )
            .await;
        assert_eq!(layer(e.expect_ok(), "tenant")["decision"], "admitted");
    }
    assert_eq!(rig.redis.hgetall(key), stored, "the bucket hash changed");
    let r = rig.request("/", "acme").await;
    assert_eq!(
        (r.status, r.remaining()),
        (200, 1),
        "the next request is counted as the 4th"
    );

    // A tier with another algorithm and a calendar quota: both policies, in order.
    for _ in 0..2 {
        assert_eq!(rig.request("/", "bob").await.status, 200);
    }
    let t = rig.tenant("bob").await;
    let p = &t["policies"];
    assert_eq!(p[0]["algorithm"], "sliding_window_log");
    assert_eq!(p[0]["remaining"], 2, "{t}");
    assert_eq!(p[1]["name"], "metered.month");
    assert_eq!(
        (p[1]["limit"].as_u64(), p[1]["remaining"].as_u64()),
        (Some(3), Some(1)),
        "{t}"
    );
    assert!(p[1]["seconds_until_full"].as_u64().unwrap() > 0);
    assert_eq!(rig.request("/", "bob").await.status, 200);
    assert_eq!(
        rig.request("/", "bob").await.status,
        429,
        "the monthly quota of 3 is spent"
    );
    let p = rig.tenant("bob").await["policies"].clone();
    assert_eq!(
        (p[0]["remaining"].as_u64(), p[1]["remaining"].as_u64()),
        (Some(1), Some(0))
    );

    // Path ids are percent-decoded; unknown and malformed ones are problems.
    assert_eq!(rig.request("/", "team/a b").await.status, 200);
    let t = rig.tenant("team%2Fa%20b").await;
    assert_eq!(
        (t["tenant"].as_str(), t["policies"][0]["remaining"].as_u64()),
        (Some("team/a b"), Some(4))
    );
    rig.admin("GET", "/v1/tenants/nobody", None)
        .await
        .expect_problem(404);
    rig.admin("GET", "/v1/tenants/%20padded", None)
        .await
        .expect_problem(400);
    rig.admin("GET", "/v1/tenants/acme/extra", None)
        .await
        .expect_problem(404);
    rig.admin("DELETE", "/v1/tenants/acme", None)
        .await
        .expect_problem(405);
}

/// With `identity.default_tier`, any id has a tier, but a tenant without state that was never
/// seen is unknown: reset answers 404 for it exactly when GET does, and deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_of_an_unknown_tenant_is_404_like_get_with_a_default_tier() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::new()
        .redis(&redis.url(), STRICT_REDIS)
        .tier_lines(TIERS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\" }}"
        ))
        .api_key(&api_key_of("acme"), "acme", "free")
        .default_tier("free")
        .upstream("echo", &backend.addr())
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .yaml();
    let gw = Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
    let admin_at =
        |method: &'static str, path: &'static str| admin(gw.admin_addr(), method, path, None);
    admin_at("GET", "/v1/tenants/stranger")
        .await
        .expect_problem(404);
    admin_at("POST", "/v1/tenants/stranger/reset")
        .await
        .expect_problem(404);
    // A known tenant is still reset, state or not.
    let r = admin_at("POST", "/v1/tenants/acme/reset").await;
    assert_eq!(r.expect_ok()["deleted_keys"], 0, "{:?}", r.reply);
    let r = try_get_with_key(&client(), &gw.url("/"), Some(&api_key_of("acme")))
        .await
        .expect("proxied request");
    assert_eq!((r.status, r.remaining()), (200, 4));
    let r = admin_at("POST", "/v1/tenants/acme/reset").await;
    assert_eq!(r.expect_ok()["deleted_keys"], 1, "{:?}", r.reply);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_restores_the_full_burst_and_is_idempotent() {
    let rig = Rig::start(&[("acme", "free"), ("bob", "metered")], "");
    for _ in 0..5 {
        assert_eq!(rig.request("/", "acme").await.status, 200);
    }
    assert_eq!(
        rig.request("/", "acme").await.status,
        429,
        "burst of 5 spent"
    );
    let r = rig.admin("POST", "/v1/tenants/acme/reset", None).await;
    assert_eq!(r.expect_ok()["deleted_keys"], 1, "{:?}", r.reply);
    let r = rig.admin("POST", "/v1/tenants/acme/reset", None).await;
    assert_eq!(
        r.expect_ok()["deleted_keys"],
        0,
        "second reset: nothing left"
    );
    assert_eq!(rig.tenant("acme").await["policies"][0]["remaining"], 5);
    let r = rig.request("/", "acme").await;
    assert_eq!((r.status, r.remaining()), (200, 4), "full burst again");

    // The main key and the calendar quota counter both go.
    for _ in 0..3 {
        assert_eq!(rig.request("/", "bob").await.status, 200);
    }
    assert_eq!(rig.request("/", "bob").await.status, 429);
    assert_eq!(rig.redis.keys("tollgate:{bob}:*").len(), 2);
    let r = rig.admin("POST", "/v1/tenants/bob/reset", None).await;
    assert_eq!(r.expect_ok()["deleted_keys"], 2);
    assert!(rig.redis.keys("tollgate:{bob}:*").is_empty());
    assert_eq!(rig.request("/", "bob").await.status, 200);
    rig.admin("POST", "/v1/tenants/nobody/reset", None)
        .await
        .expect_problem(404);

    // Redis down: a problem, not a made-up answer; explain says the tenant layer is unknown.
    let mut rig = rig;
    rig.redis.kill();
    let p = rig.admin("GET", "/v1/tenants/acme", None).await;
    assert_eq!(
        p.expect_problem(503)["reason"],
        "connection",
        "{:?}",
        p.reply
    );
    rig.admin("POST", "/v1/tenants/acme/reset", None)
        .await
        .expect_problem(503);
    let e = rig
        .admin(
            "POST",
            "/v1/explain",
            Some(&explain_body("/", Some("acme"))),
        )
        .await;
    assert_eq!(layer(e.expect_ok(), "tenant")["decision"], "unknown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_walks_every_layer_without_debiting() {
    let extra = "edge: { limit: 100, per: 1m, burst: 50 }\n\
        upstreams:\n  echo: { backends: [\"BACKEND\"], max_concurrency: 8 }\n\
        routes:\n  - { path_prefix: \"/orders\", upstream: echo, auth: required, cost: 2 }\n  \
        - { path_prefix: \"/public\", upstream: echo, auth: none }\n";
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let extra = extra.replace("BACKEND", &backend.addr());
    let yaml = admin_yaml(
        &redis.url(),
        &backend.addr(),
        TIERS,
        &[("acme", "free")],
        true,
        &extra,
    );
    let gw = Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
    let http = client();
    let explain = |body: Value| {
        let admin_addr = gw.admin_addr().to_string();
        async move { admin(&admin_addr, "POST", "/v1/explain", Some(&body)).await }
    };

    let mut edge_remaining = Vec::new();
    for _ in 0..2 {
        let e = explain(explain_body("/x/../orders//1?q=1", Some("acme"))).await;
        let e = e.expect_ok();
        let route = layer(e, "route");
        assert_eq!(
            (route["route"].as_str(), route["path"].as_str()),
            (Some("routes[0]"), Some("/orders/1")),
            "{e}"
        );
        assert_eq!(route["cost"], 2);
        let id = &layer(e, "identity")["identity"];
        assert_eq!(
            (
                id["tenant"].as_str(),
                id["tier"].as_str(),
                id["method"].as_str()
            ),
            (Some("acme"), Some("free"), Some("api_key"))
        );
        let tenant = layer(e, "tenant");
        assert_eq!(tenant["decision"], "admitted", "{e}");
        assert_eq!(tenant["policies"][0]["remaining"], 5);
        assert_eq!(tenant["policies"][0]["remaining_after"], 3);
        let up = layer(e, "upstream");
        assert_eq!(
            (
                up["decision"].as_str(),
                up["in_flight"].as_u64(),
                up["max_concurrency"].as_u64()
            ),
            (Some("admitted"), Some(0), Some(8))
        );
        let edge = layer(e, "edge");
        assert_eq!(edge["decision"], "admitted");
        edge_remaining.push(edge["numbers"]["remaining"].as_u64().unwrap());
        assert_eq!(e["outcome"]["decision"], "admitted");
        assert_eq!(e["debited"], false);
    }
    assert!(
        edge_remaining[1] >= edge_remaining[0],
        "explain debited the edge: {edge_remaining:?}"
    );
    // The first real request is charged the full route cost from a full bucket.
    let r = try_get_with_key(&http, &gw.url("/orders/1"), Some(&api_key_of("acme")))
        .await
        .unwrap();
    assert_eq!((r.status, r.remaining()), (200, 3));
    let r = try_get_with_key(&http, &gw.url("/orders/1"), Some(&api_key_of("acme")))
        .await
        .unwrap();
    assert_eq!((r.status, r.remaining()), (200, 1));

    // Now the tenant layer refuses (cost 2 > 1 left), and says so with the numbers.
    let e = explain(explain_body("/orders/2", Some("acme"))).await;
    let e = e.expect_ok();
    let tenant = layer(e, "tenant");
    assert_eq!(tenant["decision"], "limited", "{e}");
    assert_eq!(tenant["policies"][0]["remaining"], 1);
    assert!(tenant["policies"][0]["retry_after_s"].as_u64().unwrap() > 0);
    assert_eq!(
        (
            e["outcome"]["layer"].as_str(),
            e["outcome"]["status"].as_u64()
        ),
        (Some("tenant"), Some(429))
    );

    // Identity failures, an anonymous route, a refused target, no route.
    let mut wrong = explain_body("/orders/1", None);
    wrong["headers"] = json!({ "x-api-key": "not-a-key" });
    let e = explain(wrong).await;
    assert_eq!(
        (
            e.expect_ok()["outcome"]["layer"].as_str(),
            e.json["outcome"]["status"].as_u64()
        ),
        (Some("identity"), Some(401))
    );
    let e = explain(explain_body("/orders/1", None)).await;
    assert_eq!(e.expect_ok()["outcome"]["decision"], "unauthenticated");
    let e = explain(explain_body("/public/a", None)).await;
    assert_eq!(layer(e.expect_ok(), "identity")["decision"], "skipped");
    assert_eq!(layer(&e.json, "tenant")["decision"], "skipped");
    let e = explain(explain_body("/orders%2Fx", Some("acme"))).await;
    assert_eq!(
        (
            e.expect_ok()["outcome"]["layer"].as_str(),
            e.json["outcome"]["status"].as_u64()
        ),
        (Some("http"), Some(400))
    );
    let e = explain(explain_body("/nothing", Some("acme"))).await;
    assert_eq!(e.expect_ok()["outcome"]["status"], 404);
    explain(json!({"path": 7})).await.expect_problem(400);
    // Still exactly as counted: 1 token left.
    let r = try_get_with_key(&http, &gw.url("/orders/1"), Some(&api_key_of("acme")))
        .await
        .unwrap();
    assert_eq!((r.status, r.remaining()), (429, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_is_shown_with_secrets_redacted_hash_and_load_time() {
    let rig = Rig::start(&[("acme", "free")], "");
    let file = std::fs::read_to_string(rig.gw.config_path()).unwrap();
    let r = rig.admin("GET", "/v1/config", None).await;
    let c = r.expect_ok();
    assert_eq!(c["sha256"], sha256_hex(&file));
    let loaded = c["loaded_at"].as_str().unwrap();
    assert!(
        loaded.len() == 20 && loaded.ends_with('Z') && loaded.as_bytes()[10] == b'T',
        "{loaded}"
    );
    assert_eq!(c["config"]["tiers"]["free"]["burst"], 5);
    assert_eq!(
        c["config"]["identity"]["api_keys"]["keys"][0]["sha256"],
        "***"
    );
    assert_eq!(
        c["config"]["identity"]["api_keys"]["keys"][0]["tenant"],
        "acme"
    );
    assert_eq!(c["config"]["admin"]["token_env"], ADMIN_TOKEN_ENV);
    let digest = sha256_hex(&api_key_of("acme"));
    assert!(file.contains(&digest));
    for secret in [digest.as_str(), ADMIN_TOKEN, &api_key_of("acme")] {
        assert!(
            !r.reply.body.contains(secret),
            "{secret} in {}",
            r.reply.body
        );
    }

    // A reload shows the new file and its hash.
    let yaml = file.replace("burst: 5", "burst: 6");
    rig.gw.reload(&yaml);
    let mut shown = Value::Null;
    // A wide margin: on a loaded host a reload (file read, validation, Redis set-up) once took
    // more than 10 s.
    let reloaded = wait_until(Duration::from_secs(30), || {
        shown = config_now(rig.gw.admin_addr());
        shown["sha256"] == sha256_hex(&yaml)
    });
    assert!(reloaded, "{shown}");
    assert_eq!(shown["config"]["tiers"]["free"]["burst"], 6);
}

/// `GET /v1/config` from synchronous code (polling loops).
fn config_now(admin_addr: &str) -> Value {
    let addr = admin_addr.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async { admin(&addr, "GET", "/v1/config", None).await.json })
    })
    .join()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tier_fit_from_the_api_and_the_bounded_metric() {
    let rig = Rig::start(
        &[("fit", "tiny"), ("calm", "free")],
        "observability: { tenant_metrics: 1 }\n",
    );
    let statuses: Vec<u16> = {
        let mut s = Vec::new();
        for _ in 0..5 {
            s.push(rig.request("/", "fit").await.status);
        }
        s
    };
    assert_eq!(statuses, [200, 200, 429, 429, 429]);
    for _ in 0..2 {
        assert_eq!(rig.request("/", "calm").await.status, 200);
    }

    let fit = rig.tenant("fit").await["fit"].clone();
    for (window, minutes) in [("hour", 60.0), ("day", 1440.0)] {
        let w = &fit[window];
        assert_eq!(
            (w["requests"].as_u64(), w["refused"].as_u64()),
            (Some(5), Some(3)),
            "{fit}"
        );
        assert_eq!(w["refused_share"].as_f64(), Some(0.6));
        // The 5 requests take well under a minute, but may straddle a minute boundary.
        let at_limit = w["minutes_at_limit"].as_u64().unwrap();
        assert!((1..=2).contains(&at_limit), "{fit}");
        assert_eq!(
            w["minutes_at_limit_share"].as_f64(),
            Some(at_limit as f64 / minutes)
        );
    }
    let calm = rig.tenant("calm").await["fit"].clone();
    assert_eq!(calm["day"]["requests"], 2);
    assert_eq!(
        (
            calm["day"]["refused_share"].as_f64(),
            calm["day"]["minutes_at_limit"].as_u64()
        ),
        (Some(0.0), Some(0))
    );

    // The metric: top 1 tenant (observability.tenant_metrics) by refused share, per window.
    let metrics = rig.gw.metrics();
    for window in ["hour", "day"] {
        let series = format!("tollgate_tenant_refused_share{{tenant=\"fit\",window=\"{window}\"}}");
        assert_eq!(metric_value(&metrics, &series), Some(0.6), "{series}");
        let at =
            format!("tollgate_tenant_minutes_at_limit_share{{tenant=\"fit\",window=\"{window}\"}}");
        assert_eq!(
            metric_value(&metrics, &at),
            fit[window]["minutes_at_limit_share"].as_f64()
        );
    }
    assert!(
        !metrics.contains("tollgate_tenant_refused_share{tenant=\"calm\""),
        "top-1 bound"
    );
}

/// Every algorithm's state is read from the key its script writes, with the same math: after
/// two requests the API reports what the last response's `RateLimit` said, and the next request
/// reports one token less.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_is_read_from_its_own_key_with_the_scripts_math() {
    let algorithms = ALGORITHMS;
    let tiers: String = algorithms
        .iter()
        .map(|a| format!("  t_{a}: {{ algorithm: {a}, limit: 1, per: 1h, burst: 4 }}\n"))
        .collect();
    let tenants: Vec<(String, String)> = algorithms
        .iter()
        .map(|a| (format!("c_{a}"), format!("t_{a}")))
        .collect();
    let pairs: Vec<(&str, &str)> = tenants
        .iter()
        .map(|(t, r)| (t.as_str(), r.as_str()))
        .collect();
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = admin_yaml(&redis.url(), &backend.addr(), &tiers, &pairs, true, "");
    let gw = Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
    let http = client();
    for (tenant, _) in &pairs {
        let mut last = None;
        for _ in 0..2 {
            let r = try_get_with_key(&http, &gw.url("/"), Some(&api_key_of(tenant)))
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{tenant}");
            last = Some(r);
        }
        let last = last.unwrap();
        let t = admin(
            gw.admin_addr(),
            "GET",
            &format!("/v1/tenants/{tenant}"),
            None,
        )
        .await;
        let main = &t.expect_ok()["policies"][0];
        assert_eq!(
            main["remaining"].as_u64(),
            Some(last.remaining()),
            "{tenant}: {main}"
        );
        assert_eq!(main["remaining"], 2, "{tenant}: {main}");
        let reset_s: u64 = last
            .header("ratelimit")
            .and_then(|f| f.split(';').find_map(|p| p.strip_prefix("t=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{tenant}: no t= in {:?}", last.header("ratelimit")));
        let full = main["seconds_until_full"].as_u64().unwrap();
        assert!(
            full <= reset_s && full + 2 >= reset_s,
            "{tenant}: {full} vs t={reset_s}"
        );
        let r = try_get_with_key(&http, &gw.url("/"), Some(&api_key_of(tenant)))
            .await
            .unwrap();
        assert_eq!((r.status, r.remaining()), (200, 1), "{tenant}");
    }
}

/// A reset through one instance's admin API reaches every instance: another gateway that has
/// just refused the tenant (and remembers that refusal locally, see `quota::deny_cache`) admits
/// it again within its `MAX_DENY_MS` (1 s) instead of for the rest of the hour its Retry-After
/// says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_through_one_instance_is_seen_by_the_others() {
    let rig = Rig::start(&[("acme", "free")], "");
    let yaml = admin_yaml(
        &rig.redis.url(),
        &rig._backend.addr(),
        TIERS,
        &[("acme", "free")],
        true,
        "",
    );
    let other = Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
    let on_other = || async {
        try_get_with_key(&rig.http, &other.url("/"), Some(&api_key_of("acme")))
            .await
            .expect("proxied request")
    };
    for _ in 0..5 {
        assert_eq!(rig.request("/", "acme").await.status, 200);
    }
    for _ in 0..3 {
        let r = on_other().await;
        assert_eq!(
            r.status, 429,
            "the burst of 5 is spent on the first gateway"
        );
        let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!(
            wait > 600,
            "Retry-After {wait}: most of the hour a token takes"
        );
    }
    let r = rig.admin("POST", "/v1/tenants/acme/reset", None).await;
    assert_eq!(r.expect_ok()["deleted_keys"], 1);
    // Wide margin on a busy box; without the bound the refusal would last the hour.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let admitted = loop {
        let r = on_other().await;
        if r.status == 200 {
            break Some(r);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let r = admitted.expect("the other gateway admits acme again after the reset");
    assert_eq!(r.remaining(), 4, "one token of the fresh burst of 5");
}

/// A tenant whose tier comes from its JWT (`tier_claim`) is shown with the tier its requests
/// were last decided with, or the `?tier=` asked for, or as "tier unknown": never with
/// `identity.default_tier`'s numbers as fact. Explain shows the token's tier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_tier_tenant_is_shown_with_its_own_tier_or_as_unknown() {
    const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!";
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::new()
        .redis(&redis.url(), STRICT_REDIS)
        .tier_lines(
            "  basic: { limit: 1, per: 1h, burst: 8 }\n  gold: { limit: 1, per: 1h, burst: 50 }\n",
        )
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\" }}"
        ))
        .default_tier("basic")
        .jwt("{ tier_claim: tier, keys: [{ algorithm: HS256, secret_env: \"TG_TEST_JWT\" }] }")
        .upstream("echo", &backend.addr())
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .yaml();
    let gw = Gateway::start_with_env(
        &yaml,
        &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN), ("TG_TEST_JWT", SECRET)],
    );
    let claims = json!({"sub": "user-77", "tier": "gold", "exp": 4_102_444_800u64});
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).expect("HMAC key"),
    )
    .expect("token");
    // Before any request: unknown tenant (no state, never seen).
    admin(gw.admin_addr(), "GET", "/v1/tenants/user-77", None)
        .await
        .expect_problem(404);

    let r = client()
        .get(gw.url("/"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("proxied request");
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["ratelimit-policy"]
            .to_str()
            .unwrap()
            .split(';')
            .nth(1),
        Some("q=50")
    );

    let t = admin(gw.admin_addr(), "GET", "/v1/tenants/user-77", None)
        .await
        .expect_ok()
        .clone();
    assert_eq!(
        (
            &t["tier"],
            &t["tier_source"],
            &t["policies"][0]["burst"],
            &t["policies"][0]["remaining"]
        ),
        (
            &json!("gold"),
            &json!("last_decision"),
            &json!(50),
            &json!(49)
        ),
        "{t}"
    );
    let t = admin(
        gw.admin_addr(),
        "GET",
        "/v1/tenants/user-77?tier=basic",
        None,
    )
    .await
    .expect_ok()
    .clone();
    assert_eq!(
        (&t["tier"], &t["tier_source"], &t["policies"][0]["burst"]),
        (&json!("basic"), &json!("query"), &json!(8)),
        "{t}"
    );
    admin(
        gw.admin_addr(),
        "GET",
        "/v1/tenants/user-77?tier=platinum",
        None,
    )
    .await
    .expect_problem(404);

    // Explain reads the token's tier.
    let body = json!({"method": "GET", "host": "example.com", "path": "/",
        "headers": {"authorization": format!("Bearer {token}")}, "client_ip": "127.0.0.1"});
    let e = admin(gw.admin_addr(), "POST", "/v1/explain", Some(&body)).await;
    let tenant = layer(e.expect_ok(), "tenant").clone();
    assert_eq!(
        (&tenant["tier"], &tenant["policies"][0]["burst"]),
        (&json!("gold"), &json!(50)),
        "{tenant}"
    );

    // Another instance (a restart) that never decided it: state in Redis, tier unknown.
    drop(gw);
    let gw = Gateway::start_with_env(
        &yaml,
        &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN), ("TG_TEST_JWT", SECRET)],
    );
    let t = admin(gw.admin_addr(), "GET", "/v1/tenants/user-77", None).await;
    let t = t.expect_ok();
    assert_eq!(
        (&t["tier"], &t["tier_source"], &t["policies"]),
        (&json!(null), &json!("unknown"), &json!([])),
        "{t}"
    );
    assert!(t["why"].as_str().unwrap().contains("?tier="), "{t}");
}
