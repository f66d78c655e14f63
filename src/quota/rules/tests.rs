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

fn rule(key: &str) -> RuleCall {
    RuleCall {
        name: "r".into(),
        entry: entry(key, 1),
        on_failure: FailurePolicy::Open,
    }
}

#[test]
fn prepared_calls_fit_only_the_tier_part_they_were_built_with() {
    let quotas = [CalendarQuota {
        period: Period::Day,
        limit: 100,
    }];
    let call = |tenant, cost| PolicyCall {
        tenant,
        algorithm: Algorithm::TokenBucket,
        rate: Rate::new(10, 1_000, 10),
        cost,
        max_delay_ms: 0,
        quotas: &quotas,
    };
    let acme = call("acme", 1);
    let tier = acme.entry("tg");
    assert_eq!(&*tier.key, "tg:{acme}:tb");
    let (own, shared) = (
        rule("tg:{acme}:r:a:tb:tenant=4.acme"),
        rule("tg:{r:b:tb:route=1.%2F}"),
    );
    let p = PreparedCalls::build(
        "tg",
        Some(tier.clone()),
        &[&own, &shared],
        Some(acme.quota_part()),
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
    assert_eq!(p.keys[0].keys[0], "tg:{acme}:tb");
    assert_eq!(p.keys[1].keys, ["tg:{r:b:tb:route=1.%2F}"]);
    assert_eq!(
        p.entries(&[&own, &shared]),
        [&tier, &own.entry, &shared.entry]
    );
    assert!(p.fits("tg", Some((&acme, false))));
    assert!(!p.fits("other", Some((&acme, false))), "another prefix");
    assert!(!p.fits("tg", Some((&acme, true))), "a shadow tier");
    assert!(
        !p.fits("tg", Some((&call("acme", 2), false))),
        "another cost"
    );
    assert!(
        !p.fits("tg", Some((&call("globex", 1), false))),
        "another tenant"
    );
    let gcra = PolicyCall {
        algorithm: Algorithm::Gcra,
        ..acme
    };
    assert!(!p.fits("tg", Some((&gcra, false))), "another algorithm");
    let bigger = PolicyCall {
        rate: Rate::new(20, 1_000, 20),
        ..acme
    };
    assert!(!p.fits("tg", Some((&bigger, false))), "another size");
    let no_quotas = PolicyCall {
        quotas: &[],
        ..acme
    };
    assert!(!p.fits("tg", Some((&no_quotas, false))), "other quotas");
    assert!(!p.fits("tg", None));
    let no_tier = PreparedCalls::build("tg", None, &[&own], None);
    assert!(no_tier.fits("tg", None) && !no_tier.fits("tg", Some((&acme, false))));
}
