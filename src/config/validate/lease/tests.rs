use crate::config::{parse, parse_errors, LeaseSettings, DEFAULT_WORK_STEALING};

fn config(tier: &str, server: &str) -> String {
    format!(
        r#"
listen: ["127.0.0.1:8080"]
{server}
redis: {{ url: "redis://127.0.0.1:6379/0" }}
tiers:
  pro: {tier}
upstreams:
  u: {{ backends: ["127.0.0.1:9001"] }}
routes:
  - {{ path_prefix: "/", upstream: u }}
"#
    )
}

#[test]
fn a_lease_is_read_in_tokens_and_ms() {
    let c = parse(&config(
        "{ limit: 100, per: 1s, burst: 50, lease: { tokens: 20, max_hold: 250ms } }",
        "",
    ))
    .unwrap();
    assert_eq!(
        c.tiers["pro"].policy.lease,
        Some(LeaseSettings {
            tokens: 20,
            max_hold_ms: 250
        })
    );
}

#[test]
fn a_lease_is_refused_on_other_algorithms_and_with_quotas() {
    let e = parse_errors(&config(
        "{ algorithm: gcra, limit: 100, per: 1s, lease: { tokens: 20, max_hold: 250ms } }",
        "",
    ));
    assert!(
        e.iter().any(|e| e.contains("tiers.pro.lease")
            && e.contains("only applies to algorithm token_bucket")),
        "{e:?}"
    );
    let e = parse_errors(&config(
        "{ limit: 100, per: 1s, quotas: [ { limit: 1000, period: day } ], lease: { tokens: 20, max_hold: 250ms } }",
        "",
    ));
    assert!(
        e.iter()
            .any(|e| e.contains("tiers.pro.lease") && e.contains("quotas")),
        "{e:?}"
    );
}

#[test]
fn lease_fields_are_bounded() {
    for (lease, field) in [
        ("{ tokens: 0, max_hold: 250ms }", "tiers.pro.lease.tokens"),
        ("{ tokens: 51, max_hold: 250ms }", "tiers.pro.lease.tokens"),
        ("{ tokens: 5, max_hold: 2m }", "tiers.pro.lease.max_hold"),
        ("{ tokens: 5, max_hold: 0ms }", "tiers.pro.lease.max_hold"),
        ("{ tokens: 5, max_hold: soon }", "tiers.pro.lease.max_hold"),
    ] {
        let e = parse_errors(&config(
            &format!("{{ limit: 100, per: 1s, burst: 50, lease: {lease} }}"),
            "",
        ));
        assert!(e.iter().any(|e| e.starts_with(field)), "{lease}: {e:?}");
    }
}

#[test]
fn work_stealing_defaults_and_is_read() {
    let tier = "{ limit: 100, per: 1s }";
    let c = parse(&config(tier, "")).unwrap();
    assert_eq!(c.server.work_stealing, DEFAULT_WORK_STEALING);
    let c = parse(&config(tier, "server: { work_stealing: true }")).unwrap();
    assert!(c.server.work_stealing);
    let e = parse_errors(&config(tier, "server: { work_stealing: 3 }"));
    assert!(e.iter().any(|e| e.contains("work_stealing")), "{e:?}");
}
