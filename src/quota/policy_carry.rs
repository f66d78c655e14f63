//! What the `local` fallback admitted for tiers decided by the policy script (another algorithm
//! than the token bucket, or calendar quotas), carried into Redis when Redis decides again
//! (docs/redis.md#when-redis-is-slow-or-down-failure-policy): the tenant's next policy call
//! takes it into its Redis state and quota counters in the same script call as its decision
//! (`lua/policy.lua`'s carry, mirrored by [`crate::limit::carry`]).
//!
//! Kept per tenant decided locally, on the caller's monotonic clock (ms): the local **debt** (a
//! GCRA over the local admissions at the local rate: what the local token bucket, GCRA or leaky
//! bucket still owes, less its refill since), the **admissions of the last two windows** (window
//! algorithms; merged into slots of 1/16 window, each at its latest admission, so a slot is never
//! counted earlier than it happened) and the **admissions per UTC hour** (calendar quotas: every
//! period starts on an hour, so each hour's admissions fall in one period; the last 48 hours,
//! taken at most an hour after the last one). Memory per tenant: at most 32 slots and 48 hours.

use crate::limit::algorithm::Algorithm;
use crate::limit::Rate;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Slots per window of the admissions kept for the window algorithms.
const SLOTS_PER_WINDOW: u64 = 16;
const HOUR_MS: u64 = 3_600_000;
/// Hours of admissions kept for the calendar quotas (the last two days), and how long after the
/// last one they wait for the tenant's next decision in Redis.
const MAX_HOURS: usize = 48;
const QUOTA_WAIT_MS: u64 = HOUR_MS;

/// One tenant's local admissions since the last carry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spent {
    algorithm: Algorithm,
    /// The local share that decided.
    local: Rate,
    /// The Redis window length (window algorithms keep two of them).
    window_ms: u64,
    /// The local debt's theoretical arrival time, in units of `1 / local.limit` ms.
    tat: u128,
    /// (ms, tokens), oldest first.
    admissions: Vec<(u64, u64)>,
    /// (UTC hour, ms of its latest admission, tokens), oldest first; empty without quotas.
    hours: Vec<(u64, u64, u64)>,
}

impl Spent {
    fn owes(&self) -> bool {
        matches!(
            self.algorithm,
            Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket
        )
    }

    /// Tokens still owed at `now_ms`, rounded up.
    fn debt(&self, now_ms: u64) -> u64 {
        let now = now_ms as u128 * self.local.limit as u128;
        let units = self.tat.saturating_sub(now);
        u64::try_from(units.div_ceil(self.local.per_ms.max(1) as u128)).unwrap_or(u64::MAX)
    }

    /// When nothing is left to carry (ms).
    fn until_ms(&self) -> u64 {
        let debt =
            u64::try_from(self.tat.div_ceil(self.local.limit.max(1) as u128)).unwrap_or(u64::MAX);
        let windows = self
            .admissions
            .last()
            .map_or(0, |(t, _)| t.saturating_add(2 * self.window_ms));
        let quotas = self
            .hours
            .last()
            .map_or(0, |(_, t, _)| t.saturating_add(QUOTA_WAIT_MS));
        debt.max(windows).max(quotas)
    }
}

/// What a tenant's next policy call carries: see `lua/policy.lua` (its `carry` arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyCarried {
    /// Tokens its main limit still owes (token bucket, GCRA, leaky bucket).
    pub debt: u64,
    /// (age ms, tokens) of its admissions (window algorithms).
    pub admissions: Vec<(u64, u64)>,
    /// (age ms, tokens) of its admissions per UTC hour (calendar quotas).
    pub quota: Vec<(u64, u64)>,
}

impl PolicyCarried {
    /// The script arguments, each followed by one space (as a call key's).
    pub fn words(&self) -> String {
        let mut s = format!("carry {} ", self.debt);
        for list in [&self.admissions, &self.quota] {
            let _ = write!(s, "{} ", list.len());
            for (age, tokens) in list {
                let _ = write!(s, "{age} {tokens} ");
            }
        }
        s
    }
}

/// The carry of the policy tiers of one quota service.
pub struct PolicyCarry {
    /// Tenants tracked at most (like the local fallback); one beyond is not carried.
    max: usize,
    noted: Mutex<HashMap<String, Spent>>,
    pending: Mutex<HashMap<String, Spent>>,
    /// Something is pending (one relaxed load on the healthy path).
    active: AtomicBool,
    /// When nothing pending is left to carry (ms).
    until_ms: AtomicU64,
}

impl PolicyCarry {
    /// Tracks at most `max` tenants.
    pub fn new(max: usize) -> Self {
        PolicyCarry {
            max,
            noted: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            active: AtomicBool::new(false),
            until_ms: AtomicU64::new(0),
        }
    }

    /// Notes that `tenant`'s local fallback (`algorithm` at the `local` share of `full`)
    /// admitted `cost` tokens at `now_ms` (monotonic) and `unix_ms` (wall clock, for the hour of
    /// its calendar quotas when `quotas`). A tenant noted again before its carry was taken goes
    /// on from it.
    #[allow(clippy::too_many_arguments)]
    pub fn note(
        &self,
        tenant: &str,
        algorithm: Algorithm,
        full: Rate,
        local: Rate,
        quotas: bool,
        cost: u64,
        now_ms: u64,
        unix_ms: u64,
    ) {
        let mut noted = self.noted.lock();
        if !noted.contains_key(tenant) {
            if noted.len() >= self.max {
                return;
            }
            let earlier = self.pending.lock().remove(tenant);
            let fresh = Spent {
                algorithm,
                local,
                window_ms: full.window_ms(),
                tat: 0,
                admissions: Vec::new(),
                hours: Vec::new(),
            };
            let spent = earlier
                .filter(|e| e.algorithm == algorithm && e.local == local)
                .unwrap_or(fresh);
            noted.insert(tenant.to_string(), spent);
        }
        let Some(s) = noted.get_mut(tenant) else {
            return;
        };
        if s.algorithm != algorithm || s.local != local {
            // A reload changed the tier: the earlier admissions are another limit's.
            s.algorithm = algorithm;
            s.local = local;
            s.tat = 0;
            s.admissions.clear();
        }
        s.window_ms = full.window_ms();
        if s.owes() {
            let now = now_ms as u128 * local.limit as u128;
            s.tat = s.tat.max(now) + cost as u128 * local.per_ms as u128;
        } else {
            let slot = (s.window_ms / SLOTS_PER_WINDOW).max(1);
            match s.admissions.last_mut() {
                Some(last) if last.0 / slot == now_ms / slot => *last = (now_ms, last.1 + cost),
                _ => s.admissions.push((now_ms, cost)),
            }
            let horizon = now_ms.saturating_sub(2 * s.window_ms);
            let old = s.admissions.iter().take_while(|(t, _)| *t < horizon);
            let old = old.count();
            s.admissions.drain(..old);
        }
        if quotas {
            let hour = unix_ms / HOUR_MS;
            match s.hours.last_mut() {
                Some(last) if last.0 == hour => *last = (hour, now_ms, last.2 + cost),
                _ => s.hours.push((hour, now_ms, cost)),
            }
            if s.hours.len() > MAX_HOURS {
                s.hours.remove(0);
            }
        }
    }

    /// Takes `cost` tokens back from `tenant`'s local debt: its local leaky bucket gave a slot
    /// back (only ever its latest reservation, so the last tokens noted), and what was given
    /// back is not carried into Redis. Noted or already pending alike; nothing for a tenant not
    /// tracked or an algorithm without a debt.
    pub fn give_back(&self, tenant: &str, cost: u64) {
        let back = |s: &mut Spent| {
            if s.owes() {
                s.tat = s.tat.saturating_sub(cost as u128 * s.local.per_ms as u128);
            }
        };
        // In `note`'s lock order, so a close between the two cannot hide the tenant.
        let mut noted = self.noted.lock();
        match noted.get_mut(tenant) {
            Some(s) => back(s),
            None => {
                if let Some(s) = self.pending.lock().get_mut(tenant) {
                    back(s);
                }
            }
        }
    }

    /// Redis decides again at `now_ms`: what each noted tenant admitted becomes pending for its
    /// next policy call.
    pub fn close(&self, now_ms: u64) {
        let noted = std::mem::take(&mut *self.noted.lock());
        if noted.is_empty() {
            return;
        }
        let mut pending = self.pending.lock();
        pending.retain(|_, s| s.until_ms() > now_ms);
        pending.extend(noted.into_iter().filter(|(_, s)| s.until_ms() > now_ms));
        let until = pending.values().map(Spent::until_ms).max().unwrap_or(0);
        self.until_ms.store(until, Ordering::Relaxed);
        self.active.store(!pending.is_empty(), Ordering::Relaxed);
    }

    /// Whether some carry may be pending (one relaxed load).
    pub fn pending(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// What `tenant`'s policy call at `now_ms` carries, once; `None` when nothing.
    pub fn take(&self, tenant: &str, now_ms: u64) -> Option<PolicyCarried> {
        if !self.pending() {
            return None;
        }
        let mut pending = self.pending.lock();
        let s = pending.remove(tenant);
        if pending.is_empty() || now_ms >= self.until_ms.load(Ordering::Relaxed) {
            pending.clear();
            self.active.store(false, Ordering::Relaxed);
        }
        drop(pending);
        let s = s?;
        let age = |t: u64| now_ms.saturating_sub(t);
        let horizon = now_ms.saturating_sub(2 * s.window_ms);
        let carried = PolicyCarried {
            debt: if s.owes() { s.debt(now_ms) } else { 0 },
            admissions: s
                .admissions
                .iter()
                .filter(|(t, _)| *t >= horizon)
                .map(|&(t, n)| (age(t), n))
                .collect(),
            quota: s.hours.iter().map(|&(_, t, n)| (age(t), n)).collect(),
        };
        let empty = carried.debt == 0 && carried.admissions.is_empty() && carried.quota.is_empty();
        (!empty).then_some(carried)
    }

    /// Tenants noted and carries pending (tests, metrics).
    pub fn len(&self) -> (usize, usize) {
        (self.noted.lock().len(), self.pending.lock().len())
    }
}

#[cfg(test)]
mod tests;
