//! `gateway.schema.json`: generated from the config structs, shipped in sync with `tollgate
//! schema`, accepting every config we ship and refusing bad ones exactly where `tollgate check`
//! refuses them (issue 16 point 3).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tollgate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run tollgate")
}

fn shipped_schema() -> serde_json::Value {
    let text = std::fs::read_to_string(root().join("gateway.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The schema's complaints about a YAML text (empty when it validates).
fn schema_errors(yaml: &str) -> Vec<String> {
    let schema = shipped_schema();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let instance: serde_json::Value = serde_yaml::from_str(yaml).expect("YAML parses");
    validator
        .iter_errors(&instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// `tollgate check` on a YAML text written next to the repo's files: (exit ok, output).
fn check(yaml: &str, dir: &Path) -> (bool, String) {
    let path = dir.join("gateway.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = tollgate(&["check", "-c", path.to_str().unwrap()]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tollgate-schema-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn shipped_schema_is_what_tollgate_schema_prints() {
    let out = tollgate(&["schema"]);
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    let shipped = std::fs::read_to_string(root().join("gateway.schema.json")).unwrap();
    assert!(
        printed == shipped,
        "gateway.schema.json is stale: run `tollgate schema > gateway.schema.json`"
    );
    let yaml = std::fs::read_to_string(root().join("gateway.yaml")).unwrap();
    assert!(
        yaml.starts_with("# yaml-language-server: $schema=./gateway.schema.json\n"),
        "gateway.yaml must reference the schema on its first line for editor completion"
    );
}

/// The shipped configs: `gateway.yaml`, the compose demo's config (service names mapped to
/// loopback for `check`, as scripts/check-compose.py does), and the demo template rendered for
/// both demo instances. Each passes the schema and `tollgate check`.
#[test]
fn every_shipped_and_example_config_passes_the_schema_and_check() {
    let dir = temp_dir("shipped");
    let mut configs = vec![(
        "gateway.yaml".to_string(),
        std::fs::read_to_string(root().join("gateway.yaml")).unwrap(),
    )];
    let compose = std::fs::read_to_string(root().join("demo/compose-gateway.yaml")).unwrap();
    let compose = compose
        .replace("\"echo-1:", "\"127.0.0.1:")
        .replace("\"echo-2:", "\"127.0.0.1:")
        .replace("redis://redis:", "redis://127.0.0.1:")
        .replace(
            "demo/jwt-hs256.secret",
            root().join("demo/jwt-hs256.secret").to_str().unwrap(),
        );
    configs.push(("demo/compose-gateway.yaml".into(), compose));
    let cert = Command::new(root().join("scripts/demo-cert.sh"))
        .arg(&dir)
        .output()
        .expect("scripts/demo-cert.sh");
    assert!(cert.status.success(), "{cert:?}");
    std::fs::copy(
        root().join("demo/jwt-hs256.secret"),
        dir.join("jwt-hs256.secret"),
    )
    .unwrap();
    for (n, port) in [(1, 18080), (2, 18081)] {
        let out = Command::new(root().join("scripts/render-template.sh"))
            .arg(root().join("demo/gateway.demo.yaml.tmpl"))
            .args([
                format!("N={n}"),
                format!("GW_PORT={port}"),
                format!("TLS_PORT={}", port + 363),
                format!("ADMIN_PORT={}", port + 1010),
                "EDGE_BURST=20".into(),
                format!("WORK={}", dir.display()),
                "REDIS_TARGET=url: \"redis://127.0.0.1:16379/0\"".into(),
                "REDIS_TIMEOUT_MS=50".into(),
                "ECHO1_PORT=19001".into(),
                "ECHO2_PORT=19002".into(),
            ])
            .output()
            .expect("scripts/render-template.sh");
        assert!(out.status.success(), "{out:?}");
        configs.push((
            format!("demo/gateway.demo.yaml.tmpl (instance {n})"),
            String::from_utf8(out.stdout).unwrap(),
        ));
    }
    assert_eq!(configs.len(), 4);
    for (name, yaml) in &configs {
        let errors = schema_errors(yaml);
        assert!(errors.is_empty(), "{name} fails the schema: {errors:#?}");
        let (ok, out) = check(yaml, &dir);
        assert!(ok, "{name} fails tollgate check: {out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad configs: each is refused by the schema AND by `check`, and `check` names the field the
/// schema points at.
#[test]
fn bad_configs_are_refused_by_both_the_schema_and_check() {
    let dir = temp_dir("bad");
    let base = |tier: &str, route: &str| {
        format!(
            "listen: [\"127.0.0.1:18999\"]\n\
             redis: {{ url: \"redis://127.0.0.1:16379/0\" }}\n\
             tiers:\n  free: {tier}\n\
             upstreams:\n  echo: {{ backends: [\"127.0.0.1:19001\"] }}\n\
             routes:\n  - {route}\n"
        )
    };
    let good_tier = "{ limit: 10, per: 1m, burst: 5 }";
    let good_route = "{ path_prefix: \"/\", upstream: echo }";
    let (ok, out) = check(&base(good_tier, good_route), &dir);
    assert!(ok, "the base config must pass: {out}");
    assert!(schema_errors(&base(good_tier, good_route)).is_empty());

    // (yaml, field the schema's error points at, field check names)
    let cases = [
        (
            base(
                "{ limit: 10, per: 1m, algorithm: token_buckets }",
                good_route,
            ),
            "/tiers/free/algorithm",
            "tiers.free.algorithm",
        ),
        (
            base("{ limit: 10, per: 1m, burst: 0 }", good_route),
            "/tiers/free/burst",
            "tiers.free.burst",
        ),
        (
            base("{ limit: 10, per: \"5\" }", good_route),
            "/tiers/free/per",
            "tiers.free.per",
        ),
        (
            base("{ limit: 10, per: 1m, bursts: 5 }", good_route),
            "/tiers/free",
            "bursts",
        ),
        (
            base(
                good_tier,
                "{ path_prefix: \"/\", upstream: echo, auth: maybe }",
            ),
            "/routes/0/auth",
            "routes[0].auth",
        ),
        (
            base(
                "{ limit: 10, per: 1m, quotas: [ { limit: 5, period: year } ] }",
                good_route,
            ),
            "/tiers/free/quotas/0/period",
            "tiers.free.quotas[0].period",
        ),
        (
            "listen: [\"127.0.0.1:18999\"]\nroutes: []\n".to_string(),
            "",
            "upstreams",
        ),
    ];
    for (yaml, schema_path, check_field) in &cases {
        let errors = schema_errors(yaml);
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with(&format!("{schema_path}:"))),
            "the schema must refuse at {schema_path:?}: {errors:#?}\n{yaml}"
        );
        let (ok, out) = check(yaml, &dir);
        assert!(!ok, "check must refuse:\n{yaml}");
        assert!(
            out.contains(check_field),
            "check must name {check_field}: {out}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_takes_the_file_as_an_argument_too() {
    let dir = temp_dir("positional");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "listen: [\"127.0.0.1:0\"]\nredis: { timeout_ms: 0 }\n",
    )
    .unwrap();
    assert!(!tollgate(&["check", bad.to_str().unwrap()]).status.success());
    assert!(tollgate(&["check", "gateway.yaml"]).status.success());
    for path in [root().join("gateway.yaml"), bad] {
        let p = path.to_str().unwrap();
        let with_flag = tollgate(&["check", "-c", p]);
        let positional = tollgate(&["check", p]);
        assert_eq!(
            positional.status.success(),
            with_flag.status.success(),
            "{p}"
        );
        assert_eq!(positional.stdout, with_flag.stdout, "{p}");
        assert_eq!(positional.stderr, with_flag.stderr, "{p}");
    }
}
