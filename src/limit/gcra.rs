//! GCRA (generic cell rate algorithm, ITU-T I.371 "virtual scheduling"), integer-exact.
//!
//! One stored value per tenant: the theoretical arrival time (TAT) of the next request. The
//! emission interval is `T = per_ms / limit` ms per token and the tolerance lets `burst` tokens
//! through back to back: a request of `cost` tokens is admitted when
//! `max(TAT, now) + cost·T − now ≤ burst·T`, and then `TAT = max(TAT, now) + cost·T`.
//!
//! Units: time below one millisecond is kept in *units* of `1 / limit` ms, so `T` is exactly
//! `per_ms` units and every quantity is an integer: the state is `tat_ms` plus a remainder
//! `rem < limit` units (and the `limit` it was written with, so a reload that changes `limit`
//! converts the remainder, rounded down). The *debt* `TAT − now` (in units) is what the bucket
//! owes; `burst·per_ms − debt` is the token bucket's level, so GCRA admits exactly what the token
//! bucket admits for an unchanged config while storing a single timestamp.
//!
//! Clock rule: a TAT ahead of `now` is the algorithm's normal state, but never by more than the
//! largest debt it can admit (`burst·T`, plus the shaping allowance for
//! [`leaky_bucket`](super::leaky_bucket)). A stored TAT further ahead (the clock stepped back, or
//! a reload lowered the burst) is treated as exactly that largest debt: nobody is locked out for
//! longer than an empty bucket takes to refill (the rebased TAT is written even on a refusal, so
//! waiting the refusal's `Retry-After` is always enough). `lua/gcra.lua` implements the same steps.

use super::token_bucket::Decision;
use super::{ceil_div, Rate};

/// Stored GCRA state: the theoretical arrival time `tat_ms + rem / scale` ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TatState {
    /// Whole milliseconds of the TAT (caller's clock).
    pub tat_ms: u64,
    /// Sub-millisecond part, in units of `1 / scale` ms (`rem < scale`).
    pub rem: u64,
    /// The `limit` the remainder was written with.
    pub scale: u64,
}

/// Result of [`decide_with_delay`]: the decision, the shaping delay and the state to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TatOutcome {
    pub decision: Decision,
    /// Milliseconds the admitted request must wait for its slot (0 = now).
    pub delay_ms: u64,
    /// State to store: `Some` when admitted, or when a refusal rebased a TAT that was further
    /// ahead than the largest debt (see the clock rule); `None` when nothing changes.
    pub next: Option<TatState>,
}

/// Debt of `state` at `now_ms` in units (`1 / limit` ms), at most `max_debt`, and whether it was
/// capped (a TAT further ahead than `max_debt`: rebase it).
fn debt(state: Option<TatState>, now_ms: u64, limit: u64, max_debt: u64) -> (u64, bool) {
    let Some(s) = state else { return (0, false) };
    if s.tat_ms < now_ms {
        return (0, false);
    }
    let rem = if s.scale == limit || s.scale == 0 {
        s.rem
    } else {
        ((s.rem as u128 * limit as u128) / s.scale as u128) as u64
    };
    let ahead = s.tat_ms - now_ms;
    if ahead > ceil_div(max_debt, limit) {
        return (max_debt, true);
    }
    let debt = ahead * limit + rem;
    (debt.min(max_debt), debt > max_debt)
}

/// The state `debt` units after `now_ms`.
fn tat_at(now_ms: u64, debt: u64, limit: u64) -> TatState {
    TatState {
        tat_ms: now_ms + debt / limit,
        rem: debt % limit,
        scale: limit,
    }
}

/// GCRA with an optional shaping allowance of `max_delay_ms` (0 for plain GCRA): a request that
/// does not fit in `burst` now but fits within `max_delay_ms` is admitted with a delay until its
/// slot. `cost > burst` is never admissible (`retry_after_ms = u64::MAX`).
pub fn decide_with_delay(
    state: Option<TatState>,
    now_ms: u64,
    rate: &Rate,
    cost: u64,
    max_delay_ms: u64,
) -> TatOutcome {
    let limit = rate.limit;
    let cap = rate.burst * rate.per_ms;
    let max_debt = cap + max_delay_ms * limit;
    let need = cost * rate.per_ms;
    let (owed, capped) = debt(state, now_ms, limit, max_debt);
    let remaining = cap.saturating_sub(owed) / rate.per_ms;
    let rejected = |retry_after_ms| TatOutcome {
        decision: Decision {
            admitted: false,
            remaining,
            retry_after_ms,
            full_ms: ceil_div(owed, limit),
        },
        delay_ms: 0,
        next: capped.then(|| tat_at(now_ms, owed, limit)),
    };
    if need > cap {
        return rejected(u64::MAX);
    }
    let new = owed + need;
    if new > max_debt {
        return rejected(ceil_div(new - max_debt, limit));
    }
    TatOutcome {
        decision: Decision {
            admitted: true,
            remaining: cap.saturating_sub(new) / rate.per_ms,
            retry_after_ms: 0,
            full_ms: ceil_div(new, limit),
        },
        delay_ms: ceil_div(new.saturating_sub(cap), limit),
        next: Some(tat_at(now_ms, new, limit)),
    }
}

/// Decides one request of `cost` tokens at `now_ms` (None = no state, a full bucket).
///
/// Returns the decision and the state to store (`Some` when admitted or rebased).
pub fn decide(
    state: Option<TatState>,
    now_ms: u64,
    rate: &Rate,
    cost: u64,
) -> (Decision, Option<TatState>) {
    let o = decide_with_delay(state, now_ms, rate, cost, 0);
    (o.decision, o.next)
}

#[cfg(test)]
mod tests;
