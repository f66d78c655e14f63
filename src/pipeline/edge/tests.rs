use super::*;
use crate::pipeline::test_support::{admitted, refused, snapshot};

fn settings() -> EdgeSettings {
    let snap = snapshot("routes:\n  - { path_prefix: \"/\", upstream: orders }\nedge: { limit: 1, per: 1h, burst: 2 }\n");
    snap.config.edge.clone().unwrap()
}

#[test]
fn exempt_is_not_a_decision_and_admission_admits() {
    let s = settings();
    assert!(judge(&s, 429, EdgeOutcome::Skipped, false).is_none());
    let d = judge(&s, 429, EdgeOutcome::Admitted(admitted(1)), false);
    assert!(matches!(d, Some(Decision::Admit)));
}

#[test]
fn limited_is_a_quota_exceeded_rejection_with_retry_after() {
    let s = settings();
    let Some(Decision::Reject(r)) = judge(&s, 429, EdgeOutcome::Limited(refused(1_500)), false)
    else {
        panic!("not a rejection")
    };
    assert_eq!((r.layer, r.reason), (Layer::Edge, Outcome::Limited));
    assert_eq!(r.problem.status, 429);
    assert_eq!(r.problem.type_uri, response::QUOTA_EXCEEDED);
    assert_eq!(r.problem.extensions["violated-policies"], json!(["edge"]));
    assert!(
        r.problem.detail.contains("(2 requests burst)"),
        "{}",
        r.problem.detail
    );
    assert_eq!(r.response_headers(), [("Retry-After", "2".to_string())]);
    // `response.status` decides the status.
    let d = judge(&s, 503, EdgeOutcome::Limited(refused(1)), false);
    assert_eq!(d.unwrap().rejection().unwrap().problem.status, 503);
}

#[test]
fn shadow_turns_the_rejection_into_a_shadow_rejection() {
    let s = settings();
    let d = judge(&s, 429, EdgeOutcome::Limited(refused(1_000)), true);
    assert!(matches!(d, Some(Decision::ShadowReject(ref r)) if r.layer == Layer::Edge));
    // Shadow changes nothing for an admission.
    let d = judge(&s, 429, EdgeOutcome::Admitted(admitted(0)), true);
    assert!(matches!(d, Some(Decision::Admit)));
}
