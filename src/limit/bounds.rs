//! The one range check for every bucket size tollgate runs: tiers, edge, and every tenant's
//! effective (tier merged with `tenants:` override) rate. Config validation calls [`check`] for
//! each and turns a [`RateBoundError`] into an error at the field path of the value to blame.
//!
//! Why these bounds: the Lua script computes in doubles, exact only below 2^53, and the headers
//! (`RateLimit-Policy` `w`, `RateLimit` `t`, `Retry-After`, `X-RateLimit-Reset`) are computed in
//! `u64`. Within the bounds every intermediate value of the script (capacity, level + refill,
//! the numerators of its ceiling divisions) stays at most 2^53, and every header fits `u64`
//! exactly (a property test compares them with exact big-integer arithmetic).

use super::Rate;

/// Longest period, ms (one day).
pub const MAX_PER_MS: u64 = 86_400_000;
/// Largest `burst × per_ms` and `limit × per_ms`, in token·ms.
pub const MAX_UNITS: u128 = 1 << 52;
/// Largest `burst × per_ms + 2 × limit`: keeps `ceil_div` in Lua doubles exact
/// (`floor((a + b - 1) / b)` is exact when `a + 2b ≤ 2^53`).
pub const MAX_CEIL_SPAN: u128 = 1 << 53;

/// Which part of a rate is out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RateBoundError {
    /// `limit`, `per` or `burst` is zero.
    #[error("must be greater than zero")]
    Zero,
    /// `per` is longer than [`MAX_PER_MS`].
    #[error("must be at most 1d")]
    PerTooLong,
    /// `burst × per` exceeds [`MAX_UNITS`].
    #[error("burst × per is too large (max 2^52 token·ms)")]
    BurstTooLarge,
    /// `limit × per` exceeds [`MAX_UNITS`], or `burst × per + 2 × limit` exceeds [`MAX_CEIL_SPAN`].
    #[error("limit × per is too large (max 2^52 token·ms)")]
    LimitTooLarge,
}

/// The bound on a period alone (`per` at most [`MAX_PER_MS`]), for a `per` checked before it
/// is part of a whole rate (a tenant override). Errors: [`RateBoundError::PerTooLong`].
pub fn check_per(per_ms: u64) -> Result<(), RateBoundError> {
    if per_ms > MAX_PER_MS {
        return Err(RateBoundError::PerTooLong);
    }
    Ok(())
}

/// Checks that `rate` can be decided exactly in Rust and in Lua, and that its headers fit.
///
/// Errors: the first bound violated, in the order of the variants of [`RateBoundError`].
pub fn check(rate: &Rate) -> Result<(), RateBoundError> {
    let (limit, per, burst) = (rate.limit as u128, rate.per_ms as u128, rate.burst as u128);
    if limit == 0 || per == 0 || burst == 0 {
        return Err(RateBoundError::Zero);
    }
    check_per(rate.per_ms)?;
    if burst * per > MAX_UNITS {
        return Err(RateBoundError::BurstTooLarge);
    }
    if limit * per > MAX_UNITS || burst * per + 2 * limit > MAX_CEIL_SPAN {
        return Err(RateBoundError::LimitTooLarge);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_is_reported() {
        assert_eq!(check(&Rate::new(1, 86_400_000, 5)), Ok(()));
        assert_eq!(check(&Rate::new(0, 1000, 5)), Err(RateBoundError::Zero));
        assert_eq!(
            check(&Rate::new(1, 86_400_001, 5)),
            Err(RateBoundError::PerTooLong)
        );
        // A burst of 5e12 per day would wrap u64 in `w=`.
        assert_eq!(
            check(&Rate::new(1, 86_400_000, 5_000_000_000_000)),
            Err(RateBoundError::BurstTooLarge)
        );
        assert_eq!(
            check(&Rate::new(1 << 52, 2, 1)),
            Err(RateBoundError::LimitTooLarge)
        );
        assert_eq!(
            check(&Rate::new(1 << 52, 1, 1 << 52)),
            Err(RateBoundError::LimitTooLarge)
        );
        assert_eq!(check(&Rate::new(1 << 51, 1, 1 << 51)), Ok(()));
    }
}
