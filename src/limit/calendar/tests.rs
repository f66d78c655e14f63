use super::*;

const T: u64 = 1_796_083_200_000; // 2026-12-01T00:00:00Z, a Tuesday

#[test]
fn windows_at_their_utc_boundaries() {
    assert_eq!(Period::Day.window(T), (T, T + DAY_MS));
    assert_eq!(Period::Day.window(T - 1), (T - DAY_MS, T));
    assert_eq!(Period::Hour.window(T + 3_599_999), (T, T + HOUR_MS));
    // Week: Monday 2026-11-30 to Monday 2026-12-07.
    assert_eq!(Period::Week.window(T), (T - DAY_MS, T + 6 * DAY_MS));
    assert_eq!(Period::Week.window(T - DAY_MS - 1).1, T - DAY_MS);
    // Month: December has 31 days; November 30.
    assert_eq!(Period::Month.window(T), (T, T + 31 * DAY_MS));
    assert_eq!(Period::Month.window(T - 1), (T - 30 * DAY_MS, T));
}

#[test]
fn months_and_leap_years() {
    assert_eq!(days_from_civil(1970, 1), 0);
    assert_eq!(days_from_civil(2000, 3) - days_from_civil(2000, 2), 29);
    assert_eq!(days_from_civil(2100, 3) - days_from_civil(2100, 2), 28);
    assert_eq!(days_from_civil(2028, 3) - days_from_civil(2028, 2), 29);
    for days in (0..200_000).step_by(7) {
        let (y, m) = year_month(days);
        let start = days_from_civil(y, m);
        assert!(start <= days && days - start < 31, "{days}: {y}-{m}");
    }
}

#[test]
fn quota_refuses_until_the_boundary() {
    let d = decide(100, 100, 1, T - 1_000, T);
    assert_eq!(
        (d.admitted, d.remaining, d.retry_after_ms),
        (false, 0, 1_000)
    );
    let d = decide(99, 100, 1, T - 1_000, T);
    assert_eq!((d.admitted, d.remaining), (true, 0));
}
