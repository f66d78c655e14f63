use super::*;
use crate::limit::calendar::Period;

fn entry(key: &str, cost: u64) -> LimitEntry {
    LimitEntry {
        key: key.into(),
        algorithm: Algorithm::TokenBucket,
        rate: Rate::new(10, 1_000, 10),
        cost,
        max_delay_ms: 0,
        shadow: false,
    }
}

#[test]
fn prepared_calls_fit_only_the_tier_part_they_were_built_with() {
    let tier = entry("tg:{acme}:tb", 1);
    let rule = entry("tg:{acme}:r:a:tb:tenant=4.acme", 1);
    let shared = entry("tg:{r:b:tb:route=1.%2F}", 1);
    let quotas = [CalendarQuota {
        period: Period::Day,
        limit: 100,
    }];
    let part = |tenant, cost| QuotaPart {
        tenant,
        quotas: &quotas,
        cost,
    };
    let p = PreparedCalls::build(
        "tg",
        Some(&tier),
        &[&tier, &rule, &shared],
        Some(part("acme", 1)),
    );
    // Two slots: the tenant's (tier and its rule, with the quotas) and the shared rule's.
    assert_eq!(p.groups.len(), 2);
    assert_eq!(p.keys.len(), 2);
    assert_eq!(p.groups[0].members, [0, 1]);
    assert_eq!(
        p.keys[0].keys.len(),
        3,
        "two entries and the quota's key base"
    );
    assert_eq!(p.keys[1].keys, ["tg:{r:b:tb:route=1.%2F}"]);
    assert!(p.fits(Some(&tier), Some(part("acme", 1))));
    assert!(!p.fits(Some(&entry("tg:{acme}:tb", 2)), Some(part("acme", 1))));
    assert!(!p.fits(Some(&entry("tg:{globex}:tb", 1)), Some(part("acme", 1))));
    assert!(!p.fits(Some(&tier), Some(part("acme", 2))));
    assert!(!p.fits(Some(&tier), None));
    assert!(!p.fits(None, None));
    let no_tier = PreparedCalls::build("tg", None, &[&rule], None);
    assert!(no_tier.fits(None, None) && !no_tier.fits(Some(&tier), None));
}
