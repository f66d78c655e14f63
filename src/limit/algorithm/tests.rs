use super::*;

fn rng(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut s = seed;
    move |m| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) % m.max(1)
    }
}

/// For every algorithm, on random traffic (with clock steps back): a decision reporting
/// `r > 0` admits the next cost-1 request at once, and a refused request retried exactly
/// `Retry-After` (whole seconds) later is admitted.
#[test]
fn every_algorithm_keeps_the_header_promises() {
    for alg in Algorithm::ALL {
        let mut rnd = rng(alg as u64 + 3);
        for _ in 0..400 {
            let rate = Rate::new(1 + rnd(40), 1 + rnd(60_000), 1 + rnd(30));
            let max_delay = if rnd(2) == 0 { 0 } else { rnd(5_000) };
            let mut state = None;
            let mut now = 10_000_000 + rnd(1_000_000);
            for _ in 0..30 {
                // Now and then the clock steps back (a stored time ahead of now is now).
                now = if rnd(20) == 0 {
                    now - rnd(5_000)
                } else {
                    now + rnd(4_000)
                };
                let cost = 1 + rnd(rate.burst);
                let d = decide(alg, &mut state, now, &rate, cost, max_delay).decision;
                if d.admitted {
                    assert!(d.retry_after_ms == 0);
                }
                if d.remaining > 0 {
                    let mut probe = state.clone();
                    let o = decide(alg, &mut probe, now, &rate, 1, 0);
                    assert!(
                        o.decision.admitted && o.delay_ms == 0,
                        "{alg:?} {rate:?} r>0 at {now}"
                    );
                }
                if let Some(s) = d.retry_after_s() {
                    let later = now + s * 1000;
                    let o = decide(alg, &mut state, later, &rate, cost, max_delay);
                    assert!(
                        o.decision.admitted,
                        "{alg:?} {rate:?} cost {cost} waited {s}s at {now}"
                    );
                    now = later;
                }
            }
        }
    }
}

#[test]
fn a_state_of_another_algorithm_counts_as_none() {
    let rate = Rate::new(1, 3_600_000, 2);
    let mut state = None;
    decide(Algorithm::FixedWindow, &mut state, 0, &rate, 2, 0);
    assert!(
        !decide(Algorithm::FixedWindow, &mut state, 0, &rate, 1, 0)
            .decision
            .admitted
    );
    let d = decide(Algorithm::Gcra, &mut state, 0, &rate, 1, 0).decision;
    assert_eq!((d.admitted, d.remaining), (true, 1));
}

#[test]
fn names_and_key_suffixes() {
    for a in Algorithm::ALL {
        assert_eq!(Algorithm::parse(a.as_str()), Some(a));
    }
    let suffixes: Vec<_> = Algorithm::ALL.iter().map(|a| a.key_suffix()).collect();
    assert_eq!(suffixes, ["tb", "gcra", "fw", "swl", "swc", "lb"]);
}

/// Cost-1 requests admitted back to back at `now` on a copy of `state`.
fn admitted_at_once(alg: Algorithm, state: &Option<AlgoState>, now: u64, rate: &Rate) -> u64 {
    let mut s = state.clone();
    let mut n = 0;
    while n <= rate.burst && decide(alg, &mut s, now, rate, 1, 0).decision.admitted {
        n += 1;
    }
    n
}

/// For every algorithm, on random traffic: right after a change to a tighter limit (lower
/// `limit` or `burst`, longer `per`), no more requests pass at once than the old limit would
/// still have let through, nor more than the new burst (the state is carried over, nothing is
/// minted), and a refusal's `Retry-After` is waited out. The sliding window log is the
/// exception by design: its state is the history itself, judged by the new window, so a lower
/// burst with a shorter window may let through what the new limit allows over that history.
#[test]
fn every_algorithm_carries_its_state_into_a_tighter_limit_without_minting() {
    for alg in Algorithm::ALL {
        let mut rnd = rng(alg as u64 + 60);
        for case in 0..600 {
            let old = Rate::new(1 + rnd(40), 1 + rnd(60_000), 1 + rnd(30));
            let new = Rate::new(
                1 + rnd(old.limit),
                old.per_ms + rnd(3) * rnd(3_600_000),
                1 + rnd(old.burst),
            );
            let mut state = None;
            let mut now = 10_000_000 + rnd(1_000_000);
            for _ in 0..rnd(12) {
                now += rnd(old.window_ms() / 2 + 1);
                decide(alg, &mut state, now, &old, 1 + rnd(old.burst), 0);
            }
            now += rnd(old.window_ms() / 4 + 1);
            let before = admitted_at_once(alg, &state, now, &old);
            let after = admitted_at_once(alg, &state, now, &new);
            let bound = match alg {
                Algorithm::SlidingWindowLog => new.burst,
                _ => before.min(new.burst),
            };
            assert!(
                after <= bound,
                "{alg:?} case {case}: {old:?} -> {new:?} at {now}: {after} > {before} passed"
            );
            let d = decide(alg, &mut state, now, &new, 1, 0).decision;
            if let Some(s) = d.retry_after_s() {
                let later = now + s * 1000;
                assert!(
                    decide(alg, &mut state, later, &new, 1, 0).decision.admitted,
                    "{alg:?} case {case}: waited {s}s"
                );
            }
        }
    }
}

/// GCRA and the leaky bucket keep a drained tenant's debt in tokens: `limit: 2, per: 10s,
/// burst: 3` spent, then `per: 1h`, owes 3 tokens of the new rate (5400 s), not 15 s.
#[test]
fn a_drained_gcra_or_leaky_bucket_stays_drained_when_its_period_grows() {
    for alg in [Algorithm::Gcra, Algorithm::LeakyBucket] {
        let old = Rate::new(2, 10_000, 3);
        let new = Rate::new(2, 3_600_000, 3);
        let mut state = None;
        for _ in 0..3 {
            assert!(
                decide(alg, &mut state, 1_000_000, &old, 1, 0)
                    .decision
                    .admitted
            );
        }
        let d = decide(alg, &mut state, 1_000_001, &new, 1, 0).decision;
        assert!(!d.admitted, "{alg:?}");
        assert_eq!(d.remaining, 0);
        // 3 tokens owed less the 1 ms gone at the old rate (0.0002 token), at 1800 s a token.
        assert_eq!(d.retry_after_ms, 1_800_000 - 360, "{alg:?}");
        assert_eq!(d.full_ms, 5_400_000 - 360, "{alg:?}");
    }
}
