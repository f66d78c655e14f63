use super::*;

#[test]
fn a_refusal_names_the_concurrency_policy_and_waits_one_second() {
    let how = |mode, region| RefusalHeaders { mode, region };
    let r = refused(
        "pro",
        "tier \"pro\"",
        3,
        false,
        429,
        how(HeaderMode::Both, None),
    );
    assert_eq!((r.problem.status, r.retry_after), (429, Some(1)));
    assert_eq!(
        r.problem.extensions["violated-policies"],
        json!(["pro.concurrency"])
    );
    let headers = r.response_headers();
    assert!(headers.contains(&("RateLimit-Policy", "\"pro.concurrency\";q=3".to_string())));
    assert!(headers.contains(&("X-RateLimit-Limit", "3".to_string())));
    assert!(headers.contains(&("Retry-After", "1".to_string())));
    let local = refused(
        "pro",
        "tier \"pro\"",
        2,
        true,
        429,
        how(HeaderMode::Ietf, None),
    );
    assert!(local.problem.detail.contains("on this instance"));
    assert!(local
        .response_headers()
        .contains(&("Tollgate-Degraded", "redis".to_string())));
    // Under `multi_region:` the cap is the region's share, and says so.
    let eu = refused(
        "pro",
        "tier \"pro\"",
        2,
        false,
        429,
        how(HeaderMode::Both, Some("eu")),
    );
    let headers = eu.response_headers();
    assert!(headers.contains(&(
        "RateLimit-Policy",
        "\"pro.concurrency\";q=2;region=\"eu\"".to_string()
    )));
    assert!(headers.contains(&("Tollgate-Region", "eu".to_string())));
}
