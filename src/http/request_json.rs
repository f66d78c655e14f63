//! A count the client states in its request's JSON body (`usage.reserve: { from_json: <field>,
//! default: <n> }`, docs/usage-cost.md#reserve-from-the-request-body): which bodies may be read
//! before the decision, and the top-level field's value.
//!
//! A body is read only when it can be replayed to the backend whole: Pingora keeps what the
//! request stage read in its retry buffer (pingora-core `BODY_BUF_LIMIT`, 64 KiB) and sends it
//! upstream, so only a JSON body whose `Content-Length` fits that buffer qualifies. A chunked
//! body, a larger one or another media type is left to stream as usual.

use ::http::header::{CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING};
use ::http::HeaderMap;

/// Bytes of request body Pingora can buffer and replay to the backend (its retry buffer,
/// pingora-core 0.9 `BODY_BUF_LIMIT`).
pub const REPLAY_LIMIT: usize = 64 * 1024;

/// True when the request head announces a body that may be read before the decision: a JSON
/// media type (`application/json` or a `+json` suffix, RFC 6839; parameters ignored), a
/// `Content-Length` of 1..=`limit` bytes and no `Transfer-Encoding`.
pub fn readable(headers: &HeaderMap, limit: usize) -> bool {
    if headers.contains_key(TRANSFER_ENCODING) {
        return false;
    }
    let len = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let json = headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| is_json(v.as_bytes()));
    json && len.is_some_and(|n| n > 0 && n <= limit)
}

/// True for `application/json` and `<type>/<subtype>+json`, case-insensitive.
pub fn is_json(content_type: &[u8]) -> bool {
    let essence = content_type
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii()
        .to_ascii_lowercase();
    essence == b"application/json" || (essence.ends_with(b"+json") && essence.contains(&b'/'))
}

/// The value of the top-level field `field` of a JSON object `body`, when it is a non-negative
/// integer (`1000`; not `1000.0`, `"1000"`, `-1` or `1e3`); `None` for any other value, a
/// missing field, or a body that is not a JSON object.
pub fn top_level_count(body: &[u8], field: &str) -> Option<u64> {
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body).ok()?;
    object.get(field)?.as_u64()
}

#[cfg(test)]
mod tests;
