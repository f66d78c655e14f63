use super::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn k(ip: IpAddr) -> ClientKey {
    ip.into()
}

#[test]
fn bound_holds_under_a_flood_and_hot_client_stays_limited() {
    let store: BucketStore = BucketStore::new(640);
    let rate = Rate::new(1, 3_600_000, 3);
    let hot: IpAddr = "203.0.113.1".parse().unwrap();
    let mut hot_admitted = 0;
    for i in 0..20_000u32 {
        let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
        store.check(&k(ip), 0, &rate, 1);
        if store.check(&k(hot), 0, &rate, 1).admitted {
            hot_admitted += 1;
        }
    }
    assert!(store.len() <= store.capacity());
    assert_eq!(store.capacity(), 640);
    assert!(store.evictions() > 0);
    assert_eq!(hot_admitted, 3);
}

#[test]
fn a_clock_step_backwards_never_locks_a_client_out() {
    // The bucket was last written at 10 s; the clock now reads 5 s (a stamp in the future).
    let store: BucketStore = BucketStore::new(10);
    let rate = Rate::new(1, 1_000, 2);
    let client: IpAddr = "203.0.113.9".parse().unwrap();
    assert!(store.check(&k(client), 10_000, &rate, 2).admitted);
    let refused = store.check(&k(client), 5_000, &rate, 1);
    assert_eq!(refused.retry_after_s(), Some(1));
    assert!(store.check(&k(client), 6_000, &rate, 1).admitted);
}

#[test]
fn capacity_is_exactly_max_clients() {
    for max in [1, 2, 5, 63, 64, 65, 100, 1000, 5000, 100_000] {
        let store: BucketStore = BucketStore::new(max);
        assert_eq!(store.capacity(), max, "max_clients {max}");
        let rate = Rate::new(1, 3_600_000, 3);
        for i in 0..(3 * max as u32 + 10) {
            store.check(&k(IpAddr::V4(Ipv4Addr::from(i))), 0, &rate, 1);
        }
        assert!(store.len() <= max, "max_clients {max}: {}", store.len());
        assert_eq!(store.len() as u64 + store.evictions(), 3 * max as u64 + 10);
    }
    assert_eq!(BucketStore::<IpAddr>::new(0).capacity(), 1);
}

#[test]
fn resize_keeps_the_exact_bound_and_counts_what_it_evicts() {
    let rate = Rate::new(1, 3_600_000, 3);
    let store: BucketStore = BucketStore::new(1000);
    let hot: IpAddr = "203.0.113.1".parse().unwrap();
    store.check(&k(hot), 0, &rate, 1);
    store.check(&k(hot), 0, &rate, 1);
    // Through shard-count changes (64 -> 30 -> 64 shards) a lone entry keeps its level.
    for max in [30, 2000] {
        store.resize(max);
        assert_eq!(store.capacity(), max);
        assert_eq!(store.len(), 1);
    }
    assert_eq!(store.check(&k(hot), 0, &rate, 1).remaining, 0);
    // Fill, then shrink across shard counts: the bound holds and every entry is either
    // still tracked or counted as evicted.
    for i in 0..1500u32 {
        store.check(&k(IpAddr::V4(Ipv4Addr::from(i))), 0, &rate, 1);
    }
    for max in [1200, 100, 10, 64, 63, 1, 500] {
        store.resize(max);
        assert_eq!(store.capacity(), max);
        assert!(store.len() <= max, "{max}: {}", store.len());
        assert_eq!(store.len() as u64 + store.evictions(), 1501, "{max}");
    }
}

#[test]
fn a_tracked_client_costs_at_most_64_bytes_of_the_store() {
    // Slot: 16-byte key, 24-byte state, 8 bytes of links, no padding.
    assert_eq!(
        super::super::slab_lru::slot_bytes::<ClientKey, TokenBucketState>(),
        48
    );
    // At the default bound and above (a few thousand entries per shard); small stores pay the
    // shards' fixed overhead.
    for max in [200_000, 1_000_000] {
        let store: BucketStore = BucketStore::new(max);
        let per_client = store.reserved_bytes() as f64 / max as f64;
        assert!(
            per_client <= 64.0,
            "{max} clients: {per_client:.1} bytes each"
        );
    }
}

#[test]
fn ipv4_and_ipv6_clients_keep_apart_keys() {
    let v4 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let v6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0xc000, 0x0201));
    assert_ne!(k(v4), k(v6));
    assert_eq!(k(v4), k(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))));
}
