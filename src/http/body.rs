//! Request-body size limit of a route (`routes[].max_body_bytes`): decided up front from
//! `Content-Length`, and while streaming for bodies without one (chunked), so that an oversized
//! body is refused (413) without being read to its end.

/// Whether a declared `Content-Length` (bytes) is over `max` (bytes; `None` = unlimited).
/// An unparseable value is left to the HTTP parser (it refuses it with 400).
pub fn declared_too_large(content_length: Option<&[u8]>, max: Option<u64>) -> bool {
    let (Some(value), Some(max)) = (content_length, max) else {
        return false;
    };
    std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|len| len > max)
}

/// The body length a request head declares: its `Content-Length` (bytes) when it has no
/// `Transfer-Encoding`; `None` for a chunked body, an HTTP/2 request without the field, or an
/// unparseable value (the HTTP parser refuses that one).
pub fn declared_length(headers: &::http::HeaderMap) -> Option<u64> {
    if headers.contains_key(::http::header::TRANSFER_ENCODING) {
        return None;
    }
    let value = headers.get(::http::header::CONTENT_LENGTH)?;
    value.to_str().ok()?.trim().parse().ok()
}

/// Adds a received chunk of `chunk` bytes to the running `total` (bytes) and says whether the
/// body is now over `max`.
pub fn streamed_too_large(total: &mut u64, chunk: usize, max: Option<u64>) -> bool {
    *total = total.saturating_add(chunk as u64);
    max.is_some_and(|m| *total > m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_length_against_the_limit() {
        assert!(!declared_too_large(Some(b"10"), Some(10)));
        assert!(declared_too_large(Some(b"11"), Some(10)));
        assert!(!declared_too_large(Some(b"99999"), None));
        assert!(!declared_too_large(None, Some(1)));
        assert!(!declared_too_large(Some(b"x"), Some(1)));
    }

    #[test]
    fn declared_length_needs_content_length_without_transfer_encoding() {
        let mut h = ::http::HeaderMap::new();
        assert_eq!(declared_length(&h), None);
        h.insert("content-length", " 42".parse().unwrap());
        assert_eq!(declared_length(&h), Some(42));
        h.insert("transfer-encoding", "chunked".parse().unwrap());
        assert_eq!(declared_length(&h), None);
        h.remove("transfer-encoding");
        h.insert("content-length", "4x".parse().unwrap());
        assert_eq!(declared_length(&h), None);
    }

    #[test]
    fn running_total_stops_past_the_limit() {
        let mut total = 0;
        assert!(!streamed_too_large(&mut total, 6, Some(10)));
        assert!(!streamed_too_large(&mut total, 4, Some(10)));
        assert!(streamed_too_large(&mut total, 1, Some(10)));
        let mut total = u64::MAX - 1;
        assert!(streamed_too_large(&mut total, 5, Some(10)));
        assert_eq!(total, u64::MAX);
    }
}
