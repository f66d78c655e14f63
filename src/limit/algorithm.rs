//! The six algorithms behind one interface, for the in-memory limiters (edge, local fallback)
//! and for tests that hold every algorithm to the same contract.

use super::gcra::TatState;
use super::{
    fixed_window, gcra, leaky_bucket, sliding_window_counter, sliding_window_log, token_bucket,
    Decision, Rate,
};
use std::collections::VecDeque;

/// A tier's main-limit algorithm (`tiers.<name>.algorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    #[default]
    TokenBucket,
    Gcra,
    FixedWindow,
    SlidingWindowLog,
    SlidingWindowCounter,
    LeakyBucket,
}

impl Algorithm {
    /// Every algorithm, in documentation order.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindowLog,
        Algorithm::SlidingWindowCounter,
        Algorithm::LeakyBucket,
    ];

    /// The name written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::Gcra => "gcra",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindowLog => "sliding_window_log",
            Algorithm::SlidingWindowCounter => "sliding_window_counter",
            Algorithm::LeakyBucket => "leaky_bucket",
        }
    }

    /// Parses a YAML name.
    pub fn parse(s: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The key suffix in Redis: `<prefix>:{<tenant>}:<suffix>` (docs/DESIGN.md 4c "Keys").
    pub fn key_suffix(self) -> &'static str {
        match self {
            Algorithm::TokenBucket => "tb",
            Algorithm::Gcra => "gcra",
            Algorithm::FixedWindow => "fw",
            Algorithm::SlidingWindowLog => "swl",
            Algorithm::SlidingWindowCounter => "swc",
            Algorithm::LeakyBucket => "lb",
        }
    }
}

/// One tenant's in-memory state, tagged by algorithm so a reload that switches algorithms never
/// reads one algorithm's state as another's (a mismatched state counts as no state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlgoState {
    TokenBucket(token_bucket::TokenBucketState),
    Gcra(TatState),
    FixedWindow(fixed_window::WindowState),
    SlidingWindowLog(VecDeque<u64>),
    SlidingWindowCounter(sliding_window_counter::CounterState),
    LeakyBucket(TatState),
}

/// A decision plus the shaping delay (`leaky_bucket` only; 0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    /// Milliseconds an admitted request waits for its slot.
    pub delay_ms: u64,
}

/// Decides one request with `alg` at `now_ms`, updating `state` in place (None = no state).
/// `max_delay_ms` is used by `leaky_bucket` only.
pub fn decide(
    alg: Algorithm,
    state: &mut Option<AlgoState>,
    now_ms: u64,
    rate: &Rate,
    cost: u64,
    max_delay_ms: u64,
) -> Outcome {
    fn plain<S>(
        decision: Decision,
        next: Option<S>,
        wrap: fn(S) -> AlgoState,
    ) -> (Outcome, Option<AlgoState>) {
        (
            Outcome {
                decision,
                delay_ms: 0,
            },
            next.map(wrap),
        )
    }
    let (outcome, next) = match (alg, state.take()) {
        (Algorithm::SlidingWindowLog, s) => {
            let mut log = match s {
                Some(AlgoState::SlidingWindowLog(l)) => l,
                _ => VecDeque::new(),
            };
            let (decision, _) = sliding_window_log::decide(&mut log, now_ms, rate, cost);
            let o = Outcome {
                decision,
                delay_ms: 0,
            };
            (o, Some(AlgoState::SlidingWindowLog(log)))
        }
        (Algorithm::TokenBucket, s) => {
            let s = match s {
                Some(AlgoState::TokenBucket(s)) => Some(s),
                _ => None,
            };
            let (d, n) = token_bucket::decide(s, now_ms, rate, cost);
            let (o, n) = plain(d, n, AlgoState::TokenBucket);
            (o, n.or(s.map(AlgoState::TokenBucket)))
        }
        (Algorithm::Gcra, s) => {
            let s = match s {
                Some(AlgoState::Gcra(s)) => Some(s),
                _ => None,
            };
            let (d, n) = gcra::decide(s, now_ms, rate, cost);
            let (o, n) = plain(d, n, AlgoState::Gcra);
            (o, n.or(s.map(AlgoState::Gcra)))
        }
        (Algorithm::FixedWindow, s) => {
            let s = match s {
                Some(AlgoState::FixedWindow(s)) => Some(s),
                _ => None,
            };
            let (d, n) = fixed_window::decide(s, now_ms, rate, cost);
            let (o, n) = plain(d, n, AlgoState::FixedWindow);
            (o, n.or(s.map(AlgoState::FixedWindow)))
        }
        (Algorithm::SlidingWindowCounter, s) => {
            let s = match s {
                Some(AlgoState::SlidingWindowCounter(s)) => Some(s),
                _ => None,
            };
            let (d, n) = sliding_window_counter::decide(s, now_ms, rate, cost);
            let (o, n) = plain(d, n, AlgoState::SlidingWindowCounter);
            (o, n.or(s.map(AlgoState::SlidingWindowCounter)))
        }
        (Algorithm::LeakyBucket, s) => {
            let s = match s {
                Some(AlgoState::LeakyBucket(s)) => Some(s),
                _ => None,
            };
            let o = leaky_bucket::decide(s, now_ms, rate, cost, max_delay_ms);
            let out = Outcome {
                decision: o.decision,
                delay_ms: o.delay_ms,
            };
            (out, o.next.or(s).map(AlgoState::LeakyBucket))
        }
    };
    *state = next;
    outcome
}

#[cfg(test)]
mod tests;
