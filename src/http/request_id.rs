//! The one rule for a client's `X-Request-Id`, used by the front end's head refusals and by the
//! proxy for served requests alike.
//!
//! A client's id is kept only when the request carries exactly one `X-Request-Id` field whose
//! value is 1..=200 bytes of visible ASCII (RFC 9110 `VCHAR`, 0x21..=0x7E: no space, tab or
//! obs-text). Anything else (no field, two fields, an empty, long or spaced value) gets a new
//! UUID v4, so an id never carries a field separator into the text access log.

/// Longest client request id kept, in bytes.
pub const MAX_LEN: usize = 200;

/// The client's request id among `values` (every `X-Request-Id` field of the request, in
/// order), or `None` when a new id must be generated: not exactly one field, or a value that is
/// empty, longer than [`MAX_LEN`] bytes, or not all visible ASCII.
pub fn accepted<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<&'a str> {
    let mut values = values.into_iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let visible =
        !first.is_empty() && first.len() <= MAX_LEN && first.iter().all(|b| b.is_ascii_graphic());
    // Visible ASCII is UTF-8.
    visible.then(|| std::str::from_utf8(first).ok()).flatten()
}

/// A new random request id: UUID v4, hyphenated lower case (36 bytes, one allocation).
pub fn generate() -> String {
    generate_into(&mut [0u8; LENGTH]).to_string()
}

/// Length of a generated request id, in bytes.
pub const LENGTH: usize = uuid::fmt::Hyphenated::LENGTH;

/// [`generate`] written into `buf`, without allocating: for a caller that copies it into a
/// buffer of its own anyway (a header value).
pub fn generate_into(buf: &mut [u8; LENGTH]) -> &str {
    uuid::Uuid::new_v4().hyphenated().encode_lower(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: &[u8]) -> Option<&str> {
        accepted([v])
    }

    #[test]
    fn one_visible_value_is_kept() {
        assert_eq!(one(b"abc-123"), Some("abc-123"));
        assert_eq!(one(br#"a"b,c;d"#), Some(r#"a"b,c;d"#));
        let long = "x".repeat(MAX_LEN);
        assert_eq!(one(long.as_bytes()), Some(long.as_str()));
    }

    #[test]
    fn anything_else_gets_a_new_id() {
        assert_eq!(accepted(Vec::<&[u8]>::new()), None);
        assert_eq!(one(b""), None);
        assert_eq!(one("x".repeat(MAX_LEN + 1).as_bytes()), None);
        for spaced in [&b"a b"[..], b"a\tb", b" a", b"a ", b"caf\xc3\xa9", b"\xff"] {
            assert_eq!(one(spaced), None, "{spaced:?}");
        }
        // Two fields, even two valid or equal ones: which one is meant is unknown.
        assert_eq!(accepted([&b"one"[..], b"two"]), None);
        assert_eq!(accepted([&b"one"[..], b"one"]), None);
    }

    #[test]
    fn generated_ids_are_uuid_v4_text() {
        let id = generate();
        assert_eq!(id.len(), 36);
        assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 4);
        assert_eq!(one(id.as_bytes()), Some(id.as_str()));
    }
}
