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
