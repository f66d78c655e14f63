//! Parsing of human-written durations (`250ms`, `1s`, `1m`, `1h`, `1d`).

use std::time::Duration;

/// Parses a duration written as an integer followed by a unit: `ms`, `s`, `m`, `h` or `d`.
///
/// Errors: an empty string, a missing or unknown unit, a non-integer amount, zero, or an amount
/// that overflows `u64` milliseconds. The error is a human-readable reason without the field path.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("\"{text}\" has no unit; write e.g. 250ms, 1s, 1m, 1h"))?;
    let (amount, unit) = text.split_at(split);
    if amount.is_empty() {
        return Err(format!(
            "\"{text}\" is not a duration; write a positive integer and a unit, e.g. 250ms, 1s, 1m"
        ));
    }
    let amount: u64 = amount
        .parse()
        .map_err(|_| format!("\"{text}\": amount is too large"))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(format!(
                "\"{text}\": unknown unit \"{other}\" (use ms, s, m, h, d)"
            ))
        }
    };
    if amount == 0 {
        return Err(format!("\"{text}\" must be greater than zero"));
    }
    amount
        .checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("\"{text}\" is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86400));
    }

    #[test]
    fn rejects_bad_input() {
        for bad in ["", "5", "ms", "-1s", "0s", "1.5s", "1y", "1 s"] {
            assert!(parse_duration(bad).is_err(), "{bad} accepted");
        }
    }
}
