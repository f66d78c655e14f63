//! Bounded in-process stores: a slab-backed LRU ([`slab_lru`]), the edge's token buckets
//! ([`bucket_store`]) and per-key algorithm state ([`algo_store`]: edge GCRA, the local
//! fallback).

pub mod algo_store;
pub mod bucket_store;
pub mod sharded;
pub mod slab_lru;
