use super::*;
use crate::identity::Method;
use crate::pipeline::test_support::{admitted, refused, snapshot};
use crate::quota::PolicyExtras;

fn snap() -> Snapshot {
    snapshot(
        "routes:\n  - { path_prefix: \"/\", upstream: orders }\nredis: { url: \"redis://127.0.0.1:1\" }\ntiers:\n  free: { limit: 1, per: 1h, burst: 10, pool: { limit: 1, per: 1s, burst: 50 } }\ntenants:\n  bigco: { burst: 5 }\n",
    )
}

fn identity(tenant: &str, tier: Option<&str>) -> Identity {
    Identity {
        tenant: tenant.into(),
        tier: tier.map(str::to_string),
        method: Method::ApiKey,
        claims: None,
    }
}

fn decided(decision: limit::Decision, rate: Rate) -> QuotaOutcome {
    QuotaOutcome::Decided {
        decision,
        rate,
        degraded: false,
        extras: PolicyExtras::default(),
    }
}

#[test]
fn plan_merges_the_tenant_override_and_skips_tierless_identities() {
    let s = snap();
    let id = identity("bigco", Some("free"));
    let p = plan(&s, &id, 3).unwrap().unwrap();
    assert_eq!((p.tenant, p.limits.tier.name.as_str()), ("bigco", "free"));
    assert_eq!((p.limits.rate.burst, p.cost), (5, 3));
    assert!(plan(&s, &identity("acme", None), 1).unwrap().is_none());
    let r = plan(&s, &identity("acme", Some("gold")), 1).unwrap_err();
    assert_eq!(
        (r.layer, r.reason, r.problem.status),
        (Layer::Identity, Outcome::Rejected, 403)
    );
    assert_eq!(r.problem.detail, "tier \"gold\" does not exist");
}

#[test]
fn admission_carries_headers_and_flags_near_limit() {
    let s = snap();
    let id = identity("acme", Some("free"));
    let p = plan(&s, &id, 1).unwrap().unwrap();
    let v = judge(&p, 429, decided(admitted(1), p.limits.rate), None, false);
    assert!(matches!(v.decision, Decision::Admit));
    assert_eq!(v.outcome, Outcome::Admitted);
    assert!(v.near_limit, "1 of 10 left is under 20%");
    assert_eq!(v.headers.unwrap().policy_name, "free");
    let v = judge(&p, 429, decided(admitted(9), p.limits.rate), None, false);
    assert!(!v.near_limit);
}

#[test]
fn refusal_is_429_quota_exceeded_with_violated_policy_and_retry_after() {
    let s = snap();
    let id = identity("acme", Some("free"));
    let p = plan(&s, &id, 1).unwrap().unwrap();
    let v = judge(&p, 429, decided(refused(2_500), p.limits.rate), None, false);
    let Decision::Reject(r) = &v.decision else {
        panic!("not a rejection: {:?}", v.decision)
    };
    assert_eq!(
        (r.layer, r.reason, r.problem.status),
        (Layer::Tenant, Outcome::Limited, 429)
    );
    assert_eq!(r.problem.extensions["violated-policies"], json!(["free"]));
    assert_eq!(r.retry_after, Some(3));
    assert!(
        r.problem.detail.contains("0 of 10 tokens left"),
        "{}",
        r.problem.detail
    );
    assert!(
        v.headers.is_some(),
        "a refusal sends its rate-limit headers"
    );
    // Shadow: the same rejection, not enforced.
    let v = judge(&p, 429, decided(refused(2_500), p.limits.rate), None, true);
    assert!(matches!(v.decision, Decision::ShadowReject(ref r) if r.retry_after == Some(3)));
}

#[test]
fn the_pool_rescues_a_refusal_and_lists_both_policies() {
    let s = snap();
    let id = identity("acme", Some("free"));
    let p = plan(&s, &id, 1).unwrap().unwrap();
    let pool = p.limits.tier.pool.as_ref().unwrap();
    let v = judge(
        &p,
        429,
        decided(refused(1_000), p.limits.rate),
        Some((pool, admitted(49))),
        false,
    );
    assert!(matches!(v.decision, Decision::Admit));
    assert_eq!(v.outcome, Outcome::PoolAdmitted);
    let h = v.headers.unwrap();
    assert_eq!(h.policy_name, "free.pool");
    assert!(h.listed_before.unwrap().starts_with("\"free\";q=10"));
    // A pool that refuses too leaves the tenant's refusal.
    let v = judge(
        &p,
        429,
        decided(refused(1_000), p.limits.rate),
        Some((pool, refused(5))),
        false,
    );
    assert!(matches!(v.decision, Decision::Reject(_)));
}

#[test]
fn store_failures_follow_the_tier_policy() {
    let s = snap();
    let id = identity("acme", Some("free"));
    let p = plan(&s, &id, 1).unwrap().unwrap();
    let v = judge(&p, 429, QuotaOutcome::FailedOpen, None, false);
    assert!(matches!(v.decision, Decision::Admit));
    assert_eq!(v.outcome, Outcome::FailedOpen);
    assert!(v.headers.is_none(), "no invented headers");
    let v = judge(
        &p,
        429,
        QuotaOutcome::FailedClosed { retry_after_s: 4 },
        None,
        false,
    );
    let r = v.decision.rejection().unwrap();
    assert_eq!(
        (r.reason, r.problem.status, r.retry_after),
        (Outcome::FailedClosed, 503, Some(4))
    );
    assert_eq!(r.problem.type_uri, response::REDUCED_CAPACITY);
}

#[test]
fn a_shaping_delay_is_a_delay_decision() {
    let s = snap();
    let id = identity("acme", Some("free"));
    let p = plan(&s, &id, 1).unwrap().unwrap();
    let outcome = QuotaOutcome::Decided {
        decision: admitted(5),
        rate: p.limits.rate,
        degraded: true,
        extras: PolicyExtras {
            delay_ms: 120,
            ..Default::default()
        },
    };
    let v = judge(&p, 429, outcome, None, false);
    assert!(matches!(v.decision, Decision::Delay(120)));
    assert_eq!(v.outcome, Outcome::Fallback);
}
