//! Request attributes that limits read, through the real gateway, a real `redis-server` and real
//! backends: Flask (Werkzeug, which upper-cases the method and routes HEAD to GET views) and
//! Django (which reads the last value of a repeated query parameter), from
//! `tests/frameworks/app.py`, installed into the repository's venv by `scripts/venv.sh` on first
//! use; and the echo backend.
//!
//! - a method with lower-case letters is refused (400) before any limit, on HTTP/1.1 and h2;
//! - HEAD counts against a rule on GET, in the GET bucket;
//! - a `query:` or `header:` key part given more than once is refused (400), never a bucket
//!   of its own;
//! - the `route` key part names the route's host, not only its prefix;
//! - a tenant id spelling another key family's hash tag gets a key of its own.
//!
//! Counts are exact with buckets that barely refill (`per: 1h`).

mod common;
#[path = "common/tls.rs"]
mod tls_common;

use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use tls_common::{h2c, H2};

/// The venv's python with `tests/frameworks/requirements.txt` (once per test process).
fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = venv_with("tests/frameworks/requirements.txt");
        format!("{}/bin/python", venv.display())
    })
}

/// `tests/frameworks/app.py <kind>` on a free port; killed on drop.
struct Framework {
    child: Child,
    addr: String,
}

impl Framework {
    fn start(kind: &str) -> Self {
        let port = free_port();
        let app = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/frameworks/app.py");
        let mut child = Command::new(python())
            .arg(app)
            .arg(kind)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the framework backend");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the ready line");
        assert_eq!(line.trim(), format!("ready {port}"), "{kind} did not start");
        Framework {
            child,
            addr: format!("127.0.0.1:{port}"),
        }
    }

    /// How many times the framework ran view `view` (any method), and for which methods.
    fn hits(&self, view: &str) -> (u64, Vec<String>) {
        let r = http_get(&self.addr, "/hits").expect("GET /hits");
        let all: Value = serde_json::from_str(&r.body).expect("hits JSON");
        let mut n = 0;
        let mut methods = Vec::new();
        for (k, v) in all.as_object().expect("object") {
            if let Some(m) = k.strip_prefix(&format!("{view} ")) {
                n += v.as_u64().expect("count");
                methods.push(m.to_string());
            }
        }
        (n, methods)
    }
}

impl Drop for Framework {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const KEY: &str = "key-acme-0123456789";

/// A gateway in front of `backend` with a big tier, API key `KEY` for tenant `acme`, and the
/// `limits:` block `rules`; listening on HTTP/1.1 and h2c (prior knowledge).
fn config(redis: &RedisServer, backend: &str, rules: &str) -> String {
    GatewayConfig::echo(backend, "required")
        .listen(&["{ addr: \"{listen}\", h2: true }"])
        .redis(&redis.url(), STRICT_REDIS)
        .tier("T", "{ limit: 1, per: 1h, burst: 1000 }")
        .api_keys_always()
        .api_key(KEY, "acme", "T")
        .section("limits", &format!("\n{rules}"))
        .yaml()
}

/// One HTTP/1.1 request with `method` (sent as spelled) and extra headers.
async fn h1(gw: &Gateway, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = client().request(m, gw.url(path)).header("x-api-key", KEY);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    Reply::read(req.send().await.expect("send"))
        .await
        .expect("read")
}

/// One h2 request on `conn` with `method` (sent as spelled in `:method`) and extra headers
/// (a name given twice is sent twice): (status, body).
async fn h2(
    conn: &mut H2,
    gw: &Gateway,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut req = http::Request::builder()
        .method(http::Method::from_bytes(method.as_bytes()).expect("method"))
        .uri(format!("http://{}{path}", gw.listen_addr()))
        .header("x-api-key", KEY);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let (resp, _) = conn
        .send_request(req.body(()).expect("request"), true)
        .expect("send h2 request");
    if method == "HEAD" {
        // The status only: a HEAD answer's Content-Length describes a body never sent.
        let status = resp.await.expect("h2 response").status().as_u16();
        return (status, String::new());
    }
    tls_common::h2_read(resp).await
}

fn reason(body: &str) -> Value {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    v["reason"].clone()
}

/// A method that is a standard one in another case (`post`, `Post`; Flask runs its POST view
/// for it) is refused with 400 before any limit, on HTTP/1.1 and h2, and never reaches the
/// backend; the rule on POST keeps counting only real POSTs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lower_case_methods_are_refused_before_any_limit() {
    let redis = RedisServer::start();
    let flask = Framework::start("flask");
    let rules = "  - { name: login, match: { routes: [\"/login\"], methods: [POST] }, key: [client_ip], limit: 1, per: 1h, burst: 3 }\n";
    let gw = Gateway::start(&config(&redis, &flask.addr, rules));
    for _ in 0..3 {
        let r = h1(&gw, "POST", "/login", &[]).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            serde_json::from_str::<Value>(&r.body).unwrap()["method"],
            "POST"
        );
    }
    for m in ["post", "Post", "pOST", "get", "delete"] {
        let r = h1(&gw, m, "/login", &[]).await;
        assert_eq!(
            (r.status, reason(&r.body)),
            (400, "method_case".into()),
            "{m}: {r:?}"
        );
    }
    let mut conn = h2c(gw.listen_addr()).await;
    for m in ["post", "Post"] {
        let (status, body) = h2(&mut conn, &gw, m, "/login", &[]).await;
        assert_eq!(
            (status, reason(&body)),
            (400, "method_case".into()),
            "h2 {m}"
        );
    }
    assert_eq!(h1(&gw, "POST", "/login", &[]).await.status, 429);
    assert_eq!(h2(&mut conn, &gw, "POST", "/login", &[]).await.0, 429);
    assert_eq!(flask.hits("login"), (3, vec!["POST".to_string()]));
}

/// HEAD runs the GET view (Flask and Django alike), so a rule on GET counts it, in the same
/// bucket as GET when keyed by method: 3 admitted in all, on HTTP/1.1 and h2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_counts_against_a_rule_on_get() {
    for kind in ["flask", "django"] {
        let redis = RedisServer::start();
        let backend = Framework::start(kind);
        let rules = "  - { name: items, match: { routes: [\"/items\"], methods: [GET] }, key: [tenant, method], limit: 1, per: 1h, burst: 3 }\n";
        let gw = Gateway::start(&config(&redis, &backend.addr, rules));
        let mut conn = h2c(gw.listen_addr()).await;
        assert_eq!(h1(&gw, "GET", "/items", &[]).await.status, 200, "{kind}");
        assert_eq!(h1(&gw, "HEAD", "/items", &[]).await.status, 200, "{kind}");
        assert_eq!(
            h2(&mut conn, &gw, "HEAD", "/items", &[]).await.0,
            200,
            "{kind}"
        );
        for _ in 0..3 {
            assert_eq!(h1(&gw, "HEAD", "/items", &[]).await.status, 429, "{kind}");
        }
        assert_eq!(
            h2(&mut conn, &gw, "HEAD", "/items", &[]).await.0,
            429,
            "{kind}"
        );
        assert_eq!(h1(&gw, "GET", "/items", &[]).await.status, 429, "{kind}");
        assert_eq!(
            backend.hits("items").0,
            3,
            "{kind}: the GET view ran 3 times"
        );
    }
}

/// `?model=zN&model=gpt4` is `gpt4` to Django (the last value) and `zN` to others: a key part
/// given more than once is refused with 400 naming the part, never a fresh bucket per spelling;
/// the same for a `header:` part sent twice, on HTTP/1.1 and h2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_key_parts_are_refused() {
    let redis = RedisServer::start();
    let django = Framework::start("django");
    let rules = "  - { name: per-model, match: { routes: [\"/v1/completions\"] }, key: [tenant, \"query:model\"], limit: 1, per: 1h, burst: 3 }\n\
                 \x20 - { name: per-user, match: { routes: [\"/items\"] }, key: [tenant, \"header:x-user\"], limit: 1, per: 1h, burst: 3 }\n";
    let gw = Gateway::start(&config(&redis, &django.addr, rules));
    let mut conn = h2c(gw.listen_addr()).await;
    for _ in 0..3 {
        let r = h1(&gw, "GET", "/v1/completions?model=gpt4", &[]).await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    for n in 0..4 {
        let path = format!("/v1/completions?model=z{n}&model=gpt4");
        let r = h1(&gw, "GET", &path, &[]).await;
        assert_eq!(r.status, 400, "{path}: {r:?}");
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["reason"], "ambiguous-limit-key");
        assert_eq!(v["key-part"], "query:model");
        assert_eq!(v["policy"], "per-model");
        let (status, body) = h2(&mut conn, &gw, "GET", &path, &[]).await;
        assert_eq!((status, reason(&body)), (400, "ambiguous-limit-key".into()));
    }
    let r = h1(
        &gw,
        "GET",
        "/v1/completions?model=%6Dodel&model=gpt4&%6Dodel=x",
        &[],
    )
    .await;
    assert_eq!(r.status, 400, "an escaped name is the same name: {r:?}");
    assert_eq!(
        h1(&gw, "GET", "/v1/completions?model=gpt4", &[])
            .await
            .status,
        429
    );
    assert_eq!(django.hits("completions").0, 3);

    let twice = [("x-user", "u1"), ("x-user", "u2")];
    let r = h1(&gw, "GET", "/items", &twice).await;
    assert_eq!(r.status, 400, "{r:?}");
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        (v["reason"].as_str(), v["key-part"].as_str()),
        (Some("ambiguous-limit-key"), Some("header:x-user"))
    );
    let (status, body) = h2(&mut conn, &gw, "GET", "/items", &twice).await;
    assert_eq!((status, reason(&body)), (400, "ambiguous-limit-key".into()));
    // One field whose value holds a comma is one value.
    let r = h1(&gw, "GET", "/items", &[("x-user", "u1, u2")]).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(django.hits("items").0, 1);
}

/// Two routes with the same prefix on hosts a.test and b.test (different upstreams) have a
/// `route` bucket each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_key_part_names_the_host() {
    let redis = RedisServer::start();
    let a = Backend::start("a");
    let b = Backend::start("b");
    let yaml = GatewayConfig::new()
        .upstream("a", &a.addr())
        .upstream("b", &b.addr())
        .route("{ host: a.test, path_prefix: \"/api\", upstream: a, auth: required }")
        .route("{ host: b.test, path_prefix: \"/api\", upstream: b, auth: required }")
        .redis(&redis.url(), STRICT_REDIS)
        .tier("T", "{ limit: 1, per: 1h, burst: 1000 }")
        .api_keys_always()
        .api_key(KEY, "acme", "T")
        .section(
            "limits",
            "\n  - { name: per-route, key: [route], limit: 1, per: 1h, burst: 2 }\n",
        )
        .yaml();
    let gw = Gateway::start(&yaml);
    let call = |host: &'static str| {
        let url = gw.url("/api/x");
        async move {
            let r = client()
                .get(url)
                .header("host", host)
                .header("x-api-key", KEY)
                .send()
                .await
                .expect("send");
            r.status().as_u16()
        }
    };
    let mut got = Vec::new();
    for host in ["a.test", "a.test", "b.test", "b.test", "a.test", "b.test"] {
        got.push(call(host).await);
    }
    assert_eq!(got, [200, 200, 200, 200, 429, 429]);
    assert_eq!((a.stats().requests, b.stats().requests), (2, 2));
    let keys = redis.keys("tollgate:{r:per-route:*");
    assert_eq!(
        keys,
        [
            "tollgate:{r:per-route:tb:route=10.a.test%2Fapi}",
            "tollgate:{r:per-route:tb:route=10.b.test%2Fapi}"
        ]
    );
}

/// A tenant named `pool:pro` gets a bucket of its own, not tier `pro`'s burst pool: tenant a of
/// tier `pro` still gets its own token and the whole pool (4) after `pool:pro` spent 10.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_named_like_a_pool_does_not_spend_it() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier(
            "pro",
            "{ limit: 1, per: 1h, burst: 1, pool: { limit: 1, per: 1h, burst: 4, max_share: 1.0 } }",
        )
        .tier("big", "{ limit: 1, per: 1h, burst: 10 }")
        .api_key("key-a", "a", "pro")
        .api_key("key-pool", "pool:pro", "big")
        .api_key("key-rule", "r:ipu:tb:client_ip=9.127.0.0.1", "big")
        .yaml();
    let gw = Gateway::start(&yaml);
    let http = client();
    for key in ["key-pool", "key-rule"] {
        for _ in 0..10 {
            let r = try_get_with_key(&http, &gw.url("/x"), Some(key))
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{key}: {r:?}");
        }
    }
    let mut got = Vec::new();
    for _ in 0..6 {
        got.push(
            try_get_with_key(&http, &gw.url("/x"), Some("key-a"))
                .await
                .unwrap()
                .status,
        );
    }
    assert_eq!(got, [200, 200, 200, 200, 200, 429]);
    let keys = redis.keys("*");
    for want in [
        "tollgate:{pool%3Apro}:tb",
        "tollgate:{r%3Aipu%3Atb%3Aclient_ip=9.127.0.0.1}:tb",
        "tollgate:{pool:pro}:tb",
        "tollgate:{a}:tb",
    ] {
        assert!(keys.contains(&want.to_string()), "{want} not in {keys:?}");
    }
}
