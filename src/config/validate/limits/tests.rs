use crate::config::model::{FailurePolicy, HostMatch, KeyPart, Missing, Mode};
use crate::config::{parse, parse_errors};
use crate::limit::Rate;

const BASE: &str = "listen: [\"127.0.0.1:1\"]\nupstreams: { u: { backends: [\"127.0.0.1:2\"] } }\nroutes: [ { path_prefix: \"/\", upstream: u } ]\nredis: { url: \"redis://127.0.0.1:6379\", on_failure: open }\ntiers:\n  free: { limit: 5, per: 1s }\n  pro: { limit: 50, per: 1s }\n";

fn errors(limits: &str) -> Vec<String> {
    parse_errors(&format!("{BASE}limits:\n{limits}"))
}

/// Asserts that `limits` fails with exactly the error `want` (a prefix of it).
fn fails_with(limits: &str, want: &str) {
    let e = errors(limits);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with(want), "want {want:?}, got {e:?}");
}

#[test]
fn a_full_rule_parses_into_the_model() {
    let c = parse(&format!(
        "{BASE}limits:\n  - name: search\n    match: {{ routes: [\"/search\"], methods: [get, POST], hosts: [\"api.example.com\", \"*.example.com\"], headers: {{ X-Client: \"beta\" }} }}\n    key: [tenant, method, \"header:X-User\", \"claim:sub\", \"query:q\"]\n    limit: 10\n    per: 1s\n    burst: 20\n    algorithm: gcra\n    by_tier: {{ free: {{ limit: 2, per: 1s, burst: 5 }} }}\n    missing: refuse\n    mode: shadow\n    on_failure: local\n  - {{ name: login, key: [client_ip], limit: 5, per: 1m, algorithm: leaky_bucket }}\n"
    ))
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(c.limits.len(), 2);
    let r = &c.limits[0];
    assert_eq!(r.name, "search");
    assert_eq!(r.matcher.routes, ["/search"]);
    assert_eq!(r.matcher.methods, ["GET", "POST"]);
    assert_eq!(
        r.matcher.hosts,
        [
            HostMatch::Exact("api.example.com".into()),
            HostMatch::Suffix(".example.com".into())
        ]
    );
    assert_eq!(r.matcher.headers, [("x-client".into(), "beta".into())]);
    assert_eq!(
        r.key,
        [
            KeyPart::Tenant,
            KeyPart::Method,
            KeyPart::Header("x-user".into()),
            KeyPart::Claim("sub".into()),
            KeyPart::Query("q".into())
        ]
    );
    assert_eq!(r.rate, Rate::new(10, 1000, 20));
    assert_eq!(r.algorithm.as_str(), "gcra");
    assert_eq!(r.rate_for(Some("free")), Rate::new(2, 1000, 5));
    assert_eq!(r.rate_for(Some("pro")), r.rate);
    assert_eq!(
        (r.missing, r.mode, r.on_failure),
        (Missing::Refuse, Mode::Shadow, FailurePolicy::Local)
    );
    assert!(r.per_tenant());
    let l = &c.limits[1];
    assert_eq!(l.rate, Rate::new(5, 60_000, 5), "burst defaults to limit");
    assert_eq!(l.matcher, Default::default());
    assert_eq!(l.algorithm.as_str(), "leaky_bucket");
    assert_eq!(
        (l.missing, l.mode, l.on_failure),
        (Missing::Skip, Mode::Enforce, FailurePolicy::Open),
        "defaults; on_failure from redis"
    );
    assert!(!l.per_tenant());
}

#[test]
fn names_are_checked() {
    let rule = |name: &str| format!("  - {{ name: {name}, key: [tenant], limit: 1, per: 1s }}\n");
    fails_with(
        &rule("Search"),
        "limits[0].name: \"Search\" is not a rule name",
    );
    fails_with(&rule(&"a".repeat(41)), "limits[0].name:");
    fails_with(&rule("pro"), "limits[0].name: \"pro\" is also a tier name");
    fails_with(
        &format!("{}{}", rule("a"), rule("a")),
        "limits[1].name: \"a\" is the name of an earlier rule",
    );
}

#[test]
fn keys_are_checked() {
    let rule = |key: &str| format!("  - {{ name: r, key: [{key}], limit: 1, per: 1s }}\n");
    fails_with(&rule(""), "limits[0].key: needs at least one part");
    fails_with(
        &rule("tenant, user"),
        "limits[0].key[1]: \"user\" is not a key part",
    );
    fails_with(
        &rule("\"header:bad name\""),
        "limits[0].key[0]: \"bad name\" is not a valid header name",
    );
    fails_with(
        &rule("\"claim:\""),
        "limits[0].key[0]: \"claim:\" needs a name",
    );
    fails_with(
        &rule("\"query:\""),
        "limits[0].key[0]: \"query:\" needs a name",
    );
    fails_with(
        &rule("\"cookie:a\""),
        "limits[0].key[0]: \"cookie:\" is not a key part kind",
    );
    fails_with(
        &rule("\"header:X-A\", tenant, \"header:x-a\""),
        "limits[0].key[2]: \"header:x-a\" appears earlier in the key",
    );
}

#[test]
fn buckets_are_checked() {
    fails_with(
        "  - { name: r, key: [tenant], limit: 0, per: 1s }\n",
        "limits[0].limit: must be greater than zero",
    );
    fails_with(
        "  - { name: r, key: [tenant], limit: 1, per: 1x }\n",
        "limits[0].per:",
    );
    fails_with(
        "  - { name: r, key: [tenant], limit: 1, per: 1s, algorithm: sliding }\n",
        "limits[0].algorithm: unknown algorithm \"sliding\"",
    );
    fails_with(
        "  - { name: r, key: [tenant], limit: 20000, per: 1h, algorithm: sliding_window_log }\n",
        "limits[0].burst: 20000 is too large for sliding_window_log",
    );
    fails_with(
        "  - { name: r, key: [tenant], limit: 1, per: 1s, by_tier: { gold: { limit: 1, per: 1s } } }\n",
        "limits[0].by_tier.gold: no tier named \"gold\"",
    );
    fails_with(
        "  - { name: r, key: [tenant], limit: 1, per: 1s, by_tier: { free: { limit: 1, per: 1s, burst: 0 } } }\n",
        "limits[0].by_tier.free.burst: must be greater than zero",
    );
    fails_with(
        "  - { name: r, key: [tenant], limit: 1, per: 1s, algorithm: gcra, by_tier: { pro: { limit: 100000000, per: 1s } } }\n",
        "limits[0].by_tier.pro.limit: 100000000 is too large for gcra",
    );
}

#[test]
fn matches_and_choices_are_checked() {
    let rule =
        |field: &str| format!("  - {{ name: r, key: [tenant], limit: 1, per: 1s, {field} }}\n");
    fails_with(
        &rule("match: { methods: [GET, \"BAD METHOD\"] }"),
        "limits[0].match.methods[1]: \"BAD METHOD\" is not an HTTP method",
    );
    fails_with(
        &rule("match: { routes: [search] }"),
        "limits[0].match.routes[0]: must start with /",
    );
    fails_with(
        &rule("match: { routes: [\"/a/../b\"] }"),
        "limits[0].match.routes[0]: \"/a/../b\" is not a normalised path",
    );
    fails_with(
        &rule("match: { hosts: [\"api.example.com:443\"] }"),
        "limits[0].match.hosts[0]: \"api.example.com:443\" never matches a request: has a port",
    );
    fails_with(
        &rule("match: { headers: { \"X Bad\": v } }"),
        "limits[0].match.headers[\"X Bad\"]: \"x bad\" is not a valid header name",
    );
    fails_with(
        &rule("match: { headers: { X-A: v, x-a: w } }"),
        "limits[0].match.headers.x-a: \"x-a\" is listed twice",
    );
    fails_with(
        &rule("missing: drop"),
        "limits[0].missing: \"drop\" is not a missing-key action",
    );
    fails_with(&rule("mode: dry"), "limits[0].mode: \"dry\" is not a mode");
    fails_with(
        &rule("on_failure: maybe"),
        "limits[0].on_failure: \"maybe\" is not a failure policy",
    );
    let e = errors(&rule("matches: {}"));
    assert!(e[0].contains("unknown field `matches`"), "{e:?}");
}

#[test]
fn limits_need_redis() {
    let yaml = format!("{BASE}limits:\n  - {{ name: r, key: [client_ip], limit: 1, per: 1s }}\n")
        .replace(
            "redis: { url: \"redis://127.0.0.1:6379\", on_failure: open }\n",
            "",
        )
        .replace(
            "tiers:\n  free: { limit: 5, per: 1s }\n  pro: { limit: 50, per: 1s }\n",
            "",
        );
    let e = parse_errors(&yaml);
    assert_eq!(e, ["limits: redis is required when limits are configured"]);
    let c = parse(&format!("{BASE}limits: []\n")).unwrap();
    assert!(c.limits.is_empty());
}

#[test]
fn concurrency_rules_take_max_in_flight_and_no_bucket() {
    let c = parse(&format!(
        "{BASE}limits:\n  - {{ name: uploads, key: [tenant], max_in_flight: 2 }}\n"
    ))
    .unwrap();
    assert_eq!(c.limits[0].max_in_flight, Some(2));
    let errs = parse(&format!(
        "{BASE}limits:\n  - {{ name: a, key: [tenant], max_in_flight: 2, limit: 1, per: 1s }}\n  - {{ name: b, key: [tenant], max_in_flight: 2, burst: 3, algorithm: gcra }}\n  - {{ name: c, key: [tenant] }}\n  - {{ name: d, key: [tenant], limit: 1 }}\n  - {{ name: e, key: [tenant], max_in_flight: 0 }}\n"
    ))
    .unwrap_err();
    let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
    for p in [
        "limits[0].max_in_flight",
        "limits[1].burst",
        "limits[1].algorithm",
        "limits[2].limit",
        "limits[3].per",
        "limits[4].max_in_flight",
    ] {
        assert!(paths.contains(&p), "{p} not in {paths:?}");
    }
}

#[test]
fn decision_service_rules_parse_and_are_checked() {
    let c = parse(&format!(
        "{BASE}limits:\n  - {{ name: rls, match: {{ domain: edge, descriptors: [remote_address, {{ plan: gold }}] }}, key: [\"descriptor:remote_address\"], limit: 100, per: 1s }}\n"
    ))
    .unwrap_or_else(|e| panic!("{e:?}"));
    let r = &c.limits[0];
    assert_eq!(r.matcher.domain.as_deref(), Some("edge"));
    assert_eq!(
        r.matcher.descriptors,
        [
            ("remote_address".to_string(), None),
            ("plan".to_string(), Some("gold".to_string()))
        ]
    );
    assert_eq!(r.key, [KeyPart::Descriptor("remote_address".into())]);
    let rule = |m: &str, key: &str, more: &str| {
        format!("  - {{ name: r, match: {m}, key: [{key}], limit: 1, per: 1s{more} }}\n")
    };
    let e = errors(&rule("{ domain: edge }", "\"descriptor:a\"", ""));
    assert!(
        e[0].starts_with("limits[0].match.descriptors: is required with domain"),
        "{e:?}"
    );
    fails_with(
        &rule("{ domain: edge, descriptors: [a] }", "\"descriptor:b\"", ""),
        "limits[0].key[0]: \"descriptor:b\" is not among",
    );
    fails_with(
        &rule("{ domain: edge, descriptors: [a] }", "tenant", ""),
        "limits[0].key[0]: \"tenant\" does not apply to a decision-service rule",
    );
    fails_with(
        &rule(
            "{ domain: edge, descriptors: [a], routes: [\"/x\"] }",
            "\"descriptor:a\"",
            "",
        ),
        "limits[0].match.routes: does not apply",
    );
    fails_with(
        &rule(
            "{ domain: edge, descriptors: [a] }",
            "\"descriptor:a\"",
            ", by_tier: { free: { limit: 1, per: 1s } }",
        ),
        "limits[0].by_tier: does not apply to a decision-service rule",
    );
    fails_with(
        &rule("{ routes: [\"/x\"] }", "\"descriptor:a\"", ""),
        "limits[0].key[0]: a descriptor: part needs match.domain",
    );
    fails_with(
        &rule("{ descriptors: [a] }", "tenant", ""),
        "limits[0].match.descriptors: needs domain",
    );
    fails_with(
        &rule("{ domain: \"\", descriptors: [a] }", "\"descriptor:a\"", ""),
        "limits[0].match.domain: must not be empty",
    );
}

#[test]
fn the_decision_listener_is_checked() {
    let yaml = |d: &str| format!("{BASE}decision: {d}\n");
    let c = parse(&yaml(
        "{ grpc: { listen: \"127.0.0.1:8081\", on_failure: unavailable } }",
    ))
    .unwrap_or_else(|e| panic!("{e:?}"));
    let g = c.decision.grpc.expect("grpc");
    assert_eq!(g.listen.port(), 8081);
    assert_eq!(g.on_failure, crate::config::DecisionFailure::Unavailable);
    let e = parse_errors(&yaml(
        "{ grpc: { listen: \"nowhere\", on_failure: maybe } }",
    ));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e.iter().any(|m| m.starts_with("decision.grpc.listen")),
        "{e:?}"
    );
    assert!(
        e.iter().any(|m| m.starts_with("decision.grpc.on_failure")),
        "{e:?}"
    );
}
