//! Rate-limiting algorithms as pure functions over `(state, now, params)`.
//!
//! No I/O and no clock: callers pass `now` in milliseconds. The in-memory limiters (edge, local
//! fallback) use these directly; `lua/token_bucket.lua` mirrors [`token_bucket`] exactly and an
//! integration test checks both agree on thousands of random cases.

pub mod algorithm;
pub mod bounds;
pub mod calendar;
pub mod carry;
pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
pub mod pool;
pub mod share;
pub mod sliding_window_counter;
pub mod sliding_window_log;
pub mod token_bucket;

pub use token_bucket::{Decision, TokenBucketState};

/// Bucket size: `limit` tokens refilled per `per_ms` milliseconds, capacity `burst` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    /// Tokens added per period.
    pub limit: u64,
    /// Period length in milliseconds.
    pub per_ms: u64,
    /// Capacity in tokens.
    pub burst: u64,
}

impl Rate {
    /// A rate of `limit` tokens per `per_ms` ms with capacity `burst`. All must be > 0.
    pub const fn new(limit: u64, per_ms: u64, burst: u64) -> Self {
        Rate {
            limit,
            per_ms,
            burst,
        }
    }

    /// Seconds for an empty bucket to fill up to `burst` (the `w` of `RateLimit-Policy`), ≥ 1.
    ///
    /// Computed in u128 and saturated to `u64::MAX`, so no rate can wrap it; for every rate that
    /// passes [`bounds::check`] the result is exact.
    pub fn window_s(&self) -> u64 {
        let units = self.burst as u128 * self.per_ms as u128;
        let ms = units.div_ceil(self.limit.max(1) as u128);
        u64::try_from(ms.div_ceil(1000).max(1)).unwrap_or(u64::MAX)
    }

    /// Window length of the window algorithms in ms: the time to refill `burst`,
    /// `ceil(burst × per_ms / limit)`, ≥ 1 (equal to `per_ms` when `burst = limit`).
    pub fn window_ms(&self) -> u64 {
        let ms = (self.burst as u128 * self.per_ms as u128).div_ceil(self.limit.max(1) as u128);
        u64::try_from(ms.max(1)).unwrap_or(u64::MAX)
    }

    /// This rate divided among `n` instances (limit and burst rounded down, at least 1).
    pub fn divided(&self, n: u64) -> Rate {
        Rate {
            limit: (self.limit / n.max(1)).max(1),
            per_ms: self.per_ms,
            burst: (self.burst / n.max(1)).max(1),
        }
    }
}

/// `ceil(a / b)` for `b > 0`.
pub(crate) fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}
