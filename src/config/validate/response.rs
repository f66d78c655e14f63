//! `response:`: the status of a rate-limit rejection and which RateLimit headers to send.

use super::common::Check;
use crate::config::model::{HeaderMode, ResponseSettings};
use crate::config::raw::{RawHeaderModes, RawResponse};

/// `response:`, with its defaults (429, IETF headers) when absent.
pub(super) fn settings(c: &mut Check, raw: Option<&RawResponse>) -> ResponseSettings {
    let status = raw.and_then(|r| r.status).unwrap_or(429);
    if !(400..=599).contains(&status) {
        c.err(
            "response.status",
            format!("must be a 4xx or 5xx status (got {status})"),
        );
    }
    let (names, path): (Vec<&str>, _) = match raw.and_then(|r| r.headers.as_ref()) {
        None => (Vec::new(), "response.headers"),
        Some(RawHeaderModes::One(m)) => (vec![m.as_str()], "response.headers"),
        Some(RawHeaderModes::List(l)) => (l.iter().map(String::as_str).collect(), "list"),
    };
    let mut headers = None;
    let mut openai = false;
    for (i, name) in names.iter().enumerate() {
        let field = match path {
            "list" => format!("response.headers[{i}]"),
            p => p.to_string(),
        };
        let mode = match *name {
            "openai" if path == "list" => {
                openai = true;
                continue;
            }
            "ietf" => HeaderMode::Ietf,
            "legacy" => HeaderMode::Legacy,
            "both" => HeaderMode::Both,
            "none" => HeaderMode::None,
            other => {
                c.err(
                    field,
                    format!("\"{other}\" is not a header mode (ietf, legacy, both, none; openai in a list)"),
                );
                continue;
            }
        };
        if headers.replace(mode).is_some() {
            c.err(field, "give one of ietf, legacy, both, none (and openai)");
        }
    }
    ResponseSettings {
        status: status.clamp(400, 599) as u16,
        headers: headers.unwrap_or(HeaderMode::Ietf),
        openai,
    }
}
