use super::*;

#[test]
fn exact_count_over_the_last_window() {
    let rate = Rate::new(3, 1_000, 3);
    let mut log = VecDeque::new();
    for t in [0, 400, 800] {
        assert!(decide(&mut log, t, &rate, 1).0.admitted);
    }
    let (d, _) = decide(&mut log, 999, &rate, 1);
    assert_eq!((d.admitted, d.retry_after_ms, d.full_ms), (false, 1, 801));
    assert!(decide(&mut log, 1_000, &rate, 1).0.admitted); // 0 left the window
    let (d, _) = decide(&mut log, 1_000, &rate, 2);
    assert_eq!(d.retry_after_ms, 800); // 400 and 800 must leave: at 1800
    assert!(!decide(&mut log, 1_399, &rate, 1).0.admitted);
    assert!(decide(&mut log, 1_400, &rate, 1).0.admitted);
    assert_eq!(log, [800, 1_000, 1_400]);
}

#[test]
fn no_boundary_burst() {
    let rate = Rate::new(5, 1_000, 5);
    let mut log = VecDeque::new();
    let a = (0..10)
        .filter(|_| decide(&mut log, 999, &rate, 1).0.admitted)
        .count();
    let b = (0..10)
        .filter(|_| decide(&mut log, 1_000, &rate, 1).0.admitted)
        .count();
    assert_eq!((a, b), (5, 0));
}

#[test]
fn future_entries_are_rebased_and_retry_after_holds() {
    let rate = Rate::new(2, 1_000, 2);
    let mut log = VecDeque::from([500, 90_000]);
    let (d, changed) = decide(&mut log, 1_000, &rate, 1);
    assert!(changed && !d.admitted);
    assert_eq!(log, [500, 1_000]);
    assert_eq!(d.retry_after_ms, 500);
    assert!(decide(&mut log, 1_500, &rate, 1).0.admitted);
}
