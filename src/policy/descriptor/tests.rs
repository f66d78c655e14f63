use super::*;
use crate::config::{FailurePolicy, Missing, Mode, RuleMatch};
use crate::limit::algorithm::Algorithm;
use crate::limit::Rate;

fn rule(name: &str, domain: &str, entries: &[(&str, Option<&str>)], key: &[&str]) -> LimitRule {
    LimitRule {
        name: name.into(),
        matcher: RuleMatch {
            domain: Some(domain.into()),
            descriptors: entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
            ..Default::default()
        },
        key: key
            .iter()
            .map(|k| KeyPart::Descriptor(k.to_string()))
            .collect(),
        rate: Rate::new(10, 1_000, 10),
        algorithm: Algorithm::TokenBucket,
        by_tier: Default::default(),
        missing: Missing::Skip,
        mode: Mode::Enforce,
        on_failure: FailurePolicy::Open,
        max_in_flight: None,
        usage: None,
        counting: Default::default(),
        block_for: None,
        cost: None,
    }
}

fn entries(e: &[(&str, &str)]) -> Vec<Entry> {
    e.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn names(rules: &[LimitRule], domain: &str, e: &[(&str, &str)]) -> Vec<String> {
    applicable(rules, domain, &entries(e))
        .into_iter()
        .map(|r| rules[r.index].name.clone())
        .collect()
}

#[test]
fn keys_must_be_exactly_the_rules_in_order_and_in_its_domain() {
    let rules = [
        rule(
            "addr",
            "edge",
            &[("remote_address", None)],
            &["remote_address"],
        ),
        rule(
            "path",
            "edge",
            &[("remote_address", None), ("path", None)],
            &["path"],
        ),
    ];
    assert_eq!(
        names(&rules, "edge", &[("remote_address", "1.2.3.4")]),
        ["addr"]
    );
    assert_eq!(
        names(&rules, "edge", &[("remote_address", "1"), ("path", "/")]),
        ["path"]
    );
    assert!(names(&rules, "edge", &[("path", "/"), ("remote_address", "1")]).is_empty());
    assert!(names(&rules, "other", &[("remote_address", "1")]).is_empty());
    assert!(names(&rules, "edge", &[("unknown", "1")]).is_empty());
}

#[test]
fn a_pinned_value_wins_over_any_value_and_equals_all_apply() {
    let rules = [
        rule("any", "d", &[("k", None)], &["k"]),
        rule("pinned", "d", &[("k", Some("gold"))], &["k"]),
        rule("pinned-too", "d", &[("k", Some("gold"))], &["k"]),
    ];
    assert_eq!(
        names(&rules, "d", &[("k", "gold")]),
        ["pinned", "pinned-too"]
    );
    assert_eq!(names(&rules, "d", &[("k", "silver")]), ["any"]);
}

#[test]
fn the_key_is_the_named_entries_values() {
    let rules = [rule("r", "d", &[("a", None), ("b", None)], &["b"])];
    let one = applicable(&rules, "d", &entries(&[("a", "1"), ("b", "x")]));
    let two = applicable(&rules, "d", &entries(&[("a", "2"), ("b", "x")]));
    let three = applicable(&rules, "d", &entries(&[("a", "1"), ("b", "y")]));
    assert_eq!(one[0].key, two[0].key);
    assert_ne!(one[0].key, three[0].key);
}
