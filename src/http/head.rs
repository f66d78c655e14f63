//! The request-head rules, one set for every protocol a request may arrive by: HTTP/1.x (checked
//! by the front end on the raw bytes, before Pingora parses them), and HTTP/2 in cleartext (h2c)
//! or over TLS (checked on the parsed head before the first stage). Same request, same verdict:
//! a head a backend could read another way than the router did never gets past this.
//!
//! Pure: a [`Head`] (the protocol's view of the request line and fields) in, the first
//! [`HeadProblem`] out. The rules (docs/http-hardening.md#request-head-errors):
//! - `Host`: at most one field, no userinfo, RFC 9110 `uri-host [ ":" port ]` only (RFC 9112 3.2).
//! - The request's own authority (an HTTP/1 absolute-form target's, RFC 9112 3.2.2; HTTP/2
//!   `:authority`, RFC 9113 8.3.1): no userinfo, the same syntax as `Host`, and a `Host` beside
//!   it must equal it byte for byte.
//! - Connection-specific fields: on HTTP/1, the `Connection` nominations Pingora refuses
//!   ([`super::connection::nomination_problem`]); on HTTP/2 none at all (RFC 9113 8.2.2).
//! - Framing: `Transfer-Encoding` only on HTTP/1.1 and ending in `chunked`; every
//!   `Content-Length` value a number, and all the same.
//! - Lengths ([`size_problem`]): `server.max_headers` fields and `server.max_header_bytes` bytes
//!   of head, counted as the head's HTTP/1.1 spelling whatever the protocol (414 when the request
//!   line alone is longer).

use super::connection;
use super::target::{is_sub_delim, is_unreserved};

/// What kind of refusal a head gets: the status and the metrics outcome follow from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadFault {
    /// 400: a head that breaks a rule above.
    Malformed,
    /// 431: more bytes of head than `server.max_header_bytes`.
    HeadersTooLarge,
    /// 431: more header fields than `server.max_headers`.
    TooManyHeaders,
    /// 414: a request line alone longer than `server.max_header_bytes`.
    UriTooLong,
}

impl HeadFault {
    /// The response status.
    pub fn status(self) -> u16 {
        match self {
            HeadFault::Malformed => 400,
            HeadFault::HeadersTooLarge | HeadFault::TooManyHeaders => 431,
            HeadFault::UriTooLong => 414,
        }
    }
}

/// Why a head is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadProblem {
    pub fault: HeadFault,
    /// A sentence for the problem `detail` and the log.
    pub detail: String,
}

impl HeadProblem {
    fn malformed(detail: &str) -> HeadProblem {
        HeadProblem {
            fault: HeadFault::Malformed,
            detail: detail.to_string(),
        }
    }
}

/// Which protocol a head came by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.0 or HTTP/1.1 (`minor` version 0 or 1).
    Http1 { minor: u8 },
    /// HTTP/2 (h2c or h2 over TLS).
    Http2,
}

/// One request head as its protocol gives it.
pub struct Head<'a, F> {
    pub protocol: Protocol,
    /// HTTP/1: the request-target as sent; HTTP/2: `:path`.
    pub target: &'a [u8],
    /// HTTP/2 `:authority`, when sent (HTTP/1 carries an authority only in an absolute-form
    /// target, found in `target`).
    pub authority: Option<&'a [u8]>,
    /// Every header field (name, value) in order, pseudo-header fields excluded. Iterated more
    /// than once (so `Clone`); values are compared trimmed of optional whitespace.
    pub fields: F,
}

/// Bounds on a head's size (`server.max_header_bytes`, `server.max_headers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLimits {
    pub max_bytes: usize,
    pub max_fields: usize,
}

/// The first rule `head` breaks, if any (lengths aside: [`size_problem`]).
pub fn problem<'a, F>(head: &Head<'a, F>) -> Option<HeadProblem>
where
    F: Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a,
{
    semantic_problem(head).map(HeadProblem::malformed)
}

/// The values of every `name` field of `fields`, in order.
fn values<'a, F>(fields: &F, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a
where
    F: Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a,
{
    fields
        .clone()
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v)
}

/// HTTP/2 forbids these fields outright (RFC 9113 8.2.2): they are about one HTTP/1 connection.
const H2_CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

fn semantic_problem<'a, F>(head: &Head<'a, F>) -> Option<&'static str>
where
    F: Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a,
{
    let fields = &head.fields;
    let mut hosts = values(fields, "host");
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
    let h2 = head.protocol == Protocol::Http2;
    let authority = match head.protocol {
        Protocol::Http2 => head.authority,
        Protocol::Http1 { .. } => absolute_authority(head.target),
    };
    if let Some(authority) = authority {
        if authority.contains(&b'@') {
            return Some(match h2 {
                true => "userinfo in :authority",
                false => "userinfo in the request target",
            });
        }
        if !is_host_field(authority) {
            return Some(match h2 {
                true => ":authority is not a host with an optional port",
                false => "the request-target authority is not a host with an optional port",
            });
        }
        if host.is_some_and(|h| h != authority) {
            return Some(match h2 {
                true => "the Host header differs from :authority",
                false => "the Host header differs from the request-target authority",
            });
        }
    }
    match head.protocol {
        Protocol::Http2 => {
            let forbidden = fields.clone().any(|(name, value)| {
                H2_CONNECTION_SPECIFIC
                    .iter()
                    .any(|f| name.eq_ignore_ascii_case(f.as_bytes()))
                    || (name.eq_ignore_ascii_case(b"te")
                        && !value.trim_ascii().eq_ignore_ascii_case(b"trailers"))
            });
            if forbidden {
                return Some("a connection-specific header field in an HTTP/2 request");
            }
        }
        Protocol::Http1 { minor } => {
            if let Some(problem) = connection::nomination_problem(values(fields, "connection")) {
                return Some(problem);
            }
            let mut transfer_encodings = values(fields, "transfer-encoding").peekable();
            if transfer_encodings.peek().is_some() {
                if minor == 0 {
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
        }
    }
    let mut length: Option<&[u8]> = None;
    for value in content_lengths(fields.clone()) {
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

/// Every `Content-Length` value of `fields`, list members split and trimmed.
pub fn content_lengths<'a, F>(fields: F) -> impl Iterator<Item = &'a [u8]>
where
    F: Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a,
{
    values(&fields, "content-length")
        .flat_map(|v| v.split(|&b| b == b','))
        .map(|v| v.trim_ascii())
}

/// The length verdict of a head whose request line is `line_bytes` long, whose whole head is
/// `head_bytes` long (both as HTTP/1.1 bytes, line ends included) and which has `fields` header
/// fields: 431 `too_many_headers`, 414 when the request line alone is over `max_bytes`, else
/// 431 `headers_too_large`; `None` within the limits.
pub fn size_problem(
    line_bytes: usize,
    head_bytes: usize,
    fields: usize,
    limits: HeadLimits,
) -> Option<HeadProblem> {
    if fields > limits.max_fields {
        return Some(HeadProblem {
            fault: HeadFault::TooManyHeaders,
            detail: format!("more than {} header fields", limits.max_fields),
        });
    }
    if line_bytes > limits.max_bytes {
        return Some(HeadProblem {
            fault: HeadFault::UriTooLong,
            detail: format!("the request line is longer than {} bytes", limits.max_bytes),
        });
    }
    (head_bytes > limits.max_bytes).then(|| HeadProblem {
        fault: HeadFault::HeadersTooLarge,
        detail: format!("the request head is larger than {} bytes", limits.max_bytes),
    })
}

/// [`size_problem`] of an HTTP/2 head, counted as its HTTP/1.1 spelling: `<method> <:path>
/// HTTP/1.1`, each field as `name: value`, `:authority` as a `Host` field when there is none,
/// each line with its CRLF, and the empty line that ends the head.
pub fn h2_size_problem<'a, F>(
    method: &str,
    head: &Head<'a, F>,
    limits: HeadLimits,
) -> Option<HeadProblem>
where
    F: Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a,
{
    let line = method.len() + 1 + head.target.len() + " HTTP/1.1\r\n".len();
    let (mut bytes, mut count) = (line + 2, 0);
    for (name, value) in head.fields.clone() {
        bytes += name.len() + 2 + value.len() + 2;
        count += 1;
    }
    if let Some(authority) = head.authority {
        if values(&head.fields, "host").next().is_none() {
            bytes += "host: ".len() + authority.len() + 2;
            count += 1;
        }
    }
    size_problem(line, bytes, count, limits)
}

/// The bytes of an RFC 3986 reg-name (unreserved, `%` and sub-delims), one lookup per byte.
static REG_NAME: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = is_unreserved(c) || c == b'%' || is_sub_delim(c);
        b += 1;
    }
    table
};

/// Whether a (trimmed) `Host` field value is RFC 9110 `uri-host [ ":" port ]` (RFC 3986
/// `host`: an IP-literal in brackets, or a reg-name / IPv4 of unreserved, percent-encoded and
/// sub-delim characters; `port` digits), or empty (allowed for a target without authority).
/// Anything else (`a:80:80`, `a/x`, `a b`, `a?x`, `[name]`) is refused as nginx does, so a
/// backend never sees a host spelling the router did not route.
pub fn is_host_field(value: &[u8]) -> bool {
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
    let reg_name = |b: u8| REG_NAME[usize::from(b)];
    let port_ok = match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    };
    host.iter().all(|&b| reg_name(b)) && port_ok
}

/// The authority of an `http(s)://authority/...` target.
pub fn absolute_authority(target: &[u8]) -> Option<&[u8]> {
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
