//! Editing the header fields of Pingora's heads. A parsed head keeps two maps sized exactly to
//! the fields it arrived with: the values and, for HTTP/1, the names' original case. Each field
//! tollgate adds through `insert_header` parses its name, copies it for the case map and grows
//! both maps, about 1.7 k instructions a field; `pingora-http` offers no way to reserve room.
//!
//! Unless `server.preserve_header_case` is on, an edited head is taken apart into its
//! `http` parts instead: its one value map gets room for the added fields at once, names are
//! `http` constants, and the head goes back together without a case map, so its names go out
//! in lower case (as Envoy sends them, and as HTTP/2 always does; RFC 9110 5.1: field names are
//! case-insensitive). What else the head holds is kept: method, target (a verbatim or non-UTF-8
//! one too), version, extensions, the reason phrase of a response.

use http::{HeaderMap, HeaderName, HeaderValue};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;

/// The header fields of one head, as tollgate edits them: through the head itself (keeping the
/// names' case) or through its bare value map.
pub(super) trait Fields {
    /// The fields as they are.
    fn map(&self) -> &HeaderMap;
    /// Sets `name` to `value` alone (removing its other values).
    fn insert(&mut self, name: HeaderName, value: HeaderValue) -> Result<()>;
    /// Removes every value of `name`.
    fn remove(&mut self, name: &HeaderName);
}

impl Fields for HeaderMap {
    fn map(&self) -> &HeaderMap {
        self
    }
    fn insert(&mut self, name: HeaderName, value: HeaderValue) -> Result<()> {
        self.try_insert(name, value)
            .or_err(ErrorType::InvalidHTTPHeader, "too many header fields")?;
        Ok(())
    }
    fn remove(&mut self, name: &HeaderName) {
        HeaderMap::remove(self, name);
    }
}

/// Through the head's own methods, which keep both of its maps (values and names' case).
macro_rules! fields_of_head {
    ($($head:ty),*) => {$(
        impl Fields for $head {
            fn map(&self) -> &HeaderMap {
                &self.headers
            }
            fn insert(&mut self, name: HeaderName, value: HeaderValue) -> Result<()> {
                self.insert_header(name, value)
            }
            fn remove(&mut self, name: &HeaderName) {
                self.remove_header(name);
            }
        }
    )*};
}
fields_of_head!(RequestHeader, ResponseHeader);

/// Runs `edit` on the fields of `req`, which will gain at most `extra` of them. With
/// `preserve_case` through the head itself; otherwise on its value map alone (module docs).
pub(super) fn edit_request<T>(
    req: &mut RequestHeader,
    preserve_case: bool,
    extra: usize,
    edit: impl FnOnce(&mut dyn Fields) -> T,
) -> T {
    if preserve_case {
        return edit(req);
    }
    // The target the URI does not reproduce (absolute-form, non-UTF-8) is kept as it came.
    let from_uri = req.uri.path_and_query().map(|p| p.as_str().as_bytes());
    let verbatim = (from_uri != Some(req.raw_path())).then(|| req.raw_path().to_vec());
    let end_stream = req.send_end_stream();
    let empty = http::Request::new(()).into_parts().0;
    let mut parts: http::request::Parts = std::mem::replace(req, empty.into()).into();
    parts.headers.reserve(extra);
    let out = edit(&mut parts.headers);
    *req = parts.into();
    if let Some(raw) = verbatim.filter(|raw| !raw.is_empty()) {
        // Parsed once already when the head was read, so it parses again.
        let _ = req.set_raw_path(&raw);
    }
    if let Some(end) = end_stream {
        req.set_send_end_stream(end);
    }
    out
}

/// [`edit_request`] for a response head.
pub(super) fn edit_response<T>(
    resp: &mut ResponseHeader,
    preserve_case: bool,
    extra: usize,
    edit: impl FnOnce(&mut dyn Fields) -> T,
) -> T {
    if preserve_case {
        return edit(resp);
    }
    let status = resp.status;
    let reason = resp
        .get_reason_phrase()
        .filter(|r| Some(*r) != status.canonical_reason())
        .map(str::to_owned);
    let empty = http::Response::new(()).into_parts().0;
    let mut parts: http::response::Parts = std::mem::replace(resp, empty.into()).into();
    parts.headers.reserve(extra);
    let out = edit(&mut parts.headers);
    *resp = parts.into();
    if reason.is_some() {
        let _ = resp.set_reason_phrase(reason.as_deref());
    }
    out
}

/// The header name for one of tollgate's own names (`RateLimit-Policy`, `Retry-After`, ...):
/// a constant for the common ones, else parsed (lower-cased).
pub(super) fn name(name: &str) -> Result<HeaderName> {
    // A match, not a table: a table of `HeaderName`s would be built and dropped at every call.
    let known = match name {
        "RateLimit-Policy" => HeaderName::from_static("ratelimit-policy"),
        "RateLimit" => HeaderName::from_static("ratelimit"),
        "X-RateLimit-Limit" => HeaderName::from_static("x-ratelimit-limit"),
        "X-RateLimit-Remaining" => HeaderName::from_static("x-ratelimit-remaining"),
        "X-RateLimit-Reset" => HeaderName::from_static("x-ratelimit-reset"),
        "Retry-After" => HeaderName::from_static("retry-after"),
        _ => {
            return HeaderName::from_bytes(name.as_bytes())
                .or_err(ErrorType::InvalidHTTPHeader, "header name")
        }
    };
    Ok(known)
}

/// A header value from bytes tollgate made (always valid ones; an invalid one is an error).
pub(super) fn value<B>(bytes: B) -> Result<HeaderValue>
where
    B: TryInto<HeaderValue>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    bytes
        .try_into()
        .or_err(ErrorType::InvalidHTTPHeader, "header value")
}

/// [`value`] of bytes that share their buffer (a slice of it, without a copy).
pub(super) fn shared_value(bytes: bytes::Bytes) -> Result<HeaderValue> {
    HeaderValue::from_maybe_shared(bytes).or_err(ErrorType::InvalidHTTPHeader, "header value")
}

#[cfg(test)]
mod tests;
