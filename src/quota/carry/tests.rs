use super::*;

/// 20 tokens per 4 s, burst 20; its local share on one of two instances: 10 per 4 s, burst 10.
fn rates() -> (Rate, Rate) {
    let full = Rate {
        limit: 20,
        per_ms: 4000,
        burst: 20,
    };
    (full, full.divided(2))
}

#[test]
fn a_spent_local_bucket_is_carried_once_less_its_refill_since_the_close() {
    let (full, local) = rates();
    let store = BucketStore::new(16);
    let carry = LocalCarry::new(16);
    for _ in 0..8 {
        assert!(store.check(&"t".to_string(), 1000, &local, 1).admitted);
        carry.note("t", full, local, 1);
    }
    carry.close(&store, 1000);
    store.clear();
    // 8 tokens lacking at the close; 800 ms later the local bucket would have 2 of them back.
    assert_eq!(carry.take("other", 1800), None);
    assert_eq!(carry.take("t", 1800), Some((full, 6)));
    assert_eq!(carry.take("t", 1800), None, "carried once");
    assert_eq!(carry.len(), (0, 0));
}

#[test]
fn a_full_local_bucket_or_a_tenant_never_decided_locally_carries_nothing() {
    let (full, local) = rates();
    let store = BucketStore::new(16);
    let carry = LocalCarry::new(16);
    carry.close(&store, 0);
    assert_eq!(carry.take("t", 0), None);
    assert!(store.check(&"t".to_string(), 0, &local, 1).admitted);
    carry.note("t", full, local, 1);
    // Refilled before the close: nothing lacking.
    carry.close(&store, 10_000);
    assert_eq!(carry.take("t", 10_000), None);
}

#[test]
fn a_deficit_refilled_before_the_tenant_returns_is_not_carried() {
    let (full, local) = rates();
    let store = BucketStore::new(16);
    let carry = LocalCarry::new(16);
    for _ in 0..10 {
        store.check(&"t".to_string(), 0, &local, 1);
    }
    carry.note("t", full, local, 10);
    carry.close(&store, 0);
    // 10 tokens at 10 per 4 s: refilled after 4 s.
    assert_eq!(carry.take("t", 4000), None);
    assert_eq!(carry.len(), (0, 0));
}

#[test]
fn tenants_beyond_the_bound_are_not_noted() {
    let (full, local) = rates();
    let carry = LocalCarry::new(1);
    carry.note("a", full, local, 1);
    carry.note("b", full, local, 1);
    carry.note("a", full, local, 1);
    assert_eq!(carry.len(), (1, 0));
}

/// A local bucket kept across two short failures (the breaker never opened): the second close
/// carries only what was admitted since the first, not the whole deficit again.
#[test]
fn a_bucket_kept_across_closes_is_carried_once_per_admission() {
    let (full, local) = rates();
    let store = BucketStore::new(16);
    let carry = LocalCarry::new(16);
    for _ in 0..6 {
        store.check(&"t".to_string(), 0, &local, 1);
        carry.note("t", full, local, 1);
    }
    carry.close(&store, 0);
    assert_eq!(carry.take("t", 0), Some((full, 6)));
    store.check(&"t".to_string(), 0, &local, 1);
    carry.note("t", full, local, 1);
    carry.close(&store, 0);
    assert_eq!(
        carry.take("t", 0),
        Some((full, 1)),
        "7 lacking, 1 admitted since"
    );
    // A refusal is noted with nothing admitted: nothing to carry.
    carry.note("t", full, local, 0);
    carry.close(&store, 0);
    assert_eq!(carry.take("t", 0), None);
}
