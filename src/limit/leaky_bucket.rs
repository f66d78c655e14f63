//! Leaky bucket as a queue (shaping), integer-exact: requests leave at a steady rate of
//! `limit / per`; up to `burst` tokens pass at once, and a request that does not fit is *delayed*
//! until its slot when that slot is at most `max_delay_ms` away, refused beyond.
//!
//! It is GCRA ([`super::gcra`]) with the tolerance extended by `max_delay_ms`: the stored TAT is
//! the time the bucket has drained, every admitted request (delayed or not) moves it by
//! `cost · per / limit`, and a request's slot is `TAT_before + cost·T − burst·T`. Slots are
//! handed out in arrival order and only move forward, so a tenant's requests are never reordered
//! (a later request's slot is never earlier than an earlier request's). With `max_delay_ms = 0`
//! it admits exactly what GCRA and the token bucket admit. nginx `limit_req burst=… delay=…` is
//! the same idea with the queue bounded in requests; here it is bounded in time.
//!
//! Giving a slot back ([`refund`]): a delayed request whose client went away returns its cost,
//! but only while its reservation is still the latest one (the stored TAT is exactly what it
//! wrote). Moving the TAT back under later reservations would let a new request overtake them;
//! in that case the slot stays taken (at most `cost` tokens under-admitted, never over-admitted).
//! `lua/leaky_bucket.lua` and `lua/leaky_refund.lua` implement the same steps.

use super::gcra::{decide_with_delay, TatOutcome, TatState};
use super::Rate;

/// Decides one request of `cost` tokens at `now_ms` with shaping up to `max_delay_ms`.
///
/// `outcome.delay_ms` is how long an admitted request waits for its slot (≤ `max_delay_ms`);
/// a refusal's `retry_after_ms` is the wait after which the same request is admitted (possibly
/// delayed). `cost > burst` is never admissible.
pub fn decide(
    state: Option<TatState>,
    now_ms: u64,
    rate: &Rate,
    cost: u64,
    max_delay_ms: u64,
) -> TatOutcome {
    decide_with_delay(state, now_ms, rate, cost, max_delay_ms)
}

/// Gives back the `cost` tokens of the reservation that wrote `reserved`, when `stored` is still
/// exactly that state (its TAT and scale; the period is not compared, as in
/// `lua/leaky_refund.lua`). Returns the state to store, or `None` when nothing changes (a later
/// reservation exists, or the state is gone).
pub fn refund(
    stored: Option<TatState>,
    reserved: TatState,
    rate: &Rate,
    cost: u64,
) -> Option<TatState> {
    let same = |s: &TatState| {
        (s.tat_ms, s.rem, s.scale) == (reserved.tat_ms, reserved.rem, reserved.scale)
    };
    let s = stored.filter(|s| same(s) && s.scale > 0)?;
    let need = cost * rate.per_ms;
    // Subtract `need` units from tat_ms + rem/scale, borrowing whole milliseconds.
    let (mut tat_ms, mut rem) = (s.tat_ms, s.rem);
    if rem >= need {
        rem -= need;
    } else {
        let borrow = (need - rem).div_ceil(s.scale);
        tat_ms = tat_ms.saturating_sub(borrow);
        rem = rem + borrow * s.scale - need;
    }
    Some(TatState {
        tat_ms,
        rem,
        scale: s.scale,
        per_ms: s.per_ms,
    })
}

#[cfg(test)]
mod tests;
