//! What the `local` fallback admitted, taken into a limit's stored state when Redis decides
//! again (docs/redis.md#when-redis-is-slow-or-down-failure-policy): the Rust mirror of the carry
//! in `lua/policy.lua`, step for step, in each algorithm's own terms. Times are on the caller's
//! clock (ms); nothing is ever taken beyond full.

use super::algorithm::{AlgoState, Algorithm};
use super::fixed_window::WindowState;
use super::gcra::{self, TatState};
use super::sliding_window_counter::CounterState;
use super::token_bucket::TokenBucketState;
use super::Rate;

/// What one tenant's local fallback admitted, to carry into its state at `now_ms`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    /// Tokens the local bucket still owed (token bucket, GCRA, leaky bucket): its debt.
    pub debt: u64,
    /// Admissions of the window algorithms: (time ms, tokens), oldest first.
    pub admissions: Vec<(u64, u64)>,
}

impl Carried {
    /// Tokens admitted at or after `from_ms`.
    pub fn since(&self, from_ms: u64) -> u64 {
        self.admissions
            .iter()
            .filter(|(t, _)| *t >= from_ms)
            .map(|(_, n)| n)
            .sum()
    }
}

/// `new`, lowered to `most` (or to `old` when already above it).
pub fn capped(old: u64, new: u64, most: u64) -> u64 {
    if new > most {
        most.max(old)
    } else {
        new
    }
}

/// `state` of `alg` with `carried` taken in at `now_ms` (`max_delay_ms`: leaky bucket only).
/// Token bucket: the debt taken from the refilled level, never below empty; GCRA and leaky
/// bucket: the debt's emission intervals added to the TAT, at most burst (plus the delay)
/// ahead; fixed window: the admissions in the current window added to its count; sliding window
/// counter: those of the current and previous windows added to their counts (a counter of
/// another window length is left alone); sliding window log: an entry per token admitted in the
/// last window, the newest `burst` entries kept. Counts are lowered to the burst.
pub fn apply(
    alg: Algorithm,
    state: &mut Option<AlgoState>,
    now_ms: u64,
    rate: &Rate,
    max_delay_ms: u64,
    carried: &Carried,
) {
    let (limit, per, burst) = (rate.limit, rate.per_ms, rate.burst);
    let w = rate.window_ms();
    let start = now_ms / w * w;
    match alg {
        Algorithm::TokenBucket if carried.debt > 0 => {
            let capacity = burst * per;
            let level = match state {
                Some(AlgoState::TokenBucket(s)) => refilled(s, now_ms, rate),
                _ => capacity,
            };
            let level = level - level.min(carried.debt.saturating_mul(per));
            *state = Some(AlgoState::TokenBucket(TokenBucketState {
                level,
                scale: per,
                last_ms: now_ms,
            }));
        }
        Algorithm::Gcra | Algorithm::LeakyBucket if carried.debt > 0 => {
            let delay = if alg == Algorithm::LeakyBucket {
                max_delay_ms
            } else {
                0
            };
            let max_debt = burst * per + delay * limit;
            let old = match state {
                Some(AlgoState::Gcra(s)) | Some(AlgoState::LeakyBucket(s)) => Some(*s),
                _ => None,
            };
            let owed = gcra::debt(old, now_ms, rate, max_debt).0;
            let new = (owed + carried.debt.saturating_mul(per)).min(max_debt);
            if new > owed {
                let s = TatState {
                    tat_ms: now_ms + new / limit,
                    rem: new % limit,
                    scale: limit,
                    per_ms: per,
                };
                *state = Some(if alg == Algorithm::Gcra {
                    AlgoState::Gcra(s)
                } else {
                    AlgoState::LeakyBucket(s)
                });
            }
        }
        Algorithm::FixedWindow => {
            let x = carried.since(start);
            if x == 0 {
                return;
            }
            let (mut s, mut count, mut len) = (start, 0, w);
            if let Some(AlgoState::FixedWindow(old)) = state {
                let l = if old.len_ms == 0 { w } else { old.len_ms };
                if old.start_ms + l > now_ms {
                    (s, count, len) = (old.start_ms, old.count, l);
                }
            }
            *state = Some(AlgoState::FixedWindow(WindowState {
                start_ms: s,
                count: capped(count, count + x, burst),
                len_ms: len,
            }));
        }
        Algorithm::SlidingWindowCounter => {
            let xc = carried.since(start);
            let xp = carried.since(start.saturating_sub(w)) - xc;
            if xc + xp == 0 {
                return;
            }
            let (mut prev, mut cur) = (0, 0);
            if let Some(AlgoState::SlidingWindowCounter(old)) = state {
                if old.len_ms != 0 && old.len_ms != w {
                    return;
                }
                if old.start_ms >= start {
                    (prev, cur) = (old.prev, old.cur);
                } else if old.start_ms + w >= start {
                    prev = old.cur;
                }
            }
            *state = Some(AlgoState::SlidingWindowCounter(CounterState {
                start_ms: start,
                cur: capped(cur, cur + xc, burst),
                prev: capped(prev, prev + xp, burst),
                len_ms: w,
            }));
        }
        Algorithm::SlidingWindowLog => {
            let mut log: Vec<u64> = match state {
                Some(AlgoState::SlidingWindowLog(l)) => {
                    l.iter().copied().filter(|v| v + w > now_ms).collect()
                }
                _ => Vec::new(),
            };
            let n = log.len();
            for &(t, tokens) in &carried.admissions {
                if t + w > now_ms {
                    log.extend(std::iter::repeat_n(t, tokens.min(burst) as usize));
                }
            }
            if log.len() == n {
                return;
            }
            log.sort_unstable();
            let first = log.len().saturating_sub(burst as usize);
            *state = Some(AlgoState::SlidingWindowLog(log.drain(first..).collect()));
        }
        _ => {}
    }
}

/// A token bucket's level at `now_ms` (as `token_bucket::decide` refills it).
fn refilled(s: &TokenBucketState, now_ms: u64, rate: &Rate) -> u64 {
    let scale = rate.per_ms;
    let capacity = rate.burst * scale;
    let level = if s.scale == scale || s.scale == 0 {
        s.level.min(capacity)
    } else {
        (s.level as u128 * scale as u128 / s.scale as u128).min(capacity as u128) as u64
    };
    if now_ms > s.last_ms {
        let to_full = (capacity - level).div_ceil(rate.limit);
        (level + (now_ms - s.last_ms).min(to_full) * rate.limit).min(capacity)
    } else {
        level
    }
}
