use super::*;
use crate::pipeline::test_support::snapshot;

#[test]
fn refusal_is_503_reduced_capacity_with_scope_reason_and_retry_after() {
    let snap = snapshot("routes:\n  - { path_prefix: \"/\", upstream: orders }\n");
    let up = &snap.config.upstreams["orders"];
    let r = rejection(SlotRejection::TenantFull, up, "acme", true);
    assert_eq!((r.layer, r.reason), (Layer::Upstream, Outcome::Limited));
    assert_eq!(r.problem.status, 503);
    assert_eq!(r.problem.type_uri, response::REDUCED_CAPACITY);
    assert_eq!(r.problem.extensions["reason"], json!("tenant_full"));
    assert_eq!(
        r.problem.extensions["capacity-scope"],
        json!(SlotRejection::TenantFull.scope())
    );
    assert!(r
        .problem
        .detail
        .contains("tenant \"acme\" has 1 requests in flight"));
    assert!(
        r.problem.detail.ends_with("is not refunded."),
        "{}",
        r.problem.detail
    );
    assert_eq!(r.retry_after, Some(up.retry_after_s));
    let r = rejection(SlotRejection::Full, up, "acme", false);
    assert!(
        r.problem.detail.ends_with("(full)."),
        "{}",
        r.problem.detail
    );
}
