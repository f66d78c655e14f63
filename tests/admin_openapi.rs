//! The admin API against its OpenAPI 3.1 document (`docs/openapi.json`, docs/admin-api.md
//! "OpenAPI document"), black-box: a real `redis-server`, the echo backend and the `tollgate`
//! binary with its admin listener, and `schemathesis` (pinned in `tests/openapi/requirements.txt`,
//! installed into the repository's venv by `scripts/venv.sh` on first use).
//!
//! With the token, schemathesis sends every operation its documented examples, boundary values
//! and generated (valid and invalid) inputs, and checks that no answer is a 5xx and that every
//! status, content type, header and body is the document's. Without it, the same operations are
//! sent again and every answer must be 401. Both runs are deterministic: a fixed seed, one worker,
//! no example database, a bounded number of examples per operation.

mod common;

use common::admin::*;
use common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Tiers with every kind of policy the views show: a token bucket, a calendar quota on another
/// algorithm, a leaky bucket, an anonymous tier, and a fleet-wide concurrency limit.
const TIERS: &str = "  free: { limit: 1, per: 1h, burst: 5, max_in_flight: 4 }\n  \
    metered: { algorithm: sliding_window_log, limit: 1, per: 1h, burst: 4, quotas: [{ limit: 3, period: month }] }\n  \
    slow: { algorithm: leaky_bucket, limit: 1, per: 1h, burst: 2, max_delay: 100ms }\n  \
    anonymous: { limit: 1, per: 1h, burst: 2 }\n";

/// An edge limit, a queued upstream, an anonymous route, and limit rules (rate and concurrency)
/// keyed by the tenant and by other parts.
const EXTRA: &str = "edge: { limit: 1000, per: 1m, burst: 1000 }\n\
    upstreams:\n  echo: { backends: [\"BACKEND\"], max_concurrency: 8, queue: { max: 4, timeout_ms: 1000 } }\n  \
    plain: { backends: [\"BACKEND\"] }\n\
    routes:\n  - { path_prefix: \"/orders\", upstream: echo, auth: required, cost: 2 }\n  \
    - { path_prefix: \"/v2\", upstream: echo, auth: required }\n  \
    - { path_prefix: \"/public\", upstream: plain, auth: optional }\n\
    limits:\n  - { name: per-tenant, key: [tenant], limit: 1, per: 1h, burst: 9 }\n  \
    - { name: per-method, key: [tenant, method], limit: 1, per: 1h, burst: 9, mode: shadow }\n  \
    - { name: held, key: [tenant], max_in_flight: 3 }\n\
    store: { blocks: true }\n";

struct Rig {
    redis: RedisServer,
    _backend: Backend,
    gw: Gateway,
}

impl Rig {
    fn start() -> Self {
        let redis = RedisServer::start();
        let backend = Backend::start("echo");
        let extra = EXTRA.replace("BACKEND", &backend.addr());
        let tenants = [("acme", "free"), ("bob", "metered"), ("carol", "slow")];
        let yaml = admin_yaml(&redis.url(), &backend.addr(), TIERS, &tenants, true, &extra);
        let gw = Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
        Rig {
            redis,
            _backend: backend,
            gw,
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn document_path() -> PathBuf {
    root().join("docs/openapi.json")
}

fn document() -> Value {
    let text = std::fs::read_to_string(document_path()).expect("docs/openapi.json");
    serde_json::from_str(&text).expect("docs/openapi.json is JSON")
}

/// `(METHOD, path template)` of every operation of the document.
fn operations(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                out.push((method.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    out
}

/// Whether the request path `path` has the shape of `template` (`{...}` is one segment).
fn fits(template: &str, path: &str) -> bool {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter()
            .zip(&p)
            .all(|(t, p)| t == p || (t.starts_with('{') && t.ends_with('}')))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_is_the_repository_file_and_needs_the_token() {
    let rig = Rig::start();
    let addr = rig.gw.admin_addr();
    let served = admin(addr, "GET", "/v1/openapi.json", None).await;
    served.expect_ok();
    let file = std::fs::read_to_string(document_path()).expect("docs/openapi.json");
    assert!(
        served.reply.body == file,
        "GET /v1/openapi.json is not docs/openapi.json"
    );
    let r = admin_call(addr, "GET", "/v1/openapi.json", None, None).await;
    r.expect_problem(401);

    // Every documented operation is served (not 404 "no such admin resource", not 405).
    for (method, template) in operations(&document()) {
        let path = template.replace("{id}", "acme");
        let body = json!({ "path": "/orders/1" });
        let r = admin(addr, &method, &path, Some(&body)).await;
        if template.starts_with("/v1/keys")
            || template.starts_with("/v1/blocks/")
            || template.ends_with("/limits")
        {
            // Served, though this body is not a key's, a block's or a limit's (their own
            // 400/404 problems).
            assert!(
                r.status() != 405 && !r.reply.body.contains("no such admin resource"),
                "{method} {path}: {:?}",
                r.reply
            );
            continue;
        }
        assert_eq!(r.status(), 200, "{method} {path}: {:?}", r.reply);
    }

    // Auth comes before the body: an unauthenticated call over the body limit is 401, not 413.
    let big = json!({ "path": "/x".repeat(40_000) });
    let r = admin_call(addr, "POST", "/v1/explain", None, Some(&big)).await;
    r.expect_problem(401);
    admin(addr, "POST", "/v1/explain", Some(&big))
        .await
        .expect_problem(413);

    // The outcome of a request admitted by an upstream without slots has its status too.
    let body = json!({ "path": "/public/a", "client_ip": "203.0.113.7" });
    let r = admin(addr, "POST", "/v1/explain", Some(&body)).await;
    let outcome = &r.expect_ok()["outcome"];
    assert_eq!(
        outcome,
        &json!({ "layer": "upstream", "decision": "admitted", "status": 200 })
    );
}

/// One schemathesis run against `admin` (`127.0.0.1:P`) in `dir` with `checks` and `extra`
/// arguments, asserted to pass with more than 50 requests: each request's method, path and
/// status (from its HAR record), and the run's output (also in `<name>.out`).
fn schemathesis(
    dir: &Path,
    name: &str,
    admin: &str,
    checks: &str,
    extra: &[&str],
) -> (Vec<(String, String, u64)>, String) {
    let venv = venv_with("tests/openapi/requirements.txt");
    let har = dir.join(format!("{name}.har"));
    let out = dir.join(format!("{name}.out"));
    let log = std::fs::File::create(&out).expect("output file");
    let mut child = Command::new(venv.join("bin/schemathesis"))
        .current_dir(dir)
        .arg("run")
        .arg(document_path())
        .args(["--url", &format!("http://{admin}")])
        .args(["--checks", checks])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args([
            "--max-examples",
            "100",
            "--seed",
            "20261201",
            "--workers",
            "1",
        ])
        .args(["--generation-database", "none", "--no-shrink", "--no-color"])
        .args(["--request-timeout", "20", "--max-failures", "20"])
        .args(["--report", "har", "--report-har-path"])
        .arg(&har)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("run schemathesis");
    // Generous: several hundred requests to a local listener; never hang the suite.
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait schemathesis") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("schemathesis {name} did not finish in 600 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(status.success(), "schemathesis {name} failed:\n{output}");
    eprintln!("schemathesis {name}:\n{}", summary(&output));
    let record: Value = std::fs::read_to_string(&har)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let seen: Vec<_> = record["log"]["entries"]
        .as_array()
        .map(|e| e.iter().map(entry).collect())
        .unwrap_or_default();
    assert!(
        seen.len() > 50,
        "{name}: only {} requests:\n{output}",
        seen.len()
    );
    (seen, output)
}

/// Whether `seen` has a `method` request to a path of `template` answered `status` (any
/// status when `None`).
fn called(
    seen: &[(String, String, u64)],
    method: &str,
    template: &str,
    status: Option<u64>,
) -> bool {
    seen.iter()
        .any(|(m, p, s)| m == method && fits(template, p) && status.is_none_or(|st| st == *s))
}

/// The summary a schemathesis run ends with (from its `SUMMARY` line).
fn summary(output: &str) -> &str {
    output.find("SUMMARY").map_or(output, |i| &output[i..])
}

/// The request method, path and response status of a HAR entry.
fn entry(e: &Value) -> (String, String, u64) {
    let url = e["request"]["url"].as_str().unwrap_or_default();
    let path = url
        .splitn(4, '/')
        .nth(3)
        .map(|p| format!("/{p}"))
        .unwrap_or_default();
    let path = path.split('?').next().unwrap_or_default().to_string();
    let method = e["request"]["method"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (method, path, e["response"]["status"].as_u64().unwrap_or(0))
}

#[test]
fn schemathesis_finds_every_answer_documented_and_every_unauthenticated_call_401() {
    let rig = Rig::start();
    let dir = test_dir("tollgate-openapi-");
    let admin = rig.gw.admin_addr();
    let ops = operations(&document());
    // The blocks the document's examples of GET and DELETE name, so each answers a 200.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for target in [
        "ip/192.0.2.1",
        "ip/192.0.2.2",
        "tenant/blocked-get",
        "tenant/blocked-delete",
        "key/key_00000000000000a1",
        "key/key_00000000000000a2",
    ] {
        let path = format!("/v1/blocks/{target}");
        let body = json!({ "reason": "the document's example" });
        runtime
            .block_on(common::admin::admin(admin, "PUT", &path, Some(&body)))
            .expect_ok();
    }

    // The keys the document's examples of GET, DELETE and rotate name (ids are random when
    // issued through the API, so they are written to the store as the API writes them).
    let mut conn = rig.redis.conn();
    for (i, id) in [
        "key_00000000000000b1",
        "key_00000000000000b2",
        "key_00000000000000b3",
    ]
    .iter()
    .enumerate()
    {
        let record = json!({"id": id, "tenant": "acme", "tier": "free", "name": format!("ex{i}"),
            "created_at": 1, "digest": format!("{i:064}")});
        let _: () = redis::cmd("SET")
            .arg(format!("tollgate:{{live:store}}:id:{id}"))
            .arg(record.to_string())
            .query(&mut conn)
            .expect("SET key record");
    }

    // Beyond the answers' conformance: valid inputs are accepted and invalid ones refused with
    // a 4xx, undocumented methods are a 405 with `Allow`, and the token is not ignored.
    let checks = "not_a_server_error,status_code_conformance,content_type_conformance,\
                  response_headers_conformance,response_schema_conformance,\
                  positive_data_acceptance,negative_data_rejection,unsupported_method,\
                  allow_header_conformance,missing_required_header,ignored_auth";
    let bearer = format!("Authorization: Bearer {ADMIN_TOKEN}");
    let (seen, output) = schemathesis(dir.path(), "authenticated", admin, checks, &["-H", &bearer]);
    for (method, template) in &ops {
        assert!(
            called(&seen, method, template, Some(200)),
            "no 200 for {method} {template}:\n{output}"
        );
    }
    assert!(seen.iter().all(|(_, _, s)| *s < 500), "a 5xx:\n{output}");

    // Without the token: every answer is the documented 401 (schemathesis checks its shape).
    let checks = "not_a_server_error,status_code_conformance,content_type_conformance,\
                  response_headers_conformance,response_schema_conformance";
    let (seen, output) = schemathesis(dir.path(), "unauthenticated", admin, checks, &[]);
    for (method, template) in &ops {
        assert!(
            called(&seen, method, template, None),
            "{method} {template} was not called:\n{output}"
        );
    }
    let not_401: Vec<_> = seen.iter().filter(|(_, _, s)| *s != 401).collect();
    assert!(
        not_401.is_empty(),
        "answered without the token: {not_401:?}"
    );
}
