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
