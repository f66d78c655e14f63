use super::*;
use std::net::Ipv4Addr;

#[test]
fn bound_holds_under_a_flood_and_hot_client_stays_limited() {
    let store: BucketStore = BucketStore::new(640);
    let rate = Rate::new(1, 3_600_000, 3);
    let hot: IpAddr = "203.0.113.1".parse().unwrap();
    let mut hot_admitted = 0;
    for i in 0..20_000u32 {
        let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
        store.check(&ip, 0, &rate, 1);
        if store.check(&hot, 0, &rate, 1).admitted {
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
    assert!(store.check(&client, 10_000, &rate, 2).admitted);
    let refused = store.check(&client, 5_000, &rate, 1);
    assert_eq!(refused.retry_after_s(), Some(1));
    assert!(store.check(&client, 6_000, &rate, 1).admitted);
}

#[test]
fn capacity_is_exactly_max_clients() {
    for max in [1, 2, 5, 63, 64, 65, 100, 1000, 5000, 100_000] {
        let store: BucketStore = BucketStore::new(max);
        assert_eq!(store.capacity(), max, "max_clients {max}");
        let rate = Rate::new(1, 3_600_000, 3);
        for i in 0..(3 * max as u32 + 10) {
            store.check(&IpAddr::V4(Ipv4Addr::from(i)), 0, &rate, 1);
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
    store.check(&hot, 0, &rate, 1);
    store.check(&hot, 0, &rate, 1);
    // Through shard-count changes (64 -> 30 -> 64 shards) a lone entry keeps its level.
    for max in [30, 2000] {
        store.resize(max);
        assert_eq!(store.capacity(), max);
        assert_eq!(store.len(), 1);
    }
    assert_eq!(store.check(&hot, 0, &rate, 1).remaining, 0);
    // Fill, then shrink across shard counts: the bound holds and every entry is either
    // still tracked or counted as evicted.
    for i in 0..1500u32 {
        store.check(&IpAddr::V4(Ipv4Addr::from(i)), 0, &rate, 1);
    }
    for max in [1200, 100, 10, 64, 63, 1, 500] {
        store.resize(max);
        assert_eq!(store.capacity(), max);
        assert!(store.len() <= max, "{max}: {}", store.len());
        assert_eq!(store.len() as u64 + store.evictions(), 1501, "{max}");
    }
}
