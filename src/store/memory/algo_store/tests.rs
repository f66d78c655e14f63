use super::*;

#[test]
fn keeps_state_per_key_and_algorithm() {
    let store: AlgoStore<String> = AlgoStore::new(100);
    let rate = Rate::new(1, 3_600_000, 2);
    let k = "t".to_string();
    let n = (0..5)
        .filter(|_| {
            store
                .decide(&k, Algorithm::SlidingWindowLog, 0, &rate, 1, 0)
                .0
                .decision
                .admitted
        })
        .count();
    assert_eq!(n, 2);
    // Another algorithm for the same key starts from no state.
    assert!(
        store
            .decide(&k, Algorithm::FixedWindow, 0, &rate, 2, 0)
            .0
            .decision
            .admitted
    );
    assert!(
        !store
            .decide(&k, Algorithm::FixedWindow, 0, &rate, 1, 0)
            .0
            .decision
            .admitted
    );
}

#[test]
fn refund_of_the_latest_reservation() {
    let store: AlgoStore<String> = AlgoStore::new(100);
    let rate = Rate::new(10, 1_000, 1);
    let k = "t".to_string();
    store.decide(&k, Algorithm::LeakyBucket, 0, &rate, 1, 500);
    let (o, reserved) = store.decide(&k, Algorithm::LeakyBucket, 0, &rate, 1, 500);
    assert_eq!(o.delay_ms, 100);
    assert!(store.refund(&k, reserved.unwrap(), &rate, 1));
    assert!(!store.refund(&k, reserved.unwrap(), &rate, 1));
    assert_eq!(
        store
            .decide(&k, Algorithm::LeakyBucket, 0, &rate, 1, 500)
            .0
            .delay_ms,
        100
    );
}
