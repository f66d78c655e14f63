//! Burst pool of a tier (`tiers.<name>.pool`): a token bucket shared by all tenants of the tier,
//! consulted only when a tenant's own bucket refused, plus a per-tenant share bucket of
//! `max_share` × the pool's limit and burst that caps how much of the pool one tenant can drain.
//! A request is admitted only if both buckets have room, and then both are debited (all or
//! nothing). `lua/pool_bucket.lua` mirrors [`decide`] exactly (checked by tests/lua_reference.rs).

use super::token_bucket::{self, Decision, TokenBucketState};
use super::Rate;

/// The share bucket of one tenant: `max_share` (0 < s ≤ 1) of the pool's limit and burst, at
/// least 1 token each, same period.
pub fn share_rate(pool: &Rate, max_share: f64) -> Rate {
    let part = |v: u64| ((v as f64 * max_share).floor() as u64).clamp(1, v);
    Rate {
        limit: part(pool.limit),
        per_ms: pool.per_ms,
        burst: part(pool.burst),
    }
}

/// Decides one request of `cost` tokens at `now_ms` against the pool bucket and the tenant's share
/// bucket (`None` = full).
///
/// Returns the decision (`remaining` and `full_ms` are the pool's; `retry_after_ms` the longer
/// wait of the buckets that refused, `u64::MAX` when `cost` exceeds either burst) and, only when
/// admitted, the new (pool, share) states to store. A refusal writes nothing.
pub fn decide(
    pool: Option<TokenBucketState>,
    share: Option<TokenBucketState>,
    now_ms: u64,
    pool_rate: &Rate,
    share_rate: &Rate,
    cost: u64,
) -> (Decision, Option<(TokenBucketState, TokenBucketState)>) {
    let (p, p_next) = token_bucket::decide(pool, now_ms, pool_rate, cost);
    let (s, s_next) = token_bucket::decide(share, now_ms, share_rate, cost);
    if p.admitted && s.admitted {
        let next = p_next.zip(s_next);
        return (p, next);
    }
    // The pool's own state without a debit: what a refusal reports.
    let (level, _) = token_bucket::decide(pool, now_ms, pool_rate, 0);
    let never = cost > pool_rate.burst || cost > share_rate.burst;
    let wait = |d: &Decision| if d.admitted { 0 } else { d.retry_after_ms };
    let decision = Decision {
        admitted: false,
        remaining: level.remaining,
        retry_after_ms: if never {
            u64::MAX
        } else {
            wait(&p).max(wait(&s))
        },
        full_ms: level.full_ms,
    };
    (decision, None)
}

#[cfg(test)]
mod tests;
