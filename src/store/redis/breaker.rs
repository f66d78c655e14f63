//! Circuit breaker around one Redis endpoint, shared by all worker threads.
//!
//! Closed: every call goes through; outcomes are counted in a sliding window of one-second
//! buckets. When the window holds at least `min_calls` calls and the failure ratio reaches
//! `failure_ratio`, the breaker opens. Open: no call is made for `break_duration`. Half-open:
//! up to `probes` calls at a time go through as probes; `probes` successes close the breaker,
//! any failure re-opens it. Timeouts count as failures. Pure state machine over an injected
//! clock (milliseconds); the caller does the I/O.
//!
//! Degraded ([`Breaker::degraded`]) is wider than "not closed": it is also true while the last
//! recorded call failed, so a gateway whose Redis is down from the start reports the fallback
//! from its first failed decision, not only once enough failures opened the breaker.

use crate::config::BreakerSettings;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Breaker state, as exported in `tollgate_redis_breaker_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    /// Gauge value: 0 closed, 1 open, 2 half-open.
    pub fn gauge(self) -> i64 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        }
    }

    /// Lower-case name for logs and labels.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// Permission for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// Call Redis; report the outcome with `probe` as given.
    Call { probe: bool },
    /// Do not call; the next probe is allowed in this many milliseconds (≥ 0).
    Rejected { retry_in_ms: u64 },
}

struct Inner {
    state: BreakerState,
    /// Per-second (calls, failures), indexed by second % len.
    window: Vec<(u64, u64, u64)>, // (second, calls, failures)
    open_until_ms: u64,
    probes_in_flight: u64,
    probe_successes: u64,
}

/// The breaker. Cheap to call: one short mutex section per call and per outcome.
pub struct Breaker {
    settings: BreakerSettings,
    inner: Mutex<Inner>,
    /// The last recorded call failed (its request fell to the failure policy).
    failing: AtomicBool,
    /// The state is not [`BreakerState::Closed`] (a lock-free copy for [`Breaker::degraded`]).
    not_closed: AtomicBool,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(settings: BreakerSettings) -> Self {
        let slots = settings.window.as_secs().max(1) as usize;
        Breaker {
            settings,
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                window: vec![(u64::MAX, 0, 0); slots],
                open_until_ms: 0,
                probes_in_flight: 0,
                probe_successes: 0,
            }),
            failing: AtomicBool::new(false),
            not_closed: AtomicBool::new(false),
        }
    }

    /// Whether decisions are degraded now: the breaker is not closed, or the last call it
    /// recorded failed. Lock-free (two relaxed loads), for the health answer and the gauge.
    pub fn degraded(&self) -> bool {
        self.failing.load(Ordering::Relaxed) || self.not_closed.load(Ordering::Relaxed)
    }

    /// Current state (Open turns HalfOpen only when a call asks for a permit).
    pub fn state(&self) -> BreakerState {
        self.inner.lock().state
    }

    /// Asks to make one call at `now_ms`. Returns the permit and a state transition, if any.
    pub fn permit(&self, now_ms: u64) -> (Permit, Option<BreakerState>) {
        let mut g = self.inner.lock();
        match g.state {
            BreakerState::Closed => (Permit::Call { probe: false }, None),
            BreakerState::Open if now_ms < g.open_until_ms => (
                Permit::Rejected {
                    retry_in_ms: g.open_until_ms - now_ms,
                },
                None,
            ),
            BreakerState::Open => {
                g.state = BreakerState::HalfOpen;
                self.not_closed.store(true, Ordering::Relaxed);
                g.probes_in_flight = 1;
                g.probe_successes = 0;
                (Permit::Call { probe: true }, Some(BreakerState::HalfOpen))
            }
            BreakerState::HalfOpen if g.probes_in_flight < self.settings.probes => {
                g.probes_in_flight += 1;
                (Permit::Call { probe: true }, None)
            }
            BreakerState::HalfOpen => (Permit::Rejected { retry_in_ms: 0 }, None),
        }
    }

    /// Reports the outcome of a permitted call. Returns the transition, if any.
    pub fn record(&self, now_ms: u64, ok: bool, probe: bool) -> Option<BreakerState> {
        let mut g = self.inner.lock();
        self.failing.store(!ok, Ordering::Relaxed);
        if probe {
            g.probes_in_flight = g.probes_in_flight.saturating_sub(1);
            if g.state != BreakerState::HalfOpen {
                return None;
            }
            if !ok {
                return Some(self.open(&mut g, now_ms));
            }
            g.probe_successes += 1;
            if g.probe_successes >= self.settings.probes {
                g.state = BreakerState::Closed;
                self.not_closed.store(false, Ordering::Relaxed);
                for slot in g.window.iter_mut() {
                    *slot = (u64::MAX, 0, 0);
                }
                return Some(BreakerState::Closed);
            }
            return None;
        }
        if g.state != BreakerState::Closed {
            return None;
        }
        let second = now_ms / 1000;
        let len = g.window.len();
        let slot = &mut g.window[(second as usize) % len];
        if slot.0 != second {
            *slot = (second, 0, 0);
        }
        slot.1 += 1;
        if ok {
            // A success never opens the breaker: the window's totals are not needed.
            return None;
        }
        slot.2 += 1;
        let oldest = second.saturating_sub(len as u64 - 1);
        let (calls, failures) = g
            .window
            .iter()
            .filter(|s| s.0 != u64::MAX && s.0 >= oldest && s.0 <= second)
            .fold((0, 0), |(c, f), s| (c + s.1, f + s.2));
        if calls >= self.settings.min_calls
            && failures as f64 >= self.settings.failure_ratio * calls as f64
        {
            return Some(self.open(&mut g, now_ms));
        }
        None
    }

    fn open(&self, g: &mut Inner, now_ms: u64) -> BreakerState {
        g.state = BreakerState::Open;
        self.not_closed.store(true, Ordering::Relaxed);
        g.open_until_ms = now_ms + self.settings.break_duration.as_millis() as u64;
        g.probe_successes = 0;
        BreakerState::Open
    }
}

#[cfg(test)]
mod tests;
