//! The bounded per-instance cache of live API keys (`store.cache`): least recently used evicted
//! first, found keys served for `ttl`, unknown ones remembered for `negative_ttl`. Pure: every
//! call takes the time (milliseconds of any monotonic clock).

use super::keys::LiveKey;
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::sync::Arc;

/// What the cache holds for one digest.
#[derive(Debug, Clone)]
struct Entry {
    /// The record, or `None`: no key has this digest.
    key: Option<Arc<LiveKey>>,
    fetched_ms: u64,
}

/// A cached answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Cached {
    /// Within its TTL: the record, or `None` for a known-unknown digest.
    Fresh(Option<Arc<LiveKey>>),
    /// A found key past its TTL: to be read again, but served when the store does not answer.
    Stale(Arc<LiveKey>),
    /// Nothing usable.
    Miss,
}

/// The cache: digest → record (or its absence).
pub struct KeyCache {
    entries: Mutex<LruCache<[u8; 32], Entry>>,
    ttl_ms: u64,
    negative_ttl_ms: u64,
}

impl KeyCache {
    /// A cache of at most `max_entries` (at least 1).
    pub fn new(max_entries: usize, ttl_ms: u64, negative_ttl_ms: u64) -> Self {
        let cap = NonZeroUsize::new(max_entries.max(1)).unwrap_or(NonZeroUsize::MIN);
        KeyCache {
            entries: Mutex::new(LruCache::new(cap)),
            ttl_ms,
            negative_ttl_ms,
        }
    }

    /// What the cache knows of `digest` at `now_ms`.
    pub fn get(&self, digest: &[u8; 32], now_ms: u64) -> Cached {
        let mut entries = self.entries.lock();
        let Some(e) = entries.get(digest) else {
            return Cached::Miss;
        };
        let age = now_ms.saturating_sub(e.fetched_ms);
        match &e.key {
            Some(k) if age < self.ttl_ms => Cached::Fresh(Some(k.clone())),
            Some(k) => Cached::Stale(k.clone()),
            None if age < self.negative_ttl_ms => Cached::Fresh(None),
            None => Cached::Miss,
        }
    }

    /// Remembers what the store answered for `digest` at `now_ms`.
    pub fn put(&self, digest: [u8; 32], key: Option<Arc<LiveKey>>, now_ms: u64) {
        let entry = Entry {
            key,
            fetched_ms: now_ms,
        };
        self.entries.lock().put(digest, entry);
    }

    /// Forgets `digest` (a change announced for it).
    pub fn forget(&self, digest: &[u8; 32]) {
        self.entries.lock().pop(digest);
    }

    /// Forgets every entry (the version changed and the changes are not known one by one).
    pub fn clear(&self) {
        self.entries.lock().clear();
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Arc<LiveKey> {
        Arc::new(LiveKey {
            id: "key_1".into(),
            tenant: "acme".into(),
            tier: "free".into(),
            name: "ci".into(),
            created_at: 0,
            expires_at: None,
            revoked_at: None,
            digest: "d".into(),
            previous_digest: None,
            previous_until: None,
            rotated_at: None,
        })
    }

    #[test]
    fn found_and_unknown_keys_expire_by_their_ttls() {
        let c = KeyCache::new(10, 1000, 100);
        c.put([1; 32], Some(key()), 0);
        c.put([2; 32], None, 0);
        assert_eq!(c.get(&[1; 32], 999), Cached::Fresh(Some(key())));
        assert_eq!(c.get(&[1; 32], 1000), Cached::Stale(key()));
        assert_eq!(c.get(&[2; 32], 99), Cached::Fresh(None));
        assert_eq!(c.get(&[2; 32], 100), Cached::Miss);
        assert_eq!(c.get(&[3; 32], 0), Cached::Miss);
        c.forget(&[1; 32]);
        assert_eq!(c.get(&[1; 32], 0), Cached::Miss);
    }

    #[test]
    fn bounded_least_recently_used_goes_first() {
        let c = KeyCache::new(2, 1000, 1000);
        c.put([1; 32], None, 0);
        c.put([2; 32], None, 0);
        let _ = c.get(&[1; 32], 0);
        c.put([3; 32], None, 0);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(&[2; 32], 0), Cached::Miss);
        assert_eq!(c.get(&[1; 32], 0), Cached::Fresh(None));
        c.clear();
        assert!(c.is_empty());
    }
}
