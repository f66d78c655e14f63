//! The admin commands of the command line (docs/admin-api.md#command-line), black-box: the real
//! `tollgate` binary as the CLI, against a real gateway (`redis-server`, the echo backend) and
//! its admin API. Exit codes: 0 success, 1 the API answered an error, 2 usage, 3 unreachable.

mod common;

use common::admin::*;
use common::*;
use serde_json::Value;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const TIERS: &str = "  free: { limit: 1, per: 1h, burst: 1000 }\n";

fn start() -> (RedisServer, Backend, Gateway) {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::new()
        .redis(&redis.url(), STRICT_REDIS)
        .tier_lines(TIERS)
        .admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: {ADMIN_TOKEN_ENV} }}"
        ))
        .api_key(&api_key_of("acme"), "acme", "free")
        .upstream("echo", &backend.addr())
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .raw("store: { blocks: true }\n")
        .yaml();
    let gw = Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)]);
    (redis, backend, gw)
}

/// `tollgate <args>` against `gw`'s admin API (URL by flag, token by environment).
fn cli(gw: &Gateway, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(args)
        .args(["--admin-url", &format!("http://{}", gw.admin_addr())])
        .env("TOLLGATE_ADMIN_TOKEN", ADMIN_TOKEN)
        .env_remove("TOLLGATE_ADMIN_URL")
        .output()
        .expect("run tollgate")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_of(o: &Output) -> Value {
    assert_eq!(code(o), 0, "stderr: {}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("--json prints JSON")
}

/// Polls until a request from `from` with `key` is answered `status` (generous deadline).
async fn becomes(gw: &Gateway, from: &str, key: &str, status: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = try_get_with_key(&http_from(from), &gw.url("/"), Some(key))
            .await
            .expect("proxied request");
        if r.status == status {
            return true;
        }
        if Instant::now() > deadline {
            eprintln!("last reply: {r:?}");
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_created_used_listed_and_revoked_from_the_command_line() {
    let (_redis, _backend, gw) = start();
    let created = json_of(&cli(
        &gw,
        &[
            "keys", "create", "--tenant", "cli-co", "--tier", "free", "--name", "ci", "--json",
        ],
    ));
    let secret = created["secret"].as_str().expect("secret").to_string();
    let id = created["id"].as_str().expect("id").to_string();
    assert!(becomes(&gw, "127.0.0.1", &secret, 200).await);

    let listed = cli(&gw, &["keys", "list", "--tenant", "cli-co"]);
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    let out = stdout(&listed);
    assert!(
        out.starts_with("NAME") && out.contains(&id) && out.contains("active"),
        "{out}"
    );

    let rotated = json_of(&cli(
        &gw,
        &["keys", "rotate", &id, "--grace", "1h", "--json"],
    ));
    let newer = rotated["secret"].as_str().expect("secret").to_string();
    assert!(becomes(&gw, "127.0.0.1", &newer, 200).await);

    let revoked = cli(&gw, &["keys", "revoke", &id]);
    assert_eq!(code(&revoked), 0, "{}", stderr(&revoked));
    assert!(stdout(&revoked).starts_with(&format!("revoked {id}")));
    assert!(becomes(&gw, "127.0.0.1", &newer, 401).await);
    assert!(becomes(&gw, "127.0.0.1", &secret, 401).await);

    // The API's refusal: exit 1, its detail on stderr.
    let again = cli(
        &gw,
        &[
            "keys", "create", "--tenant", "cli-co", "--tier", "gold", "--name", "x",
        ],
    );
    assert_eq!(code(&again), 1);
    assert!(stderr(&again).contains("tier"), "{}", stderr(&again));
    let missing = cli(&gw, &["keys", "revoke", "key_0000000000000000"]);
    assert_eq!(code(&missing), 1);
    assert!(
        stderr(&missing).contains("no such key"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_blocked_listed_and_removed_from_the_command_line() {
    let (_redis, _backend, gw) = start();
    let key = api_key_of("acme");
    let added = cli(
        &gw,
        &[
            "blocks",
            "add",
            "ip",
            "127.0.0.8/30",
            "--reason",
            "scraping",
            "--for",
            "1h",
        ],
    );
    assert_eq!(code(&added), 0, "{}", stderr(&added));
    assert!(stdout(&added).starts_with("blocked ip 127.0.0.8/30 (scraping) until"));
    assert!(becomes(&gw, "127.0.0.9", &key, 403).await);
    assert!(becomes(&gw, "127.0.0.12", &key, 200).await);

    let listed = json_of(&cli(&gw, &["blocks", "list", "--json"]));
    assert_eq!(listed["blocks"][0]["value"], "127.0.0.8/30");
    let table = stdout(&cli(&gw, &["blocks", "list", "--type", "ip"]));
    assert!(
        table.starts_with("TYPE") && table.contains("scraping"),
        "{table}"
    );

    let removed = cli(&gw, &["blocks", "remove", "ip", "127.0.0.8/30"]);
    assert_eq!(code(&removed), 0, "{}", stderr(&removed));
    assert!(becomes(&gw, "127.0.0.9", &key, 200).await);

    // Refused by the API (exit 1): a malformed network, a block that is not there.
    let bad = cli(
        &gw,
        &["blocks", "add", "ip", "10.0.0.0/33", "--reason", "x"],
    );
    assert_eq!(code(&bad), 1);
    assert!(stderr(&bad).contains("value"), "{}", stderr(&bad));
    let gone = cli(&gw, &["blocks", "remove", "ip", "127.0.0.8/30"]);
    assert_eq!(code(&gone), 1);
    // Usage (exit 2): an unknown type, a missing reason, a bad duration.
    for args in [
        &["blocks", "add", "cidr", "10.0.0.0/8", "--reason", "x"][..],
        &["blocks", "add", "ip", "10.0.0.0/8"][..],
        &[
            "blocks",
            "add",
            "ip",
            "10.0.0.0/8",
            "--reason",
            "x",
            "--for",
            "soon",
        ][..],
    ] {
        assert_eq!(code(&cli(&gw, args)), 2, "{args:?}");
    }
}

#[test]
fn an_unreachable_admin_api_is_exit_3() {
    let port = free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["keys", "list", "--tenant", "acme"])
        .env("TOLLGATE_ADMIN_URL", format!("http://127.0.0.1:{port}"))
        .output()
        .expect("run tollgate");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("unreachable"), "{}", stderr(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args([
            "blocks",
            "list",
            "--admin-url",
            &format!("http://127.0.0.1:{port}"),
        ])
        .output()
        .expect("run tollgate");
    assert_eq!(out.status.code(), Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_exit_1_with_the_api_detail() {
    let (_redis, _backend, gw) = start();
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["blocks", "list", "--token", "wrong"])
        .env("TOLLGATE_ADMIN_URL", format!("http://{}", gw.admin_addr()))
        .output()
        .expect("run tollgate");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("(401)"), "{}", stderr(&out));
}
