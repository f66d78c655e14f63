//! Bounded, sharded in-memory store of per-client token buckets.
//!
//! Up to `SHARDS` independent LRU maps, each behind its own mutex, so worker threads rarely
//! contend. Capacity is exactly `max_clients` in total: it is split over the shards with the
//! remainder spread one by one (and with fewer shards than `SHARDS` when `max_clients` is
//! smaller), so the number of tracked clients never exceeds the configured bound. When a shard is
//! full its least recently used entry is evicted. A client that keeps sending is always recently
//! used, so a flood of new addresses evicts idle clients, not an active abuser.
//!
//! Memory per tracked client (x86_64): one slab slot (key [`ClientKey`] 16 B + state 24 B +
//! links 8 B: 48 B, no padding) plus its index entry (4 B + 1 control byte per bucket, 1.1–2.3
//! buckets per entry): 54–60 bytes, all reserved up front ([`BucketStore::reserved_bytes`]; the
//! benchmark's memory run measures the process's RSS as well).

use super::slab_lru::SlabLru;
use crate::limit::token_bucket::{decide, Decision, TokenBucketState};
use crate::limit::Rate;
use parking_lot::{Mutex, RwLock};
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

const SHARDS: usize = 64;

/// A client address as the edge store keys it: the 16 bytes of its IPv6 form (an IPv4 address
/// as its IPv4-mapped IPv6 address, `::ffff:a.b.c.d`, RFC 4291 2.5.5.2). An `IpAddr` takes 17
/// bytes (its tag), which padded each slot from 48 to 56 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientKey([u8; 16]);

impl From<IpAddr> for ClientKey {
    fn from(ip: IpAddr) -> Self {
        ClientKey(match ip {
            IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            IpAddr::V6(v6) => v6.octets(),
        })
    }
}

type Shard<K> = Mutex<SlabLru<K, TokenBucketState>>;

/// Bucket store keyed by `K` (client address for the edge, tenant id for the local fallback);
/// survives config reloads.
pub struct BucketStore<K = ClientKey> {
    /// Write-locked only by [`resize`](Self::resize).
    shards: RwLock<Vec<Shard<K>>>,
    hasher: crate::hashing::RandomState,
    evictions: AtomicU64,
}

/// Empty shards whose capacities sum to exactly `max_clients` (at least 1): `min(SHARDS, max)`
/// shards, the remainder spread over the first ones.
fn empty_shards<K: Hash + Eq>(max_clients: usize) -> Vec<Shard<K>> {
    let max = max_clients.max(1);
    let n = max.min(SHARDS);
    (0..n)
        .map(|i| Mutex::new(SlabLru::new(max / n + usize::from(i < max % n))))
        .collect()
}

impl<K: Hash + Eq + Clone> BucketStore<K> {
    /// A store holding at most `max_clients` keys (at least 1).
    pub fn new(max_clients: usize) -> Self {
        BucketStore {
            shards: RwLock::new(empty_shards(max_clients)),
            hasher: Default::default(),
            evictions: AtomicU64::new(0),
        }
    }

    /// Changes the bound (on reload): every entry is re-inserted, least recently used first, so
    /// shrinking evicts (and counts) the least recently used ones and growing keeps them all.
    pub fn resize(&self, max_clients: usize) {
        let mut shards = self.shards.write();
        let old = std::mem::replace(&mut *shards, empty_shards(max_clients));
        for shard in old {
            for (key, state) in shard.into_inner().drain_lru_first() {
                let index = self.index(&key, shards.len());
                if shards[index].lock().push(key, state).is_some() {
                    self.count_evictions(1);
                }
            }
        }
    }

    fn count_evictions(&self, n: usize) {
        if n > 0 {
            self.evictions.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Total keys the store can hold (exactly the `max_clients` it was built or resized with).
    pub fn capacity(&self) -> usize {
        self.shards.read().iter().map(|s| s.lock().capacity()).sum()
    }

    fn index(&self, key: &K, shards: usize) -> usize {
        (self.hasher.hash_one(key) as usize) % shards
    }

    /// Decides a request of `cost` tokens for `key` at `now_ms` (monotonic milliseconds).
    pub fn check(&self, key: &K, now_ms: u64, rate: &Rate, cost: u64) -> Decision {
        let shards = self.shards.read();
        let mut shard = shards[self.index(key, shards.len())].lock();
        if let Some(state) = shard.get_mut(key) {
            let (decision, next) = decide(Some(*state), now_ms, rate, cost);
            if let Some(next) = next {
                *state = next;
            }
            return decision;
        }
        let (decision, next) = decide(None, now_ms, rate, cost);
        if let Some(next) = next {
            if shard.push(key.clone(), next).is_some() {
                self.count_evictions(1);
            }
        }
        decision
    }

    /// The decision [`check`](Self::check) would take now, without changing anything (admin
    /// `POST /v1/explain`).
    pub fn peek(&self, key: &K, now_ms: u64, rate: &Rate, cost: u64) -> Decision {
        let shards = self.shards.read();
        let mut shard = shards[self.index(key, shards.len())].lock();
        let state = shard.get_mut(key).map(|s| *s);
        decide(state, now_ms, rate, cost).0
    }

    /// Number of tracked client keys.
    pub fn len(&self) -> usize {
        self.shards.read().iter().map(|s| s.lock().len()).sum()
    }

    /// True when no client is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every entry (e.g. local fallback buckets once Redis is back).
    pub fn clear(&self) {
        for s in self.shards.read().iter() {
            s.lock().clear();
        }
    }

    /// Bytes the store holds for its entries: every shard (its lock and map header) with its
    /// slots and index, all sized for `capacity` entries up front.
    pub fn reserved_bytes(&self) -> usize {
        let shards = self.shards.read();
        let own = shards.len() * std::mem::size_of::<Shard<K>>();
        own + shards
            .iter()
            .map(|s| s.lock().reserved_bytes())
            .sum::<usize>()
    }

    /// Entries evicted to respect the bound since start.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
