//! Issue 14, point 4 and the `redis:` contract of docs/DESIGN.md 4b: `mode`, `urls`,
//! `sentinel`, `username_env` / `password_env` (ACL credentials from the environment, never in
//! a log line or a response) and `rediss://` with `tls.ca_file`. Real redis-server processes
//! (ACL users, TLS with a self-signed CA made by `openssl` for the test).

mod common;
#[path = "common/redis_topology.rs"]
mod redis_topology;

use common::*;
use redis_topology::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const TIER: &str = "  t: { limit: 1, per: 1d, burst: 100, on_failure: closed }\n";

fn yaml(redis: &str) -> String {
    ha_gateway_yaml(redis, TIER, &[("acme".to_string(), "t")], "127.0.0.1:9")
}

#[test]
fn redis_mode_fields_are_validated_with_their_path() {
    let cases = [
        (
            "mode: clustr, url: \"redis://h:1\"",
            "redis.mode: \"clustr\" is not a Redis mode",
        ),
        (
            "mode: cluster, url: \"redis://h:1\"",
            "redis.url: is for standalone; mode: cluster takes urls",
        ),
        (
            "mode: cluster",
            "redis.urls: is required with mode: cluster",
        ),
        (
            "mode: cluster, urls: []",
            "redis.urls: needs at least one URL",
        ),
        (
            "mode: cluster, urls: [\"redis://h:1\", \"http://h:2\"]",
            "redis.urls[1]: \"http://h:2\" is not a redis:// or rediss:// URL",
        ),
        (
            "mode: sentinel, urls: [\"redis://h:1\"]",
            "redis.sentinel: is required with mode: sentinel",
        ),
        (
            "url: \"redis://h:1\", sentinel: { master: m }",
            "redis.sentinel: is only valid with mode: sentinel",
        ),
        (
            "mode: sentinel, urls: [\"redis://h:1\"], sentinel: { master: \"\" }",
            "redis.sentinel.master: must not be empty",
        ),
        (
            "urls: [\"redis://h:1\"]",
            "redis.url: is required with mode: standalone",
        ),
        (
            "url: \"redis://user:pw@h:1\"",
            "redis.url: must not carry credentials",
        ),
        (
            "url: \"redis://h:1\", tls: { ca_file: \"/nonexistent/ca.pem\" }",
            "redis.tls: needs rediss:// URLs",
        ),
        (
            "url: \"rediss://h:1\", tls: { ca_file: \"/nonexistent/ca.pem\" }",
            "redis.tls.ca_file: cannot read \"/nonexistent/ca.pem\"",
        ),
        (
            "url: \"redis://h:1\", fleet_size: some",
            "redis.fleet_size: \"some\" is neither a positive number nor auto",
        ),
        (
            "url: \"redis://h:1\", fleet_size: 0",
            "redis.fleet_size: must be greater than zero",
        ),
        (
            "url: \"redis://h:1\", password_env: TOLLGATE_TEST_UNSET_PASSWORD_VAR",
            "redis.password_env: environment variable TOLLGATE_TEST_UNSET_PASSWORD_VAR is not set",
        ),
    ];
    for (redis, want) in cases {
        let out = check_config(&yaml(redis));
        assert_ne!(out.code(), Some(0), "{redis}: accepted\n{}", out.all());
        assert!(
            out.all().contains(want),
            "{redis}: want {want:?} in\n{}",
            out.all()
        );
    }
    for ok in [
        "url: \"redis://h:1\", fleet_size: auto",
        "mode: cluster, urls: [\"redis://h:1\", \"redis://h:2\"]",
        "mode: sentinel, urls: [\"redis://h:1\"], sentinel: { master: m }",
    ] {
        let out = check_config(&yaml(ok));
        assert_eq!(out.code(), Some(0), "{ok}:\n{}", out.all());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_credentials_come_from_the_environment_and_never_reach_the_log() {
    const SECRET: &str = "s3cret-Pass-4f1c";
    const WRONG: &str = "wr0ng-Pass-9a2e";
    let redis = RedisNode::start(&[]);
    redis.acl_user("gw", SECRET, &[]);
    redis.cmd(&["ACL", "SETUSER", "default", "off"]);
    let backend = Backend::start("echo");
    let config = ha_gateway_yaml(
        &format!(
            "url: \"{}\", username_env: TG_REDIS_USER, password_env: TG_REDIS_PASSWORD, \
             timeout_ms: 1000",
            redis.url()
        ),
        TIER,
        &[("acme".to_string(), "t")],
        &backend.addr(),
    );
    let http = http();

    let good = Gateway::start_with_env(
        &config,
        &[("TG_REDIS_USER", "gw"), ("TG_REDIS_PASSWORD", SECRET)],
    );
    let (v, r) = ask(&http, &good.url("/x"), "acme").await;
    assert_eq!(v, Verdict::RedisAdmitted, "{r:?}");
    assert_eq!(r.remaining(), 99);

    let bad = Gateway::start_with_env(
        &config,
        &[("TG_REDIS_USER", "gw"), ("TG_REDIS_PASSWORD", WRONG)],
    );
    for _ in 0..3 {
        let (v, r) = ask(&http, &bad.url("/x"), "acme").await;
        assert_eq!(v, Verdict::FailedClosed, "{r:?}");
        assert!(!r.body.contains(WRONG), "{r:?}");
    }
    assert!(
        wait_until(Duration::from_secs(5), || bad
            .log()
            .contains("redis call failed")),
        "{}",
        bad.log_tail(20)
    );
    let log = bad.log();
    let line = log
        .lines()
        .find(|l| l.contains("redis call failed"))
        .unwrap();
    println!("failing connection logged: {line}");
    assert!(
        line.to_ascii_lowercase().contains("pass"),
        "the reason is given: {line}"
    );
    for gw in [&good, &bad] {
        let log = gw.log();
        assert!(
            !log.contains(SECRET) && !log.contains(WRONG),
            "a password in the log:\n{log}"
        );
        let metrics = gw.metrics();
        assert!(!metrics.contains(SECRET) && !metrics.contains(WRONG));
    }
}

/// A CA and a server certificate for 127.0.0.1, made with the `openssl` command line.
fn make_certs(dir: &Path) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=tollgate-test-ca",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.crt",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_a_ca_file_is_decided_by_redis_and_an_unknown_ca_fails_by_policy() {
    let certs = tempfile::tempdir().expect("dir");
    make_certs(certs.path());
    let p = |f: &str| certs.path().join(f).display().to_string();
    let tls_port = free_port();
    // The plain port stays open only for the harness' PING; the gateway uses TLS.
    let redis = RedisNode::start(&[
        "--tls-port",
        &tls_port.to_string(),
        "--tls-cert-file",
        &p("srv.crt"),
        "--tls-key-file",
        &p("srv.key"),
        "--tls-ca-cert-file",
        &p("ca.crt"),
        "--tls-auth-clients",
        "no",
    ]);
    let backend = Backend::start("echo");
    let url = format!("rediss://127.0.0.1:{tls_port}");
    let keys = [("acme".to_string(), "t")];
    let with_ca = Gateway::start(&ha_gateway_yaml(
        &format!(
            "url: \"{url}\", tls: {{ ca_file: \"{}\" }}, timeout_ms: 1000",
            p("ca.crt")
        ),
        TIER,
        &keys,
        &backend.addr(),
    ));
    let http = http();
    for expected in [99, 98] {
        let (v, r) = ask(&http, &with_ca.url("/x"), "acme").await;
        assert_eq!(v, Verdict::RedisAdmitted, "{r:?}\n{}", with_ca.log_tail(10));
        assert_eq!(r.remaining(), expected);
    }
    let exists: i64 =
        redis::from_redis_value(redis.cmd(&["EXISTS", "tollgate:{acme}:tb"])).unwrap();
    assert_eq!(exists, 1);

    // Without the CA file the system roots do not know the test CA: the handshake fails and
    // the tier's policy answers (never a 500).
    let without_ca = Gateway::start(&ha_gateway_yaml(
        &format!("url: \"{url}\", timeout_ms: 1000"),
        TIER,
        &keys,
        &backend.addr(),
    ));
    let (v, r) = ask(&http, &without_ca.url("/x"), "acme").await;
    assert_eq!(v, Verdict::FailedClosed, "{r:?}");
    assert!(
        wait_until(Duration::from_secs(5), || without_ca
            .log()
            .contains("redis call failed")),
        "{}",
        without_ca.log_tail(10)
    );
}
