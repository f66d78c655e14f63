use super::*;
use crate::limit::share::static_share;
use std::collections::BTreeMap;

fn shares(list: &[(&str, u64)]) -> BTreeMap<String, u64> {
    list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn calendar_quotas_are_cut_like_the_main_limit() {
    use crate::limit::calendar::{CalendarQuota, Period};
    let policy = TierPolicy {
        quotas: vec![
            CalendarQuota {
                limit: 100_000,
                period: Period::Day,
            },
            CalendarQuota {
                limit: 2,
                period: Period::Month,
            },
        ],
        ..TierPolicy::default()
    };
    let eu = static_share(&shares(&[("eu", 2), ("us", 1), ("ap", 2)]), "eu").unwrap();
    let cut = cut_quotas(eu, &policy).expect("quotas to cut");
    let limits: Vec<u64> = cut.quotas.iter().map(|q| q.limit).collect();
    // 100 000 × 2/5 = 40 000; 2 × 2/5 = 0.8, kept at the 1-token floor.
    assert_eq!(limits, [40_000, 1]);
    assert_eq!(cut_quotas(Share::WHOLE, &policy), None);
    assert_eq!(cut_quotas(eu, &TierPolicy::default()), None);
}
