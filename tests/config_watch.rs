//! `reload: { watch: true }`: a change of the config file reloads as SIGHUP does, the way
//! Kubernetes updates a mounted ConfigMap (a new `..<timestamp>` folder, then the `..data` symlink
//! swapped to it by a rename) and the way an editor saves (write a new file, rename it over the
//! old one). A bad file is refused and the running config stays. Black-box: a real
//! `redis-server`, a real backend and the real gateway, no SIGHUP sent.
//!
//! Determinism: the tier refills ~never, so `q=` of `RateLimit-Policy` says which config is
//! running; every change is waited for through `tollgate_config_reloads_total`.

mod common;

use common::*;
use std::path::Path;
use std::time::Duration;

const RELOADS_OK: &str = "tollgate_config_reloads_total{result=\"ok\"}";
const RELOADS_ERR: &str = "tollgate_config_reloads_total{result=\"error\"}";

/// Tenants `t0` … `t9`, with keys `key-0` … `key-9`: each check uses a tenant of its own, so a
/// full bucket shows the running burst.
const TENANTS: usize = 10;

/// A watched config whose tier `T` has burst `burst`.
fn config(redis: &RedisServer, backend: &Backend, burst: u64) -> String {
    let mut c = GatewayConfig::echo(&backend.addr(), "optional")
        .redis(&redis.url(), "timeout_ms: 1000")
        .tier("T", &format!("{{ limit: 1, per: 1d, burst: {burst} }}"))
        .section("reload", "{ watch: true, debounce: 200ms }");
    for i in 0..TENANTS {
        c = c.api_key(&format!("key-{i}"), &format!("t{i}"), "T");
    }
    c.yaml()
}

/// `q=` of the `RateLimit-Policy` of one request as tenant `t<n>`.
async fn policy_q(gw: &Gateway, n: usize) -> u64 {
    let r = try_get_with_key(&client(), &gw.url("/q"), Some(&format!("key-{n}")))
        .await
        .expect("GET /q");
    assert_eq!(r.status, 200, "{r:?}");
    let field = r.header("ratelimit-policy").expect("RateLimit-Policy");
    field
        .split(';')
        .find_map(|p| p.strip_prefix("q="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no q= in {field}"))
}

/// Waits until the reload counter `series` moved past `before` and returns its new value.
async fn counted(gw: &Gateway, series: &str, before: f64) -> f64 {
    let moved = eventually(Duration::from_secs(10), || {
        gw.metric_or_zero(series) > before
    })
    .await;
    assert!(
        moved,
        "{series} did not move; log tail:\n{}",
        gw.log_tail(20)
    );
    gw.metric_or_zero(series)
}

/// What the kubelet does for a ConfigMap volume: the content in a new hidden folder, then
/// `..data` pointed at it by renaming a fresh symlink over it (one atomic step).
fn configmap_update(dir: &Path, version: &str, content: &str) {
    let folder = dir.join(format!("..{version}"));
    std::fs::create_dir(&folder).expect("create ..<version>");
    std::fs::write(folder.join("gateway.yaml"), content).expect("write gateway.yaml");
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).expect("symlink ..data_tmp");
    std::fs::rename(&tmp, dir.join("..data")).expect("rename ..data_tmp over ..data");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configmap_swap_reloads_and_a_bad_one_keeps_the_running_config() {
    let redis = RedisServer::start();
    let backend = Backend::start("b1");
    let gw = Gateway::start(&config(&redis, &backend, 3));
    assert_eq!(policy_q(&gw, 1).await, 3);
    let render = |yaml: &str| render(yaml, gw.listen_addr(), gw.admin_addr());

    // Turn the plain file into a ConfigMap mount, same content: gateway.yaml -> ..data/gateway.yaml.
    let dir = gw.dir().to_path_buf();
    let same = std::fs::read_to_string(gw.config_path()).expect("read gateway.yaml");
    configmap_update(&dir, "2026_12_03_01", &same);
    let link = dir.join("gateway.yaml.link");
    std::os::unix::fs::symlink("..data/gateway.yaml", &link).expect("symlink gateway.yaml");
    std::fs::rename(&link, gw.config_path()).expect("gateway.yaml as a symlink");
    let ok = gw.metric_or_zero(RELOADS_OK);

    // A new version: burst 5.
    configmap_update(&dir, "2026_12_03_02", &render(&config(&redis, &backend, 5)));
    let ok = counted(&gw, RELOADS_OK, ok).await;
    assert_eq!(policy_q(&gw, 2).await, 5);

    // A broken version is refused; burst 5 stays and requests are served.
    let err = gw.metric_or_zero(RELOADS_ERR);
    configmap_update(&dir, "2026_12_03_03", "listen: [\"{not yaml");
    assert_eq!(counted(&gw, RELOADS_ERR, err).await, err + 1.0);
    assert_eq!(gw.metric_or_zero(RELOADS_OK), ok);
    assert_eq!(policy_q(&gw, 3).await, 5);

    // Fixed: burst 7.
    configmap_update(&dir, "2026_12_03_04", &render(&config(&redis, &backend, 7)));
    assert_eq!(counted(&gw, RELOADS_OK, ok).await, ok + 1.0);
    assert_eq!(policy_q(&gw, 4).await, 7);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_editors_rename_over_the_file_reloads() {
    let redis = RedisServer::start();
    let backend = Backend::start("b1");
    let gw = Gateway::start(&config(&redis, &backend, 3));
    assert_eq!(policy_q(&gw, 5).await, 3);
    let ok = gw.metric_or_zero(RELOADS_OK);

    let tmp = gw.dir().join(".gateway.yaml.swp");
    let new = render(
        &config(&redis, &backend, 4),
        gw.listen_addr(),
        gw.admin_addr(),
    );
    std::fs::write(&tmp, new).expect("write the new file");
    std::fs::rename(&tmp, gw.config_path()).expect("rename over gateway.yaml");

    assert_eq!(counted(&gw, RELOADS_OK, ok).await, ok + 1.0);
    assert_eq!(policy_q(&gw, 6).await, 4);
}
