//! SHA-256 digests of presented API keys, remembered per worker thread so that a client sending
//! the same key on every request pays the hash once: a direct-mapped table of [`SLOTS`] recent
//! keys (at most [`MAX_CACHED_LEN`] bytes each) and their digests, indexed by a keyed hash of the
//! key (aHash with random per-process keys, `crate::hashing`), so a client cannot choose which
//! entry its key evicts.
//!
//! The digest is a pure function of the key, so an entry stays right across config reloads; the
//! lookup by digest (file keys, live keys) is unchanged. The presented key is compared with the
//! slot's in constant time (`subtle`), so a probe learns nothing about a cached key from the
//! time it takes. A miss (a new key, a longer one, a collision) hashes as before.

use crate::hashing::RandomState;
use once_cell::sync::Lazy;
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use subtle::ConstantTimeEq;

/// Entries per worker thread.
pub const SLOTS: usize = 256;
/// Longest key remembered, in bytes (longer keys are hashed on every request).
pub const MAX_CACHED_LEN: usize = 96;

/// One remembered key: its bytes (zero-padded), length and digest.
#[derive(Clone, Copy)]
struct Slot {
    len: u8,
    key: [u8; MAX_CACHED_LEN],
    digest: [u8; 32],
}

const EMPTY: Slot = Slot {
    len: 0,
    key: [0; MAX_CACHED_LEN],
    digest: [0; 32],
};

static SLOT_HASH: Lazy<RandomState> = Lazy::new(RandomState::new);

thread_local! {
    static TABLE: RefCell<Box<[Slot; SLOTS]>> = RefCell::new(Box::new([EMPTY; SLOTS]));
}

/// SHA-256 of `key` (FIPS 180-4), from this thread's table when it holds `key`.
pub fn digest(key: &[u8]) -> [u8; 32] {
    if key.is_empty() || key.len() > MAX_CACHED_LEN {
        return sha256(key);
    }
    let index = (SLOT_HASH.hash_one(key) as usize) % SLOTS;
    let mut padded = [0u8; MAX_CACHED_LEN];
    padded[..key.len()].copy_from_slice(key);
    let hit = TABLE.with(|t| {
        let t = t.borrow();
        let slot = &t[index];
        let same = usize::from(slot.len).ct_eq(&key.len()) & same_bytes(&slot.key, &padded);
        bool::from(same).then_some(slot.digest)
    });
    if let Some(d) = hit {
        return d;
    }
    let d = sha256(key);
    TABLE.with(|t| {
        t.borrow_mut()[index] = Slot {
            len: key.len() as u8,
            key: padded,
            digest: d,
        }
    });
    d
}

/// Whether `a` and `b` are equal, in time independent of their contents: their 8-byte words'
/// differences OR-ed together without a branch, then one constant-time test of the result
/// (`subtle`'s byte-wise `ct_eq` spent a `black_box` per byte).
fn same_bytes(a: &[u8; MAX_CACHED_LEN], b: &[u8; MAX_CACHED_LEN]) -> subtle::Choice {
    let word = |w: &[u8]| u64::from_ne_bytes(w.try_into().expect("8-byte chunk"));
    let diff = a
        .chunks_exact(8)
        .zip(b.chunks_exact(8))
        .fold(0u64, |d, (x, y)| d | (word(x) ^ word(y)));
    diff.ct_eq(&0)
}

fn sha256(key: &[u8]) -> [u8; 32] {
    Sha256::digest(key).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_digests_equal_sha256_whatever_the_table_holds() {
        let keys: Vec<Vec<u8>> = (0..2000)
            .map(|i| format!("key-{i}-{}", "x".repeat(i % 120)).into_bytes())
            .collect();
        for _ in 0..2 {
            for k in &keys {
                assert_eq!(digest(k), sha256(k), "{}", String::from_utf8_lossy(k));
            }
        }
        assert_eq!(digest(b""), sha256(b""));
        // A key that is a prefix of a cached one (same padded bytes but its length) differs.
        assert_eq!(digest(b"abc\0"), sha256(b"abc\0"));
        assert_eq!(digest(b"abc"), sha256(b"abc"));
        assert_eq!(digest(b"abc\0"), sha256(b"abc\0"));
    }

    #[test]
    fn keys_differing_in_any_one_byte_are_not_the_same() {
        let a = [7u8; MAX_CACHED_LEN];
        assert!(bool::from(same_bytes(&a, &a)));
        for i in 0..MAX_CACHED_LEN {
            let mut b = a;
            b[i] ^= 0x80;
            assert!(!bool::from(same_bytes(&a, &b)), "byte {i}");
        }
    }
}
