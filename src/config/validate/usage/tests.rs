use crate::config::{parse, parse_errors, RefundOn, UsageSource};

fn config(usage: &str) -> String {
    format!(
        r#"
listen: ["127.0.0.1:8080"]
redis: {{ url: "redis://127.0.0.1:6379/0" }}
tiers:
  pro: {{ limit: 100, per: 1m, usage: {usage} }}
upstreams:
  u: {{ backends: ["127.0.0.1:9001"] }}
routes:
  - {{ path_prefix: "/", upstream: u }}
"#
    )
}

#[test]
fn a_usage_budget_is_read_with_its_defaults() {
    let c = parse(&config(
        "{ limit: 1000, per: 1m, reserve: 100, from: { openai: true } }",
    ))
    .unwrap();
    let u = c.tiers["pro"].usage.clone().unwrap();
    assert_eq!(u.policy, "pro.tokens");
    assert_eq!(
        (u.rate.limit, u.rate.per_ms, u.rate.burst),
        (1000, 60_000, 1000)
    );
    assert_eq!((u.reserve, u.max), (100, 1000));
    assert_eq!(u.source, UsageSource::OpenAi);
    assert_eq!(u.refund_on, RefundOn::default());
    // A stream without a count costs max; streamed requests are asked for their usage.
    assert_eq!(u.uncounted, 1000);
    assert!(u.include_usage);
}

#[test]
fn uncounted_and_include_usage_are_read() {
    let c = parse(&config(
        "{ limit: 1000, per: 1m, reserve: 100, max: 500, uncounted: 0,          from: { openai: true, include_usage: false } }",
    ))
    .unwrap();
    let u = c.tiers["pro"].usage.clone().unwrap();
    assert_eq!((u.uncounted, u.include_usage), (0, false));
    let c = parse(&config(
        "{ limit: 10, per: 1s, reserve: 5, from: { header: x-usage } }",
    ))
    .unwrap();
    assert!(!c.tiers["pro"].usage.clone().unwrap().include_usage);
}

#[test]
fn header_names_and_refunds_are_read() {
    let c = parse(&config(
        "{ name: units, limit: 10, per: 1s, burst: 50, reserve: 5, max: 40, \
         from: { header: X-Usage-Tokens }, refund_on: [backend_5xx, client_gone_before_response] }",
    ))
    .unwrap();
    let u = c.tiers["pro"].usage.clone().unwrap();
    assert_eq!(u.policy, "pro.units");
    assert_eq!(u.source, UsageSource::Header("x-usage-tokens".into()));
    assert_eq!(u.max, 40);
    assert!(u.refund_on.backend_5xx && u.refund_on.client_gone_before_response);
    assert!(!u.refund_on.upstream_unavailable);
}

#[test]
fn bad_fields_are_named() {
    for (usage, field) in [
        ("{ limit: 10, per: 1s, reserve: 0, from: { openai: true } }", "tiers.pro.usage.reserve"),
        ("{ limit: 10, per: 1s, reserve: 11, from: { openai: true } }", "tiers.pro.usage.reserve"),
        ("{ limit: 10, per: 1s, reserve: 5, max: 4, from: { openai: true } }", "tiers.pro.usage.max"),
        ("{ limit: 10, per: 1s, reserve: 5, from: {} }", "tiers.pro.usage.from"),
        ("{ limit: 10, per: 1s, reserve: 5, from: { openai: true, header: x } }", "tiers.pro.usage.from"),
        ("{ name: day, limit: 10, per: 1s, reserve: 5, from: { openai: true } }", "tiers.pro.usage.name"),
        ("{ name: Tok, limit: 10, per: 1s, reserve: 5, from: { openai: true } }", "tiers.pro.usage.name"),
        ("{ limit: 10, per: 1s, reserve: 5, from: { openai: true }, refund_on: [always] }", "tiers.pro.usage.refund_on[0]"),
        ("{ limit: 10, per: 1s, reserve: { from_json: \"\", default: 5 }, from: { openai: true } }", "tiers.pro.usage.reserve.from_json"),
        ("{ limit: 10, per: 1s, reserve: { from_json: max_tokens, default: 0 }, from: { openai: true } }", "tiers.pro.usage.reserve.default"),
        ("{ limit: 10, per: 1s, reserve: { from_json: max_tokens, default: 11 }, from: { openai: true } }", "tiers.pro.usage.reserve"),
        ("{ limit: 0, per: 1s, reserve: 5, from: { openai: true } }", "tiers.pro.usage.limit"),
        ("{ limit: 10, per: 1s, reserve: 5, max: 8, uncounted: 9, from: { openai: true } }", "tiers.pro.usage.uncounted"),
        ("{ limit: 10, per: 1s, reserve: 5, uncounted: -1, from: { openai: true } }", "tiers.pro.usage.uncounted"),
        ("{ limit: 10, per: 1s, reserve: 5, from: { header: x, include_usage: true } }", "tiers.pro.usage.from.include_usage"),
    ] {
        let e = parse_errors(&config(usage));
        assert!(e.iter().any(|e| e.contains(field)), "{usage}: {e:?}");
    }
}

#[test]
fn a_reserve_from_the_request_body_is_read() {
    let c = parse(&config(
        "{ limit: 1000, per: 1m, reserve: { from_json: max_tokens, default: 50 }, \
         from: { openai: true } }",
    ))
    .unwrap();
    let u = c.tiers["pro"].usage.clone().unwrap();
    assert_eq!(u.from_json.as_deref(), Some("max_tokens"));
    assert_eq!(u.reserve, 50);
}

fn rule_config(rule: &str) -> String {
    format!(
        r#"
listen: ["127.0.0.1:8080"]
redis: {{ url: "redis://127.0.0.1:6379/0" }}
tiers:
  pro: {{ limit: 100, per: 1m }}
limits:
  - {rule}
upstreams:
  u: {{ backends: ["127.0.0.1:9001"] }}
routes:
  - {{ path_prefix: "/", upstream: u }}
"#
    )
}

#[test]
fn a_limit_rule_takes_a_usage_budget_named_after_it() {
    let c = parse(&rule_config(
        "{ name: users, key: [tenant, \"claim:sub\"], limit: 10, per: 1s, \
         usage: { limit: 1000, per: 1m, reserve: 100, from: { openai: true } } }",
    ))
    .unwrap();
    let u = c.limits[0].usage.clone().unwrap();
    assert_eq!((u.policy.as_str(), u.reserve), ("users.tokens", 100));
    for (rule, field) in [
        (
            "{ name: c, key: [tenant], max_in_flight: 2, \
             usage: { limit: 10, per: 1s, reserve: 1, from: { openai: true } } }",
            "limits[0].usage",
        ),
        (
            "{ name: c, key: [tenant], limit: 10, per: 1s, \
             usage: { limit: 10, per: 1s, reserve: 20, from: { openai: true } } }",
            "limits[0].usage.reserve",
        ),
    ] {
        let e = parse_errors(&rule_config(rule));
        assert!(e.iter().any(|e| e.contains(field)), "{rule}: {e:?}");
    }
}
