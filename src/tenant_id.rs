//! What a tenant id may be, and how it is written outside the process: one validation and one
//! encoding for every source of a tenant id (JWT claim, API-key entry, client certificate CN,
//! `tenants:` map key, anonymous client address).
//!
//! Validation ([`validate`]): not empty, no leading or trailing whitespace (Unicode `White_Space`;
//! HTTP trims header values, so `" acme"` and `"acme"` would look the same to the backend while
//! having two buckets), no control characters (Unicode `Cc`: C0, DEL, C1), at most
//! [`MAX_TENANT_BYTES`] bytes of UTF-8, and not starting with [`ANONYMOUS_PREFIX`] (reserved for
//! anonymous clients, which get their ids from [`anonymous`]).
//!
//! Encoding ([`encode`]): RFC 3986 percent-encoding of the UTF-8 bytes of the id, applied to
//! every byte outside printable ASCII and to `%`, `{` and `}`. Printable ASCII ids without those
//! three characters are unchanged. The encoded form is what the backend receives in
//! `identity.tenant_header` (decode it as percent-encoded UTF-8) and what goes between the braces
//! of the Redis key (`<prefix>:{<encoded>}:tb`), so the Cluster hash tag is exactly the tenant: a
//! tenant's own `{` or `}` can no longer end or start the tag early. The encoding is injective
//! (`%` itself is encoded), so two tenants never share a key.

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use std::borrow::Cow;

/// Longest tenant id, in bytes of UTF-8 (before encoding).
pub const MAX_TENANT_BYTES: usize = 256;

/// Tenant ids of anonymous clients are `ip:<address>`; no other source may use this prefix, so an
/// authenticated tenant never shares a bucket with an anonymous address.
pub const ANONYMOUS_PREFIX: &str = "ip:";

/// Bytes [`encode`] escapes besides non-ASCII: controls, `%` (so the encoding is injective) and
/// the Redis Cluster hash-tag delimiters.
const ESCAPED: &AsciiSet = &CONTROLS.add(b'%').add(b'{').add(b'}');

/// Why a text is not a tenant id. The messages are safe to show (they never echo the id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TenantIdError {
    /// Empty, or only whitespace.
    #[error("must not be empty or blank")]
    Blank,
    /// Starts or ends with whitespace.
    #[error("must not start or end with whitespace")]
    Padded,
    /// Contains a control character (e.g. CR, LF, NUL, DEL).
    #[error("must not contain control characters")]
    Control,
    /// Longer than [`MAX_TENANT_BYTES`].
    #[error("must be at most 256 bytes")]
    TooLong,
    /// Starts with [`ANONYMOUS_PREFIX`].
    #[error("must not start with \"ip:\" (reserved for anonymous clients)")]
    Reserved,
}

/// The text rules shared by every source, anonymous ids included.
fn check_text(id: &str) -> Result<(), TenantIdError> {
    if id.trim().is_empty() {
        return Err(TenantIdError::Blank);
    }
    if id.len() > MAX_TENANT_BYTES {
        return Err(TenantIdError::TooLong);
    }
    if id.chars().any(char::is_control) {
        return Err(TenantIdError::Control);
    }
    if id.trim() != id {
        return Err(TenantIdError::Padded);
    }
    Ok(())
}

/// Validates a tenant id from a credential or the config (every source except anonymous).
///
/// Errors: the first rule broken, checked in the order blank, length, control characters,
/// surrounding whitespace, reserved prefix.
pub fn validate(id: &str) -> Result<(), TenantIdError> {
    check_text(id)?;
    if id.starts_with(ANONYMOUS_PREFIX) {
        return Err(TenantIdError::Reserved);
    }
    Ok(())
}

/// The tenant id of an anonymous client: `ip:<client_key>` (the client's address, IPv6
/// aggregated to its prefix). Goes through the same text rules as every other id; an address
/// always passes them.
pub fn anonymous(client_key: std::net::IpAddr) -> String {
    // One allocation of the final size (the longest IPv6 text is 39 bytes); runs per request.
    let mut id = Vec::with_capacity(ANONYMOUS_PREFIX.len() + 39);
    id.extend_from_slice(ANONYMOUS_PREFIX.as_bytes());
    crate::http::client_ip::push_ip(&mut id, client_key);
    let id = String::from_utf8(id).expect("an address's text is ASCII");
    debug_assert_eq!(check_text(&id), Ok(()), "anonymous tenant id {id:?}");
    id
}

/// The one external form of a validated tenant id: percent-encoded UTF-8 (see the module docs);
/// borrowed when nothing needs escaping.
pub fn encode(id: &str) -> Cow<'_, str> {
    utf8_percent_encode(id, ESCAPED).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_in_order() {
        let cases: &[(&str, Result<(), TenantIdError>)] = &[
            ("acme", Ok(())),
            ("Acme Corp", Ok(())),
            ("zürich-ß", Ok(())),
            ("a}b{c", Ok(())),
            ("", Err(TenantIdError::Blank)),
            ("   ", Err(TenantIdError::Blank)),
            ("\u{a0}\u{3000}", Err(TenantIdError::Blank)),
            (" acme", Err(TenantIdError::Padded)),
            ("acme\u{a0}", Err(TenantIdError::Padded)),
            ("a\r\nb", Err(TenantIdError::Control)),
            ("a\0b", Err(TenantIdError::Control)),
            ("a\u{7f}b", Err(TenantIdError::Control)),
            ("a\u{85}b", Err(TenantIdError::Control)),
            ("ip:10.0.0.1", Err(TenantIdError::Reserved)),
        ];
        for (id, want) in cases {
            assert_eq!(validate(id), *want, "{id:?}");
        }
        assert_eq!(validate(&"t".repeat(MAX_TENANT_BYTES)), Ok(()));
        assert_eq!(
            validate(&"t".repeat(MAX_TENANT_BYTES + 1)),
            Err(TenantIdError::TooLong)
        );
        // 128 two-byte characters are 256 bytes; one more is too long.
        assert_eq!(validate(&"é".repeat(128)), Ok(()));
        assert_eq!(validate(&"é".repeat(129)), Err(TenantIdError::TooLong));
        assert_eq!(anonymous("2001:db8::".parse().unwrap()), "ip:2001:db8::");
    }

    #[test]
    fn encoding_is_percent_encoded_utf8_of_non_ascii_percent_and_braces() {
        assert!(matches!(
            encode("acme-1.Corp_x"),
            Cow::Borrowed("acme-1.Corp_x")
        ));
        assert_eq!(encode("Acme Corp"), "Acme Corp");
        assert_eq!(encode("a}b{c"), "a%7Db%7Bc");
        assert_eq!(encode("100%"), "100%25");
        assert_eq!(encode("zürich"), "z%C3%BCrich");
        assert_eq!(encode("日本"), "%E6%97%A5%E6%9C%AC");
        assert_eq!(encode("ip:2001:db8::"), "ip:2001:db8::");
        // Injective: the percent sign is escaped, so an encoded id never collides with a raw one.
        assert_ne!(encode("a{b"), encode("a%7Bb"));
    }
}
