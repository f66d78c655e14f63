use super::*;

/// Drives `decide` with an injected clock, like a caller with its own store.
struct Bucket {
    state: Option<TokenBucketState>,
    rate: Rate,
}

impl Bucket {
    fn new(limit: u64, per_ms: u64, burst: u64) -> Self {
        Bucket {
            state: None,
            rate: Rate::new(limit, per_ms, burst),
        }
    }
    fn hit(&mut self, now_ms: u64, cost: u64) -> Decision {
        let (d, next) = decide(self.state, now_ms, &self.rate, cost);
        if let Some(n) = next {
            self.state = Some(n);
        }
        d
    }
}

#[test]
fn burst_then_reject_with_remaining_counting_down() {
    let mut b = Bucket::new(1, 3_600_000, 5);
    let rem: Vec<u64> = (0..5).map(|_| b.hit(0, 1)).map(|d| d.remaining).collect();
    assert_eq!(rem, [4, 3, 2, 1, 0]);
    let d = b.hit(0, 1);
    assert!(!d.admitted);
    assert_eq!(d.remaining, 0);
    assert_eq!(d.retry_after_s(), Some(3600));
}

#[test]
fn case_c02_retry_after_is_computed() {
    // burst 2, 0.1 tokens/s = 6 per minute
    let mut b = Bucket::new(6, 60_000, 2);
    assert_eq!(b.hit(0, 1).remaining, 1);
    assert_eq!(b.hit(0, 1).remaining, 0);
    assert_eq!(b.hit(4_500, 1).retry_after_s(), Some(6));
    assert_eq!(b.hit(7_500, 1).retry_after_s(), Some(3));
    let d = b.hit(10_500, 1);
    assert!(d.admitted);
    assert_eq!(d.remaining, 0);
}

#[test]
fn case_c03_retry_after_rounds_up_and_waiting_works() {
    // burst 1, 0.4 tokens/s = 24 per minute
    let mut b = Bucket::new(24, 60_000, 1);
    assert!(b.hit(0, 1).admitted);
    let d = b.hit(200, 1);
    assert_eq!(d.retry_after_ms, 2_300);
    assert_eq!(d.retry_after_s(), Some(3));
    assert!(b.hit(200 + 3_000, 1).admitted);
}

#[test]
fn waiting_exactly_retry_after_is_always_enough() {
    let mut seed = 7u64;
    let mut rnd = |m: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    for _ in 0..2000 {
        let rate = Rate::new(1 + rnd(100), 1 + rnd(120_000), 1 + rnd(50));
        let mut b = Bucket { state: None, rate };
        let mut now = 0;
        let cost = 1 + rnd(rate.burst);
        for _ in 0..20 {
            now += rnd(5_000);
            let d = b.hit(now, cost);
            if let Some(s) = d.retry_after_s() {
                assert!(s >= 1);
                assert!(b.hit(now + s * 1000, cost).admitted, "{rate:?} cost {cost}");
                now += s * 1000;
            }
        }
    }
}

#[test]
fn rejection_changes_nothing_and_remaining_never_negative() {
    let mut b = Bucket::new(1, 3_600_000, 3);
    let out: Vec<(bool, u64)> = (0..5)
        .map(|_| b.hit(10, 1))
        .map(|d| (d.admitted, d.remaining))
        .collect();
    assert_eq!(
        out,
        [(true, 2), (true, 1), (true, 0), (false, 0), (false, 0)]
    );
}

#[test]
fn cost_above_burst_is_never_admissible_and_consumes_nothing() {
    let mut b = Bucket::new(10, 1000, 5);
    let d = b.hit(0, 6);
    assert!(d.never_admissible());
    assert_eq!(d.retry_after_s(), None);
    assert_eq!(b.hit(0, 5).remaining, 0);
}

#[test]
fn refill_caps_at_burst_and_full_time_is_exact() {
    let mut b = Bucket::new(10, 1000, 5); // 1 token / 100 ms
    assert_eq!(b.hit(0, 5).full_ms, 500);
    assert_eq!(b.hit(250, 1).remaining, 1); // 2.5 refilled, minus 1
    assert_eq!(b.hit(1_000_000, 1).remaining, 4);
}

#[test]
fn changed_rate_applies_to_live_bucket_capped_at_new_burst() {
    let mut b = Bucket::new(1, 3_600_000, 10);
    for _ in 0..10 {
        b.hit(0, 1);
    }
    b.rate = Rate::new(1, 3_600_000, 20); // raise burst: no fresh tokens
    assert!(!b.hit(0, 1).admitted);
    b.rate = Rate::new(1, 60_000, 20); // change per: level converted, still empty
    assert!(!b.hit(0, 1).admitted);
    let mut full = Bucket::new(1, 1000, 10);
    full.hit(0, 1);
    full.rate = Rate::new(1, 1000, 3); // lower burst: capped
    assert_eq!(full.hit(0, 1).remaining, 2);
}

#[test]
fn clock_going_backwards_mints_nothing() {
    let mut b = Bucket::new(10, 1000, 2);
    b.hit(1_000, 2);
    assert!(!b.hit(500, 1).admitted);
    assert!(b.hit(1_100, 1).admitted);
}

#[test]
fn a_batch_decides_as_consecutive_requests_at_one_instant() {
    let rates = [
        Rate::new(1, 1_000, 5),
        Rate::new(7, 60_000, 20),
        Rate::new(3, 1, 4),
        Rate::new(1 << 20, 86_400_000, 1 << 12),
    ];
    for rate in rates {
        let capacity = rate.burst * rate.per_ms;
        for level in [
            0,
            1,
            rate.per_ms - 1,
            rate.per_ms,
            capacity / 2 + 1,
            capacity,
        ] {
            for cost in [1, 2, rate.burst, rate.burst + 1] {
                for n in [1, 2, 3, 8] {
                    let now = 5_000;
                    let mut state = Some(TokenBucketState {
                        level,
                        scale: rate.per_ms,
                        last_ms: now,
                    });
                    let one_by_one: Vec<Decision> = (0..n)
                        .map(|_| {
                            let (d, s) = decide(state, now, &rate, cost);
                            state = s.or(state);
                            d
                        })
                        .collect();
                    let (batch, left) = decide_batch(level, &rate, cost, n);
                    assert_eq!(
                        batch, one_by_one,
                        "{rate:?} level {level} cost {cost} n {n}"
                    );
                    assert_eq!(left, state.map_or(capacity, |s| s.level));
                }
            }
        }
    }
}
