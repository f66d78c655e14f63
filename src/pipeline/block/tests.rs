use super::*;

#[test]
fn a_blocked_key_is_told_when_the_block_ends() {
    let r = blocked("login_failures", 899_001, 429);
    assert_eq!(r.retry_after, Some(900));
    assert_eq!(r.problem.status, 429);
    assert!(
        r.problem.detail.contains("\"login_failures\""),
        "{}",
        r.problem.detail
    );
    assert_eq!(blocked("x", 1, 429).retry_after, Some(1));
    assert_eq!(blocked("x", 0, 503).problem.status, 503);
}
