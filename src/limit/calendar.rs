//! Calendar quota windows (UTC): the hour, day, ISO week (Monday 00:00) or month containing a
//! Unix time, in integer milliseconds, and the quota decision over one window's counter.
//!
//! Month arithmetic uses the days-from-civil algorithm on the proleptic Gregorian calendar
//! (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms"), in integers only, so
//! `lua/policy.lua` computes exactly the same boundaries from Redis `TIME`.

use super::token_bucket::Decision;

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 86_400_000;

/// A calendar quota (`tiers.<name>.quotas[]`): `limit` tokens per UTC `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CalendarQuota {
    pub limit: u64,
    pub period: Period,
}

/// A calendar quota period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Period {
    Hour,
    Day,
    Week,
    Month,
}

impl Period {
    /// The name used in YAML, policy names (`<tier>.<period>`) and keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Hour => "hour",
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
        }
    }

    /// Parses `hour | day | week | month`.
    pub fn parse(s: &str) -> Option<Period> {
        Some(match s {
            "hour" => Period::Hour,
            "day" => Period::Day,
            "week" => Period::Week,
            "month" => Period::Month,
            _ => return None,
        })
    }

    /// Nominal length in seconds (the `w` of `RateLimit-Policy`; a month counts 30 days).
    pub fn nominal_s(self) -> u64 {
        match self {
            Period::Hour => 3_600,
            Period::Day => 86_400,
            Period::Week => 604_800,
            Period::Month => 2_592_000,
        }
    }

    /// `[start, end)` in Unix ms of the window containing `now_ms`.
    pub fn window(self, now_ms: u64) -> (u64, u64) {
        match self {
            Period::Hour => {
                let s = now_ms - now_ms % HOUR_MS;
                (s, s + HOUR_MS)
            }
            Period::Day => {
                let s = now_ms - now_ms % DAY_MS;
                (s, s + DAY_MS)
            }
            Period::Week => {
                // 1970-01-01 was a Thursday: (days + 3) % 7 is 0 on Mondays.
                let days = now_ms / DAY_MS;
                let s = (days - (days + 3) % 7) * DAY_MS;
                (s, s + 7 * DAY_MS)
            }
            Period::Month => {
                let (y, m) = year_month(now_ms / DAY_MS);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (
                    days_from_civil(y, m) * DAY_MS,
                    days_from_civil(ny, nm) * DAY_MS,
                )
            }
        }
    }
}

/// Days since 1970-01-01 of the first day of month `m` (1–12) of year `y` (≥ 1970).
pub fn days_from_civil(y: u64, m: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5; // day 1 of the month
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month 1–12) of a day number since 1970-01-01.
pub fn year_month(days: u64) -> (u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m)
}

/// A quota of `limit` tokens per calendar window, given `used` tokens counted in the window
/// `[start, end)` containing `now_ms`: admitted when `used + cost ≤ limit`. `retry_after_ms` and
/// `full_ms` count to the window's end (`u64::MAX` retry when `cost > limit`).
pub fn decide(used: u64, limit: u64, cost: u64, now_ms: u64, end_ms: u64) -> Decision {
    let to_end = end_ms - now_ms;
    if used + cost <= limit {
        return Decision {
            admitted: true,
            remaining: limit - used - cost,
            retry_after_ms: 0,
            full_ms: to_end,
        };
    }
    Decision {
        admitted: false,
        remaining: limit.saturating_sub(used),
        retry_after_ms: if cost > limit { u64::MAX } else { to_end },
        full_ms: to_end,
    }
}

#[cfg(test)]
mod tests;
