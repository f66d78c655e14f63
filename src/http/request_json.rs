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

/// A count a client states in its request (a cost, docs/rules.md#costs-read-from-the-request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stated {
    /// A non-negative integer; a number too large for `u64` is `u64::MAX`.
    Count(u64),
    /// Not there (no such field, header or parameter; JSON `null`; no body).
    Absent,
    /// There, but not a non-negative integer (`-1`, `2.5`, `"7"`, `abc`, a body that is not JSON).
    Malformed,
}

/// The count at dotted `path` (`["batch", "size"]`) of JSON `body`: objects are walked by
/// field name, an array by a decimal index, and a last segment `length` on an array is its
/// length (`["items", "length"]`). A number must be a non-negative integer (`1000`, not
/// `1000.5` or `-1`; `1e3`, a float in JSON's grammar, is malformed); a number at or past
/// `u64::MAX` (`1e30`, or digits too many for `u64`) is `u64::MAX`.
pub fn count_at(body: &[u8], path: &[String]) -> Stated {
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Stated::Malformed;
    };
    for (i, segment) in path.iter().enumerate() {
        let next = match &mut value {
            serde_json::Value::Object(o) => o.remove(segment.as_str()),
            serde_json::Value::Array(a) if segment == "length" && i + 1 == path.len() => {
                return Stated::Count(a.len() as u64);
            }
            serde_json::Value::Array(a) => match segment.parse::<usize>() {
                Ok(n) if n < a.len() => Some(a.swap_remove(n)),
                Ok(_) => None,
                Err(_) => return Stated::Malformed,
            },
            serde_json::Value::Null => None,
            _ => return Stated::Malformed,
        };
        match next {
            Some(v) => value = v,
            None => return Stated::Absent,
        }
    }
    match value {
        serde_json::Value::Null => Stated::Absent,
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(v) => Stated::Count(v),
            // An integer past u64 parses as a float in serde_json: a huge count, not a bad one.
            None if !n.is_f64() => Stated::Malformed,
            None => match n.as_f64() {
                Some(f) if f >= u64::MAX as f64 => Stated::Count(u64::MAX),
                _ => Stated::Malformed,
            },
        },
        _ => Stated::Malformed,
    }
}

/// A count written as decimal digits (a header value or a query parameter), optional
/// surrounding spaces or tabs allowed: `Count` (u64::MAX when the digits overflow), or
/// `Malformed` for anything else (`-1`, `+1`, `1.5`, `0x10`, empty).
pub fn decimal_count(text: &[u8]) -> Stated {
    let t = text.trim_ascii();
    if t.is_empty() || !t.iter().all(u8::is_ascii_digit) {
        return Stated::Malformed;
    }
    let mut v: u64 = 0;
    for d in t {
        v = v.saturating_mul(10).saturating_add(u64::from(d - b'0'));
    }
    Stated::Count(v)
}

/// An OpenAI-style streamed request's JSON `body` with `stream_options.include_usage: true`, so
/// its stream ends with a chunk stating the usage (OpenAI's chat completions API; LiteLLM and
/// Envoy AI Gateway add it the same way). `None` when the body needs no change: not a JSON
/// object, `stream` not `true`, or `include_usage` already `true`.
///
/// Without `stream_options` the member is inserted as the object's first, leaving every byte
/// the client sent as it was; otherwise the object is written anew with `include_usage` set
/// (other members of `stream_options` kept).
pub fn with_include_usage(body: &[u8]) -> Option<Vec<u8>> {
    let mut object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(body).ok()?;
    if object.get("stream") != Some(&serde_json::Value::Bool(true)) {
        return None;
    }
    const MEMBER: &[u8] = br#""stream_options":{"include_usage":true},"#;
    match object.get_mut("stream_options") {
        None => {
            // The body is an object with at least `stream`: after its `{`, a member and a comma.
            let open = body.iter().position(|&b| b == b'{')?;
            let mut out = Vec::with_capacity(body.len() + MEMBER.len());
            out.extend_from_slice(&body[..=open]);
            out.extend_from_slice(MEMBER);
            out.extend_from_slice(&body[open + 1..]);
            Some(out)
        }
        Some(serde_json::Value::Object(o))
            if o.get("include_usage") == Some(&serde_json::Value::Bool(true)) =>
        {
            None
        }
        Some(serde_json::Value::Object(o)) => {
            o.insert("include_usage".into(), serde_json::Value::Bool(true));
            serde_json::to_vec(&object).ok()
        }
        Some(other) => {
            *other = serde_json::json!({ "include_usage": true });
            serde_json::to_vec(&object).ok()
        }
    }
}

#[cfg(test)]
mod tests;
