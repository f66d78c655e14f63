use super::*;

fn shares(list: &[(&str, u64)]) -> BTreeMap<String, u64> {
    list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn static_split_rounds_down_exactly_and_keeps_one_token() {
    let s = shares(&[("eu", 2), ("us", 1), ("ap", 2)]);
    let eu = static_share(&s, "eu").unwrap();
    // burst 10 × 2/5 = 4; limit 7/s × 2/5 = 2.8/s, kept as 2800 per 1000 s.
    assert_eq!(
        eu.apply(Rate::new(7, 1000, 10)),
        Rate::new(2800, 1_000_000, 4)
    );
    // burst 3 × 1/5 → 0 → at least 1; 1 per 1 h × 1/5: per_ms × 1000 would pass one day,
    // so × 10: 2 per 10 h.
    let us = static_share(&s, "us").unwrap();
    assert_eq!(
        us.apply(Rate::new(1, 3_600_000, 3)),
        Rate::new(2, 36_000_000, 1)
    );
    // Nothing to scale into (a one-day period): plain round down, at least 1.
    assert_eq!(
        us.apply(Rate::new(3, 86_400_000, 3)),
        Rate::new(1, 86_400_000, 1)
    );
    assert!(static_share(&s, "sa").is_none());
}

#[test]
fn static_shares_never_sum_above_the_whole_beyond_rounding() {
    let s = shares(&[("eu", 3), ("us", 3), ("ap", 1)]);
    for burst in [7u64, 10, 100, 1_000_003] {
        let sum: u64 = s
            .keys()
            .map(|r| static_share(&s, r).unwrap().of(burst))
            .sum();
        assert!(sum <= burst.max(s.len() as u64), "burst {burst}: {sum}");
    }
}

#[test]
fn huge_values_do_not_overflow() {
    let share = Share { num: PPM, den: PPM };
    assert_eq!(share.of(u64::MAX), u64::MAX);
}

#[test]
fn demand_shares_follow_demand_with_a_floor_and_sum_to_at_most_the_whole() {
    // All demand in one of three regions: it gets everything but the other two floors.
    let busy = demand_share(90, 90, 3).unwrap();
    let idle = demand_share(0, 90, 3).unwrap();
    assert_eq!(idle.num, floor_ppm(3));
    assert_eq!(busy.num + 2 * idle.num, PPM);
    assert!(idle.num > 0);
    // Demand 3:1 between two of three regions.
    let a = demand_share(75, 100, 3).unwrap();
    let b = demand_share(25, 100, 3).unwrap();
    let c = demand_share(0, 100, 3).unwrap();
    assert!(a.num + b.num + c.num <= PPM);
    assert!(a.num > 2 * b.num);
    assert!(demand_share(0, 0, 3).is_none());
}

#[test]
fn every_split_of_random_demands_stays_within_the_whole() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..10_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let regions = 1 + x % 6;
        let demands: Vec<u64> = (0..regions).map(|i| (x >> (i * 9)) % 500).collect();
        let total: u64 = demands.iter().sum();
        let sum: u64 = demands
            .iter()
            .filter_map(|d| demand_share(*d, total, regions))
            .map(|s| s.num)
            .sum();
        assert!(sum <= PPM, "{demands:?}: {sum}");
    }
}
