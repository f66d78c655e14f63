//! The audit trail of admin writes: one structured log line per write (target
//! `tollgate::audit`), whatever its outcome, and `tollgate_admin_writes_total{operation,
//! outcome}`.
//!
//! The line carries the token's name (never the token), the operation, what it was applied to,
//! and the state before and after as JSON with every secret redacted by
//! [`super::config_view::redact`] (a created key's `secret` is shown as `***`).

use crate::identity::admin_token::Caller;
use crate::observe::metrics::METRICS;
use serde_json::Value;

/// What one admin write changed: the operation's name (a metric label), its target (a tenant
/// id, key id, block) and the state before and after (`Null` when there was none).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub operation: &'static str,
    pub target: String,
    pub before: Value,
    pub after: Value,
}

impl Change {
    /// A change of `target` by `operation`.
    pub fn new(operation: &'static str, target: impl Into<String>) -> Self {
        Change {
            operation,
            target: target.into(),
            before: Value::Null,
            after: Value::Null,
        }
    }

    /// With the state before and after.
    pub fn states(mut self, before: Value, after: Value) -> Self {
        self.before = before;
        self.after = after;
        self
    }
}

/// The outcome label of an answer's status.
pub fn outcome_of(status: u16, forbidden: bool) -> &'static str {
    match status {
        _ if forbidden => "forbidden",
        200..=299 => "ok",
        400..=499 => "refused",
        _ => "failed",
    }
}

/// Logs and counts one write: `change` when it took place, else the operation that was asked
/// (`operation`, `target`) and the answer's status and detail.
pub fn record(
    caller: &Caller,
    operation: &'static str,
    target: &str,
    status: u16,
    forbidden: bool,
    change: Option<&Change>,
    detail: Option<&str>,
) {
    let outcome = outcome_of(status, forbidden);
    METRICS
        .admin_writes
        .with_label_values(&[operation, outcome])
        .inc();
    let (before, after) = match change {
        Some(c) => (
            super::config_view::redact(c.before.clone()),
            super::config_view::redact(c.after.clone()),
        ),
        None => (Value::Null, Value::Null),
    };
    let target = change.map(|c| c.target.as_str()).unwrap_or(target);
    tracing::info!(
        target: "tollgate::audit",
        token = &*caller.name,
        scope = caller.scope.as_str(),
        operation,
        target_id = target,
        status,
        outcome,
        before = %before,
        after = %after,
        detail = detail.unwrap_or(""),
        "admin write"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_by_status() {
        assert_eq!(outcome_of(200, false), "ok");
        assert_eq!(outcome_of(400, false), "refused");
        assert_eq!(outcome_of(403, true), "forbidden");
        assert_eq!(outcome_of(503, false), "failed");
    }
}
