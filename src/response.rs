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
use serde_json::{json, Map, Value};

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

    /// The JSON body.
    pub fn to_body(&self, request_id: &str) -> Bytes {
        let mut body = json!({
            "type": self.type_uri,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "request-id": request_id,
        });
        if let Value::Object(map) = &mut body {
            map.extend(self.extensions.clone());
        }
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
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
    /// A `RateLimit-Policy` item listed before this policy's (the tier's own policy when a burst
    /// pool admitted: `"pro";q=200;w=60, "pro.pool";q=1000;w=1`).
    pub listed_before: Option<String>,
}

impl QuotaHeaders {
    /// Header (name, value) pairs for `mode`, including `Retry-After` on a rejection.
    ///
    /// `RateLimit-Policy: "<tier>";q=<burst>;w=<seconds to refill burst>` and
    /// `RateLimit: "<tier>";r=<remaining>;t=<seconds until full>` (draft-11); legacy
    /// `X-RateLimit-Limit` = burst, `-Remaining` = floor(tokens), `-Reset` = seconds until full.
    /// A degraded decision carries `;degraded` on the policy and `Tollgate-Degraded: redis`.
    pub fn pairs(&self, mode: HeaderMode) -> Vec<(&'static str, String)> {
        let mut out = Vec::with_capacity(5);
        let name = &self.policy_name;
        let d = &self.decision;
        if matches!(mode, HeaderMode::Ietf | HeaderMode::Both) {
            let degraded = if self.degraded { ";degraded" } else { "" };
            let before = self
                .listed_before
                .as_ref()
                .map(|p| format!("{p}, "))
                .unwrap_or_default();
            out.push((
                "RateLimit-Policy",
                format!(
                    "{before}\"{name}\";q={};w={}{degraded}",
                    self.rate.burst,
                    self.rate.window_s()
                ),
            ));
            out.push((
                "RateLimit",
                format!("\"{name}\";r={};t={}", d.remaining, d.reset_s()),
            ));
        }
        if matches!(mode, HeaderMode::Legacy | HeaderMode::Both) {
            out.push(("X-RateLimit-Limit", self.rate.burst.to_string()));
            out.push(("X-RateLimit-Remaining", d.remaining.to_string()));
            out.push(("X-RateLimit-Reset", d.reset_s().to_string()));
        }
        if self.degraded {
            out.push(("Tollgate-Degraded", "redis".to_string()));
        }
        if let Some(s) = d.retry_after_s() {
            out.push(("Retry-After", s.to_string()));
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(decision: Decision, mode: HeaderMode) -> Vec<(&'static str, String)> {
        QuotaHeaders {
            policy_name: "free".into(),
            rate: Rate::new(60, 60_000, 20),
            decision,
            degraded: false,
            listed_before: None,
        }
        .pairs(mode)
    }

    #[test]
    fn draft11_syntax_and_retry_after() {
        let d = Decision {
            admitted: false,
            remaining: 0,
            retry_after_ms: 2_300,
            full_ms: 20_000,
        };
        let h = headers(d, HeaderMode::Ietf);
        assert_eq!(h[0], ("RateLimit-Policy", "\"free\";q=20;w=20".to_string()));
        assert_eq!(h[1], ("RateLimit", "\"free\";r=0;t=20".to_string()));
        assert_eq!(h[2], ("Retry-After", "3".to_string()));
    }

    #[test]
    fn legacy_family_and_none() {
        let d = Decision {
            admitted: true,
            remaining: 7,
            retry_after_ms: 0,
            full_ms: 12_001,
        };
        let h = headers(d, HeaderMode::Legacy);
        assert_eq!(h.len(), 3);
        assert_eq!(h[1], ("X-RateLimit-Remaining", "7".to_string()));
        assert_eq!(h[2], ("X-RateLimit-Reset", "13".to_string()));
        assert!(headers(d, HeaderMode::None).is_empty());
    }

    #[test]
    fn problem_body_has_rfc9457_members() {
        let p = Problem::typed(429, QUOTA_EXCEEDED, "Quota exceeded", "x".into())
            .with("violated-policies", json!(["free"]));
        let v: Value = serde_json::from_slice(&p.to_body("rid")).unwrap();
        assert_eq!(v["status"], 429);
        assert_eq!(v["type"], QUOTA_EXCEEDED);
        assert_eq!(v["violated-policies"][0], "free");
        assert_eq!(v["request-id"], "rid");
    }
}
