use super::*;

fn run(rate: &Rate, state: &mut Option<WindowState>, now: u64, n: u64) -> u64 {
    let mut admitted = 0;
    for _ in 0..n {
        let (d, next) = decide(*state, now, rate, 1);
        admitted += d.admitted as u64;
        *state = next.or(*state);
    }
    admitted
}

#[test]
fn admits_twice_the_burst_across_a_boundary() {
    let rate = Rate::new(5, 1_000, 5); // 5 per 1 s window
    let mut s = None;
    assert_eq!(run(&rate, &mut s, 999, 10), 5);
    assert_eq!(run(&rate, &mut s, 1_000, 10), 5); // 10 within 2 ms
    let (d, _) = decide(s, 1_000, &rate, 1);
    assert_eq!(
        (d.admitted, d.remaining, d.retry_after_ms, d.full_ms),
        (false, 0, 1_000, 1_000)
    );
}

#[test]
fn window_is_the_time_to_refill_the_burst() {
    // 1 per hour with burst 3: 3 per 3-hour window.
    let rate = Rate::new(1, 3_600_000, 3);
    assert_eq!(rate.window_ms(), 10_800_000);
    let mut s = None;
    assert_eq!(run(&rate, &mut s, 5, 10), 3);
    let (d, _) = decide(s, 5, &rate, 1);
    assert_eq!(d.retry_after_ms, 10_800_000 - 5);
    assert!(decide(s, 5 + d.retry_after_ms, &rate, 1).0.admitted);
}

#[test]
fn window_from_the_future_keeps_its_count_and_retry_after_holds() {
    let rate = Rate::new(2, 1_000, 2);
    let future = WindowState {
        start_ms: 50_000,
        count: 2,
        len_ms: 0,
    };
    let (d, keep) = decide(Some(future), 10_300, &rate, 1);
    assert!(!d.admitted);
    assert_eq!(d.retry_after_ms, 700);
    assert_eq!(
        keep,
        Some(WindowState {
            start_ms: 10_000,
            count: 2,
            len_ms: 1_000,
        })
    );
    assert!(decide(keep, 11_000, &rate, 1).0.admitted);
}
