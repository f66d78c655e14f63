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

/// The decisions of `n` requests of `cost` tokens each, taken one after the other at one
/// instant against a bucket at `level` (scaled tokens, refilled to that instant, at most the
/// capacity): each is admitted while the level still holds its cost. Returns the decisions in
/// order and the level left. The same as [`decide`] applied `n` times at one `now_ms`; used for
/// request coalescing (`lua/token_bucket.lua` with `n` returns the level it started from).
pub fn decide_batch(level: u64, rate: &Rate, cost: u64, n: usize) -> (Vec<Decision>, u64) {
    let mut level = level.min(rate.burst * rate.per_ms);
    let decisions = (0..n)
        .map(|_| take_at_level(&mut level, rate, cost))
        .collect();
    (decisions, level)
}

/// The decision of one request of `cost` tokens against a bucket at `level` (scaled tokens,
/// refilled to the instant of the decision, at most the capacity), which it lowers by what it
/// takes: one step of [`decide_batch`].
pub fn take_at_level(level: &mut u64, rate: &Rate, cost: u64) -> Decision {
    let scale = rate.per_ms;
    let capacity = rate.burst * scale;
    let refill = rate.limit;
    let need = cost.saturating_mul(scale);
    let full_ms = |level: u64| ceil_div(capacity - level, refill);
    if need > capacity {
        Decision {
            admitted: false,
            remaining: *level / scale,
            retry_after_ms: u64::MAX,
            full_ms: full_ms(*level),
        }
    } else if *level >= need {
        *level -= need;
        Decision {
            admitted: true,
            remaining: *level / scale,
            retry_after_ms: 0,
            full_ms: full_ms(*level),
        }
    } else {
        Decision {
            admitted: false,
            remaining: *level / scale,
            retry_after_ms: ceil_div(need - *level, refill),
            full_ms: full_ms(*level),
        }
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
mod tests;
