//! Token bucket with integer arithmetic, exact in both Rust and Redis Lua (doubles < 2^53).
//!
//! Units: the bucket level is kept in *scaled tokens*, where one token = `per_ms` units, so that
//! a refill of `limit / per_ms` tokens per millisecond is exactly `limit` units per millisecond.
//! Capacity is `burst × per_ms` units and a request of `cost` tokens takes `cost × per_ms` units.
//! The state records the scale it was written with; when a reload changes `per`, the level is
//! converted (rounded down), and any level above the new capacity is capped.
//!
//! Semantics (docs/DESIGN.md section 2): a missing state is a full bucket; admitted when
//! level ≥ cost, and only then is anything deducted; a rejection reports the exact wait
//! until the cost is available. `lua/token_bucket.lua` implements the same steps.

use super::{ceil_div, Rate};

/// Stored bucket state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucketState {
    /// Level in scaled tokens (`tokens × scale`).
    pub level: u64,
    /// The `per_ms` the level was written with.
    pub scale: u64,
    /// Time of the last refill, milliseconds (caller's clock: Redis `TIME` or a monotonic clock).
    pub last_ms: u64,
}

/// Outcome of one decision; everything the response headers need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is admitted (its cost was deducted).
    pub admitted: bool,
    /// Whole tokens left after the decision (floor), never negative.
    pub remaining: u64,
    /// Milliseconds until `cost` tokens are available; 0 when admitted. When the cost exceeds
    /// the burst it can never be admitted and this is `u64::MAX`.
    pub retry_after_ms: u64,
    /// Milliseconds until the bucket is full again.
    pub full_ms: u64,
}

impl Decision {
    /// True when the cost can never be admitted (cost > burst).
    pub fn never_admissible(&self) -> bool {
        !self.admitted && self.retry_after_ms == u64::MAX
    }

    /// `Retry-After` in whole seconds: ceil of the wait, at least 1; `None` when admitted or never
    /// admissible.
    pub fn retry_after_s(&self) -> Option<u64> {
        if self.admitted || self.never_admissible() {
            None
        } else {
            Some(self.retry_after_ms.div_ceil(1000).max(1))
        }
    }

    /// Seconds until full (the `t` of the `RateLimit` header), rounded up.
    pub fn reset_s(&self) -> u64 {
        self.full_ms.div_ceil(1000)
    }
}

/// Decides one request of `cost` tokens at `now_ms` against `state` (None = full bucket).
///
/// Returns the decision and the state to store: `Some` when the request was admitted, or when a
/// refused request (of a cost the burst can hold) found the stored stamp in the future and
/// rebased it (see below); otherwise `None` (a plain rejection changes nothing, so nothing needs
/// writing; neither does a cost above the burst, which no wait can admit).
///
/// Clock steps: a stored `last_ms` ahead of `now_ms` (state written under another clock, e.g. a
/// Redis restored from a snapshot of a host whose clock ran ahead) counts as `now_ms`: the level is
/// kept as it is, nothing is refilled, and the stamp is rebased to `now_ms` and stored even on a
/// rejection, so that waiting the reported `retry_after_ms` is enough. A stamp in the past refills
/// as usual; a step backwards therefore never mints tokens, and a step forwards refills at most
/// up to the burst.
pub fn decide(
    state: Option<TokenBucketState>,
    now_ms: u64,
    rate: &Rate,
    cost: u64,
) -> (Decision, Option<TokenBucketState>) {
    let scale = rate.per_ms;
    let capacity = rate.burst * scale;
    let refill = rate.limit; // units per millisecond
    let need = cost.saturating_mul(scale);

    let (mut level, rebased) = match state {
        None => (capacity, false),
        Some(s) => {
            let level = if s.scale == scale || s.scale == 0 {
                s.level.min(capacity)
            } else {
                // Exact in u128, capped before narrowing (the converted level may exceed u64).
                (s.level as u128 * scale as u128 / s.scale as u128).min(capacity as u128) as u64
            };
            if now_ms > s.last_ms {
                let to_full = ceil_div(capacity - level, refill);
                let elapsed = (now_ms - s.last_ms).min(to_full);
                (level + elapsed * refill, false)
            } else {
                (level, now_ms < s.last_ms)
            }
        }
    };
    level = level.min(capacity);
    let stored = |level: u64| TokenBucketState {
        level,
        scale,
        last_ms: now_ms,
    };

    let full_ms = |level: u64| ceil_div(capacity - level, refill);
    if need > capacity {
        let d = Decision {
            admitted: false,
            remaining: level / scale,
            retry_after_ms: u64::MAX,
            full_ms: full_ms(level),
        };
        return (d, None);
    }
    if level >= need {
        level -= need;
        let d = Decision {
            admitted: true,
            remaining: level / scale,
            retry_after_ms: 0,
            full_ms: full_ms(level),
        };
        (d, Some(stored(level)))
    } else {
        let d = Decision {
            admitted: false,
            remaining: level / scale,
            retry_after_ms: ceil_div(need - level, refill),
            full_ms: full_ms(level),
        };
        (d, rebased.then(|| stored(level)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives `decide` with an injected clock, like a caller with its own store.
    struct Bucket {
        state: Option<TokenBucketState>,
        rate: Rate,
    }

    impl Bucket {
        fn new(limit: u64, per_ms: u64, burst: u64) -> Self {
            Bucket {
                state: None,
                rate: Rate::new(limit, per_ms, burst),
            }
        }
        fn hit(&mut self, now_ms: u64, cost: u64) -> Decision {
            let (d, next) = decide(self.state, now_ms, &self.rate, cost);
            if let Some(n) = next {
                self.state = Some(n);
            }
            d
        }
    }

    #[test]
    fn burst_then_reject_with_remaining_counting_down() {
        let mut b = Bucket::new(1, 3_600_000, 5);
        let rem: Vec<u64> = (0..5).map(|_| b.hit(0, 1)).map(|d| d.remaining).collect();
        assert_eq!(rem, [4, 3, 2, 1, 0]);
        let d = b.hit(0, 1);
        assert!(!d.admitted);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.retry_after_s(), Some(3600));
    }

    #[test]
    fn case_c02_retry_after_is_computed() {
        // burst 2, 0.1 tokens/s = 6 per minute
        let mut b = Bucket::new(6, 60_000, 2);
        assert_eq!(b.hit(0, 1).remaining, 1);
        assert_eq!(b.hit(0, 1).remaining, 0);
        assert_eq!(b.hit(4_500, 1).retry_after_s(), Some(6));
        assert_eq!(b.hit(7_500, 1).retry_after_s(), Some(3));
        let d = b.hit(10_500, 1);
        assert!(d.admitted);
        assert_eq!(d.remaining, 0);
    }

    #[test]
    fn case_c03_retry_after_rounds_up_and_waiting_works() {
        // burst 1, 0.4 tokens/s = 24 per minute
        let mut b = Bucket::new(24, 60_000, 1);
        assert!(b.hit(0, 1).admitted);
        let d = b.hit(200, 1);
        assert_eq!(d.retry_after_ms, 2_300);
        assert_eq!(d.retry_after_s(), Some(3));
        assert!(b.hit(200 + 3_000, 1).admitted);
    }

    #[test]
    fn waiting_exactly_retry_after_is_always_enough() {
        let mut seed = 7u64;
        let mut rnd = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..2000 {
            let rate = Rate::new(1 + rnd(100), 1 + rnd(120_000), 1 + rnd(50));
            let mut b = Bucket { state: None, rate };
            let mut now = 0;
            let cost = 1 + rnd(rate.burst);
            for _ in 0..20 {
                now += rnd(5_000);
                let d = b.hit(now, cost);
                if let Some(s) = d.retry_after_s() {
                    assert!(s >= 1);
                    assert!(b.hit(now + s * 1000, cost).admitted, "{rate:?} cost {cost}");
                    now += s * 1000;
                }
            }
        }
    }

    #[test]
    fn rejection_changes_nothing_and_remaining_never_negative() {
        let mut b = Bucket::new(1, 3_600_000, 3);
        let out: Vec<(bool, u64)> = (0..5)
            .map(|_| b.hit(10, 1))
            .map(|d| (d.admitted, d.remaining))
            .collect();
        assert_eq!(
            out,
            [(true, 2), (true, 1), (true, 0), (false, 0), (false, 0)]
        );
    }

    #[test]
    fn cost_above_burst_is_never_admissible_and_consumes_nothing() {
        let mut b = Bucket::new(10, 1000, 5);
        let d = b.hit(0, 6);
        assert!(d.never_admissible());
        assert_eq!(d.retry_after_s(), None);
        assert_eq!(b.hit(0, 5).remaining, 0);
    }

    #[test]
    fn refill_caps_at_burst_and_full_time_is_exact() {
        let mut b = Bucket::new(10, 1000, 5); // 1 token / 100 ms
        assert_eq!(b.hit(0, 5).full_ms, 500);
        assert_eq!(b.hit(250, 1).remaining, 1); // 2.5 refilled, minus 1
        assert_eq!(b.hit(1_000_000, 1).remaining, 4);
    }

    #[test]
    fn changed_rate_applies_to_live_bucket_capped_at_new_burst() {
        let mut b = Bucket::new(1, 3_600_000, 10);
        for _ in 0..10 {
            b.hit(0, 1);
        }
        b.rate = Rate::new(1, 3_600_000, 20); // raise burst: no fresh tokens
        assert!(!b.hit(0, 1).admitted);
        b.rate = Rate::new(1, 60_000, 20); // change per: level converted, still empty
        assert!(!b.hit(0, 1).admitted);
        let mut full = Bucket::new(1, 1000, 10);
        full.hit(0, 1);
        full.rate = Rate::new(1, 1000, 3); // lower burst: capped
        assert_eq!(full.hit(0, 1).remaining, 2);
    }

    #[test]
    fn clock_going_backwards_mints_nothing() {
        let mut b = Bucket::new(10, 1000, 2);
        b.hit(1_000, 2);
        assert!(!b.hit(500, 1).admitted);
        assert!(b.hit(1_100, 1).admitted);
    }
}
