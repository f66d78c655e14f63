//! Applies the shared request-head rules ([`crate::http::head`]) to each protocol: an HTTP/1.x
//! head on its raw bytes before Pingora parses it ([`check_head`]), so that what Pingora would
//! answer with a plain-text 400 (or a limit it does not have) becomes a counted, logged
//! problem+json answer with a request id; an HTTP/2 head as Pingora parsed it, before the first
//! stage ([`check_h2`]).
//!
//! Pure: the bytes read so far (or the parsed head) and the limits in, a verdict out. HTTP/1
//! parsing is `httparse`, the parser Pingora uses, so a head accepted here is parsed the same
//! way there.

use crate::config::HttpLimits;
use crate::http::head::{self, Head, HeadFault, HeadLimits, HeadProblem, Protocol};
use crate::http::request_id;
use crate::pipeline::Outcome;
use pingora::http::RequestHeader;

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

impl HeadRefusal {
    fn of(problem: HeadProblem) -> HeadRefusal {
        let outcome = match problem.fault {
            HeadFault::Malformed => Outcome::Malformed,
            HeadFault::HeadersTooLarge => Outcome::HeadersTooLarge,
            HeadFault::TooManyHeaders => Outcome::TooManyHeaders,
            HeadFault::UriTooLong => Outcome::UriTooLong,
        };
        HeadRefusal {
            status: problem.fault.status(),
            outcome,
            detail: problem.detail,
            request_id: None,
        }
    }
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

fn head_limits(limits: &HttpLimits) -> HeadLimits {
    HeadLimits {
        max_bytes: limits.max_header_bytes,
        max_fields: limits.max_headers,
    }
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
    // A request line not ended yet is longer than anything read.
    let line = buf[start..]
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(usize::MAX);
    match head::size_problem(line, buf.len(), 0, head_limits(limits)) {
        Some(p) => HeadVerdict::Refused(HeadRefusal::of(p)),
        None => HeadVerdict::Partial,
    }
}

/// Judges `buf`, the bytes received so far on a connection for its next request.
pub fn check_head(buf: &[u8], limits: &HttpLimits) -> HeadVerdict {
    check_head_and_end(buf, limits).0
}

/// [`check_head`], and for a complete head where its request ends in `buf` (after the head when
/// it has no body, after `Content-Length` body bytes otherwise, RFC 9112 6.3; `None` for a
/// chunked body or an `Upgrade` request, whose end is not known from the head), read from the
/// same parse: the front end needs both, and a second parse cost as much as the first.
pub fn check_head_and_end(buf: &[u8], limits: &HttpLimits) -> (HeadVerdict, Option<usize>) {
    // Pingora's own cap (and the largest `server.max_headers` validation allows). Uninitialised
    // slots: this runs once per request, and initialising 256 slots (8 KiB) cost more than the
    // parse of a typical head.
    let mut slots = [const { std::mem::MaybeUninit::<httparse::Header>::uninit() }; 256];
    let mut req = httparse::Request::new(&mut []);
    let parsed = req.parse_with_uninit_headers(buf, &mut slots[..limits.max_headers.min(256)]);
    let len = match parsed {
        Ok(httparse::Status::Partial) if buf.len() > limits.max_header_bytes => {
            return (too_large(buf, limits), None)
        }
        Ok(httparse::Status::Partial) => return (HeadVerdict::Partial, None),
        Ok(httparse::Status::Complete(n)) if n > limits.max_header_bytes => {
            return (too_large(buf, limits), None)
        }
        Ok(httparse::Status::Complete(n)) => n,
        Err(httparse::Error::TooManyHeaders) => {
            let over = limits.max_headers + 1;
            let verdict = match head::size_problem(0, 0, over, head_limits(limits)) {
                Some(p) => HeadVerdict::Refused(HeadRefusal::of(p)),
                None => HeadVerdict::Partial,
            };
            return (verdict, None);
        }
        Err(e) => {
            let detail = format!("malformed request head: {e}");
            return (refuse(400, Outcome::Malformed, detail), None);
        }
    };
    let parsed = Head {
        protocol: Protocol::Http1 {
            minor: req.version.unwrap_or(1),
        },
        target: req.path.unwrap_or("").as_bytes(),
        authority: None,
        fields: fields(req.headers),
    };
    match head::problem(&parsed) {
        None => (HeadVerdict::Complete(len), end_of(req.headers, len)),
        Some(problem) => {
            let refusal = HeadRefusal {
                // Read only for a refusal (the proxy reads it itself for served requests).
                request_id: request_id::accepted(values(req.headers, "x-request-id"))
                    .map(str::to_string),
                ..HeadRefusal::of(problem)
            };
            (HeadVerdict::Refused(refusal), None)
        }
    }
}

/// Judges an HTTP/2 request head (h2c or h2 over TLS) by the same rules as [`check_head`]:
/// `:authority` stands where an HTTP/1 absolute-form authority would, and the lengths count the
/// head's HTTP/1.1 spelling. `None` when it may be served. Pingora (and the `h2` crate before it)
/// already refuse some of these heads their own way (docs/http-hardening.md#request-head-errors);
/// the rules hold here whatever they do.
pub fn check_h2(req: &RequestHeader, limits: &HttpLimits) -> Option<HeadRefusal> {
    // The rules walk the fields more than once; a header map's iterator walks them only once.
    let fields: Vec<(&[u8], &[u8])> = req
        .headers
        .iter()
        .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
        .collect();
    let parsed = Head {
        protocol: Protocol::Http2,
        target: req.raw_path(),
        authority: req.uri.authority().map(|a| a.as_str().as_bytes()),
        fields: fields.iter().copied(),
    };
    let problem = head::problem(&parsed)
        .or_else(|| head::h2_size_problem(req.method.as_str(), &parsed, head_limits(limits)))?;
    Some(HeadRefusal::of(problem))
}

/// The (name, value) pairs of a parsed HTTP/1 head.
fn fields<'h>(
    headers: &'h [httparse::Header<'_>],
) -> impl Iterator<Item = (&'h [u8], &'h [u8])> + Clone {
    headers.iter().map(|h| (h.name.as_bytes(), h.value))
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

/// Where the request of an accepted head of `head_len` bytes with these fields ends: after the
/// head when it has no body, after `Content-Length` body bytes otherwise (RFC 9112 6.3). `None`
/// for a chunked body (its end is only known by reading it) and for an `Upgrade` request (what
/// follows a `101` is another protocol). Bytes past the end are the next pipelined request(s).
fn end_of(headers: &[httparse::Header<'_>], head_len: usize) -> Option<usize> {
    if values(headers, "transfer-encoding").next().is_some()
        || values(headers, "upgrade").next().is_some()
    {
        return None;
    }
    // check_head accepted the head: every Content-Length value is the same number.
    let length = head::content_lengths(fields(headers))
        .next()
        .map_or(Some(0), |v| {
            std::str::from_utf8(v).ok()?.parse::<usize>().ok()
        })?;
    head_len.checked_add(length)
}

#[cfg(test)]
mod tests;
