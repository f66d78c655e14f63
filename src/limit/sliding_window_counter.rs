//! Sliding window counter (Cloudflare's approximation), integer-exact: counts per fixed window
//! of `W = ceil(burst · per / limit)` ms (see [`Rate::window_ms`]) and estimates the tokens in
//! the last `W` ms as `prev · (W − e) / W + cur`, where `e` is the time since the current window
//! started. A request of `cost` tokens is admitted when `estimate + cost ≤ burst`; all of it is
//! compared multiplied by `W` (`check` keeps `burst · W` below 2^52), so there is no rounding.
//!
//! Known behaviour: the estimate assumes the previous window's requests were spread evenly, so it
//! can admit a little more or less than the exact sliding log; at a window boundary it admits no
//! burst beyond `burst` (unlike the fixed window).
//!
//! Clock rule: a stored window that starts after the current one is treated as the current one
//! (counts kept, rebased to the current start, written even on a refusal). Counts above a
//! lowered `burst` are capped at it. `lua/sliding_window_counter.lua` implements the same steps.
//!
//! Carry-over (docs/algorithms.md#changing-a-limit): counters written under another window
//! length `W'` (a changed config) are not re-aligned to the new windows; the tokens they still
//! count at `now` by their own length (`prev · (W' − e') / W' + cur`, rounded up) become the
//! current window's count, written even on a refusal. Nothing they count is forgotten early.

use super::token_bucket::Decision;
use super::Rate;

/// Stored counters: the current window's start (ms, a multiple of `W`), its count and the
/// previous window's count (tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterState {
    pub start_ms: u64,
    pub cur: u64,
    pub prev: u64,
    /// The window length `W` (ms) it was written with (0: unknown, taken as the current one).
    pub len_ms: u64,
}

/// Decides one request of `cost` tokens at `now_ms` (None = nothing counted).
///
/// Returns the decision and the state to store (`Some` when admitted or rebased). `full_ms` is
/// the time until the estimate is 0 (end of the next window when the current one counts).
pub fn decide(
    state: Option<CounterState>,
    now_ms: u64,
    rate: &Rate,
    cost: u64,
) -> (Decision, Option<CounterState>) {
    let w = rate.window_ms();
    let burst = rate.burst;
    let start = now_ms - now_ms % w;
    let e = now_ms - start;
    let (prev, cur, rebased) = match state {
        Some(s) if s.len_ms != 0 && s.len_ms != w => {
            let est = carried(&s, now_ms);
            (0, est, est > 0)
        }
        Some(s) if s.start_ms >= start => (s.prev, s.cur, s.start_ms > start),
        Some(s) if s.start_ms + w >= start => (s.cur, 0, false),
        _ => (0, 0, false),
    };
    let (prev, cur) = (prev.min(burst), cur.min(burst));
    let used = prev * (w - e) + cur * w;
    let full = |cur: u64| {
        if cur > 0 {
            start + 2 * w - now_ms
        } else if prev > 0 {
            start + w - now_ms
        } else {
            0
        }
    };
    let keep = rebased.then_some(CounterState {
        start_ms: start,
        cur,
        prev,
        len_ms: w,
    });
    let refused = |retry_after_ms| Decision {
        admitted: false,
        remaining: (burst * w).saturating_sub(used) / w,
        retry_after_ms,
        full_ms: full(cur),
    };
    if cost > burst {
        return (refused(u64::MAX), keep);
    }
    if used + cost * w > burst * w {
        let wait = if burst >= cur + cost && prev > 0 {
            // Within this window, once enough of prev's weight has slid out.
            (w - e) - (burst - cur - cost) * w / prev
        } else {
            // In the next window, once enough of cur's weight has slid out (cur > 0 here:
            // with cur = 0 the first branch applies or the request was admitted).
            match ((burst - cost) * w).checked_div(cur) {
                Some(q) => (w - e) + (w - q),
                None => w - e,
            }
        };
        return (refused(wait), keep);
    }
    let cur = cur + cost;
    let d = Decision {
        admitted: true,
        remaining: (burst * w - used - cost * w) / w,
        retry_after_ms: 0,
        full_ms: full(cur),
    };
    (
        d,
        Some(CounterState {
            start_ms: start,
            cur,
            prev,
            len_ms: w,
        }),
    )
}

/// The tokens `s` (written under its own window length) still counts at `now_ms`, rounded up:
/// its current window's estimate while that window lasts (a window from the future counts in
/// full), then its count weighted down over the window after it, then nothing.
fn carried(s: &CounterState, now_ms: u64) -> u64 {
    let len = s.len_ms;
    if s.start_ms.saturating_add(len) > now_ms {
        let e = now_ms.saturating_sub(s.start_ms);
        (s.prev * (len - e) + s.cur * len).div_ceil(len)
    } else if s.start_ms.saturating_add(2 * len) > now_ms {
        let e = now_ms - s.start_ms - len;
        (s.cur * (len - e)).div_ceil(len)
    } else {
        0
    }
}

#[cfg(test)]
mod tests;
