//! The exact words of `tollgate check` for the config mistakes a new operator makes: plain
//! words instead of Rust type names, a hint at an unclosed flow mapping, a duplicated key at the
//! duplicate's line, a backend written as a URL, a relative file path with the directory it was
//! resolved against. Table-driven: each case is a file and the one problem line it must get.

mod common;

use common::*;
use std::process::{Command, Stdio};

/// One route to one upstream; cases append a section or replace the upstreams.
const BASE: &str = "listen: [\"127.0.0.1:0\"]
upstreams:
  orders: { backends: [\"127.0.0.1:9001\"] }
routes:
  - { path_prefix: \"/\", upstream: orders }
";

/// `tollgate check -c gateway.yaml` run in a fresh directory holding `yaml`: the directory
/// (canonical) and the problem lines (stderr lines after the count line).
fn check_in_dir(yaml: &str) -> (String, Vec<String>) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("gateway.yaml"), yaml).expect("write config");
    let out = Command::new(GATEWAY_BIN)
        .args(["check", "-c", "gateway.yaml"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run tollgate check");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let problems = text
        .lines()
        .filter(|l| !l.contains("problem(s)") && !l.starts_with("warning"))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let canonical = dir.path().canonicalize().expect("canonical dir");
    (canonical.display().to_string(), problems)
}

#[test]
fn config_mistakes_get_plain_exact_messages() {
    let with = |section: &str| format!("{BASE}{section}");
    let upstream = |backends: &str| BASE.replace("[\"127.0.0.1:9001\"]", backends);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "a flow mapping missing its }",
            with("edge: { limit: 20, per: 1s, burst: 40\nidentity:\n  default_tier: basic\n"),
            "edge.burst: a whole number was expected, found the text \"40 identity\" at line 6 column 36 \
             (the flow mapping `{` opened at line 6 is still open here: is its closing `}` missing?)",
        ),
        (
            "a top-level key written twice",
            with("tiers:\n  a: { limit: 1, per: 1s }\nredis: { url: \"redis://127.0.0.1:6379\" }\ntiers:\n  b: { limit: 1, per: 1s }\n"),
            "tiers: is written twice in one mapping: the second `tiers:` is at line 9; YAML keys are unique, so merge the two",
        ),
        (
            "a nested key written twice (flow)",
            with("edge: { limit: 1, per: 1s, limit: 2 }\n"),
            "edge.limit: is written twice in one mapping: the second `limit:` is at line 6; YAML keys are unique, so merge the two",
        ),
        (
            "a nested key written twice (block)",
            with("edge:\n  limit: 1\n  per: 1s\n  limit: 2\n"),
            "edge.limit: is written twice in one mapping: the second `limit:` is at line 9; YAML keys are unique, so merge the two",
        ),
        (
            "a map key written twice (a tier)",
            with("redis: { url: \"redis://127.0.0.1:6379\" }\ntiers:\n  a: { limit: 1, per: 1s }\n  a: { limit: 2, per: 1s }\n"),
            "tiers.a: is written twice in one mapping: the second `a:` is at line 9; YAML keys are unique, so merge the two",
        ),
        (
            "a map key written twice (an upstream, flow)",
            BASE.replace(
                "upstreams:\n  orders: { backends: [\"127.0.0.1:9001\"] }",
                "upstreams: { orders: { backends: [\"127.0.0.1:9001\"] }, orders: { backends: [\"127.0.0.1:9002\"] } }",
            ),
            "upstreams.orders: is written twice in one mapping: the second `orders:` is at line 2; YAML keys are unique, so merge the two",
        ),
        (
            "a backend written as a URL",
            upstream("[\"http://127.0.0.1:18081\"]"),
            "upstreams.orders.backends[0]: \"http://127.0.0.1:18081\": drop the scheme, a backend is host:port \
             (\"127.0.0.1:18081\"); for HTTPS to the backends set upstreams.orders.tls",
        ),
        (
            "a relative secret_file that is not there",
            with("redis: { url: \"redis://127.0.0.1:6379\" }\ntiers: { a: { limit: 1, per: 1s } }\n\
                  identity:\n  default_tier: a\n  jwt: { keys: [{ algorithm: HS256, secret_file: \"secrets/hs.key\" }] }\n"),
            "identity.jwt.keys[0].secret_file: cannot read \"secrets/hs.key\" (a relative path, resolved against \
             the working directory {dir}): No such file or directory (os error 2)",
        ),
        (
            "a fraction where a whole number goes",
            with("edge: { limit: 1.5, per: 1s }\n"),
            "edge.limit: a whole number was expected, found the number 1.5 at line 6 column 16",
        ),
        (
            "a number too large for any field",
            with("edge: { limit: 99999999999999999999999, per: 1s }\n"),
            "edge.limit: a whole number was expected, found the number 99999999999999999999999 at line 6 column 16",
        ),
        (
            "a scalar where a mapping goes",
            BASE.replace("  - { path_prefix: \"/\", upstream: orders }", "  - 5"),
            "routes[0]: a mapping of fields was expected, found the number 5 at line 5 column 5",
        ),
        (
            "a word where true or false goes",
            with("observability: { access_log: maybe }\n"),
            "observability.access_log: true or false was expected, found the text \"maybe\" at line 6 column 30",
        ),
        (
            "a scalar where a list goes",
            with("edge: { limit: 5, per: 1s, exempt: 5 }\n"),
            "edge.exempt: a list was expected, found the number 5 at line 6 column 36",
        ),
        (
            "none of an untagged field's forms",
            with("response: { headers: 5 }\n"),
            "response: expected one of ietf, legacy, both, none, or a list of those that may add openai at line 6 column 11",
        ),
    ];
    let mut wrong = Vec::new();
    for (what, yaml, want) in &cases {
        let (dir, problems) = check_in_dir(yaml);
        let want = want.replace("{dir}", &dir);
        if problems != [want.clone()] {
            wrong.push(format!("{what}:\n  want {want}\n  got  {problems:?}"));
        }
        for p in &problems {
            for rust in ["i64", "u32", "u64", "f64", "struct Raw", "untagged enum"] {
                assert!(!p.contains(rust), "{what}: a Rust type name in {p:?}");
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// An HMAC JWT secret shorter than its hash is accepted with a warning (RFC 7518 section 3.2:
/// at least 32 bytes for HS256); a long enough one draws none.
#[test]
fn a_short_hs256_secret_is_warned_about() {
    let dir = tempfile::tempdir().expect("temp dir");
    let check = |secret: &str| {
        std::fs::write(dir.path().join("hs.key"), format!("{secret}\n")).expect("write secret");
        let yaml = format!(
            "{BASE}redis: {{ url: \"redis://127.0.0.1:6379\" }}\ntiers: {{ a: {{ limit: 1, per: 1s }} }}\n\
             identity:\n  default_tier: a\n  jwt: {{ keys: [{{ algorithm: HS256, secret_file: \"hs.key\" }}] }}\n"
        );
        std::fs::write(dir.path().join("gateway.yaml"), yaml).expect("write config");
        let out = Command::new(GATEWAY_BIN)
            .args(["check", "-c", "gateway.yaml"])
            .current_dir(dir.path())
            .output()
            .expect("run tollgate check");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let short = check("s3cre");
    assert!(
        short.contains(
            "warning: identity.jwt.keys[0].secret_file: a HS256 secret of 5 bytes: RFC 7518 section 3.2 \
             requires at least 32 (the hash size)"
        ),
        "{short}"
    );
    let long = check(&"x".repeat(32));
    assert!(!long.contains("secret"), "{long}");
}
