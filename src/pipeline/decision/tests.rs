use super::*;

fn rejection() -> Rejection {
    Rejection::new(Layer::Tenant, Outcome::Limited, Problem::status(429, "x"))
}

#[test]
fn retry_after_is_kept_apart_and_written_first() {
    let r = rejection().with_headers(vec![
        ("RateLimit", "\"free\";r=0;t=9".to_string()),
        ("Retry-After", "7".to_string()),
    ]);
    assert_eq!(r.retry_after, Some(7));
    assert_eq!(r.headers, [("RateLimit", "\"free\";r=0;t=9".to_string())]);
    assert_eq!(
        r.response_headers(),
        [
            ("Retry-After", "7".to_string()),
            ("RateLimit", "\"free\";r=0;t=9".to_string())
        ]
    );
    assert_eq!(rejection().response_headers(), []);
}

#[test]
fn refuse_enforces_or_shadows() {
    assert!(matches!(
        Decision::refuse(rejection(), false),
        Decision::Reject(_)
    ));
    let shadowed = Decision::refuse(rejection(), true);
    assert!(matches!(shadowed, Decision::ShadowReject(_)));
    assert_eq!(shadowed.rejection().unwrap().layer, Layer::Tenant);
    assert!(Decision::Admit.rejection().is_none());
    assert!(Decision::Delay(5).rejection().is_none());
}
