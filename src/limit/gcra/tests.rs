use super::*;
use crate::limit::token_bucket;

struct Cell {
    state: Option<TatState>,
    rate: Rate,
}

impl Cell {
    fn hit(&mut self, now: u64, cost: u64) -> Decision {
        let (d, next) = decide(self.state, now, &self.rate, cost);
        if next.is_some() {
            self.state = next;
        }
        d
    }
}

#[test]
fn emission_interval_and_tolerance_are_exact() {
    // 3 per second, burst 4: T = 333⅓ ms, tolerance (burst − 1)·T = 1000 ms.
    let mut c = Cell {
        state: None,
        rate: Rate::new(3, 1_000, 4),
    };
    let rem: Vec<u64> = (0..4).map(|_| c.hit(0, 1).remaining).collect();
    assert_eq!(rem, [3, 2, 1, 0]);
    let d = c.hit(0, 1);
    assert!(!d.admitted);
    assert_eq!(d.retry_after_ms, 334); // ceil(333⅓)
    assert_eq!(d.full_ms, 1_334); // TAT = 4·T = 1333⅓ ms
    assert!(!c.hit(333, 1).admitted);
    assert!(c.hit(334, 1).admitted);
    // After that one cell per emission interval: 666⅔ → admitted at 667, 1000 at 1000.
    assert!(!c.hit(666, 1).admitted);
    assert!(c.hit(667, 1).admitted);
    assert!(!c.hit(999, 1).admitted);
    assert!(c.hit(1_000, 1).admitted);
    assert_eq!(c.state.unwrap().tat_ms, 2_333);
    assert_eq!(c.state.unwrap().rem, 1); // TAT = 2333⅓ ms: one unit of ⅓ ms
}

#[test]
fn admits_exactly_what_the_token_bucket_admits_for_an_unchanged_config() {
    let mut seed = 11u64;
    let mut rnd = |m: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    for _ in 0..500 {
        let rate = Rate::new(1 + rnd(50), 1 + rnd(60_000), 1 + rnd(20));
        let (mut g, mut tb) = (None, None);
        let mut now = 1_000;
        for _ in 0..40 {
            now += rnd(3_000);
            let cost = 1 + rnd(rate.burst + 1);
            let (dg, ng) = decide(g, now, &rate, cost);
            let (dt, nt) = token_bucket::decide(tb, now, &rate, cost);
            assert_eq!(dg, dt, "{rate:?} cost {cost} at {now}");
            g = ng.or(g);
            tb = nt.or(tb);
        }
    }
}

#[test]
fn tat_far_ahead_is_treated_as_an_empty_bucket_not_a_lockout() {
    let rate = Rate::new(1, 1_000, 2); // T = 1 s, empty bucket refills in 2 s
    let stepped = TatState {
        tat_ms: 1_000_000,
        rem: 0,
        scale: 1,
        per_ms: 1_000,
    };
    let (d, rebased) = decide(Some(stepped), 10_000, &rate, 1);
    assert!(!d.admitted);
    assert_eq!(d.retry_after_ms, 1_000);
    assert_eq!(d.full_ms, 2_000);
    assert_eq!(rebased.unwrap().tat_ms, 12_000);
    assert!(decide(rebased, 11_000, &rate, 1).0.admitted);
}

#[test]
fn changed_limit_converts_the_remainder() {
    let rate = Rate::new(3, 1_000, 1);
    let (_, s) = decide(None, 0, &rate, 1);
    let s = s.unwrap(); // TAT 333⅓: tat 333, rem 1 of 3
    assert_eq!((s.tat_ms, s.rem, s.scale), (333, 1, 3));
    let faster = Rate::new(6, 2_000, 1); // same rate written in other units
                                         // TAT 333⅓ in units of ⅙ ms is 333 + 2/6: ⅓ ms owed, rounded up to 1 ms.
    let d = decide(Some(s), 333, &faster, 1).0;
    assert_eq!(d.retry_after_ms, 1);
    assert!(decide(Some(s), 334, &faster, 1).0.admitted);
}
