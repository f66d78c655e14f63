use super::*;

fn admit_n(rate: &Rate, s: &mut Option<CounterState>, now: u64, n: u64) -> u64 {
    let mut k = 0;
    for _ in 0..n {
        let (d, next) = decide(*s, now, rate, 1);
        k += d.admitted as u64;
        *s = next.or(*s);
    }
    k
}

#[test]
fn weighted_estimate_of_the_previous_window() {
    let rate = Rate::new(10, 1_000, 10);
    let mut s = None;
    assert_eq!(admit_n(&rate, &mut s, 100, 12), 10);
    // At 1250 a quarter of the window passed: estimate 10 · 0.75 = 7.5, so 2 more fit.
    assert_eq!(admit_n(&rate, &mut s, 1_250, 5), 2);
    let (d, _) = decide(s, 1_250, &rate, 1);
    assert_eq!((d.remaining, d.retry_after_ms), (0, 50));
    assert!(decide(s, 1_300, &rate, 1).0.admitted); // 10 · 0.7 + 2 + 1 = 10
    assert!(!decide(s, 1_299, &rate, 1).0.admitted);
}

#[test]
fn no_double_burst_at_the_boundary() {
    let rate = Rate::new(5, 1_000, 5);
    let mut s = None;
    assert_eq!(admit_n(&rate, &mut s, 999, 10), 5);
    assert_eq!(admit_n(&rate, &mut s, 1_000, 10), 0);
    // One token's weight leaves every 200 ms of the new window.
    assert_eq!(decide(s, 1_000, &rate, 1).0.retry_after_ms, 200);
}

#[test]
fn retry_after_reaching_into_the_next_window() {
    let rate = Rate::new(4, 1_000, 4);
    let mut s = None;
    assert_eq!(admit_n(&rate, &mut s, 900, 4), 4);
    // cur = 4 at e = 900: nothing fits before 100 ms into the next window plus 1/4 of it.
    let (d, _) = decide(s, 900, &rate, 1);
    assert_eq!(d.retry_after_ms, 100 + 250);
    assert!(!decide(s, 1_249, &rate, 1).0.admitted);
    assert!(decide(s, 1_250, &rate, 1).0.admitted);
    assert_eq!(d.full_ms, 1_100);
}
