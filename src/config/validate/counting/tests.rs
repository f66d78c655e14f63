use crate::config::{parse, parse_errors};

fn config(tier: &str, rule: &str) -> String {
    format!(
        r#"
listen: ["127.0.0.1:8080"]
redis: {{ url: "redis://127.0.0.1:6379/0" }}
tiers:
  pro: {tier}
upstreams:
  u: {{ backends: ["127.0.0.1:9001"] }}
routes:
  - {{ path_prefix: "/", upstream: u }}
limits:
  - {rule}
"#
    )
}

const TIER: &str = "{ limit: 100, per: 1m }";

#[test]
fn statuses_and_refunds_are_read() {
    let rule = r#"{ name: login, key: [client_ip], limit: 5, per: 15m, count: { status: [401, 403, "5xx"] }, refund_on: [client_gone_before_response] }"#;
    let c = parse(&config(
        "{ limit: 100, per: 1m, refund_on: [backend_5xx, upstream_unavailable] }",
        rule,
    ))
    .unwrap();
    let counting = c.limits[0].counting;
    let status = counting.status.unwrap();
    for s in [401, 403, 500, 503, 599] {
        assert!(status.contains(s), "{s}");
    }
    for s in [200, 204, 400, 404, 499, 600, 0] {
        assert!(!status.contains(s), "{s}");
    }
    let spec: Vec<_> = status.spec();
    assert_eq!(spec, [Ok(401), Ok(403), Err("5xx".to_string())]);
    assert!(counting.refund_on.client_gone_before_response);
    assert!(!counting.refund_on.backend_5xx);
    let tier = c.tiers["pro"].refund_on;
    assert!(tier.backend_5xx && tier.upstream_unavailable && !tier.client_gone_before_response);
    assert!(counting.settles());
}

#[test]
fn a_penalty_box_is_read() {
    let rule =
        "{ name: r, key: [client_ip], limit: 5, per: 1m, block_for: 15m, extend_on_refusal: true }";
    let c = parse(&config(TIER, rule)).unwrap();
    let b = c.limits[0].block_for.unwrap();
    assert_eq!((b.ms, b.extend_on_refusal), (900_000, true));
    let rule = "{ name: r, key: [client_ip], limit: 5, per: 1m, block_for: 2s }";
    let b = parse(&config(TIER, rule)).unwrap().limits[0]
        .block_for
        .unwrap();
    assert_eq!((b.ms, b.extend_on_refusal), (2_000, false));
}

#[test]
fn a_plain_rule_counts_every_request() {
    let c = parse(&config(
        TIER,
        "{ name: r, key: [client_ip], limit: 5, per: 1m }",
    ))
    .unwrap();
    assert!(!c.limits[0].counting.settles());
    assert_eq!(c.tiers["pro"].refund_on, Default::default());
}

#[test]
fn nonsense_is_refused_with_its_field_path() {
    let cases = [
        (
            "{ name: r, key: [client_ip], max_in_flight: 2, count: { status: [401] } }",
            "limits[0].count",
        ),
        (
            "{ name: r, key: [client_ip], max_in_flight: 2, refund_on: [backend_5xx] }",
            "limits[0].refund_on",
        ),
        (
            "{ name: r, key: [client_ip], limit: 5, per: 1m, count: { status: [] } }",
            "limits[0].count.status",
        ),
        (
            "{ name: r, key: [client_ip], limit: 5, per: 1m, count: { status: [401, 600] } }",
            "limits[0].count.status[1]",
        ),
        (
            r#"{ name: r, key: [client_ip], limit: 5, per: 1m, count: { status: ["4xy"] } }"#,
            "limits[0].count.status[0]",
        ),
        (
            r#"{ name: r, key: [client_ip], limit: 5, per: 1m, count: { status: ["5xx"] }, refund_on: [backend_5xx] }"#,
            "limits[0].refund_on",
        ),
        (
            "{ name: r, key: [client_ip], limit: 5, per: 1m, refund_on: [always] }",
            "limits[0].refund_on[0]",
        ),
        (
            "{ name: r, key: [client_ip], max_in_flight: 2, block_for: 1m }",
            "limits[0].block_for",
        ),
        (
            "{ name: r, key: [client_ip], limit: 5, per: 1m, block_for: 500ms }",
            "limits[0].block_for",
        ),
        (
            "{ name: r, key: [client_ip], limit: 5, per: 1m, block_for: 31d }",
            "limits[0].block_for",
        ),
        (
            "{ name: r, key: [client_ip], limit: 5, per: 1m, extend_on_refusal: true }",
            "limits[0].extend_on_refusal",
        ),
    ];
    for (rule, path) in cases {
        let errors = parse_errors(&config(TIER, rule));
        assert!(
            errors.iter().any(|e| e.starts_with(&format!("{path}: "))),
            "{rule}: want an error at {path}, got {errors:?}"
        );
    }
}

#[test]
fn a_tier_refund_needs_its_own_decision() {
    let rule = "{ name: r, key: [client_ip], limit: 5, per: 1m }";
    for tier in [
        "{ limit: 100, per: 1m, refund_on: [backend_5xx], pool: { limit: 10, per: 1m } }",
        "{ limit: 100, per: 1m, refund_on: [nope] }",
    ] {
        let errors = parse_errors(&config(tier, rule));
        assert!(
            errors.iter().any(|e| e.starts_with("tiers.pro.refund_on")),
            "{tier}: {errors:?}"
        );
    }
}
