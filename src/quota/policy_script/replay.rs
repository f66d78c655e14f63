//! The closed-form reply of `lua/policy.lua` for a coalesced call: the script decides how many
//! of the `n` identical requests are admitted (the first `k`) and returns each entry's state as
//! it read it; every request's decisions are derived here by running the algorithms' Rust
//! mirrors ([`crate::limit::algorithm::decide`], the same steps as the Lua scripts) over that
//! state one request after another, exactly as the script's own per-request loop would.

use super::BatchDecision;
use crate::limit::algorithm::{self, AlgoState, Algorithm};
use crate::limit::calendar::{self, CalendarQuota, Period};
use crate::limit::fixed_window::WindowState;
use crate::limit::gcra::TatState;
use crate::limit::sliding_window_counter::CounterState;
use crate::limit::token_bucket::TokenBucketState;
use crate::limit::Rate;

/// One entry of a policy call, as its arguments describe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySpec {
    pub algorithm: Algorithm,
    pub shadow: bool,
    pub rate: Rate,
    /// Tokens each request takes.
    pub cost: u64,
    /// `leaky_bucket` only.
    pub max_delay_ms: u64,
}

/// What a policy call decides, read back from its ARGV (layout in `lua/policy.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSpec {
    pub entries: Vec<EntrySpec>,
    /// Tokens each request takes from every quota.
    pub quota_cost: u64,
    pub quotas: Vec<CalendarQuota>,
}

impl CallSpec {
    /// Parses a policy call's ARGV, packed or not (an argument's words separated by spaces;
    /// what follows the quotas is not read); `None` when it is not one.
    pub fn parse<'a>(args: impl IntoIterator<Item = &'a str>) -> Option<CallSpec> {
        let mut it = args.into_iter().flat_map(str::split_ascii_whitespace);
        let mut num = || it.next()?.parse::<u64>().ok();
        let ne = num()?;
        let mut entries = Vec::new();
        for _ in 0..ne {
            let code = num()? as usize;
            let shadow = num()? == 1;
            let m = num()?;
            let values: Vec<u64> = (0..m).map(|_| num()).collect::<Option<_>>()?;
            let [limit, per_ms, burst, cost] = values.get(..4)?.try_into().ok()?;
            entries.push(EntrySpec {
                algorithm: *Algorithm::ALL.get(code.checked_sub(1)?)?,
                shadow,
                rate: Rate::new(limit, per_ms, burst),
                cost,
                max_delay_ms: values.get(4).copied().unwrap_or(0),
            });
        }
        let quota_cost = num()?;
        let nq = num()?;
        let mut quotas = Vec::new();
        for _ in 0..nq {
            let period = Period::parse(it.next()?)?;
            let limit = it.next()?.parse().ok()?;
            quotas.push(CalendarQuota { limit, period });
        }
        Some(CallSpec {
            entries,
            quota_cost,
            quotas,
        })
    }
}

/// An entry's state from the values of its hash as the script read them (empty: no state), in
/// the order its script reads them; `None` for a shape the algorithm never stores.
fn state(alg: Algorithm, v: &[u64]) -> Option<Option<AlgoState>> {
    if v.is_empty() {
        return Some(None);
    }
    let s = match (alg, v) {
        (Algorithm::TokenBucket, &[level, scale, last_ms]) => {
            AlgoState::TokenBucket(TokenBucketState {
                level,
                scale,
                last_ms,
            })
        }
        (Algorithm::Gcra, &[tat_ms, rem, scale, per_ms]) => AlgoState::Gcra(TatState {
            tat_ms,
            rem,
            scale,
            per_ms,
        }),
        (Algorithm::FixedWindow, &[start_ms, count, len_ms]) => {
            AlgoState::FixedWindow(WindowState {
                start_ms,
                count,
                len_ms,
            })
        }
        (Algorithm::SlidingWindowCounter, &[start_ms, cur, prev, len_ms]) => {
            AlgoState::SlidingWindowCounter(CounterState {
                start_ms,
                cur,
                prev,
                len_ms,
            })
        }
        _ => return None,
    };
    Some(Some(s))
}

/// Entry `e`'s state from the closed-form reply at `at` (see `lua/policy.lua`), and where the
/// next entry's starts: a token bucket's level at the call's clock `now` (one value) as a
/// bucket stamped `now`, a GCRA's debt at `now` (one value) as the TAT that owes it, any
/// other's `{m, the m values of its hash}`. `None` for a shape the algorithm never stores.
fn entry_state(
    e: &EntrySpec,
    reply: &[i64],
    at: usize,
    now: u64,
) -> Option<(Option<AlgoState>, usize)> {
    let nonneg = |v: &i64| u64::try_from(*v).ok();
    let Rate { limit, per_ms, .. } = e.rate;
    let state = match e.algorithm {
        Algorithm::TokenBucket => AlgoState::TokenBucket(TokenBucketState {
            level: nonneg(reply.get(at)?)?,
            scale: per_ms,
            last_ms: now,
        }),
        Algorithm::Gcra => {
            let debt = nonneg(reply.get(at)?)?;
            AlgoState::Gcra(TatState {
                tat_ms: now.checked_add(debt / limit.max(1))?,
                rem: debt % limit.max(1),
                scale: limit,
                per_ms,
            })
        }
        alg => {
            let m = nonneg(reply.get(at)?)? as usize;
            let mut values = [0; 4];
            let raw = reply.get(at + 1..at + 1 + m)?;
            if m > values.len() {
                return None;
            }
            for (v, r) in values.iter_mut().zip(raw) {
                *v = nonneg(r)?;
            }
            return Some((state(alg, &values[..m])?, at + 1 + m));
        }
    };
    Some((Some(state), at + 1))
}

/// Each of `n` requests' decisions from a closed-form reply (`-1, clock, k, per entry its
/// state, per quota {used}`: see [`entry_state`]) of a call described by `spec`. `None` when
/// the reply has an unexpected shape or the derived decisions do not admit exactly the first
/// `k`.
pub fn replay(reply: &[i64], spec: &CallSpec, n: usize) -> Option<Vec<BatchDecision>> {
    let nonneg = |v: &i64| u64::try_from(*v).ok();
    let [-1, now, k, ..] = *reply else {
        return None;
    };
    let (now, k) = (nonneg(&now)?, nonneg(&k)?);
    let mut at = 3;
    let mut states = Vec::with_capacity(spec.entries.len());
    for e in &spec.entries {
        let (s, next) = entry_state(e, reply, at, now)?;
        states.push(s);
        at = next;
    }
    let mut used: Vec<u64> = reply[at..].iter().map(nonneg).collect::<Option<_>>()?;
    if used.len() != spec.quotas.len() {
        return None;
    }
    let ends: Vec<u64> = spec.quotas.iter().map(|q| q.period.window(now).1).collect();

    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // The last request's states are not read again: decided in place.
        let last = i + 1 == n;
        let mut next = if last {
            std::mem::take(&mut states)
        } else {
            states.clone()
        };
        let entries: Vec<_> = spec
            .entries
            .iter()
            .zip(next.iter_mut())
            .map(|(e, s)| {
                let o = algorithm::decide(e.algorithm, s, now, &e.rate, e.cost, e.max_delay_ms);
                (o, None)
            })
            .collect();
        let quotas: Vec<_> = spec
            .quotas
            .iter()
            .zip(&used)
            .zip(&ends)
            .map(|((q, u), end)| calendar::decide(*u, q.limit, spec.quota_cost, now, *end))
            .collect();
        let admitted = spec
            .entries
            .iter()
            .zip(&entries)
            .all(|(e, (o, _))| e.shadow || o.decision.admitted)
            && quotas.iter().all(|d| d.admitted);
        if !last {
            // As the script applies writes: every entry's when all admit, else a refusing one's.
            for ((s, n), (o, _)) in states.iter_mut().zip(next).zip(&entries) {
                if admitted || !o.decision.admitted {
                    *s = n;
                }
            }
            if admitted {
                used.iter_mut().for_each(|u| *u += spec.quota_cost);
            }
        }
        out.push(BatchDecision {
            admitted,
            now_ms: now,
            entries,
            quotas,
        });
    }
    let admitted = out.iter().take_while(|d| d.admitted).count();
    (admitted as u64 == k && out.iter().skip(admitted).all(|d| !d.admitted)).then_some(out)
}

#[cfg(test)]
mod tests;
