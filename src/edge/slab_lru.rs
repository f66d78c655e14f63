//! A fixed-capacity LRU map stored in one preallocated slab: entries are slots of a `Vec`,
//! linked by `u32` indices, and found through a `hashbrown::HashTable` of slot indices.
//!
//! Compared with a node-per-entry LRU (one heap allocation per key, 16-byte pointers in the
//! table) this costs one slot (key + value + 8 bytes of links) plus about 6–10 bytes of index
//! per entry, never allocates after construction, and never grows past its capacity.

use hashbrown::HashTable;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash, RandomState};

const NIL: u32 = u32::MAX;

struct Slot<K, V> {
    key: K,
    value: V,
    /// Towards the most recently used end.
    prev: u32,
    /// Towards the least recently used end.
    next: u32,
}

/// LRU map holding at most `capacity` entries (capacity < 2^32).
pub struct SlabLru<K, V> {
    slots: Vec<Slot<K, V>>,
    index: HashTable<u32>,
    hasher: RandomState,
    /// Most recently used slot.
    head: u32,
    /// Least recently used slot (evicted first).
    tail: u32,
    capacity: usize,
}

impl<K: Hash + Eq, V> SlabLru<K, V> {
    /// An empty map for at most `capacity` (≥ 1) entries; memory for all of them is reserved now
    /// (untouched pages cost no RSS until used).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, NIL as usize - 1);
        SlabLru {
            slots: Vec::with_capacity(capacity),
            index: HashTable::with_capacity(capacity),
            hasher: RandomState::new(),
            head: NIL,
            tail: NIL,
            capacity,
        }
    }

    /// Maximum number of entries.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn find<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
    {
        let hash = self.hasher.hash_one(key);
        let slots = &self.slots;
        self.index
            .find(hash, |&i| slots[i as usize].key.borrow() == key)
            .copied()
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let s = &self.slots[i as usize];
            (s.prev, s.next)
        };
        match prev {
            NIL => self.head = next,
            p => self.slots[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.slots[n as usize].prev = prev,
        }
    }

    fn link_front(&mut self, i: u32) {
        let old_head = self.head;
        {
            let s = &mut self.slots[i as usize];
            s.prev = NIL;
            s.next = old_head;
        }
        match old_head {
            NIL => self.tail = i,
            h => self.slots[h as usize].prev = i,
        }
        self.head = i;
    }

    /// The value of `key`, marked most recently used.
    pub fn get_mut<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        let i = self.find(key)?;
        if self.head != i {
            self.unlink(i);
            self.link_front(i);
        }
        Some(&mut self.slots[i as usize].value)
    }

    /// Inserts or replaces `key` as most recently used. When a new key finds the map full, the
    /// least recently used entry is evicted and returned.
    pub fn push(&mut self, key: K, value: V) -> Option<(K, V)> {
        if let Some(v) = self.get_mut(&key) {
            *v = value;
            return None;
        }
        let hash = self.hasher.hash_one(&key);
        if self.slots.len() < self.capacity {
            let i = self.slots.len() as u32;
            self.slots.push(Slot {
                key,
                value,
                prev: NIL,
                next: NIL,
            });
            self.link_front(i);
            let (slots, hasher) = (&self.slots, &self.hasher);
            self.index
                .insert_unique(hash, i, |&j| hasher.hash_one(&slots[j as usize].key));
            return None;
        }
        // Reuse the least recently used slot.
        let i = self.tail;
        let old_hash = self.hasher.hash_one(&self.slots[i as usize].key);
        if let Ok(entry) = self.index.find_entry(old_hash, |&j| j == i) {
            entry.remove();
        }
        self.unlink(i);
        let slot = &mut self.slots[i as usize];
        let old_key = std::mem::replace(&mut slot.key, key);
        let old_value = std::mem::replace(&mut slot.value, value);
        self.link_front(i);
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index
            .insert_unique(hash, i, |&j| hasher.hash_one(&slots[j as usize].key));
        Some((old_key, old_value))
    }

    /// Removes every entry (keeps the reserved memory).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.index.clear();
        self.head = NIL;
        self.tail = NIL;
    }

    /// Takes every entry out, least recently used first.
    pub fn drain_lru_first(&mut self) -> Vec<(K, V)> {
        let mut order = Vec::with_capacity(self.slots.len());
        let mut i = self.tail;
        while i != NIL {
            order.push(i);
            i = self.slots[i as usize].prev;
        }
        let mut taken: Vec<Option<(K, V)>> = std::mem::take(&mut self.slots)
            .into_iter()
            .map(|s| Some((s.key, s.value)))
            .collect();
        self.clear();
        order
            .into_iter()
            .filter_map(|i| taken[i as usize].take())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut m = SlabLru::new(3);
        for k in 1..=3 {
            assert!(m.push(k, k * 10).is_none());
        }
        assert_eq!(m.get_mut(&1), Some(&mut 10)); // 1 is now most recent
        assert_eq!(m.push(4, 40), Some((2, 20)));
        assert_eq!(m.push(5, 50), Some((3, 30)));
        assert_eq!(m.len(), 3);
        assert!(m.get_mut(&2).is_none());
        assert_eq!(m.push(1, 11), None); // replace keeps the size
        assert_eq!(m.get_mut(&1), Some(&mut 11));
        let order: Vec<i32> = m.drain_lru_first().into_iter().map(|(k, _)| k).collect();
        assert_eq!(order, [4, 5, 1]);
        assert!(m.is_empty());
    }

    #[test]
    fn matches_a_reference_model_under_random_use() {
        let mut m = SlabLru::new(50);
        let mut model: Vec<(u32, u32)> = Vec::new(); // most recent last
        let mut seed = 1u64;
        for step in 0..20_000u32 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let key = ((seed >> 33) % 120) as u32;
            if seed & 1 == 0 {
                let got = m.get_mut(&key).map(|v| *v);
                let pos = model.iter().position(|(k, _)| *k == key);
                let want = pos.map(|p| model.remove(p)).map(|e| {
                    model.push(e);
                    e.1
                });
                assert_eq!(got, want, "step {step}");
            } else {
                let evicted = m.push(key, step);
                if let Some(p) = model.iter().position(|(k, _)| *k == key) {
                    model.remove(p);
                    assert_eq!(evicted, None);
                } else if model.len() == 50 {
                    assert_eq!(evicted, Some(model.remove(0)), "step {step}");
                }
                model.push((key, step));
            }
            assert_eq!(m.len(), model.len());
        }
    }
}
