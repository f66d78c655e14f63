//! Issue 16 point 4: the Grafana dashboard (`deploy/grafana/tollgate.json`) and the alert rules
//! (`deploy/prometheus/alerts.yml`) checked by a real Prometheus scraping a real tollgate (real
//! redis-server and backend) under a little traffic, plus `promtool check rules` / `promtool test
//! rules` on the alerts.
//!
//! Prometheus and promtool come from the Debian package `prometheus` (`.ci/run` installs it). When
//! they are absent these tests say so and pass, except under CI (`CI` set), where they fail.
//! Nothing here asserts a duration: data is polled for with a generous deadline.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/grafana/tollgate.json");
const ALERTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prometheus/alerts.yml");
const ALERTS_TEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/deploy/prometheus/alerts_test.yml"
);

/// What Grafana's `$__rate_interval` becomes in these queries (the scrape interval is 1 s, and
/// the traffic below keeps every rate above zero over this window).
const RATE_INTERVAL: &str = "30s";

/// The path of `name` on `PATH`, or `None` (after printing why the test is skipped). Under CI a
/// missing tool is a failure: CI installs the package, so it must never skip.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "`{name}` is not installed; CI must install the Debian package `prometheus`"
        );
        eprintln!(
            "SKIPPED: `{name}` not found on PATH; install it with `apt-get install prometheus` \
             to run this test"
        );
    }
    found
}

fn run_tool(bin: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn alert_rules_pass_promtool_check_and_unit_tests() {
    let Some(promtool) = tool("promtool") else {
        return;
    };
    let (ok, out) = run_tool(&promtool, &["check", "rules", ALERTS]);
    assert!(ok, "promtool check rules {ALERTS}:\n{out}");
    assert!(out.contains("SUCCESS: 3 rules found"), "{out}");
    // The unit tests: a two-second Redis blip stays silent, a two-minute outage fires, a
    // rejected reload fires until a good one follows.
    let (ok, out) = run_tool(&promtool, &["test", "rules", ALERTS_TEST]);
    assert!(ok, "promtool test rules {ALERTS_TEST}:\n{out}");
    assert!(out.contains("SUCCESS"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// A real Prometheus
// ---------------------------------------------------------------------------------------------

/// `prometheus` on a free loopback port with its own config and data directory, scraping the
/// given targets every second and evaluating `alerts.yml`. Killed on drop.
struct Prometheus {
    addr: String,
    dir: tempfile::TempDir,
    child: Child,
    http: reqwest::Client,
}

impl Prometheus {
    fn start(bin: &Path, targets: &[&str]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tollgate-prom-")
            .tempdir()
            .expect("temp dir");
        let targets: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
        let config = format!(
            "global: {{ scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s }}\n\
             rule_files: [\"{ALERTS}\"]\n\
             scrape_configs:\n\
             \x20 - job_name: tollgate\n\
             \x20   static_configs: [{{ targets: [{}] }}]\n",
            targets.join(", ")
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let addr = free_addr();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let prom = Prometheus {
            addr,
            dir,
            child,
            http: http(),
        };
        let ready = wait_until(Duration::from_secs(60), || {
            http_get(&prom.addr, "/-/ready").is_ok_and(|r| r.status == 200)
        });
        assert!(ready, "prometheus not ready; log:\n{}", prom.log_tail());
        prom
    }

    fn log_tail(&self) -> String {
        tail_file(&self.dir.path().join("prometheus.log"), 30)
    }

    /// `GET /api/v1/<path>` with query parameters; the decoded JSON (any HTTP status: Prometheus
    /// answers a query it cannot parse with 400 and `"status": "error"`).
    async fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let url =
            reqwest::Url::parse_with_params(&format!("http://{}/api/v1/{path}", self.addr), params)
                .expect("query URL");
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .unwrap_or_else(|e| panic!("prometheus {path}: {e}"));
        resp.json()
            .await
            .unwrap_or_else(|e| panic!("prometheus {path}: not JSON: {e}"))
    }

    /// Runs an instant query; `Err` carries Prometheus's error (a query that does not parse).
    async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let v = self.api("query", &[("query", expr)]).await;
        if v["status"] != "success" {
            return Err(format!("{}: {}", v["errorType"], v["error"]));
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True when some sample of an instant-vector result is a finite number (not NaN/Inf).
fn has_finite_value(result: &[Value]) -> bool {
    result.iter().any(|series| {
        series["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(f64::is_finite)
    })
}

// ---------------------------------------------------------------------------------------------
// The dashboard's queries
// ---------------------------------------------------------------------------------------------

/// One query of the dashboard: where it is and its PromQL with Grafana's variables replaced.
struct PanelQuery {
    place: String,
    expr: String,
}

/// Grafana variables the dashboard uses, replaced as Grafana would with "All" instances.
fn expand(expr: &str) -> String {
    expr.replace("$__rate_interval", RATE_INTERVAL)
        .replace("$instance", ".*")
}

/// Every panel target (rows included, recursively) and every annotation query of the dashboard.
/// Panics when a non-row panel has no query.
fn dashboard_queries(dashboard: &Value) -> Vec<PanelQuery> {
    fn walk(panels: &[Value], out: &mut Vec<PanelQuery>) {
        for panel in panels {
            let title = panel["title"].as_str().unwrap_or("?");
            if panel["type"] == "row" {
                walk(panel["panels"].as_array().map_or(&[], |v| v), out);
                continue;
            }
            let targets = panel["targets"].as_array().map_or(&[][..], |v| v);
            assert!(!targets.is_empty(), "panel {title:?} has no query");
            for t in targets {
                let expr = t["expr"]
                    .as_str()
                    .unwrap_or_else(|| panic!("panel {title:?}: a target without expr"));
                out.push(PanelQuery {
                    place: format!("panel {title:?} ref {}", t["refId"]),
                    expr: expand(expr),
                });
            }
        }
    }
    let mut out = Vec::new();
    walk(
        dashboard["panels"].as_array().expect("dashboard.panels"),
        &mut out,
    );
    for a in dashboard["annotations"]["list"]
        .as_array()
        .map_or(&[][..], |v| v)
    {
        if let Some(expr) = a["expr"].as_str() {
            out.push(PanelQuery {
                place: format!("annotation {}", a["name"]),
                expr: expand(expr),
            });
        }
    }
    // `label_values(metric, label)` variables: the metric must carry the label.
    for v in dashboard["templating"]["list"]
        .as_array()
        .map_or(&[][..], |v| v)
    {
        if let Some(def) = v["definition"].as_str() {
            let inner = def
                .strip_prefix("label_values(")
                .and_then(|s| s.strip_suffix(')'))
                .unwrap_or_else(|| panic!("variable {}: unexpected query {def}", v["name"]));
            let (metric, label) = inner.split_once(',').expect("label_values(metric, label)");
            out.push(PanelQuery {
                place: format!("variable {}", v["name"]),
                expr: format!("count by ({}) ({})", label.trim(), metric.trim()),
            });
        }
    }
    out
}

/// The `expr` of every rule in alerts.yml.
fn alert_exprs() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(ALERTS).expect("read alerts.yml");
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("alerts.yml is YAML");
    let mut out = Vec::new();
    for group in doc["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            out.push((
                rule["alert"].as_str().expect("alert name").to_string(),
                rule["expr"].as_str().expect("expr").to_string(),
            ));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The gateway under test and its traffic
// ---------------------------------------------------------------------------------------------

const FREE_KEY: &str = "obs-free-key";
const PRO_KEY: &str = "obs-pro-key";

/// Edge: a few client addresses over `max_clients: 2` so entries are evicted. Redis: a breaker
/// that opens after 3 calls and half-opens after 1 s. Tiers: `free` runs out after 3 requests
/// (near-limit, then limited), `pro` never does; both fall back to local buckets. One upstream
/// slot and a queue, so concurrent slow requests wait for a slot.
fn gateway_config(redis_url: &str, backend: &str) -> GatewayConfig {
    GatewayConfig::new()
        .redis(
            redis_url,
            "timeout_ms: 50, on_failure: local, \
             circuit_breaker: { min_calls: 3, failure_ratio: 0.5, window_s: 10, break_s: 1, probes: 1 }",
        )
        .edge("{ limit: 1000, per: 1s, burst: 1000, max_clients: 2 }")
        .api_key(FREE_KEY, "obs-free", "free")
        .api_key(PRO_KEY, "obs-pro", "pro")
        .tier("free", "{ limit: 1, per: 1h, burst: 3 }")
        .tier("pro", "{ limit: 1000, per: 1s, burst: 1000 }")
        .upstream_with(
            "echo",
            backend,
            "max_concurrency: 1, queue: { max: 2, timeout_ms: 5000 }",
        )
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
}

/// Until `stop`: every ~200 ms a `pro` request from one of 127.0.0.2..6 (edge evictions) and a
/// `free` one (limited); every ~1 s four concurrent slow `pro` requests: one takes the upstream
/// slot, two wait in its queue (`queue.max: 2`), the fourth is refused (`queue_full`), so the
/// queue-wait and rejection panels get data from the traffic itself, not from a chance overlap
/// with the Redis blip's requests. Bounded by `stop` and by 10 minutes.
async fn background_traffic(gw_url: String, stop: Arc<AtomicBool>) {
    let clients: Vec<reqwest::Client> = (2..=6)
        .map(|i| http_from(&format!("127.0.0.{i}")))
        .collect();
    let started = Instant::now();
    let mut round = 0usize;
    while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(600) {
        let c = &clients[round % clients.len()];
        let _ = try_get_with_key(c, &format!("{gw_url}/bg"), Some(PRO_KEY)).await;
        let _ = try_get_with_key(c, &format!("{gw_url}/bg"), Some(FREE_KEY)).await;
        if round.is_multiple_of(5) {
            let slow = format!("{gw_url}/slow?delay_ms=150");
            let _ = tokio::join!(
                try_get_with_key(&clients[0], &slow, Some(PRO_KEY)),
                try_get_with_key(&clients[1], &slow, Some(PRO_KEY)),
                try_get_with_key(&clients[2], &slow, Some(PRO_KEY)),
                try_get_with_key(&clients[3], &slow, Some(PRO_KEY)),
            );
        }
        round += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_and_alert_runs_on_real_prometheus() {
    let Some(prometheus) = tool("prometheus") else {
        return;
    };
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(DASHBOARD).expect("read dashboard"))
            .expect("dashboard is JSON");
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 20, "only {} queries", queries.len());

    let redis = RedisServer::start();
    let backend = Backend::start("obs-echo");
    let config = gateway_config(&redis.url(), &backend.addr());
    let yaml = config.yaml();
    let gw = Gateway::start(&yaml);
    let prom = Prometheus::start(&prometheus, &[gw.admin_addr()]);

    let stop = Arc::new(AtomicBool::new(false));
    let traffic = tokio::spawn(background_traffic(gw.url(""), stop.clone()));

    // Prometheus scrapes the gateway.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let up = prom.query("up{job=\"tollgate\"} == 1").await.expect("up");
        if !up.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "prometheus never scraped the gateway; log:\n{}",
            prom.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A Redis blip: frozen until the breaker opens (tenant decisions fall back to local
    // buckets, calls time out), then thawed; the breaker half-opens after 1 s and closes.
    let http = http();
    redis.pause();
    let mut sent = 0;
    while gw.metric_or_zero("tollgate_redis_breaker_state") != 1.0 {
        assert!(sent < 200, "the breaker never opened:\n{}", gw.metrics());
        let _ = try_get_with_key(&http, &gw.url("/blip"), Some(PRO_KEY)).await;
        sent += 1;
    }
    redis.resume();

    // A good reload, then one the gateway rejects (it keeps running the good config).
    gw.reload(&yaml);
    assert!(
        eventually(Duration::from_secs(30), || {
            gw.metric_or_zero("tollgate_config_reloads_total{result=\"ok\"}") >= 2.0
        })
        .await,
        "reload not counted:\n{}",
        gw.log_tail(20)
    );
    gw.reload(
        &config
            .tier("free", "{ limit: 1, per: 1h, burst: -3 }")
            .yaml(),
    );
    assert!(
        eventually(Duration::from_secs(30), || {
            gw.metric_or_zero("tollgate_config_reloads_total{result=\"error\"}") >= 1.0
        })
        .await,
        "rejected reload not counted:\n{}",
        gw.log_tail(20)
    );
    assert_eq!(
        gw.metric("tollgate_config_last_reload_successful"),
        Some(0.0)
    );

    // Every query parses; every dashboard query returns data (a finite sample) before the
    // deadline; every alert expression parses too.
    for (name, expr) in alert_exprs() {
        if let Err(e) = prom.query(&expr).await {
            panic!("alert {name}: Prometheus rejects its expr: {e}\n{expr}");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut missing: Vec<&PanelQuery> = queries.iter().collect();
    while !missing.is_empty() {
        let mut still = Vec::new();
        for q in missing {
            match prom.query(&q.expr).await {
                Err(e) => panic!("{}: Prometheus rejects the query: {e}\n{}", q.place, q.expr),
                Ok(result) if has_finite_value(&result) => {}
                Ok(_) => still.push(q),
            }
        }
        missing = still;
        if missing.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let list: Vec<String> = missing
                .iter()
                .map(|q| format!("  {}: {}", q.place, q.expr))
                .collect();
            panic!(
                "dashboard queries without data:\n{}\ngateway metrics:\n{}",
                list.join("\n"),
                gw.metrics()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // Prometheus loaded and evaluated the alert rules without error.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rules = prom.api("rules", &[]).await;
        let all: Vec<Value> = rules["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        let healthy = all.iter().filter(|r| r["health"] == "ok").count();
        if all.len() == alert_exprs().len() && healthy == all.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "alert rules not all healthy in Prometheus: {rules}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    stop.store(true, Ordering::Relaxed);
    let _ = traffic.await;
}
