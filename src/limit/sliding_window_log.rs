//! Sliding window log, exact: one timestamp per admitted token; a request of `cost` tokens is
//! admitted when fewer than `burst − cost + 1` tokens were admitted in the last
//! `W = ceil(burst · per / limit)` ms (see [`Rate::window_ms`]). An entry at `ts` counts during
//! `[ts, ts + W)`.
//!
//! Memory is O(burst) per tenant (one entry per token in the window), so `check` bounds the
//! window capacity of this algorithm ([`MAX_LOG_ENTRIES`]).
//!
//! Clock rule: entries stamped after `now` (the clock stepped back) are rebased to `now`
//! (written even on a refusal); expired entries are dropped. A refusal's `Retry-After` is the
//! exact time the oldest entries that must leave do leave. `lua/sliding_window_log.lua`
//! implements the same steps on a Redis list.

use super::token_bucket::Decision;
use super::Rate;
use std::collections::VecDeque;

/// Largest window capacity (`burst`) accepted for `sliding_window_log`: entries per tenant.
pub const MAX_LOG_ENTRIES: u64 = 10_000;

/// Decides one request of `cost` tokens at `now_ms` against `log` (timestamps, ascending), which
/// is updated in place. Returns the decision and whether `log` changed (needs writing).
pub fn decide(log: &mut VecDeque<u64>, now_ms: u64, rate: &Rate, cost: u64) -> (Decision, bool) {
    let w = rate.window_ms();
    let mut changed = false;
    for ts in log.iter_mut().rev() {
        if *ts <= now_ms {
            break;
        }
        *ts = now_ms;
        changed = true;
    }
    while log.front().is_some_and(|&ts| ts + w <= now_ms) {
        log.pop_front();
        changed = true;
    }
    let n = log.len() as u64;
    let full_ms = log.back().map_or(0, |&ts| ts + w - now_ms);
    let refused = |retry_after_ms| Decision {
        admitted: false,
        remaining: rate.burst.saturating_sub(n),
        retry_after_ms,
        full_ms,
    };
    if cost > rate.burst {
        return (refused(u64::MAX), changed);
    }
    if n + cost > rate.burst {
        // The k oldest entries must leave; 1 ≤ k ≤ n because cost ≤ burst.
        let k = (n + cost - rate.burst) as usize;
        return (refused(log[k - 1] + w - now_ms), changed);
    }
    log.extend(std::iter::repeat_n(now_ms, cost as usize));
    let d = Decision {
        admitted: true,
        remaining: rate.burst - n - cost,
        retry_after_ms: 0,
        full_ms: w,
    };
    (d, true)
}

#[cfg(test)]
mod tests;
