//! `limits[].count`, `limits[].refund_on` and `tiers.<name>.refund_on`
//! (docs/rules.md#counting-by-outcome).

use super::common::Check;
use crate::config::model::{BlockFor, Counting, RefundOn, StatusSet};
use crate::config::raw::{RawLimitRule, RawStatus, RawTier};
use std::time::Duration;

/// A rule's `count` and `refund_on` at `path` (`limits[i]`). Refused: either on a concurrency
/// rule (it holds no count to give back), an empty or out-of-range status list, and a 5xx
/// status both counted and refunded by `backend_5xx`.
pub(super) fn rule(c: &mut Check, path: &str, r: &RawLimitRule) -> Counting {
    let refund_on = r
        .refund_on
        .as_deref()
        .map(|items| super::usage::refund_on(c, path, items))
        .unwrap_or_default();
    let status = r
        .count
        .as_ref()
        .map(|count| statuses(c, &format!("{path}.count.status"), &count.status));
    if r.max_in_flight.is_some() {
        for (field, given) in [
            ("count", r.count.is_some()),
            ("refund_on", r.refund_on.is_some()),
        ] {
            if given {
                c.err(
                    format!("{path}.{field}"),
                    "does not apply to a concurrency rule (max_in_flight): its lease ends with the request",
                );
            }
        }
    }
    if status.is_some_and(|s| s.any_5xx()) && refund_on.backend_5xx {
        c.err(
            format!("{path}.refund_on"),
            "backend_5xx gives back what count.status counts (a 5xx status): keep one of them",
        );
    }
    Counting { status, refund_on }
}

/// Longest `block_for`.
const MAX_BLOCK: Duration = Duration::from_secs(30 * 86_400);

/// A rule's `block_for` and `extend_on_refusal` at `path` (`limits[i]`): 1 s to 30 days, on a
/// rate rule; `extend_on_refusal` only with `block_for`.
pub(super) fn block_for(c: &mut Check, path: &str, r: &RawLimitRule) -> Option<BlockFor> {
    if r.extend_on_refusal.is_some() && r.block_for.is_none() {
        c.err(format!("{path}.extend_on_refusal"), "needs block_for");
    }
    let text = r.block_for.as_deref()?;
    let bpath = format!("{path}.block_for");
    if r.max_in_flight.is_some() {
        c.err(
            &bpath,
            "does not apply to a concurrency rule (max_in_flight): write a rate rule for the penalty",
        );
        return None;
    }
    let d = c.duration(&bpath, text)?;
    if d < Duration::from_secs(1) || d > MAX_BLOCK {
        c.err(&bpath, format!("{text} is out of range (1s to 30d)"));
        return None;
    }
    Some(BlockFor {
        ms: d.as_millis() as u64,
        extend_on_refusal: r.extend_on_refusal.unwrap_or(false),
    })
}

/// A tier's `refund_on` at `path` (`tiers.<name>`). Refused with `lease` (leased tokens are
/// taken ahead, outside the request's decision) and `pool` (a tenant's borrowed token is the
/// pool's).
pub(super) fn tier(c: &mut Check, path: &str, t: &RawTier) -> RefundOn {
    let Some(items) = t.refund_on.as_deref() else {
        return RefundOn::default();
    };
    let r = super::usage::refund_on(c, path, items);
    for (field, given) in [("lease", t.lease.is_some()), ("pool", t.pool.is_some())] {
        if given {
            c.err(
                format!("{path}.refund_on"),
                format!("cannot be combined with {field} in its tier"),
            );
        }
    }
    r
}

/// `count.status` at `path`: codes 100..=599 and classes `1xx`..`5xx`, at least one.
fn statuses(c: &mut Check, path: &str, raw: &[RawStatus]) -> StatusSet {
    let mut set = StatusSet::default();
    if raw.is_empty() {
        c.err(
            path,
            "needs at least one status (a code such as 401, or a class such as \"5xx\")",
        );
    }
    for (i, s) in raw.iter().enumerate() {
        match s {
            RawStatus::Code(n) if (100..=599).contains(n) => set.insert(*n as u16),
            RawStatus::Class(k) if matches!(k.as_bytes(), [b'1'..=b'5', b'x', b'x']) => {
                set.insert_class(u16::from(k.as_bytes()[0] - b'0'));
            }
            RawStatus::Code(n) => c.err(
                format!("{path}[{i}]"),
                format!("{n} is not an HTTP status (100 to 599)"),
            ),
            RawStatus::Class(k) => c.err(
                format!("{path}[{i}]"),
                format!("\"{k}\" is not a status class (1xx to 5xx)"),
            ),
        }
    }
    set
}

#[cfg(test)]
mod tests;
