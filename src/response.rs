//! Every response tollgate writes itself: status, headers and RFC 9457 problem+json bodies.
//!
//! Rate-limit headers follow draft-ietf-httpapi-ratelimit-headers-11 (`RateLimit-Policy`,
//! `RateLimit`) with the optional legacy `X-RateLimit-*` family; `Retry-After` is RFC 9110
//! delta-seconds. Pingora does not run `response_filter` for responses we write, so common
//! headers (request id, rate-limit fields) are added here and in `proxy` through [`QuotaHeaders`].

use crate::config::HeaderMode;
use crate::limit::{Decision, Rate};
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

/// IANA problem type for quota rejections (RFC 9457 registry).
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
/// IANA problem type for capacity rejections (concurrency, Redis fail-closed).
pub const REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/// An RFC 9457 problem detail.
#[derive(Debug, Clone)]
pub struct Problem {
    pub status: u16,
    /// Problem type URI; `about:blank` means "see the status code".
    pub type_uri: &'static str,
    pub title: &'static str,
    pub detail: String,
    /// Extension members (e.g. `violated-policies`, `policy`).
    pub extensions: Map<String, Value>,
}

impl Problem {
    /// A problem with type `about:blank` whose title is the status's reason phrase.
    pub fn status(status: u16, detail: impl Into<String>) -> Self {
        let title = http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Error");
        Problem {
            status,
            type_uri: "about:blank",
            title,
            detail: detail.into(),
            extensions: Map::new(),
        }
    }

    /// A problem of a registered type.
    pub fn typed(status: u16, type_uri: &'static str, title: &'static str, detail: String) -> Self {
        Problem {
            status,
            type_uri,
            title,
            detail,
            extensions: Map::new(),
        }
    }

    /// Adds an extension member.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extensions.insert(key.to_string(), value);
        self
    }

    /// The JSON body: the RFC 9457 members `type`, `title`, `status`, `detail`, plus
    /// `request-id` and the extension members (an extension named like a standard member
    /// replaces it), keys in sorted order. Serialized straight from the fields: no JSON tree is
    /// built and the extensions are not copied (this runs for every rejection).
    pub fn to_body(&self, request_id: &str) -> Bytes {
        // Sorted by key, as `extensions` (a sorted map) is, so one merge keeps the order.
        let standard = [
            ("detail", Member::Str(&self.detail)),
            ("request-id", Member::Str(request_id)),
            ("status", Member::Status(self.status)),
            ("title", Member::Str(self.title)),
            ("type", Member::Str(self.type_uri)),
        ];
        let mut out = Vec::with_capacity(256);
        let mut ser = serde_json::Serializer::new(&mut out);
        let written = (|| {
            let mut map = ser.serialize_map(None)?;
            let mut ext = self.extensions.iter().peekable();
            for (key, value) in standard {
                while let Some((k, v)) = ext.next_if(|(k, _)| k.as_str() < key) {
                    map.serialize_entry(k, v)?;
                }
                if ext.peek().is_some_and(|(k, _)| k.as_str() == key) {
                    continue;
                }
                map.serialize_entry(key, &value)?;
            }
            for (k, v) in ext {
                map.serialize_entry(k, v)?;
            }
            map.end()
        })();
        match written {
            Ok(()) => Bytes::from(out),
            Err(_) => Bytes::new(),
        }
    }
}

/// A standard member's value in [`Problem::to_body`].
enum Member<'a> {
    Str(&'a str),
    Status(u16),
}

impl serde::Serialize for Member<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Member::Str(v) => s.serialize_str(v),
            Member::Status(v) => s.serialize_u16(*v),
        }
    }
}

/// The rate-limit headers of one decision, computed once from the decision that enforced it.
#[derive(Debug, Clone)]
pub struct QuotaHeaders {
    pub policy_name: String,
    pub rate: Rate,
    pub decision: Decision,
    /// Set when the decision came from the local fallback bucket (Redis unavailable).
    pub degraded: bool,
    /// The tier's calendar quotas decided with it (docs/DESIGN.md 4c), in config order.
    pub quotas: Vec<QuotaReport>,
    /// A `RateLimit-Policy` item listed before this policy's (the tier's own policy when a burst
    /// pool admitted: `"pro";q=200;w=60, "pro.pool";q=1000;w=1`).
    pub listed_before: Option<String>,
}

/// One calendar quota's part of a decision, for the headers.
#[derive(Debug, Clone)]
pub struct QuotaReport {
    /// Policy name `<tier>.<period>`.
    pub name: String,
    /// Tokens per window (`q`).
    pub limit: u64,
    /// Nominal window in seconds (`w`).
    pub window_s: u64,
    pub decision: Decision,
}

impl QuotaHeaders {
    /// Header (name, value) pairs for `mode`, including `Retry-After` on a rejection.
    ///
    /// `RateLimit-Policy: "<tier>";q=<burst>;w=<seconds to refill burst>` and
    /// `RateLimit: "<tier>";r=<remaining>;t=<seconds until full>` (draft-11); legacy
    /// `X-RateLimit-Limit` = burst, `-Remaining` = floor(tokens), `-Reset` = seconds until full.
    /// A degraded decision carries `;degraded` on the policy and `Tollgate-Degraded: redis`.
    ///
    /// With calendar quotas (docs/DESIGN.md 4c) every policy is listed in `RateLimit-Policy`
    /// (`"pro";q=200;w=12, "pro.day";q=100000;w=86400`), `RateLimit` and the legacy fields
    /// report the policy with the least room (fewest tokens left; the main limit on a tie), and
    /// `Retry-After` is the longest wait among the policies that refused.
    pub fn pairs(&self, mode: HeaderMode) -> Vec<(&'static str, String)> {
        let mut out = Vec::with_capacity(5);
        let (name, limit, d) = self.tightest();
        let reset_s = d.reset_s();
        if matches!(mode, HeaderMode::Ietf | HeaderMode::Both) {
            let mut policy = String::with_capacity(48);
            if let Some(before) = &self.listed_before {
                policy.push_str(before);
                policy.push_str(", ");
            }
            let (burst, window) = (self.rate.burst, self.rate.window_s());
            push_item(
                &mut policy,
                &self.policy_name,
                [("q", burst), ("w", window)],
            );
            if self.degraded {
                policy.push_str(";degraded");
            }
            for q in &self.quotas {
                policy.push_str(", ");
                push_item(&mut policy, &q.name, [("q", q.limit), ("w", q.window_s)]);
            }
            out.push(("RateLimit-Policy", policy));
            let mut now = String::with_capacity(name.len() + 32);
            push_item(&mut now, name, [("r", d.remaining), ("t", reset_s)]);
            out.push(("RateLimit", now));
        }
        if matches!(mode, HeaderMode::Legacy | HeaderMode::Both) {
            out.push(("X-RateLimit-Limit", decimal(limit)));
            out.push(("X-RateLimit-Remaining", decimal(d.remaining)));
            out.push(("X-RateLimit-Reset", decimal(reset_s)));
        }
        if self.degraded {
            out.push(("Tollgate-Degraded", "redis".to_string()));
        }
        if let Some(s) = self.retry_after_s() {
            out.push(("Retry-After", decimal(s)));
        }
        out
    }

    /// (name, q, decision) of the policy with the least room left.
    fn tightest(&self) -> (&str, u64, &Decision) {
        let mut best = (self.policy_name.as_str(), self.rate.burst, &self.decision);
        for q in &self.quotas {
            if q.decision.remaining < best.2.remaining {
                best = (q.name.as_str(), q.limit, &q.decision);
            }
        }
        best
    }

    /// True when every policy admitted.
    pub fn admitted(&self) -> bool {
        self.decision.admitted && self.quotas.iter().all(|q| q.decision.admitted)
    }

    /// Names of the policies that refused (`violated-policies`).
    pub fn violated(&self) -> Vec<String> {
        let main = (!self.decision.admitted).then(|| self.policy_name.clone());
        main.into_iter()
            .chain(
                self.quotas
                    .iter()
                    .filter(|q| !q.decision.admitted)
                    .map(|q| q.name.clone()),
            )
            .collect()
    }

    /// `Retry-After` in seconds: the longest wait among refusing policies that can ever admit.
    pub fn retry_after_s(&self) -> Option<u64> {
        std::iter::once(&self.decision)
            .chain(self.quotas.iter().map(|q| &q.decision))
            .filter_map(Decision::retry_after_s)
            .max()
    }
}

/// Writes a complete problem+json response (header with Content-Length, then body).
///
/// `headers` are added as given (e.g. `Retry-After`, `WWW-Authenticate`, rate-limit fields).
/// Errors are pingora write errors (the client went away); callers treat them as "responded".
pub async fn send_problem(
    session: &mut Session,
    problem: &Problem,
    request_id: &str,
    headers: &[(&'static str, String)],
) -> pingora::Result<()> {
    let body = problem.to_body(request_id);
    let mut h = ResponseHeader::build(problem.status, Some(4 + headers.len()))?;
    h.insert_header("Content-Type", "application/problem+json")?;
    h.insert_header("Content-Length", body.len().to_string())?;
    h.insert_header("X-Request-Id", request_id)?;
    h.insert_header("Cache-Control", "no-store")?;
    for (name, value) in headers {
        h.append_header(*name, value.as_str())?;
    }
    session.write_response_header(Box::new(h), false).await?;
    session.write_response_body(Some(body), true).await
}

/// A complete HTTP/1.1 problem+json response as bytes, with `Connection: close`, for answers
/// written straight to a connection before Pingora has a session (request-head errors).
pub fn problem_response_bytes(problem: &Problem, request_id: &str) -> Vec<u8> {
    let body = problem.to_body(request_id);
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/problem+json\r\nContent-Length: {}\r\n\
         X-Request-Id: {request_id}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        problem.status,
        problem.title,
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

/// Appends the structured-field item `"<name>";<k>=<v>;...` (draft-11: `"pro";q=200;w=12` in
/// `RateLimit-Policy`, `"pro";r=5;t=3` in `RateLimit`).
fn push_item<const N: usize>(out: &mut String, name: &str, params: [(&str, u64); N]) {
    out.push('"');
    out.push_str(name);
    out.push('"');
    for (key, value) in params {
        out.push(';');
        out.push_str(key);
        out.push('=');
        out.push_str(itoa::Buffer::new().format(value));
    }
}

/// `n` in decimal.
fn decimal(n: u64) -> String {
    itoa::Buffer::new().format(n).to_string()
}

#[cfg(test)]
mod tests;
