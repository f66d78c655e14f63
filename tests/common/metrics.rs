//! Reading the Prometheus text exposition of `GET /metrics`
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format>).
//!
//! A series is found by its name and its label set, matched as a set (any order), so a test does
//! not depend on the order in which the exporter prints labels:
//! `metric(&gw, "tollgate_decisions_total", &[("layer", "tenant"), ("outcome", "limited")])`.

use std::borrow::Cow;

use super::gateway::Gateway;

/// Label names and values, in exposition order.
pub type Labels = Vec<(String, String)>;

/// One sample line: metric name, labels (in exposition order) and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Labels,
    pub value: f64,
}

impl Sample {
    /// Whether this sample is series `name` with exactly the labels `labels` (any order).
    pub fn is(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.name == name
            && self.labels.len() == labels.len()
            && labels
                .iter()
                .all(|(k, v)| self.labels.iter().any(|(n, w)| n == k && w == v))
    }
}

/// Where an exposition comes from: its text, or a running [`Gateway`] (`GET /metrics`).
pub trait Exposition {
    fn exposition(&self) -> Cow<'_, str>;
}

impl Exposition for str {
    fn exposition(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl Exposition for String {
    fn exposition(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl<T: Exposition + ?Sized> Exposition for &T {
    fn exposition(&self) -> Cow<'_, str> {
        (**self).exposition()
    }
}

impl Exposition for Gateway {
    fn exposition(&self) -> Cow<'_, str> {
        Cow::Owned(self.metrics())
    }
}

/// The value of series `name` with exactly the label set `labels` (any order), or `None` when
/// the exposition has no such sample.
pub fn metric<E: Exposition + ?Sized>(
    source: &E,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    samples(&source.exposition())
        .into_iter()
        .find(|s| s.is(name, labels))
        .map(|s| s.value)
}

/// [`metric`], 0 when absent (counters and gauges not yet touched are not exported).
pub fn metric_or_zero<E: Exposition + ?Sized>(
    source: &E,
    name: &str,
    labels: &[(&str, &str)],
) -> f64 {
    metric(source, name, labels).unwrap_or(0.0)
}

/// Every sample of an exposition; comments, blank and malformed lines are skipped.
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(parse_sample)
        .collect()
}

/// The value of the series written `series` in exposition syntax, e.g.
/// `tollgate_requests_total{route="routes[0]",status_class="2xx"}`; labels match as a set.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    let (name, labels, rest) = parse_series(series)?;
    if !rest.trim().is_empty() {
        return None;
    }
    let labels: Vec<(&str, &str)> = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    metric(text, &name, &labels)
}

/// `name{labels} value [timestamp]` → a sample.
fn parse_sample(line: &str) -> Option<Sample> {
    let (name, labels, rest) = parse_series(line)?;
    let value = match rest.split_whitespace().next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// Splits `name{k="v",...}` off the start of `text`: name, labels (escapes `\\`, `\"`, `\n`
/// decoded) and the rest of the text.
fn parse_series(text: &str) -> Option<(String, Labels, &str)> {
    let text = text.trim_start();
    let name_end = text
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(text.len());
    let name = text[..name_end].to_string();
    if name.is_empty() {
        return None;
    }
    let mut rest = &text[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        loop {
            while chars
                .next_if(|(_, c)| c.is_whitespace() || *c == ',')
                .is_some()
            {}
            let (i, c) = chars.next()?;
            if c == '}' {
                rest = &body[i + 1..];
                break;
            }
            let mut key = String::from(c);
            loop {
                let (_, c) = chars.next()?;
                if c == '=' {
                    break;
                }
                key.push(c);
            }
            if chars.next()?.1 != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                match chars.next()?.1 {
                    '"' => break,
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    c => value.push(c),
                }
            }
            labels.push((key.trim().to_string(), value));
        }
    }
    Some((name, labels, rest))
}
