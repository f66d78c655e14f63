use super::*;

#[test]
fn key_slot_uses_the_hash_tag() {
    // Reference values from the Redis Cluster specification (CRC16/XMODEM mod 16384).
    assert_eq!(key_slot("123456789"), 0x31C3);
    assert_eq!(key_slot("foo"), 12182);
    assert_eq!(key_slot("tollgate:{acme}:tb"), key_slot("acme"));
    assert_eq!(key_slot("a:{acme}:q:day:1"), key_slot("b:{acme}:gcra"));
    // An empty tag `{}` hashes the whole key.
    assert_eq!(
        key_slot("x{}y"),
        crc16::State::<crc16::XMODEM>::calculate(b"x{}y") % 16384
    );
}

#[test]
fn wrong_role_replies_replace_the_connection() {
    use redis::{ErrorKind, ServerErrorKind};
    let err = |k| RedisError::from((ErrorKind::Server(k), "reply"));
    for kind in [
        ServerErrorKind::ReadOnly,
        ServerErrorKind::MasterDown,
        ServerErrorKind::BusyLoading,
    ] {
        assert!(is_wrong_role(&err(kind)), "{kind:?}");
    }
    for kind in [
        ServerErrorKind::NoScript,
        ServerErrorKind::ResponseError,
        ServerErrorKind::Moved,
    ] {
        assert!(!is_wrong_role(&err(kind)), "{kind:?}");
    }
}

#[test]
fn credentials_debug_hides_the_password() {
    let c = Credentials {
        username: Some("gw".into()),
        password: Some("s3cret-pass".into()),
        ca_pem: None,
    };
    let text = format!("{c:?}");
    assert!(
        !text.contains("s3cret-pass") && text.contains("redacted"),
        "{text}"
    );
}

/// A fault's cause is logged once, its repeats once per `FAULT_LOG_EVERY` with the count left
/// out; another cause, or a fault after an answered call, is logged at once.
#[test]
fn fault_log_says_a_cause_once_then_rate_limits_its_repeats() {
    let log = FaultLog::default();
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    assert_eq!(log.admit("connection refused", at(0)), Some(0));
    for i in 1..30 {
        assert_eq!(log.admit("connection refused", at(i * 50)), None);
    }
    assert_eq!(
        log.admit("connection refused", at(FAULT_LOG_EVERY.as_millis() as u64)),
        Some(29)
    );
    assert_eq!(log.admit("timed out", at(31_000)), Some(0), "a new cause");
    log.clear();
    assert_eq!(log.admit("timed out", at(31_001)), Some(0), "a new episode");
}

#[test]
fn fault_causes_are_named() {
    use redis::ErrorKind;
    let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
    assert_eq!(fault_cause(&refused), "connection refused");
    let dropped = RedisError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
    assert_eq!(fault_cause(&dropped), "connection dropped");
    let role = RedisError::from((ErrorKind::Server(redis::ServerErrorKind::ReadOnly), "reply"));
    assert_eq!(fault_cause(&role), "redis answered as a non-master");
}

#[test]
fn a_connection_that_answers_nothing_for_the_stall_limit_is_replaced() {
    let stall = Stall::default();
    let t0 = Instant::now();
    let s = Duration::from_secs(1);
    // Unanswered calls within the limit: kept.
    assert!(!stall.unanswered(t0));
    assert!(!stall.unanswered(t0 + STALL_LIMIT - s));
    // No answer for the whole limit: replaced, and a new stall starts with the next call.
    assert!(stall.unanswered(t0 + STALL_LIMIT));
    assert!(!stall.unanswered(t0 + STALL_LIMIT + s));
    assert!(!stall.unanswered(t0 + 2 * STALL_LIMIT));
    assert!(stall.unanswered(t0 + 2 * STALL_LIMIT + s));
    // An answer ends a stall: the limit counts again from the next unanswered call.
    assert!(!stall.unanswered(t0));
    stall.answered();
    assert!(!stall.unanswered(t0 + STALL_LIMIT));
    assert!(!stall.unanswered(t0 + 2 * STALL_LIMIT - s));
    assert!(stall.unanswered(t0 + 2 * STALL_LIMIT));
}
