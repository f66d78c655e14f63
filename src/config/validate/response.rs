//! `response:`: the status of a rate-limit rejection and which RateLimit headers to send.

use super::common::Check;
use crate::config::model::{HeaderMode, ResponseSettings};
use crate::config::raw::RawResponse;

/// `response:`, with its defaults (429, IETF headers) when absent.
pub(super) fn settings(c: &mut Check, raw: Option<&RawResponse>) -> ResponseSettings {
    let status = raw.and_then(|r| r.status).unwrap_or(429);
    if !(400..=599).contains(&status) {
        c.err(
            "response.status",
            format!("must be a 4xx or 5xx status (got {status})"),
        );
    }
    let headers = match raw.and_then(|r| r.headers.as_deref()) {
        None | Some("ietf") => HeaderMode::Ietf,
        Some("legacy") => HeaderMode::Legacy,
        Some("both") => HeaderMode::Both,
        Some("none") => HeaderMode::None,
        Some(other) => {
            c.err(
                "response.headers",
                format!("\"{other}\" is not a header mode (ietf, legacy, both, none)"),
            );
            HeaderMode::Ietf
        }
    };
    ResponseSettings {
        status: status.clamp(400, 599) as u16,
        headers,
    }
}
