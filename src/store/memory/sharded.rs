//! A bounded map split into [`SHARDS`] LRU maps ([`SlabLru`]), each behind its own mutex, so
//! threads rarely wait for each other; a key's shard is chosen by the process's keyed hasher.
//! The per-key stores of the local fallback and edge GCRA, the deny cache and tier fit use it.

use super::slab_lru::SlabLru;
use parking_lot::Mutex;
use std::hash::Hash;

/// Number of shards.
pub const SHARDS: usize = 16;

/// At most about `capacity` entries in all (`capacity / SHARDS` per shard, LRU beyond).
pub struct ShardedLru<K, V> {
    shards: Vec<Mutex<SlabLru<K, V>>>,
    hasher: crate::hashing::RandomState,
}

impl<K: Hash + Eq, V> ShardedLru<K, V> {
    /// A map of at most about `capacity` entries (at least one per shard).
    pub fn new(capacity: usize) -> Self {
        let per = capacity.div_ceil(SHARDS).max(1);
        ShardedLru {
            shards: (0..SHARDS).map(|_| Mutex::new(SlabLru::new(per))).collect(),
            hasher: Default::default(),
        }
    }

    /// The shard holding `key` (a `&str` finds its `String` key: both hash alike).
    pub fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> &Mutex<SlabLru<K, V>> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARDS]
    }

    /// Every shard, for sweeps over all entries.
    pub fn iter(&self) -> std::slice::Iter<'_, Mutex<SlabLru<K, V>>> {
        self.shards.iter()
    }
}
