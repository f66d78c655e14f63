//! Refusals of gRPC calls (docs/grpc.md, docs/DESIGN.md 4e "gRPC"): a request whose
//! `content-type` is `application/grpc*` gets every refusal tollgate makes as a trailers-only
//! response (HTTP 200, `grpc-status`, percent-encoded `grpc-message`,
//! `grpc-status-details-bin`) instead of a problem+json body, since a gRPC client reads only the
//! status in the trailers and would see any other HTTP status as a transport failure.
//!
//! Codes are those of the gRPC status codes doc (grpc/grpc `doc/statuscodes.md`); the mapping
//! from tollgate's refusals is [`code_for`], the one table (docs/grpc.md#status-mapping).

use super::problem::{Problem, QUOTA_EXCEEDED, REDUCED_CAPACITY};
use super::rpc_status;
use base64::Engine;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

/// The gRPC status codes tollgate answers with (numbers from grpc/grpc `doc/statuscodes.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 2: a refusal with no better match.
    Unknown = 2,
    /// 3: the request itself is malformed or lacks what a limit needs, whatever the state.
    InvalidArgument = 3,
    /// 4: the upstream or the request head did not arrive in time.
    DeadlineExceeded = 4,
    /// 7: the caller is known but may not do this.
    PermissionDenied = 7,
    /// 8: a rate limit, quota or size limit refused.
    ResourceExhausted = 8,
    /// 12: no route for this service or method.
    Unimplemented = 12,
    /// 14: no capacity now: upstream full or unhealthy, rate limiter failed closed, backend
    /// unreachable or failed.
    Unavailable = 14,
    /// 16: no or bad credentials.
    Unauthenticated = 16,
}

impl Code {
    /// The `grpc-status` value, e.g. `"8"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Unknown => "2",
            Code::InvalidArgument => "3",
            Code::DeadlineExceeded => "4",
            Code::PermissionDenied => "7",
            Code::ResourceExhausted => "8",
            Code::Unimplemented => "12",
            Code::Unavailable => "14",
            Code::Unauthenticated => "16",
        }
    }
}

/// The gRPC code of a refusal with HTTP `status` and problem type `type_uri`: the one mapping
/// table (docs/grpc.md#status-mapping).
///
/// The problem type decides first, so a quota refusal is `RESOURCE_EXHAUSTED` whatever
/// `response.status` says, and a capacity refusal (upstream full, rate limiter failed closed) is
/// `UNAVAILABLE`. Otherwise the HTTP status: 401 → 16, 403 → 7, 404 → 12, 408/504 → 4,
/// 413/429/431 → 8, 502/503 → 14, 400 → 3, anything else → 2 (as gRPC's own HTTP-to-status
/// mapping, grpc/grpc `doc/http-grpc-status-mapping.md`, except that tollgate's 400 is a refusal
/// of the client's request, not a transport failure: `INVALID_ARGUMENT`, not `INTERNAL`).
pub fn code_for(status: u16, type_uri: &str) -> Code {
    if type_uri == QUOTA_EXCEEDED {
        return Code::ResourceExhausted;
    }
    if type_uri == REDUCED_CAPACITY {
        return Code::Unavailable;
    }
    match status {
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        408 | 504 => Code::DeadlineExceeded,
        413 | 429 | 431 => Code::ResourceExhausted,
        502 | 503 => Code::Unavailable,
        400 => Code::InvalidArgument,
        _ => Code::Unknown,
    }
}

/// True for a gRPC request: `content-type` is `application/grpc` or starts with
/// `application/grpc+`, `application/grpc-` or `application/grpc;` (`+proto`, `-web`, ...), in
/// any case.
pub fn is_grpc(content_type: &[u8]) -> bool {
    const PREFIX: &[u8] = b"application/grpc";
    content_type.len() >= PREFIX.len()
        && content_type[..PREFIX.len()].eq_ignore_ascii_case(PREFIX)
        && matches!(
            content_type.get(PREFIX.len()),
            None | Some(b'+' | b'-' | b';')
        )
}

/// What `grpc-message` percent-encodes: bytes outside printable ASCII (0x20–0x7E) and `%`
/// itself (gRPC over HTTP/2, "Responses"); non-ASCII UTF-8 is always encoded.
const MESSAGE_ESCAPES: &AsciiSet = &CONTROLS.add(b'%');

/// `text` as a `grpc-message` value (percent-encoded UTF-8).
pub fn encode_message(text: &str) -> String {
    utf8_percent_encode(text, MESSAGE_ESCAPES).to_string()
}

/// A refusal as a gRPC status: the code, the message (the problem's detail, else its title) and
/// the wait in seconds when one is known.
#[derive(Debug, Clone, PartialEq)]
pub struct GrpcStatus {
    pub code: Code,
    pub message: String,
    pub retry_after_s: Option<u64>,
}

impl GrpcStatus {
    /// The gRPC status of `problem`, waiting `retry_after_s` seconds (`Retry-After`) if known.
    pub fn of(problem: &Problem, retry_after_s: Option<u64>) -> GrpcStatus {
        let message = if problem.detail.is_empty() {
            problem.title.to_string()
        } else {
            problem.detail.clone()
        };
        GrpcStatus {
            code: code_for(problem.status, problem.type_uri),
            message,
            retry_after_s,
        }
    }

    /// The status fields of a trailers-only response: `grpc-status`, `grpc-message`
    /// (percent-encoded) and `grpc-status-details-bin` (a `google.rpc.Status` of the same code
    /// and message, with `RetryInfo` when a wait is known; base64 without padding, as gRPC
    /// emits `-bin` values).
    pub fn fields(&self) -> [(&'static str, String); 3] {
        let code = self.code as i32;
        let details = rpc_status::encode_status(code, &self.message, self.retry_after_s);
        [
            ("grpc-status", self.code.as_str().to_string()),
            ("grpc-message", encode_message(&self.message)),
            (
                "grpc-status-details-bin",
                base64::engine::general_purpose::STANDARD_NO_PAD.encode(details),
            ),
        ]
    }
}

#[cfg(test)]
mod tests;
