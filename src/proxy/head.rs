//! Checks a request head (request line and header fields, HTTP/1.x) before Pingora parses it, so
//! that what Pingora would answer with a plain-text 400 (or a limit it does not have) becomes a
//! counted, logged problem+json answer with a request id.
//!
//! Pure: the bytes read so far and the limits in, a verdict out. Parsing is `httparse`, the parser
//! Pingora uses, so a head accepted here is parsed the same way there. The semantic checks mirror
//! Pingora 0.9's `validate_request` (RFC 9112): one `Host`, no userinfo in it, a `Host` equal to an
//! absolute-form authority, agreeing `Content-Length` values, `Transfer-Encoding` only on HTTP/1.1
//! and ending in `chunked`; and the `Connection` nominations Pingora refuses
//! ([`connection::nomination_problem`]), so such a request is refused before any stage.

use crate::config::HttpLimits;
use crate::http::{connection, request_id};
use crate::pipeline::Outcome;

/// Why a head is refused: status, a stable outcome label (metrics), and a detail sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadRefusal {
    /// 400, 414 or 431.
    pub status: u16,
    /// `malformed`, `headers_too_large`, `too_many_headers` or `uri_too_long`.
    pub outcome: Outcome,
    /// Human-readable reason for the problem `detail` and the log.
    pub detail: String,
    /// The client's `X-Request-Id` when the head was complete enough to read it.
    pub request_id: Option<String>,
}

/// What the bytes read so far amount to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadVerdict {
    /// Not a complete head yet and within limits: read more.
    Partial,
    /// A complete, acceptable head of this many bytes (body bytes may follow in the buffer).
    Complete(usize),
    /// Refuse the request and close the connection.
    Refused(HeadRefusal),
}

fn refuse(status: u16, outcome: Outcome, detail: impl Into<String>) -> HeadVerdict {
    HeadVerdict::Refused(HeadRefusal {
        status,
        outcome,
        detail: detail.into(),
        request_id: None,
    })
}

fn too_large(buf: &[u8], limits: &HttpLimits) -> HeadVerdict {
    // Leading empty lines are allowed before the request line (RFC 9112 2.2).
    let start = buf
        .iter()
        .position(|b| !matches!(b, b'\r' | b'\n'))
        .unwrap_or(buf.len());
    let line_end = buf[start..].iter().position(|&b| b == b'\n');
    if line_end.is_none_or(|end| end > limits.max_header_bytes) {
        refuse(
            414,
            Outcome::UriTooLong,
            format!(
                "the request line is longer than {} bytes",
                limits.max_header_bytes
            ),
        )
    } else {
        refuse(
            431,
            Outcome::HeadersTooLarge,
            format!(
                "the request head is larger than {} bytes",
                limits.max_header_bytes
            ),
        )
    }
}

/// Judges `buf`, the bytes received so far on a connection for its next request.
pub fn check_head(buf: &[u8], limits: &HttpLimits) -> HeadVerdict {
    // Pingora's own cap (and the largest `server.max_headers` validation allows). Uninitialised
    // slots: this runs once per request, and initialising 256 slots (8 KiB) cost more than the
    // parse of a typical head.
    let mut slots = [const { std::mem::MaybeUninit::<httparse::Header>::uninit() }; 256];
    let mut req = httparse::Request::new(&mut []);
    let parsed = req.parse_with_uninit_headers(buf, &mut slots[..limits.max_headers.min(256)]);
    let len = match parsed {
        Ok(httparse::Status::Partial) if buf.len() > limits.max_header_bytes => {
            return too_large(buf, limits)
        }
        Ok(httparse::Status::Partial) => return HeadVerdict::Partial,
        Ok(httparse::Status::Complete(n)) if n > limits.max_header_bytes => {
            return too_large(buf, limits)
        }
        Ok(httparse::Status::Complete(n)) => n,
        Err(httparse::Error::TooManyHeaders) => {
            return refuse(
                431,
                Outcome::TooManyHeaders,
                format!("more than {} header fields", limits.max_headers),
            )
        }
        Err(e) => {
            return refuse(
                400,
                Outcome::Malformed,
                format!("malformed request head: {e}"),
            )
        }
    };
    let problem = semantic_problem(
        req.version.unwrap_or(1),
        req.path.unwrap_or("").as_bytes(),
        req.headers,
    );
    match problem {
        None => HeadVerdict::Complete(len),
        Some(detail) => HeadVerdict::Refused(HeadRefusal {
            status: 400,
            outcome: Outcome::Malformed,
            detail: detail.to_string(),
            // Read only for a refusal (the proxy reads it itself for served requests).
            request_id: request_id::accepted(values(req.headers, "x-request-id"))
                .map(str::to_string),
        }),
    }
}

/// The values of every `name` field of a parsed head, in order (no allocation: runs per request).
fn values<'h>(
    headers: &'h [httparse::Header<'_>],
    name: &'h str,
) -> impl Iterator<Item = &'h [u8]> {
    headers
        .iter()
        .filter(move |h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
}

/// The first RFC 9112 framing / authority problem of a parsed head, if any.
fn semantic_problem(
    minor_version: u8,
    target: &[u8],
    headers: &[httparse::Header<'_>],
) -> Option<&'static str> {
    let mut hosts = values(headers, "host");
    let host = hosts.next().map(|h| h.trim_ascii());
    if hosts.next().is_some() {
        return Some("multiple Host header fields");
    }
    if host.is_some_and(|h| h.contains(&b'@')) {
        return Some("userinfo in the Host header");
    }
    if host.is_some_and(|h| !is_host_field(h)) {
        return Some("the Host header is not a host with an optional port");
    }
    if let Some(problem) = connection::nomination_problem(values(headers, "connection")) {
        return Some(problem);
    }
    if let Some(authority) = absolute_authority(target) {
        if authority.contains(&b'@') {
            return Some("userinfo in the request target");
        }
        if host.is_some_and(|h| h != authority) {
            return Some("the Host header differs from the request-target authority");
        }
    }
    let mut transfer_encodings = values(headers, "transfer-encoding").peekable();
    if transfer_encodings.peek().is_some() {
        if minor_version == 0 {
            return Some("Transfer-Encoding is not allowed in HTTP/1.0 requests");
        }
        let last = transfer_encodings
            .flat_map(|v| v.split(|&b| b == b','))
            .map(|c| c.trim_ascii())
            .filter(|c| !c.is_empty())
            .last();
        if !last.is_some_and(|c| c.eq_ignore_ascii_case(b"chunked")) {
            return Some("the final Transfer-Encoding is not chunked");
        }
        return None; // Content-Length is ignored when Transfer-Encoding is present.
    }
    let mut length: Option<&[u8]> = None;
    for value in content_lengths(headers) {
        if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
            return Some("Content-Length is not a number");
        }
        if length.is_some_and(|l| l != value) {
            return Some("conflicting Content-Length values");
        }
        length = Some(value);
    }
    None
}

/// Every `Content-Length` value, list members split and trimmed.
fn content_lengths<'h>(headers: &'h [httparse::Header<'_>]) -> impl Iterator<Item = &'h [u8]> {
    values(headers, "content-length")
        .flat_map(|v| v.split(|&b| b == b','))
        .map(|v| v.trim_ascii())
}

/// Where the first request in `buf` ends, given its accepted head of `head_len` bytes: after the
/// head when it has no body, after `Content-Length` body bytes otherwise (RFC 9112 6.3). `None`
/// for a chunked body (its end is only known by reading it). Bytes past the end are the next
/// pipelined request(s). Called only when `buf` holds more than the head.
pub fn request_end(buf: &[u8], head_len: usize) -> Option<usize> {
    let mut slots = [const { std::mem::MaybeUninit::<httparse::Header>::uninit() }; 256];
    let mut req = httparse::Request::new(&mut []);
    req.parse_with_uninit_headers(&buf[..head_len], &mut slots)
        .ok()?;
    if values(req.headers, "transfer-encoding").next().is_some() {
        return None;
    }
    // check_head accepted the head: every Content-Length value is the same number.
    let length = content_lengths(req.headers).next().map_or(Some(0), |v| {
        std::str::from_utf8(v).ok()?.parse::<usize>().ok()
    })?;
    head_len.checked_add(length)
}

/// Whether a (trimmed) `Host` field value is RFC 9110 `uri-host [ ":" port ]` (RFC 3986
/// `host`: an IP-literal in brackets, or a reg-name / IPv4 of unreserved, percent-encoded and
/// sub-delim characters; `port` digits), or empty (allowed for a target without authority).
/// Anything else (`a:80:80`, `a/x`, `a b`, `a?x`, `[name]`) is refused as nginx does, so a
/// backend never sees a host spelling the router did not route.
fn is_host_field(value: &[u8]) -> bool {
    let (host, port) = if value.first() == Some(&b'[') {
        let Some(end) = value.iter().position(|&b| b == b']') else {
            return false;
        };
        let literal = &value[1..end];
        let ok = !literal.is_empty()
            && literal
                .iter()
                .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
        if !ok {
            return false;
        }
        (&value[..0], &value[end + 1..])
    } else {
        match value.iter().position(|&b| b == b':') {
            Some(i) => (&value[..i], &value[i..]),
            None => (value, &value[value.len()..]),
        }
    };
    let reg_name = |b: u8| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(&b);
    let port_ok = match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    };
    host.iter().all(|&b| reg_name(b)) && port_ok
}

/// The authority of an `http(s)://authority/...` target.
fn absolute_authority(target: &[u8]) -> Option<&[u8]> {
    let scheme = |s: &[u8]| {
        target
            .get(..s.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(s))
    };
    let rest = if scheme(b"http://") {
        &target[7..]
    } else if scheme(b"https://") {
        &target[8..]
    } else {
        return None;
    };
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

#[cfg(test)]
mod tests;
