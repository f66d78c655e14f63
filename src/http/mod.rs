//! Pure HTTP rules the layers above apply: request-target normalisation ([`target`]), the client
//! address ([`client_ip`]), request-body limits ([`body`]), `Connection` handling
//! ([`connection`]), the client request-id rule ([`request_id`]), names that only look like
//! tollgate's ([`lookalike`]), the method's spelling ([`method`]) and the proxy-set fields only
//! a trusted peer may send ([`proxy_fields`]), the usage count a backend reports in its response
//! ([`usage_count`]), read through its content coding ([`content_coding`]), and the one a client
//! states in its JSON request body ([`request_json`]), and the request-head rules every protocol is
//! held to ([`head`]). Where they are applied to HTTP/1 connections and HTTP/2 streams is `proxy/`
//! (`head.rs`, `front.rs`).

pub mod body;
pub mod client_ip;
pub mod connection;
pub mod content_coding;
pub mod head;
pub mod lookalike;
pub mod method;
pub mod proxy_fields;
pub mod request_id;
pub mod request_json;
pub mod target;
pub mod usage_count;

use ::http::header::HOST;
use pingora::http::RequestHeader;
use std::borrow::Cow;
use target::Target;

/// Host used for routing: the absolute-form authority when there is one (RFC 9112 3.2.2: it wins
/// over `Host`; Pingora already refuses a `Host` that differs from it), else the h2 `:authority`,
/// else `Host`; lower-cased and without port (see [`normalize_host`]); borrowed when it is
/// already lower case.
pub fn routing_host<'a>(req: &'a RequestHeader, target: &'a Target) -> Cow<'a, str> {
    let raw = target
        .authority
        .as_deref()
        .or_else(|| req.uri.authority().map(|a| a.as_str()))
        .or_else(|| req.headers.get(HOST).and_then(|h| h.to_str().ok()));
    raw.map(normalize_host).unwrap_or_default()
}

/// Makes `req` carry the normalised target in origin-form (what routing saw is what the backend
/// gets). An absolute-form authority becomes the `Host` header when the request had none.
/// Errors: the target cannot be represented (Pingora refuses it), which callers answer with 400.
pub fn apply_target(req: &mut RequestHeader, target: &Target) -> pingora::Result<()> {
    // Read before the request line changes (origin-form has no authority).
    let authority = match req.headers.get(HOST) {
        Some(_) => None,
        None => target
            .authority
            .clone()
            .or_else(|| req.uri.authority().map(|a| a.as_str().to_string())),
    };
    // Most targets are already normal: then the request line stays as it is (no URI rebuild).
    if !target.is_origin_form(req.raw_path()) {
        req.set_raw_path(&target.origin_form())?;
    }
    if let Some(authority) = authority {
        req.insert_header("Host", authority)?;
    }
    Ok(())
}

/// The first `max` bytes of a raw target, escaped for a log line.
pub fn log_escape(raw: &[u8], max: usize) -> String {
    let cut = &raw[..raw.len().min(max)];
    let mut s = cut.escape_ascii().to_string();
    if raw.len() > max {
        s.push('…');
    }
    s
}

/// `Host` value → lower-case host without port (IPv6 literals keep their brackets); borrowed
/// from `raw` when it is already lower case.
pub fn normalize_host(raw: &str) -> Cow<'_, str> {
    let raw = raw.trim();
    let host = if raw.starts_with('[') {
        raw.split_inclusive(']').next().unwrap_or(raw)
    } else {
        // `:` is ASCII: its byte position is a character boundary.
        raw.bytes()
            .rposition(|b| b == b':')
            .map_or(raw, |i| &raw[..i])
    };
    let host = host.trim_end_matches('.');
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }
}
