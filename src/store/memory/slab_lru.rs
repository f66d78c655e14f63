//! A fixed-capacity LRU map stored in one preallocated slab: entries are slots of a `Vec`,
//! linked by `u32` indices, and found through a `hashbrown::HashTable` of slot indices.
//!
//! Compared with a node-per-entry LRU (one heap allocation per key, 16-byte pointers in the
//! table) this costs one slot (key + value + 8 bytes of links) plus about 6–10 bytes of index
//! per entry, never allocates after construction, and never grows past its capacity.

use crate::hashing::RandomState;
use hashbrown::HashTable;
use std::borrow::Borrow;
use std::hash::Hash;

const NIL: u32 = u32::MAX;

struct Slot<K, V> {
    key: K,
    value: V,
    /// Towards the most recently used end.
    prev: u32,
    /// Towards the least recently used end.
    next: u32,
}

/// Bytes of one entry's slot (key, value and links), for tests of the layout.
#[cfg(test)]
pub(crate) const fn slot_bytes<K, V>() -> usize {
    std::mem::size_of::<Slot<K, V>>()
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

    /// Bytes allocated for the slots and the index (both sized for `capacity` at construction).
    pub fn reserved_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot<K, V>>() + self.index.allocation_size()
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

    /// The values, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().map(|s| &s.value)
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
mod tests;
