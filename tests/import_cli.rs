//! `tollgate import envoy-ratelimit FILE...` as an operator runs it: the envoyproxy/ratelimit
//! README's examples (`tests/fixtures/envoy-ratelimit/`) become `limits:` YAML that
//! `tollgate check` accepts in a gateway file, with what cannot be carried over named on stderr.

mod common;

use common::*;
use std::process::Command;

fn fixtures() -> Vec<String> {
    (1..=6)
        .map(|i| {
            format!(
                "{}/tests/fixtures/envoy-ratelimit/example{i}.yaml",
                env!("CARGO_MANIFEST_DIR")
            )
        })
        .collect()
}

#[test]
fn the_upstream_examples_import_into_a_valid_config() {
    let out = Command::new(GATEWAY_BIN)
        .args(["import", "envoy-ratelimit"])
        .args(fixtures())
        .output()
        .expect("run tollgate import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).expect("utf-8");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("not carried over:").count(), 3, "{stderr}");
    assert!(stderr.contains("replaces"), "{stderr}");
    let rules = yaml.lines().filter(|l| l.starts_with("  - ")).count();
    assert_eq!(rules, 11, "{yaml}");
    let config = format!(
        "{}{}decision: {{ grpc: {{ listen: \"127.0.0.1:1\" }} }}\n",
        GatewayConfig::echo("127.0.0.1:2", "optional")
            .redis("redis://127.0.0.1:6379", "on_failure: open")
            .yaml(),
        yaml
    );
    let checked = check_config(&config);
    assert_eq!(checked.code(), Some(0), "{}\n{config}", checked.all());
}

#[test]
fn a_bad_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "descriptors: []\n").expect("write");
    let out = Command::new(GATEWAY_BIN)
        .args(["import", "envoy-ratelimit"])
        .arg(&bad)
        .output()
        .expect("run tollgate import");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yaml: `domain` is required"),
        "{stderr}"
    );
}
