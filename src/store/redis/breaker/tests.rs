use super::*;
use std::time::Duration;

fn breaker() -> Breaker {
    Breaker::new(BreakerSettings {
        failure_ratio: 0.5,
        min_calls: 4,
        window: Duration::from_secs(10),
        break_duration: Duration::from_secs(5),
        probes: 2,
    })
}

#[test]
fn opens_only_after_min_calls_at_ratio() {
    let b = breaker();
    assert_eq!(b.record(0, false, false), None);
    assert_eq!(b.record(10, false, false), None);
    assert_eq!(b.record(20, false, false), None);
    assert_eq!(b.record(30, false, false), Some(BreakerState::Open));
    assert_eq!(
        b.permit(1_000),
        (Permit::Rejected { retry_in_ms: 4_030 }, None)
    );
}

#[test]
fn healthy_traffic_keeps_it_closed() {
    let b = breaker();
    for i in 0..100 {
        assert_eq!(b.record(i * 10, i % 3 != 1, false), None);
    }
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn old_failures_leave_the_window() {
    let b = breaker();
    for i in 0..3 {
        b.record(i, false, false);
    }
    // 11 s later the three failures are outside the 10 s window.
    assert_eq!(b.record(11_000, false, false), None);
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn half_open_probes_close_or_reopen() {
    let b = breaker();
    for i in 0..4 {
        b.record(i, false, false);
    }
    let (p, t) = b.permit(6_000);
    assert_eq!(
        (p, t),
        (Permit::Call { probe: true }, Some(BreakerState::HalfOpen))
    );
    assert_eq!(b.permit(6_000).0, Permit::Call { probe: true });
    assert_eq!(b.permit(6_000).0, Permit::Rejected { retry_in_ms: 0 });
    assert_eq!(b.record(6_001, true, true), None);
    assert_eq!(b.record(6_002, true, true), Some(BreakerState::Closed));
    for i in 0..4 {
        b.record(7_000 + i, false, false);
    }
    b.permit(13_000);
    assert_eq!(b.record(13_001, false, true), Some(BreakerState::Open));
    assert!(matches!(b.permit(13_002).0, Permit::Rejected { .. }));
}

/// Degraded from the first failed call, while the breaker is still closed; healthy again at
/// the next call that succeeds; and for as long as the breaker is not closed.
#[test]
fn degraded_from_the_first_failure_not_only_when_open() {
    let b = breaker();
    assert!(!b.degraded());
    assert_eq!(b.record(0, false, false), None);
    assert_eq!(b.state(), BreakerState::Closed);
    assert!(
        b.degraded(),
        "a failed call fell back: degraded while closed"
    );
    b.record(10, true, false);
    assert!(!b.degraded());
    for i in 0..4 {
        b.record(20 + i, false, false);
    }
    assert_eq!(b.state(), BreakerState::Open);
    assert!(b.degraded());
    let (_, t) = b.permit(6_000);
    assert_eq!(t, Some(BreakerState::HalfOpen));
    b.record(6_001, true, true);
    assert!(b.degraded(), "half-open is still degraded");
    b.permit(6_002);
    assert_eq!(b.record(6_003, true, true), Some(BreakerState::Closed));
    assert!(!b.degraded());
}
