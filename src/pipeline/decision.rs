//! What a stage decides about one request ([`Decision`]) and, when it refuses, everything the
//! response and the metrics need ([`Rejection`]). Stages build these with pure functions; the
//! proxy turns a rejection into a response in one place.

use crate::observe::labels::{Layer, Outcome};
use crate::response::Problem;

/// A stage's verdict on one request.
#[derive(Debug, Clone)]
pub enum Decision {
    /// The request goes on to the next stage.
    Admit,
    /// The request is answered with this rejection and goes no further.
    Reject(Rejection),
    /// The layer runs in shadow mode (docs/DESIGN.md 4c "Shadow"): the rejection is counted
    /// (`outcome="shadow_limited"`) and logged, and the request goes on as if admitted.
    ShadowReject(Rejection),
    /// Admitted after a wait of this many ms (`leaky_bucket` shaping).
    Delay(u64),
}

impl Decision {
    /// `Reject(r)`, or `ShadowReject(r)` when `shadow`.
    pub fn refuse(r: Rejection, shadow: bool) -> Decision {
        if shadow {
            Decision::ShadowReject(r)
        } else {
            Decision::Reject(r)
        }
    }

    /// The rejection, enforced or shadowed, if any.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Decision::Reject(r) | Decision::ShadowReject(r) => Some(r),
            _ => None,
        }
    }
}

/// A refusal: who refused and why (metric labels), the problem+json body and extra headers.
#[derive(Debug, Clone)]
pub struct Rejection {
    pub layer: Layer,
    /// The `outcome` label (e.g. `limited`, `unauthenticated`).
    pub reason: Outcome,
    /// The problem+json body (boxed: rejections travel in `Result`s on the request path).
    pub problem: Box<Problem>,
    /// Extra response headers (`WWW-Authenticate`, rate-limit fields); `Retry-After` is kept
    /// apart in [`retry_after`](Self::retry_after).
    pub headers: Vec<(&'static str, String)>,
    /// `Retry-After` in seconds (RFC 9110 delta-seconds), if the client may retry.
    pub retry_after: Option<u64>,
}

impl Rejection {
    /// A rejection without extra headers.
    pub fn new(layer: Layer, reason: Outcome, problem: Problem) -> Rejection {
        Rejection {
            layer,
            reason,
            problem: Box::new(problem),
            headers: Vec::new(),
            retry_after: None,
        }
    }

    /// Adds `headers`; a `Retry-After` among them becomes [`retry_after`](Self::retry_after).
    pub fn with_headers(mut self, headers: Vec<(&'static str, String)>) -> Rejection {
        for (name, value) in headers {
            match (name, value.parse::<u64>()) {
                ("Retry-After", Ok(s)) => self.retry_after = Some(s),
                _ => self.headers.push((name, value)),
            }
        }
        self
    }

    /// Sets `Retry-After` (seconds).
    pub fn retry_after(mut self, seconds: Option<u64>) -> Rejection {
        self.retry_after = seconds;
        self
    }

    /// The 503 `temporary-reduced-capacity` of a policy whose Redis is unavailable and which
    /// fails closed (`owner` names it: `tier "pro"`, `limit rule "uploads"`), with
    /// `Retry-After` (seconds).
    pub fn failed_closed(owner: &str, retry_after_s: u64) -> Rejection {
        let p = Problem::typed(
            503,
            crate::response::REDUCED_CAPACITY,
            "Rate limiter unavailable",
            format!("the quota store is unavailable and {owner} fails closed; retry later"),
        );
        Rejection::new(Layer::Tenant, Outcome::FailedClosed, p).retry_after(Some(retry_after_s))
    }

    /// Every header of the response: `Retry-After` (when set), then the others.
    pub fn response_headers(&self) -> Vec<(&'static str, String)> {
        let retry = self.retry_after.map(|s| ("Retry-After", s.to_string()));
        retry
            .into_iter()
            .chain(self.headers.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests;
