use super::*;

const T0: u64 = 1_796_083_200_000; // 2026-12-01T00:00Z

#[test]
fn outcomes_count_quotas_and_an_emptied_bucket() {
    let d = |admitted, remaining| Decision {
        admitted,
        remaining,
        retry_after_ms: if admitted { 0 } else { 1_000 },
        full_ms: 1_000,
    };
    let decided = |main, quotas| QuotaOutcome::Decided {
        decision: main,
        rate: Rate::new(1, 1_000, 5),
        degraded: false,
        extras: PolicyExtras {
            quotas,
            ..PolicyExtras::default()
        },
    };
    let fit = TierFit::new(100);
    decided(d(true, 3), vec![]).record_fit(&fit, "a", "T", T0); // room left
    decided(d(true, 0), vec![]).record_fit(&fit, "b", "T", T0); // emptied: at the limit
    decided(d(true, 3), vec![d(false, 0)]).record_fit(&fit, "c", "T", T0); // quota refused
    QuotaOutcome::FailedOpen.record_fit(&fit, "d", "T", T0); // says nothing about the tier
    let hour = |t: &str| {
        fit.report(t, T0)
            .map(|r| (r.hour.refused, r.hour.minutes_at_limit))
    };
    assert_eq!(hour("a"), Some((0, 0)));
    assert_eq!(hour("b"), Some((0, 1)));
    assert_eq!(hour("c"), Some((1, 1)));
    assert_eq!(hour("d"), None);
}
