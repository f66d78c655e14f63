use super::*;

#[test]
fn one_tenant_drains_at_most_its_share() {
    let pool = Rate::new(1, 3_600_000, 10);
    let share = share_rate(&pool, 0.5);
    assert_eq!((share.limit, share.burst), (1, 5));
    let (mut p, mut a, mut b) = (None, None, None);
    let mut admitted_a = 0;
    for _ in 0..10 {
        let (d, next) = decide(p, a, 0, &pool, &share, 1);
        if let Some((np, ns)) = next {
            (p, a) = (Some(np), Some(ns));
        }
        admitted_a += u32::from(d.admitted);
    }
    assert_eq!(admitted_a, 5, "tenant a stops at half the pool");
    let (d, next) = decide(p, b, 0, &pool, &share, 1);
    assert!(d.admitted, "tenant b still draws from the pool");
    assert_eq!(d.remaining, 4);
    b = next.map(|n| n.1);
    assert!(b.is_some());
}

#[test]
fn refusal_writes_nothing_and_reports_the_longer_wait() {
    let pool = Rate::new(10, 1_000, 10);
    let share = Rate::new(1, 1_000, 1);
    let (_, next) = decide(None, None, 0, &pool, &share, 1);
    let (p, s) = next.unwrap();
    let (d, none) = decide(Some(p), Some(s), 0, &pool, &share, 1);
    assert!(!d.admitted && none.is_none());
    assert_eq!(d.remaining, 9, "the pool itself was not debited");
    assert_eq!(d.retry_after_ms, 1_000, "the share bucket's wait");
    let (d, _) = decide(None, None, 0, &pool, &share, 2);
    assert_eq!(d.retry_after_ms, u64::MAX, "above the share's burst: never");
}
