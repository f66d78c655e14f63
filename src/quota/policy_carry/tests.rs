use super::*;

/// 10 tokens per hour, burst 10 (window 1 h); the local share on one instance is the same.
fn rate() -> Rate {
    Rate::new(10, HOUR_MS, 10)
}

#[test]
fn a_gcra_debt_is_carried_once_less_its_refill() {
    let carry = PolicyCarry::new(8);
    for i in 0..4 {
        carry.note("t", Algorithm::Gcra, rate(), rate(), false, 1, 1000 + i, 0);
    }
    assert_eq!(carry.take("t", 2000), None, "nothing before the close");
    carry.close(2000);
    assert!(carry.pending());
    assert_eq!(carry.take("other", 2000), None);
    // 4 tokens owed; 6 minutes refill one of them.
    let got = carry.take("t", 1000 + 360_000).expect("carried");
    assert_eq!((got.debt, got.admissions.len(), got.quota.len()), (3, 0, 0));
    assert_eq!(carry.take("t", 1000 + 360_000), None, "carried once");
    assert!(!carry.pending());
}

#[test]
fn window_admissions_are_carried_with_their_ages_and_quotas_per_hour() {
    let carry = PolicyCarry::new(8);
    let hour = 1_000 * HOUR_MS;
    carry.note(
        "t",
        Algorithm::FixedWindow,
        rate(),
        rate(),
        true,
        2,
        0,
        hour - 1,
    );
    carry.note(
        "t",
        Algorithm::FixedWindow,
        rate(),
        rate(),
        true,
        3,
        300_000,
        hour + 5,
    );
    // Slots of 1/16 hour (225 s): these two are apart.
    carry.close(300_000);
    let got = carry.take("t", 400_000).expect("carried");
    assert_eq!(got.debt, 0);
    assert_eq!(got.admissions, vec![(400_000, 2), (100_000, 3)]);
    assert_eq!(got.quota, vec![(400_000, 2), (100_000, 3)]);
    assert_eq!(
        got.words(),
        "carry 0 2 400000 2 100000 3 2 400000 2 100000 3 "
    );
}

#[test]
fn admissions_in_one_slot_merge_at_the_latest_and_old_ones_are_dropped() {
    let carry = PolicyCarry::new(8);
    let r = Rate::new(10, 16_000, 10); // window 16 s: slots of 1 s
    for t in [0, 10, 999, 1000, 200_000] {
        carry.note("t", Algorithm::SlidingWindowLog, r, r, false, 1, t, 0);
    }
    carry.close(200_000);
    let got = carry.take("t", 200_000).expect("carried");
    assert_eq!(
        got.admissions,
        vec![(0, 1)],
        "older than two windows: dropped"
    );
    let carry = PolicyCarry::new(8);
    for t in [0, 10, 999, 1000] {
        carry.note("t", Algorithm::SlidingWindowLog, r, r, false, 1, t, 0);
    }
    carry.close(1000);
    let got = carry.take("t", 1000).expect("carried");
    assert_eq!(got.admissions, vec![(1, 3), (0, 1)]);
}

#[test]
fn a_tenant_noted_again_before_its_carry_goes_on_from_it() {
    let carry = PolicyCarry::new(8);
    carry.note("t", Algorithm::LeakyBucket, rate(), rate(), false, 2, 0, 0);
    carry.close(0);
    carry.note("t", Algorithm::LeakyBucket, rate(), rate(), false, 3, 0, 0);
    carry.close(0);
    assert_eq!(carry.take("t", 0).map(|c| c.debt), Some(5));
    assert_eq!(carry.len(), (0, 0));
}

#[test]
fn a_slot_given_back_is_not_carried() {
    let carry = PolicyCarry::new(8);
    let lb = Algorithm::LeakyBucket;
    for i in 0..3 {
        carry.note("t", lb, rate(), rate(), false, 1, 1000 + i, 0);
    }
    carry.give_back("t", 1);
    carry.give_back("other", 1);
    carry.close(2000);
    carry.note("u", lb, rate(), rate(), false, 2, 1500, 0);
    carry.close(2000);
    // Given back after the close: taken from the pending carry.
    carry.give_back("u", 1);
    let got = carry.take("t", 2000).expect("carried");
    assert_eq!(got.debt, 2, "3 slots noted, 1 given back");
    assert_eq!(carry.take("u", 2000).expect("carried").debt, 1);
}

#[test]
fn a_give_back_never_goes_below_nothing_owed() {
    let carry = PolicyCarry::new(8);
    carry.note(
        "t",
        Algorithm::LeakyBucket,
        rate(),
        rate(),
        false,
        1,
        1000,
        0,
    );
    carry.give_back("t", 5);
    carry.close(2000);
    assert_eq!(carry.take("t", 2000), None);
}
