//! The hasher of tollgate's own in-memory maps (edge buckets, tenant books, shard choice, metric
//! series, API-key digests): aHash with keys drawn at random per process, in place of the
//! standard library's SipHash-1-3. Both resist hash flooding by clients choosing keys (client
//! addresses, tenant ids); aHash hashes a short key in a fraction of SipHash's instructions, and
//! these maps are looked up several times per request.

/// The build-hasher of tollgate's maps and shard choice (random keys per instance).
pub type RandomState = ahash::RandomState;

/// A `std` hash map with [`RandomState`]; build it with `HashMap::default()`.
pub type HashMap<K, V> = std::collections::HashMap<K, V, RandomState>;
