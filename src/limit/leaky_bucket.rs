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
/// exactly that state. Returns the state to store, or `None` when nothing changes (a later
/// reservation exists, or the state is gone).
pub fn refund(
    stored: Option<TatState>,
    reserved: TatState,
    rate: &Rate,
    cost: u64,
) -> Option<TatState> {
    let s = stored.filter(|s| *s == reserved && s.scale > 0)?;
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_beyond_burst_up_to_max_delay_then_refuses() {
        // 10 per second (T = 100 ms), burst 2, max_delay 300 ms.
        let rate = Rate::new(10, 1_000, 2);
        let mut s = None;
        let mut delays = vec![];
        for _ in 0..6 {
            let o = decide(s, 0, &rate, 1, 300);
            if o.decision.admitted {
                delays.push(o.delay_ms);
                s = o.next;
            } else {
                assert_eq!(o.decision.retry_after_ms, 100);
                delays.push(u64::MAX);
            }
        }
        assert_eq!(delays, [0, 0, 100, 200, 300, u64::MAX]);
        // After waiting the Retry-After the request is admitted, with the longest delay.
        let o = decide(s, 100, &rate, 1, 300);
        assert!(o.decision.admitted);
        assert_eq!(o.delay_ms, 300);
    }

    #[test]
    fn slots_never_go_backwards() {
        let rate = Rate::new(7, 1_000, 3);
        let mut s = None;
        let mut last_slot = 0;
        let mut now = 0;
        for i in 0..200u64 {
            now += (i * 37) % 90;
            let o = decide(s, now, &rate, 1 + i % 2, 2_000);
            if o.decision.admitted {
                assert!(now + o.delay_ms >= last_slot, "request {i} overtakes");
                last_slot = now + o.delay_ms;
                s = o.next;
            }
        }
    }

    #[test]
    fn refund_gives_back_only_the_latest_reservation() {
        let rate = Rate::new(3, 1_000, 1); // T = 333⅓ ms
        let a = decide(None, 0, &rate, 1, 1_000).next.unwrap();
        let b = decide(Some(a), 0, &rate, 1, 1_000);
        assert_eq!(b.delay_ms, 334);
        let b = b.next.unwrap();
        // a is no longer the latest: its refund changes nothing.
        assert_eq!(refund(Some(b), a, &rate, 1), None);
        // b is: the state goes back exactly to a.
        assert_eq!(refund(Some(b), b, &rate, 1), Some(a));
        // and then a's refund empties the bucket (TAT 0).
        let empty = refund(Some(a), a, &rate, 1).unwrap();
        assert_eq!((empty.tat_ms, empty.rem), (0, 0));
        assert_eq!(decide(Some(empty), 0, &rate, 1, 0).decision.remaining, 0);
        assert!(decide(Some(empty), 0, &rate, 1, 0).decision.admitted);
    }
}
