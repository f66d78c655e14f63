//! Fixed window counter, integer-exact: at most `burst` tokens per window of
//! `W = ceil(burst · per / limit)` ms (the time the token bucket takes to refill `burst`, so the
//! long-run rate is `limit / per`; with the default `burst = limit`, `W = per`). Windows are
//! aligned to multiples of `W` on the caller's clock (Redis `TIME`: the Unix epoch).
//!
//! Known boundary behaviour: a client can spend `burst` at the end of one window and `burst`
//! again at the start of the next, so up to `2 · burst` pass within a few milliseconds.
//!
//! Clock rule: a stored window that starts after the current one (the clock stepped back, or a
//! reload shortened `W`) is treated as the current window: its count is kept (nothing is
//! minted) and it is rebased to the current start (written even on a refusal), so the refusal's
//! `Retry-After` (the end of the current window) is always enough.
//!
//! Carry-over (docs/algorithms.md#changing-a-limit): the state records the `W` it was written
//! with, and a window counts while it lasts by that length; one of another length (a changed
//! config) carries its count into the current window the same way, never dropped at a
//! boundary the new `W` re-aligned. `lua/fixed_window.lua`
//! implements the same steps.

use super::token_bucket::Decision;
use super::Rate;

/// Stored window: its start (ms, a multiple of `W`), the tokens counted in it and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowState {
    pub start_ms: u64,
    pub count: u64,
    /// The window length `W` (ms) it was written with (0: unknown, taken as the current one).
    pub len_ms: u64,
}

/// Decides one request of `cost` tokens at `now_ms` (None = empty window).
///
/// Returns the decision and the state to store: `Some` when admitted, or when a refusal
/// rebased a window from the future; `None` when nothing changes. `full_ms` (the `t` of
/// `RateLimit`) is the time until the current window ends (0 when nothing is counted).
pub fn decide(
    state: Option<WindowState>,
    now_ms: u64,
    rate: &Rate,
    cost: u64,
) -> (Decision, Option<WindowState>) {
    let w = rate.window_ms();
    let start = now_ms - now_ms % w;
    let end_in = start + w - now_ms;
    // The stored window counts while it lasts by the length it was written with; a window
    // from another length (a changed config) or from the future carries its count into the
    // current window, rewritten even on a refusal.
    let (count, rebased) = match state {
        Some(s) => {
            let len = if s.len_ms == 0 { w } else { s.len_ms };
            if s.start_ms.saturating_add(len) > now_ms {
                (s.count, s.start_ms != start || len != w)
            } else {
                (0, false)
            }
        }
        None => (0, false),
    };
    let keep = rebased.then_some(WindowState {
        start_ms: start,
        count,
        len_ms: w,
    });
    let refused = |retry_after_ms| Decision {
        admitted: false,
        remaining: rate.burst.saturating_sub(count),
        retry_after_ms,
        full_ms: if count > 0 { end_in } else { 0 },
    };
    if cost > rate.burst {
        return (refused(u64::MAX), keep);
    }
    if count + cost > rate.burst {
        return (refused(end_in), keep);
    }
    let count = count + cost;
    let d = Decision {
        admitted: true,
        remaining: rate.burst - count,
        retry_after_ms: 0,
        full_ms: end_in,
    };
    (
        d,
        Some(WindowState {
            start_ms: start,
            count,
            len_ms: w,
        }),
    )
}

#[cfg(test)]
mod tests;
