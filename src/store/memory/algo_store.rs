//! Bounded, sharded in-memory state of any algorithm (`limit::algorithm`), keyed by tenant (the
//! local fallback) or client address: the same semantics as the Redis scripts, on a monotonic
//! millisecond clock. Each entry is tagged with its algorithm, so a reload that switches a
//! tier's algorithm starts that tenant afresh instead of misreading the old state.

use crate::limit::algorithm::{self, AlgoState, Algorithm, Outcome};
use crate::limit::gcra::TatState;
use crate::limit::{leaky_bucket, Rate};
use crate::store::memory::sharded::ShardedLru;
use std::hash::Hash;

/// Per-key algorithm state, at most `capacity` keys (LRU beyond).
pub struct AlgoStore<K> {
    shards: ShardedLru<K, AlgoState>,
}

impl<K: Hash + Eq + Clone> AlgoStore<K> {
    /// A store of at most about `capacity` keys.
    pub fn new(capacity: usize) -> Self {
        AlgoStore {
            shards: ShardedLru::new(capacity),
        }
    }

    /// Decides one request for `key` at `now_ms`; see [`algorithm::decide`]. Also returns, for
    /// an admitted `leaky_bucket` request, the state its reservation wrote (for [`Self::refund`]).
    pub fn decide(
        &self,
        key: &K,
        alg: Algorithm,
        now_ms: u64,
        rate: &Rate,
        cost: u64,
        max_delay_ms: u64,
    ) -> (Outcome, Option<TatState>) {
        let mut shard = self.shards.shard(key).lock();
        let slot = shard.get_mut(key);
        let mut s = slot.as_ref().map(|s| (*s).clone());
        let o = algorithm::decide(alg, &mut s, now_ms, rate, cost, max_delay_ms);
        let reservation = match (&s, o.decision.admitted) {
            (Some(AlgoState::LeakyBucket(t)), true) => Some(*t),
            _ => None,
        };
        match (slot, s) {
            (Some(state), Some(s)) => *state = s,
            (None, Some(s)) => {
                shard.push(key.clone(), s);
            }
            _ => {}
        }
        (o, reservation)
    }

    /// The outcome [`decide`](Self::decide) would give now, without changing anything (admin
    /// `POST /v1/explain`).
    pub fn peek(
        &self,
        key: &K,
        alg: Algorithm,
        now_ms: u64,
        rate: &Rate,
        cost: u64,
        max_delay_ms: u64,
    ) -> Outcome {
        let mut s = self
            .shards
            .shard(key)
            .lock()
            .get_mut(key)
            .map(|s| (*s).clone());
        algorithm::decide(alg, &mut s, now_ms, rate, cost, max_delay_ms)
    }

    /// Gives back a leaky bucket reservation (see [`leaky_bucket::refund`]); true when it did.
    pub fn refund(&self, key: &K, reserved: TatState, rate: &Rate, cost: u64) -> bool {
        let mut shard = self.shards.shard(key).lock();
        let Some(AlgoState::LeakyBucket(s)) = shard.get_mut(key) else {
            return false;
        };
        match leaky_bucket::refund(Some(*s), reserved, rate, cost) {
            Some(next) => {
                *s = next;
                true
            }
            None => false,
        }
    }

    /// Forgets everything.
    pub fn clear(&self) {
        for s in self.shards.iter() {
            s.lock().clear();
        }
    }
}

#[cfg(test)]
mod tests;
