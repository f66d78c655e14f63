use super::*;
use crate::config::parse;
use crate::policy::descriptor::applicable;

const BASE: &str = "listen: [\"127.0.0.1:1\"]\nupstreams: { u: { backends: [\"127.0.0.1:2\"] } }\nroutes: [ { path_prefix: \"/\", upstream: u } ]\nredis: { url: \"redis://127.0.0.1:6379\" }\n";

fn fixture(name: &str) -> (String, String) {
    let path = format!(
        "{}/tests/fixtures/envoy-ratelimit/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    (name.to_string(), text)
}

/// Imports `files`, loads the YAML into a config (so tollgate accepts it), and answers which
/// rule names apply to a descriptor of `domain` with `entries`.
struct Loaded {
    config: crate::config::Config,
    imported: Imported,
}

impl Loaded {
    fn of(files: &[&str]) -> Loaded {
        let files: Vec<(String, String)> = files.iter().map(|f| fixture(f)).collect();
        let imported = import(&files).unwrap_or_else(|e| panic!("{e}"));
        let config = parse(&format!("{BASE}{}", imported.yaml()))
            .unwrap_or_else(|e| panic!("{e:?}\n{}", imported.yaml()));
        Loaded { config, imported }
    }

    fn applies(&self, domain: &str, entries: &[(&str, &str)]) -> Vec<(String, u64, u64, bool)> {
        let e: Vec<(String, String)> = entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        applicable(&self.config.limits, domain, &e)
            .into_iter()
            .map(|r| {
                let rule = &self.config.limits[r.index];
                let shadow = rule.mode.is_shadow();
                (rule.name.clone(), rule.rate.limit, rule.rate.per_ms, shadow)
            })
            .collect()
    }
}

fn rule(name: &str, limit: u64, per_ms: u64, shadow: bool) -> (String, u64, u64, bool) {
    (name.to_string(), limit, per_ms, shadow)
}

const DAY: u64 = 86_400_000;

#[test]
fn pinned_values_per_database() {
    let l = Loaded::of(&["example1.yaml"]);
    assert_eq!(
        l.applies("mongo_cps", &[("database", "users")]),
        [rule("mongo_cps-database-users", 500, 1000, false)]
    );
    assert_eq!(
        l.applies("mongo_cps", &[("database", "default")]),
        [rule("mongo_cps-database-default", 500, 1000, false)]
    );
    assert!(l.applies("mongo_cps", &[("database", "other")]).is_empty());
    assert!(l.imported.lost.is_empty(), "{:?}", l.imported.lost);
    assert_eq!(
        l.config.limits[0].algorithm,
        crate::limit::algorithm::Algorithm::FixedWindow
    );
}

#[test]
fn nested_descriptors_and_a_per_number_limit() {
    let l = Loaded::of(&["example2.yaml"]);
    let marketing = l.applies(
        "messaging",
        &[("message_type", "marketing"), ("to_number", "2061111111")],
    );
    assert_eq!(
        marketing,
        [rule(
            "messaging-message_type-marketin-92280220",
            5,
            DAY,
            false
        )]
    );
    assert_eq!(
        l.applies("messaging", &[("to_number", "2061111111")]),
        [rule("messaging-to_number", 100, DAY, false)]
    );
    assert!(l
        .applies(
            "messaging",
            &[("message_type", "transactional"), ("to_number", "1")]
        )
        .is_empty());
    // One bucket per number.
    let key = |n: &str| {
        applicable(
            &l.config.limits,
            "messaging",
            &[("to_number".into(), n.into())],
        )[0]
        .key
        .clone()
    };
    assert_ne!(key("1"), key("2"));
}

#[test]
fn a_zero_limit_is_named_and_left_out() {
    let l = Loaded::of(&["example3.yaml"]);
    assert_eq!(
        l.applies("edge_proxy_per_ip", &[("remote_address", "10.0.0.1")]),
        [rule("edge_proxy_per_ip-remote_address", 10, 1000, false)]
    );
    assert_eq!(l.imported.lost.len(), 1, "{:?}", l.imported.lost);
    assert!(
        l.imported.lost[0].contains("requests_per_unit 0"),
        "{:?}",
        l.imported.lost
    );
    assert!(l
        .imported
        .yaml()
        .starts_with("# not carried over: example3.yaml"));
}

#[test]
fn shadow_mode_and_the_more_specific_value_wins() {
    let l = Loaded::of(&["example4.yaml"]);
    let pinned = l.applies("example4", &[("key", "value"), ("subkey", "subvalue")]);
    assert_eq!(
        pinned,
        [rule("example4-key-value-subkey-subvalue", 300, 1000, true)]
    );
    let other = l.applies("example4", &[("key", "value"), ("subkey", "x")]);
    assert_eq!(
        other,
        [rule("example4-key-value-subkey", 10, 60_000, false)]
    );
}

#[test]
fn unlimited_shadows_the_less_specific_rule() {
    let l = Loaded::of(&["example5.yaml"]);
    let bar = l.applies(
        "example5",
        &[("source_cluster", "proxy"), ("destination_cluster", "bar")],
    );
    assert_eq!(bar.len(), 1);
    assert!(bar[0].3, "unlimited is a shadow rule: never refuses");
    let foo = l.applies(
        "example5",
        &[("source_cluster", "proxy"), ("destination_cluster", "foo")],
    );
    assert_eq!(
        foo,
        [rule(
            "example5-source_cluster-proxy-d-9fdd3811",
            10,
            1000,
            false
        )]
    );
}

#[test]
fn names_replaces_and_detailed_metric_are_named() {
    let l = Loaded::of(&["example6.yaml"]);
    assert_eq!(
        l.applies("example6", &[("key1", "value1")]),
        [rule("limit1", 1, 1000, false)]
    );
    assert_eq!(l.imported.lost.len(), 2, "{:?}", l.imported.lost);
    assert!(l
        .imported
        .lost
        .iter()
        .any(|m| m.contains("replaces [\"limit1\"]")));
    assert!(l
        .imported
        .lost
        .iter()
        .any(|m| m.contains("detailed_metric")));
}

#[test]
fn several_files_import_together_with_unique_names() {
    let all = [
        "example1.yaml",
        "example2.yaml",
        "example3.yaml",
        "example4.yaml",
        "example5.yaml",
        "example6.yaml",
    ];
    let l = Loaded::of(&all);
    assert_eq!(l.config.limits.len(), 11);
    let twice = import(&[fixture("example1.yaml"), fixture("example1.yaml")]).expect("import");
    let names: BTreeSet<&str> = twice
        .rules
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
}

#[test]
fn bad_files_are_errors_naming_the_place() {
    let bad = |text: &str| import(&[("f.yaml".into(), text.into())]).unwrap_err();
    assert!(bad("descriptors: []").contains("`domain` is required"));
    assert!(bad("domain: d\ndescriptors: [ { value: v } ]")
        .contains("descriptors[0]: `key` is required"));
    let unit = bad("domain: d\ndescriptors: [ { key: k, rate_limit: { unit: fortnight, requests_per_unit: 1 } } ]");
    assert!(unit.contains("fortnight"), "{unit}");
    assert!(bad(": : :").contains("not YAML"));
    let unknown = import(&[(
        "f.yaml".into(),
        "domain: d\nextra: 1\ndescriptors: []".into(),
    )])
    .unwrap();
    assert_eq!(unknown.lost, ["f.yaml: field `extra` is not understood"]);
    assert_eq!(rule_name("Mongo CPS.users"), "mongo-cps-users");
    assert_eq!(rule_name(&"x".repeat(60)).len(), 40);
}
