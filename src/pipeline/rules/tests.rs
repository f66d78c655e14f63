use super::*;
use crate::identity::{Identity, Method};
use crate::pipeline::test_support::{admitted, refused, snapshot};
use crate::pipeline::Decision;
use crate::quota::{PolicyExtras, QuotaOutcome};
use http::HeaderMap;

fn snap() -> Snapshot {
    snapshot(
        "routes:\n  - { path_prefix: \"/\", upstream: orders }\nredis: { url: \"redis://127.0.0.1:1\" }\ntiers:\n  free: { limit: 1, per: 1h, burst: 10 }\nlimits:\n  - { name: per-method, key: [tenant, method], limit: 1, per: 1h, burst: 2 }\n  - { name: shared, key: [route], limit: 1, per: 1h, burst: 3 }\n  - { name: watch, key: [tenant], limit: 1, per: 1h, burst: 1, mode: shadow }\n",
    )
}

fn view(headers: &HeaderMap) -> RequestView<'_> {
    RequestView {
        method: "POST",
        path: "/x",
        query: None,
        host: "",
        headers,
        client_key: Some("127.0.0.1"),
        route: Some("/"),
        tenant: Some("acme"),
        tier: Some("free"),
        claims: None,
    }
}

fn identity() -> Identity {
    Identity {
        tenant: "acme".into(),
        tier: Some("free".into()),
        method: Method::ApiKey,
        claims: None,
    }
}

fn decided(d: crate::limit::Decision, rate: crate::limit::Rate) -> RuleOutcome {
    RuleOutcome::Decided {
        decision: d,
        rate,
        degraded: false,
    }
}

#[test]
fn plan_places_tenant_rules_under_the_tenant_and_others_under_their_own_tag() {
    let s = snap();
    let headers = HeaderMap::new();
    let rules = plan(&s, &view(&headers), 2).unwrap().rules;
    let keys: Vec<&str> = rules.iter().map(|(_, c)| &*c.entry.key).collect();
    assert_eq!(
        keys,
        [
            "tollgate:{acme}:r:per-method:tb:tenant=4.acme:method=4.POST",
            "tollgate:{r:shared:tb:route=1.%2F}",
            "tollgate:{acme}:r:watch:tb:tenant=4.acme",
        ]
    );
    assert!(rules.iter().all(|(_, c)| c.entry.cost == 2));
    assert!(rules[2].1.entry.shadow && !rules[0].1.entry.shadow);
}

#[test]
fn a_refusing_rule_refuses_with_every_enforced_policy_in_the_headers() {
    let s = snap();
    let headers = HeaderMap::new();
    let rules = plan(&s, &view(&headers), 1).unwrap().rules;
    let id = identity();
    let tier = tenant::plan(&s, &id, 1).unwrap().unwrap();
    let combined = Combined {
        tier: Some(QuotaOutcome::Decided {
            decision: admitted(9),
            rate: tier.limits.rate,
            degraded: false,
            extras: PolicyExtras::default(),
        }),
        rules: vec![
            decided(admitted(1), rules[0].0.rate),
            decided(refused(2_500), rules[1].0.rate),
            decided(refused(1_000), rules[2].0.rate),
        ],
        admitted: false,
        debited_at: Vec::new(),
    };
    let v = judge(
        &s.rule_series,
        Some(&tier),
        &rules,
        &[],
        combined,
        429,
        false,
    );
    let Decision::Reject(r) = &v.decision else {
        panic!("not a rejection: {:?}", v.decision)
    };
    assert_eq!(r.problem.extensions["violated-policies"], json!(["shared"]));
    assert_eq!(r.retry_after, Some(3));
    let pairs = v.headers.unwrap().pairs(crate::config::HeaderMode::Ietf);
    assert_eq!(
        pairs[0].1,
        "\"free\";q=10;w=36000, \"per-method\";q=2;w=7200, \"shared\";q=3;w=10800"
    );
    assert_eq!(pairs[1].1, "\"shared\";r=0;t=60");
}

#[test]
fn rules_without_a_tier_lead_the_headers_and_shadow_rules_never_refuse() {
    let s = snap();
    let headers = HeaderMap::new();
    let rules = plan(&s, &view(&headers), 1).unwrap().rules;
    let combined = Combined {
        tier: None,
        rules: vec![
            decided(admitted(1), rules[0].0.rate),
            decided(admitted(2), rules[1].0.rate),
            decided(refused(1_000), rules[2].0.rate),
        ],
        admitted: true,
        debited_at: Vec::new(),
    };
    let v = judge(&s.rule_series, None, &rules, &[], combined, 429, false);
    assert!(matches!(v.decision, Decision::Admit));
    let h = v.headers.unwrap();
    assert_eq!(h.policy_name, "per-method");
    assert_eq!(h.quotas.len(), 1, "the shadow rule is not listed");
}

#[test]
fn a_rule_failing_closed_is_a_503() {
    let s = snap();
    let headers = HeaderMap::new();
    let rules = plan(&s, &view(&headers), 1).unwrap().rules;
    let combined = Combined {
        tier: None,
        rules: vec![
            RuleOutcome::FailedClosed { retry_after_s: 2 },
            RuleOutcome::Unasked,
            RuleOutcome::Unasked,
        ],
        admitted: false,
        debited_at: Vec::new(),
    };
    let v = judge(&s.rule_series, None, &rules, &[], combined, 429, false);
    let Decision::Reject(r) = &v.decision else {
        panic!("not a rejection")
    };
    assert_eq!((r.problem.status, r.retry_after), (503, Some(2)));
    assert_eq!(v.outcome, Outcome::FailedClosed);
}

/// A plan's rule as comparable values: rule index, key text, bucket, Redis key, cost.
type Summary = (usize, Arc<str>, crate::limit::Rate, Arc<str>, u64);

/// A plan's rules as comparable values.
fn summary(rules: &[(AppliedRule<'_>, RuleCall)]) -> Vec<Summary> {
    rules
        .iter()
        .map(|(a, c)| {
            (
                a.index,
                a.key.clone(),
                a.rate,
                c.entry.key.clone(),
                c.entry.cost,
            )
        })
        .collect()
}

#[test]
fn a_kept_plan_is_reused_only_by_requests_with_the_same_fingerprint() {
    let s = snap();
    let headers = HeaderMap::new();
    let first = plan(&s, &view(&headers), 1).unwrap();
    let again = plan(&s, &view(&headers), 1).unwrap();
    let (p1, p2) = (
        first.prepared.clone().unwrap(),
        again.prepared.clone().unwrap(),
    );
    assert!(
        Arc::ptr_eq(&p1, &p2),
        "the second request reuses the first's plan"
    );
    assert_eq!(summary(&again.rules), summary(&first.rules));
    assert_eq!(
        summary(&first.rules),
        summary(&build(&s, &view(&headers), 1, true).unwrap())
    );
    assert_eq!(s.rule_plans.len(), 1);
    // Another method, another cost, another tenant: plans of their own, as built afresh.
    let get = RequestView {
        method: "GET",
        ..view(&headers)
    };
    let globex = RequestView {
        tenant: Some("globex"),
        ..view(&headers)
    };
    for (req, cost) in [(get, 1), (view(&headers), 3), (globex, 1)] {
        let p = plan(&s, &req, cost).unwrap();
        assert!(!Arc::ptr_eq(p.prepared.as_ref().unwrap(), &p1));
        assert_eq!(
            summary(&p.rules),
            summary(&build(&s, &req, cost, true).unwrap())
        );
        assert_ne!(summary(&p.rules), summary(&first.rules));
    }
    assert_eq!(s.rule_plans.len(), 4);
}
