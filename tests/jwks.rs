//! JWTs of a real OpenID provider (oauth2-mock-server from npm, `tests/oidc/`) through the real
//! gateway: keys found by OIDC discovery, rotation without a 401, a removed key refused after the
//! refresh, the provider down (cached keys serve; a gateway without keys answers 503 and is not
//! ready), a flood of random kids costing at most one fetch, and the RS/HS confusion refused.

mod common;
#[path = "common/tls.rs"]
mod tls_common;

use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

fn oidc_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oidc")
}

/// `npm ci` in tests/oidc once per test process (the lock file pins the provider).
fn install_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if oidc_dir().join("node_modules/oauth2-mock-server").is_dir() {
            return;
        }
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(oidc_dir())
            .status()
            .expect("npm (Node 20+) is needed for the OpenID provider tests");
        assert!(status.success(), "npm ci in tests/oidc failed");
    });
}

/// The provider process, driven line by line (see tests/oidc/provider.mjs).
struct Provider {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    port: u16,
}

impl Provider {
    fn start() -> Provider {
        Self::start_with_env(&[])
    }

    /// With `TLS_CERT` / `TLS_KEY` set it serves HTTPS as `https://localhost:<port>`.
    fn start_with_env(env: &[(&str, &str)]) -> Provider {
        install_provider();
        let mut child = Command::new("node")
            .arg("provider.mjs")
            .envs(env.iter().copied())
            .current_dir(oidc_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start node");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).expect("provider ready line");
        let port = line
            .trim()
            .strip_prefix("ready ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("provider said {line:?}"));
        Provider {
            child,
            stdin,
            stdout,
            port,
        }
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("provider stdin");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("provider answer");
        let line = line.trim().to_string();
        assert!(!line.starts_with("error"), "{command}: {line}");
        line
    }

    fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn https_issuer(&self) -> String {
        format!("https://localhost:{}", self.port)
    }

    fn gen(&mut self) -> String {
        self.ask("gen")
    }

    fn token(&mut self, kid: &str, sub: &str) -> String {
        self.ask(&format!("token {kid} {sub}"))
    }

    fn hits(&mut self) -> u64 {
        self.ask("hits").parse().expect("hits")
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A gateway whose only JWT keys come from `issuer` by discovery, with `timing` (flow-map
/// members: refresh, unknown_kid_refetch, stale_for).
fn gateway(backend: &Backend, issuer: &str, timing: &str) -> Gateway {
    let yaml = gateway_yaml(backend, issuer, timing, "sub");
    Gateway::start_with_env(&yaml, &[("TOLLGATE_TEST_ADMIN", "explain-token")])
}

fn gateway_yaml(backend: &Backend, issuer: &str, timing: &str, tenant_claim: &str) -> String {
    let jwt = format!(
        "{{ issuers: [{{ issuer: \"{issuer}\", discovery: true, audience: api, \
         fetch_timeout: 2s, tenant_claim: {tenant_claim}, {timing} }}] }}"
    );
    GatewayConfig::echo(&backend.addr(), "required")
        .admin("{ listen: \"{admin}\", token_env: \"TOLLGATE_TEST_ADMIN\" }")
        .jwt(&jwt)
        .yaml()
}

const FAST: &str = "refresh: { min: 1s, max: 1s }, unknown_kid_refetch: 1s, stale_for: 1h";

fn wait_ready(gw: &Gateway) {
    assert!(
        wait_until(Duration::from_secs(15), || gw.admin_get("/readyz").status
            == 200),
        "gateway never ready: {}",
        gw.admin_get("/readyz").body
    );
}

async fn get(http: &reqwest::Client, gw: &Gateway, token: &str) -> Reply {
    let resp = http
        .get(gw.url("/"))
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .expect("GET");
    Reply::read(resp).await.expect("read")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_at_the_provider_never_answers_401_and_a_removed_key_is_refused() {
    let mut idp = Provider::start();
    let k1 = idp.gen();
    let backend = Backend::start("echo");
    // Refresh only hourly: the new key must be found by the unknown-kid refetch alone.
    let gw = gateway(
        &backend,
        &idp.issuer(),
        "refresh: { min: 1h, max: 1h }, unknown_kid_refetch: 1s, stale_for: 2h",
    );
    wait_ready(&gw);
    let http = client();
    let t1 = idp.token(&k1, "alice");
    let r = get(&http, &gw, &t1).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // Many clients in parallel, each always sending the newest token.
    let current = Arc::new(Mutex::new(t1.clone()));
    let (ok, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..16 {
        let (current, ok, refused, stop) =
            (current.clone(), ok.clone(), refused.clone(), stop.clone());
        let (http, url) = (http.clone(), gw.url("/"));
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let token = current.lock().unwrap().clone();
                let resp = http
                    .get(&url)
                    .header("authorization", format!("Bearer {token}"))
                    .send()
                    .await
                    .expect("GET");
                match resp.status().as_u16() {
                    200 => ok.fetch_add(1, Ordering::Relaxed),
                    _ => refused.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let k2 = idp.gen();
    let t2 = idp.token(&k2, "alice");
    *current.lock().unwrap() = t2.clone();
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    assert_eq!(
        refused.load(Ordering::Relaxed),
        0,
        "refusals during rotation"
    );
    assert!(
        ok.load(Ordering::Relaxed) > 16,
        "too little traffic to tell"
    );
    assert_eq!(
        gw.metric_or_zero(&format!(
            "tollgate_jwks_unknown_kid_refetches_total{{issuer=\"{}\",result=\"triggered\"}}",
            idp.issuer()
        )),
        1.0
    );

    // The admin explain names the issuer and the key.
    let explain = admin_explain_jwt(&gw, &t2).await;
    assert_eq!(explain["issuer"], idp.issuer());
    assert_eq!(explain["kid"], k2.as_str());

    // k1 removed at the provider: refused once the set is refetched (a token with an unknown
    // kid triggers it; here the next refetch slot comes within unknown_kid_refetch).
    idp.ask(&format!("remove {k1}"));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let k3 = idp.gen();
    let t3 = idp.token(&k3, "bob");
    assert_eq!(get(&http, &gw, &t3).await.status, 200);
    let r = get(&http, &gw, &t1).await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(get(&http, &gw, &t2).await.status, 200);
}

/// The `jwt` member of the identity layer of an admin explain of GET / with `token`.
async fn admin_explain_jwt(gw: &Gateway, token: &str) -> serde_json::Value {
    let body = serde_json::json!({
        "method": "GET", "host": "localhost", "path": "/",
        "headers": { "authorization": format!("Bearer {token}") }
    });
    let resp = client()
        .post(gw.admin_url("/v1/explain"))
        .header("authorization", "Bearer explain-token")
        .json(&body)
        .send()
        .await
        .expect("explain");
    let v: serde_json::Value = resp.json().await.expect("explain JSON");
    v["layers"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["layer"] == "identity"))
        .map(|l| l["jwt"].clone())
        .unwrap_or_else(|| panic!("no identity layer: {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_key_is_refused_after_the_background_refresh() {
    let mut idp = Provider::start();
    let (k1, k2) = (idp.gen(), idp.gen());
    let backend = Backend::start("echo");
    let gw = gateway(&backend, &idp.issuer(), FAST);
    wait_ready(&gw);
    let http = client();
    let (t1, t2) = (idp.token(&k1, "alice"), idp.token(&k2, "bob"));
    assert_eq!(get(&http, &gw, &t1).await.status, 200);
    idp.ask(&format!("remove {k1}"));
    let fetches = |gw: &Gateway| {
        gw.metric_or_zero(&format!(
            "tollgate_jwks_fetches_total{{issuer=\"{}\",result=\"ok\"}}",
            idp.issuer()
        ))
    };
    let before = fetches(&gw);
    assert!(wait_until(Duration::from_secs(10), || fetches(&gw) >= before + 2.0));
    assert_eq!(get(&http, &gw, &t1).await.status, 401);
    assert_eq!(get(&http, &gw, &t2).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_down_cached_keys_serve_and_a_new_gateway_answers_503() {
    let mut idp = Provider::start();
    let k1 = idp.gen();
    let backend = Backend::start("echo");
    let gw = gateway(&backend, &idp.issuer(), FAST);
    wait_ready(&gw);
    let http = client();
    let t1 = idp.token(&k1, "alice");
    assert_eq!(get(&http, &gw, &t1).await.status, 200);
    let issuer = idp.issuer();
    idp.stop();
    let failed = |gw: &Gateway| {
        gw.metric_or_zero(&format!(
            "tollgate_jwks_fetches_total{{issuer=\"{issuer}\",result=\"connect\"}}"
        ))
    };
    assert!(wait_until(Duration::from_secs(10), || failed(&gw) >= 2.0));
    assert_eq!(
        get(&http, &gw, &t1).await.status,
        200,
        "last good set serves"
    );
    assert_eq!(gw.admin_get("/readyz").status, 200);

    let fresh = gateway(&backend, &issuer, FAST);
    let r = get(&http, &fresh, &t1).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("5")
    );
    assert!(r.body.contains(&issuer), "{}", r.body);
    let ready = fresh.admin_get("/readyz");
    assert_eq!(ready.status, 503);
    assert!(ready.body.contains(&issuer), "{}", ready.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_random_kids_cost_at_most_one_fetch() {
    let mut idp = Provider::start();
    let k1 = idp.gen();
    let backend = Backend::start("echo");
    let gw = gateway(
        &backend,
        &idp.issuer(),
        "refresh: { min: 1h, max: 1h }, unknown_kid_refetch: 1h, stale_for: 2h",
    );
    wait_ready(&gw);
    let valid = idp.token(&k1, "alice");
    let hits = idp.hits();
    // The valid token's header with another kid: the signature no longer matters.
    let (_, rest) = valid.split_once('.').unwrap();
    let http = client();
    let mut tasks = Vec::new();
    for chunk in 0..20 {
        let (http, url, rest) = (http.clone(), gw.url("/"), rest.to_string());
        tasks.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for i in 0..50 {
                let header = format!(r#"{{"alg":"RS256","kid":"forged-{chunk}-{i}"}}"#);
                use base64::Engine;
                let h = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(header);
                let resp = http
                    .get(&url)
                    .header("authorization", format!("Bearer {h}.{rest}"))
                    .send()
                    .await
                    .expect("GET");
                statuses.push(resp.status().as_u16());
            }
            statuses
        }));
    }
    for t in tasks {
        assert!(t.await.unwrap().iter().all(|s| *s == 401));
    }
    assert!(idp.hits() - hits <= 1, "fetches: {}", idp.hits() - hits);
    // Those not waiting on the one fetch were throttled (exported within a tick).
    let series = format!(
        "tollgate_jwks_unknown_kid_refetches_total{{issuer=\"{}\",result=\"throttled\"}}",
        idp.issuer()
    );
    assert!(wait_until(Duration::from_secs(5), || gw
        .metric_or_zero(&series)
        >= 1.0));
    assert_eq!(get(&http, &gw, &valid).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hs256_signed_with_a_jwks_public_key_is_refused() {
    let mut idp = Provider::start();
    let k1 = idp.gen();
    let backend = Backend::start("echo");
    let gw = gateway(&backend, &idp.issuer(), FAST);
    wait_ready(&gw);
    let jwk: serde_json::Value = serde_json::from_str(&idp.ask(&format!("jwk {k1}"))).unwrap();
    let valid = idp.token(&k1, "alice");
    let claims: serde_json::Value = {
        use base64::Engine;
        let payload = valid.split('.').nth(1).unwrap();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    let n = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(jwk["n"].as_str().unwrap())
            .unwrap()
    };
    let http = client();
    for secret in [jwk.to_string().into_bytes(), n] {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(k1.clone());
        let forged = jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_secret(&secret).expect("key"),
        )
        .expect("encode");
        let r = get(&http, &gw, &forged).await;
        assert_eq!(r.status, 401, "{}", r.body);
    }
    assert_eq!(get(&http, &gw, &valid).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_ca_file_and_bad_answers_keep_the_last_good_set() {
    let ca = tls_common::Ca::new("idp test CA");
    let cert = ca.server("localhost", &["localhost"]);
    let mut idp = Provider::start_with_env(&[
        ("TLS_CERT", cert.cert_file.as_str()),
        ("TLS_KEY", cert.key_file.as_str()),
    ]);
    let issuer = idp.https_issuer();
    let k1 = idp.gen();
    let backend = Backend::start("echo");
    let gw = gateway(
        &backend,
        &issuer,
        &format!("{FAST}, ca_file: \"{}\"", ca.cert_file),
    );
    wait_ready(&gw);
    let http = client();
    let t1 = idp.token(&k1, "alice");
    assert_eq!(get(&http, &gw, &t1).await.status, 200);
    let fetches = |gw: &Gateway, result: &str| {
        gw.metric_or_zero(&format!(
            "tollgate_jwks_fetches_total{{issuer=\"{issuer}\",result=\"{result}\"}}"
        ))
    };
    // Not JSON, over 1 MiB, a redirect to another host: each a counted failure, the keys stay.
    for (mode, result) in [
        ("garbage", "not_json"),
        ("big", "too_large"),
        ("redirect", "redirect"),
    ] {
        idp.ask(&format!("serve {mode}"));
        assert!(
            wait_until(Duration::from_secs(10), || fetches(&gw, result) >= 1.0),
            "{mode}: {}",
            gw.metrics()
        );
        assert_eq!(get(&http, &gw, &t1).await.status, 200, "{mode}");
    }
    assert_eq!(
        idp.ask("hits2"),
        "0",
        "the redirect to another host was followed"
    );
    // A redirect within the same host is followed.
    idp.ask("serve redirect-same");
    assert!(wait_until(Duration::from_secs(10), || idp.ask("hits2") != "0"));
    assert_eq!(gw.admin_get("/readyz").status, 200);

    // Without the CA file the system roots do not know the IdP: never ready, tokens 503.
    let untrusting = gateway(&backend, &issuer, FAST);
    assert!(wait_until(Duration::from_secs(10), || fetches(
        &untrusting,
        "connect"
    ) >= 1.0));
    assert_eq!(get(&http, &untrusting, &t1).await.status, 503);
    assert_eq!(untrusting.admin_get("/readyz").status, 503);
}

#[test]
fn check_validates_the_issuer_block() {
    let yaml = GatewayConfig::echo("127.0.0.1:9", "required")
        .jwt("{ issuers: [{ issuer: \"http://idp.example\", discovery: true }, { issuer: \"https://x.example\", jwks_url: \"https://x.example/k\", refresh: { min: 1h, max: 5m } }] }")
        .yaml();
    let out = check_config(&yaml);
    assert_ne!(out.code(), Some(0), "{}", out.all());
    assert!(
        out.all().contains("identity.jwt.issuers[0].issuer")
            && out
                .all()
                .contains("plain http is accepted only for loopback hosts"),
        "{}",
        out.all()
    );
    assert!(
        out.all()
            .contains("identity.jwt.issuers[1].refresh: min must not be greater than max"),
        "{}",
        out.all()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_key_set_of_an_unchanged_issuer() {
    let mut idp = Provider::start();
    let k1 = idp.gen();
    let backend = Backend::start("echo");
    const HOURLY: &str = "refresh: { min: 1h, max: 1h }, unknown_kid_refetch: 1h, stale_for: 2h";
    let gw = gateway(&backend, &idp.issuer(), HOURLY);
    wait_ready(&gw);
    let http = client();
    let t1 = idp.token(&k1, "alice");
    assert_eq!(get(&http, &gw, &t1).await.status, 200);
    let hits = idp.hits();
    // Same issuer settings, another route: the fetched set is kept, nothing is refetched.
    let same = gateway_yaml(&backend, &idp.issuer(), HOURLY, "sub").replace(
        "routes:\n",
        "routes:\n  - { path_prefix: \"/other\", upstream: echo, auth: none }\n",
    );
    assert_ne!(same, gateway_yaml(&backend, &idp.issuer(), HOURLY, "sub"));
    gw.reload_ok(&same).await;
    assert_eq!(get(&http, &gw, &t1).await.status, 200);
    assert_eq!(gw.admin_get("/readyz").status, 200);
    assert_eq!(idp.hits(), hits, "a reload refetched an unchanged issuer");
    // Changed issuer settings: a new set is fetched for them.
    gw.reload_ok(&gateway_yaml(&backend, &idp.issuer(), HOURLY, "org"))
        .await;
    wait_ready(&gw);
    assert!(idp.hits() > hits);
    // The issuer removed (another one configured): its gauges leave /metrics.
    let gauge = format!("tollgate_jwks_keys{{issuer=\"{}\"}}", idp.issuer());
    assert!(gw.metrics().contains(&gauge), "{}", gw.metrics());
    let other = format!("{}other/", idp.issuer());
    gw.reload_ok(&gateway_yaml(&backend, &other, HOURLY, "org"))
        .await;
    assert!(
        wait_until(Duration::from_secs(10), || !gw.metrics().contains(&gauge)),
        "a removed issuer's gauge stayed: {}",
        gw.metrics()
    );
    assert!(!gw.metrics().contains(&format!(
        "tollgate_jwks_age_seconds{{issuer=\"{}\"}}",
        idp.issuer()
    )));
}
