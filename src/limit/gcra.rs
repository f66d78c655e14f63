//! GCRA (generic cell rate algorithm, ITU-T I.371 "virtual scheduling"), integer-exact.
//!
//! One stored value per tenant: the theoretical arrival time (TAT) of the next request. The
//! emission interval is `T = per_ms / limit` ms per token and the tolerance lets `burst` tokens
//! through back to back: a request of `cost` tokens is admitted when
//! `max(TAT, now) + cost·T − now ≤ burst·T`, and then `TAT = max(TAT, now) + cost·T`.
//!
//! Units: time below one millisecond is kept in *units* of `1 / limit` ms, so `T` is exactly
//! `per_ms` units and every quantity is an integer: the state is `tat_ms` plus a remainder
//! `rem < limit` units, and the `limit` and `per_ms` it was written with. The *debt* `TAT − now`
//! (in units) is what the bucket owes; `burst·per_ms − debt` is the token bucket's level, so GCRA
//! admits exactly what the token bucket admits for an unchanged config while storing a single
//! timestamp.
//!
//! Carry-over (docs/algorithms.md#changing-a-limit): when `limit` or `per` changed since the
//! state was written, the debt is carried over in *tokens*, not in time: `d` units of the old
//! rate (`d / per_old` tokens) become `d · per / per_old` units of the new one, rounded up (to a
//! whole token when the exact product would leave 2^52), and the converted TAT is written even
//! on a refusal, so its key's TTL follows the new rate. A tightened limit therefore keeps the
//! tenant's debt and never mints a burst.
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
    /// The `per_ms` the state was written with (0: unknown, taken as the current one).
    pub per_ms: u64,
}

/// Result of [`decide_with_delay`]: the decision, the shaping delay and the state to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TatOutcome {
    pub decision: Decision,
    /// Milliseconds the admitted request must wait for its slot (0 = now).
    pub delay_ms: u64,
    /// State to store: `Some` when admitted, or when a refusal rebased a TAT that was further
    /// ahead than the largest debt (see the clock rule) or converted one written under another
    /// rate (see the carry-over); `None` when nothing changes.
    pub next: Option<TatState>,
}

/// Largest value the conversion multiplies in, exact in Lua doubles with room for a ceiling.
const EXACT: u64 = 1 << 52;

/// Debt of `state` at `now_ms` in units (`1 / limit` ms) of `rate`, at most `max_debt`, and
/// whether the state must be rewritten: a TAT further ahead than `max_debt` (rebase it), or one
/// written under another `limit` or `per` (converted in tokens, see the carry-over).
pub(crate) fn debt(
    state: Option<TatState>,
    now_ms: u64,
    rate: &Rate,
    max_debt: u64,
) -> (u64, bool) {
    let Some(s) = state else { return (0, false) };
    if s.tat_ms < now_ms {
        return (0, false);
    }
    let (limit, per) = (rate.limit, rate.per_ms);
    let scale = if s.scale == 0 { limit } else { s.scale };
    let per_old = if s.per_ms == 0 { per } else { s.per_ms };
    let ahead = s.tat_ms - now_ms;
    if scale == limit && per_old == per {
        if ahead > ceil_div(max_debt, limit) {
            return (max_debt, true);
        }
        let debt = ahead * limit + s.rem;
        return (debt.min(max_debt), debt > max_debt);
    }
    // Another rate: the old debt `ahead·scale + rem` (units of 1/scale ms, per_old a token) in
    // tokens q + r/per_old, as units of the new rate, rounded up.
    if ahead > EXACT / scale {
        return (max_debt, true);
    }
    let old = ahead * scale + s.rem;
    let (q, r) = (old / per_old, old % per_old);
    if q >= ceil_div(max_debt, per) {
        return (max_debt, true);
    }
    let frac = match r {
        0 => 0,
        r if r as u128 * per as u128 <= EXACT as u128 => ceil_div(r * per, per_old),
        _ => per,
    };
    let debt = (q * per + frac).min(max_debt);
    (debt, debt > 0)
}

/// The state `debt` units of `rate` after `now_ms`.
fn tat_at(now_ms: u64, debt: u64, rate: &Rate) -> TatState {
    let limit = rate.limit;
    TatState {
        tat_ms: now_ms + debt / limit,
        rem: debt % limit,
        scale: limit,
        per_ms: rate.per_ms,
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
    let (owed, rewrite) = debt(state, now_ms, rate, max_debt);
    let remaining = cap.saturating_sub(owed) / rate.per_ms;
    let rejected = |retry_after_ms| TatOutcome {
        decision: Decision {
            admitted: false,
            remaining,
            retry_after_ms,
            full_ms: ceil_div(owed, limit),
        },
        delay_ms: 0,
        next: rewrite.then(|| tat_at(now_ms, owed, rate)),
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
        next: Some(tat_at(now_ms, new, rate)),
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
