//! Reading the Prometheus text exposition of `GET /metrics`.

/// Finds the value of the sample whose series text is exactly `series` in Prometheus text.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let end = match line.find('{') {
            Some(_) => line.rfind('}').map(|i| i + 1)?,
            None => line.find(char::is_whitespace)?,
        };
        if &line[..end] != series {
            continue;
        }
        let value = line[end..].split_whitespace().next()?;
        return match value {
            "+Inf" => Some(f64::INFINITY),
            "-Inf" => Some(f64::NEG_INFINITY),
            v => v.parse().ok(),
        };
    }
    None
}
