//! The operator console at `/ui` (docs/admin-api.md#console), black-box: a real `redis-server`,
//! the echo backend and the `tollgate` binary with its admin listener.
//!
//! The browser test runs `tests/console/console_test.py` (Selenium, pinned in
//! `tests/console/requirements.txt`, in the repository's venv by `scripts/venv.sh`) in one
//! headless Chromium session (Debian's `chromium` and `chromium-driver`) against one gateway:
//! sign in, find the refused tenant on the overview (with the last minutes' refusals as the API
//! counts them), see its policy and Retry-After, reset it and see it admitted, explain a
//! request, show a tenant id made of markup and quotes as text; on the keys page create a key
//! (its secret shown once), use it through the proxy, rotate it with a grace period, revoke it
//! and see it refused, page through a tenant's keys; on the blocks page block the test's own
//! network (a reason made of markup, shown as text), see the proxy refuse it and admit it again
//! once removed; on the limits page set and clear a tenant's override; then sign in with a read token and find no
//! write control on any page, and the API refusing its writes. Screenshots of each page go to
//! `target/console-screenshots/` (test artefacts; docs/img/ holds copies).

mod common;

use common::admin::*;
use common::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A tier whose burst is spent after two requests and refills one token an hour (exact counts).
const TIERS: &str = "  free: { limit: 1, per: 1h, burst: 2 }\n  \
    pro: { limit: 100, per: 1m, burst: 50, quotas: [{ limit: 1000, period: day }] }\n";
const BURST: u64 = 2;

/// A tenant id of markup and quotes, valid as an id; it has an API key, and is refused too, so it
/// shows on the overview and its own page.
const XSS_ID: &str = "\"><script>alert(1)</script>";

/// A read-scoped admin token beside the write token of `ADMIN_TOKEN_ENV`.
const READ_ENV: &str = "TOLLGATE_TEST_READ_TOKEN";
const READ_TOKEN: &str = "console-read-token-5c1e93";

/// The tenant (not in the file) and tier of the keys the browser issues.
const KEY_TENANT: &str = "keyco";
const KEY_TIER: &str = "pro";

/// An edge limit, a queued upstream and a limit rule keyed by the tenant.
const EXTRA: &str = "edge: { limit: 1000, per: 1m, burst: 1000 }\n\
    upstreams:\n  echo: { backends: [\"BACKEND\"], max_concurrency: 8, queue: { max: 4, timeout: 1s } }\n\
    routes:\n  - { path_prefix: \"/\", upstream: echo, auth: required }\n\
    limits:\n  - { name: per-tenant, key: [tenant], limit: 1, per: 1h, burst: 50 }\n\
    store: { blocks: true }\n";

/// The admin API is on when [`ADMIN_TOKEN_ENV`] (write) or [`READ_ENV`] (read) is set.
fn yaml(redis: &RedisServer, backend: &Backend) -> String {
    let mut config = GatewayConfig::new()
        .redis(&redis.url(), STRICT_REDIS)
        .tier_lines(TIERS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\", tokens: [\
             {{ token_env: \"{READ_ENV}\", scope: read, name: console-read }}] }}"
        ));
    for (tenant, tier) in [("acme", "free"), ("bob", "pro"), (XSS_ID, "free")] {
        config = config.api_key(&api_key_of(tenant), tenant, tier);
    }
    config
        .raw(&EXTRA.replace("BACKEND", &backend.addr()))
        .yaml()
}

const TOKENS: [(&str, &str); 2] = [(ADMIN_TOKEN_ENV, ADMIN_TOKEN), (READ_ENV, READ_TOKEN)];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

async fn get(url: &str, method: reqwest::Method) -> Reply {
    let resp = client()
        .request(method, url)
        .send()
        .await
        .expect("console request");
    Reply::read(resp).await.expect("console reply")
}

async fn proxy(gw: &Gateway, tenant: &str) -> Reply {
    let resp = client()
        .get(gw.url("/orders/1"))
        .header("x-api-key", api_key_of(tenant))
        .send()
        .await
        .expect("proxy request");
    Reply::read(resp).await.expect("proxy reply")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_carries_its_security_headers_and_exists_only_with_the_api() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start_with_env(&yaml(&redis, &backend), &TOKENS);
    let base = format!("http://{}", gw.admin_addr());
    for (path, method, status, content_type) in [
        ("/ui", reqwest::Method::GET, 200, "text/html; charset=utf-8"),
        (
            "/ui/",
            reqwest::Method::GET,
            200,
            "text/html; charset=utf-8",
        ),
        (
            "/ui/console.js",
            reqwest::Method::GET,
            200,
            "text/javascript; charset=utf-8",
        ),
        (
            "/ui/console.css",
            reqwest::Method::GET,
            200,
            "text/css; charset=utf-8",
        ),
        (
            "/ui/console.js",
            reqwest::Method::HEAD,
            200,
            "text/javascript; charset=utf-8",
        ),
        ("/ui/nothing", reqwest::Method::GET, 404, "text/plain"),
        ("/ui", reqwest::Method::POST, 405, "text/plain"),
    ] {
        let r = get(&format!("{base}{path}"), method.clone()).await;
        assert_eq!(r.status, status, "{method} {path}: {r:?}");
        assert_eq!(r.header("content-type"), Some(content_type), "{path}");
        let csp = r.header("content-security-policy").unwrap_or_default();
        assert!(csp.starts_with("default-src 'self';"), "{path}: {csp}");
        assert!(csp.contains("script-src 'self'") && csp.contains("style-src 'self'"));
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{path}");
    }
    // The page holds no data: served without the token; the data needs it.
    let page = get(&format!("{base}/ui"), reqwest::Method::GET).await;
    assert!(page.body.contains("/ui/console.js"), "{}", page.body);
    admin_call(gw.admin_addr(), "GET", "/v1/status", None, None)
        .await
        .expect_problem(401);
    let who = admin(gw.admin_addr(), "GET", "/v1/whoami", None).await;
    assert_eq!(who.expect_ok()["scope"], "write");

    // The API off (token_env names an unset variable): no console either.
    let off = Gateway::start(&yaml(&redis, &backend));
    for path in ["/ui", "/ui/console.js"] {
        let r = get(
            &format!("http://{}{path}", off.admin_addr()),
            reqwest::Method::GET,
        )
        .await;
        assert_eq!(r.status, 404, "{path} while the API is off");
    }
}

/// `GET /v1/status` reads, never debits: the refused tenant is listed with its tier's counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_lists_refusals_by_tier_and_the_refused_tenant() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start_with_env(&yaml(&redis, &backend), &TOKENS);
    for expected in [200, 200, 429] {
        assert_eq!(proxy(&gw, "acme").await.status, expected);
    }
    for _ in 0..2 {
        let r = admin(gw.admin_addr(), "GET", "/v1/status", None).await;
        let s = r.expect_ok();
        let free = s["tiers"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == "free"))
            .unwrap_or_else(|| panic!("no free tier in {s}"));
        assert_eq!(free["last_hour"]["requests"], 3, "{s}");
        assert_eq!(free["last_hour"]["refused"], 1, "{s}");
        assert_eq!(free["decisions"]["tenant"]["admitted"], 2, "{s}");
        assert_eq!(free["decisions"]["tenant"]["limited"], 1, "{s}");
        // The last minutes, oldest first: their sums are the counters' (the process is younger
        // than the window).
        let minutes = free["last_minutes"].as_array().expect("last_minutes");
        assert_eq!(minutes.len(), 10, "{s}");
        let sum = |k: &str| minutes.iter().filter_map(|m| m[k].as_u64()).sum::<u64>();
        assert_eq!((sum("decisions"), sum("limited")), (3, 1), "{s}");
        assert_eq!(
            sum("failed_open") + sum("failed_closed") + sum("fallback"),
            0
        );
        let starts: Vec<&str> = minutes
            .iter()
            .filter_map(|m| m["minute"].as_str())
            .collect();
        assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
        assert!(starts.iter().all(|m| m.ends_with(":00Z")), "{starts:?}");
        assert_eq!(s["refused_tenants"][0]["tenant"], "acme", "{s}");
        assert_eq!(s["redis"]["breaker"], "closed");
        assert_eq!(s["config"]["last_reload"]["ok"], true);
        let echo = &s["upstreams"][0];
        assert_eq!(
            (
                &echo["name"],
                &echo["max_concurrency"],
                &echo["in_flight"],
                &echo["queue_max"]
            ),
            (&"echo".into(), &8.into(), &0.into(), &4.into()),
            "{s}"
        );
    }
    // The tenant view says the next request is refused, with the Retry-After it would get.
    let t = admin(gw.admin_addr(), "GET", "/v1/tenants/acme", None).await;
    let p = &t.expect_ok()["policies"][0];
    assert_eq!(
        (&p["remaining"], &p["would_admit"]),
        (&0.into(), &false.into())
    );
    assert!(p["retry_after_s"].as_u64().is_some_and(|s| s > 3000), "{p}");
    assert_eq!(
        proxy(&gw, "acme").await.status,
        429,
        "views debited nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_browser_finds_a_refused_tenant_resets_it_manages_keys_and_escapes_ids() {
    let venv = venv_with("tests/console/requirements.txt");
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start_with_env(&yaml(&redis, &backend), &TOKENS);
    // Spend acme's burst: the third request is refused, with its Retry-After.
    for _ in 0..BURST {
        assert_eq!(proxy(&gw, "acme").await.status, 200);
    }
    let refused = proxy(&gw, "acme").await;
    assert_eq!(refused.status, 429, "{refused:?}");
    let retry_after = refused
        .header("retry-after")
        .expect("Retry-After")
        .to_string();
    // The markup tenant is refused too (listed on the overview); some traffic of another tier.
    for expected in [200, 200, 429] {
        assert_eq!(proxy(&gw, XSS_ID).await.status, expected);
    }
    assert_eq!(proxy(&gw, "bob").await.status, 200);

    let shots = root().join("target/console-screenshots");
    let _ = std::fs::remove_dir_all(&shots); // this run's pictures only
    let out = Command::new(venv.join("bin/python"))
        .arg(root().join("tests/console/console_test.py"))
        .env("CONSOLE_ADMIN", format!("http://{}", gw.admin_addr()))
        .env("CONSOLE_TOKEN", ADMIN_TOKEN)
        .env("CONSOLE_PROXY", format!("http://{}", gw.listen_addr()))
        .env("CONSOLE_API_KEY", api_key_of("acme"))
        .env("CONSOLE_REFUSED", "acme")
        .env("CONSOLE_RETRY_AFTER", &retry_after)
        .env("CONSOLE_BURST", BURST.to_string())
        .env("CONSOLE_XSS_ID", XSS_ID)
        .env("CONSOLE_READ_TOKEN", READ_TOKEN)
        .env("CONSOLE_KEY_TENANT", KEY_TENANT)
        .env("CONSOLE_KEY_TIER", KEY_TIER)
        .env("CONSOLE_SHOTS", &shots)
        // The browser and driver are Debian's: Selenium Manager must fetch nothing.
        .env("SE_OFFLINE", "true")
        .env("SE_AVOID_STATS", "true")
        .stdin(Stdio::null())
        .output()
        .expect("run tests/console/console_test.py");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the browser test failed:\n{said}");
    assert!(said.contains("every check passed"), "{said}");
    for page in [
        "login",
        "overview",
        "tenant",
        "explain",
        "tenant-escaping",
        "keys",
        "keys-escaping",
        "keys-read-only",
        "blocks",
        "limits",
    ] {
        let png = shots.join(format!("console-{page}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert!(
            bytes.starts_with(b"\x89PNG"),
            "{} is not a PNG",
            png.display()
        );
    }
    // The reset in the browser gave the burst back: the script spent one, one is left.
    assert_eq!(proxy(&gw, "acme").await.status, 200);
    assert_eq!(proxy(&gw, "acme").await.status, 429);
}
