//! `routes[].cost` and `limits[].cost` (docs/rules.md#costs-read-from-the-request): a fixed
//! number, or a cost read from the request with its bounds.

use super::common::Check;
use crate::config::model::{CostFrom, CostSource, RuleCost};
use crate::config::raw::{RawCost, RawCostFrom};

/// A route's `cost` at `path` (`routes[i].cost`): its fixed tokens (a read cost's `default`)
/// and, when read from the request, how.
pub(super) fn route(c: &mut Check, path: &str, raw: Option<&RawCost>) -> (u64, Option<CostFrom>) {
    match raw {
        None => (1, None),
        Some(RawCost::Fixed(n)) => (c.positive(path, *n).unwrap_or(1), None),
        Some(RawCost::From(f)) => match from(c, path, f) {
            Some(f) => (f.default.max(1), Some(f)),
            None => (1, None),
        },
    }
}

/// A rule's `cost` at `path` (`limits[i].cost`); refused on a concurrency rule (it holds a
/// lease, not tokens).
pub(super) fn rule(
    c: &mut Check,
    path: &str,
    raw: Option<&RawCost>,
    concurrency: bool,
) -> Option<RuleCost> {
    let raw = raw?;
    if concurrency {
        c.err(
            path,
            "does not apply to a concurrency rule (max_in_flight): it holds a lease, not tokens",
        );
        return None;
    }
    match raw {
        RawCost::Fixed(n) => c.positive(path, *n).map(RuleCost::Fixed),
        RawCost::From(f) => from(c, path, f).map(RuleCost::From),
    }
}

/// A cost read from the request at `path`: exactly one source; `min <= default <= max`.
fn from(c: &mut Check, path: &str, f: &RawCostFrom) -> Option<CostFrom> {
    let before = c.errors.len();
    let given = [
        f.from.is_some(),
        f.header.is_some(),
        f.json.is_some(),
        f.query.is_some(),
    ];
    let source = match given.iter().filter(|g| **g).count() {
        1 => source(c, path, f),
        0 => {
            c.err(
                path,
                "needs one of from: request_bytes, header, json or query",
            );
            None
        }
        _ => {
            c.err(
                path,
                "takes one of from, header, json and query, not several",
            );
            None
        }
    };
    let mut nonneg = |field: &str, v: Option<i64>| -> Option<u64> {
        let v = v?;
        if v < 0 {
            c.err(
                format!("{path}.{field}"),
                format!("must not be negative (got {v})"),
            );
            return None;
        }
        Some(v as u64)
    };
    let min = nonneg("min", f.min).unwrap_or(1);
    let default = nonneg("default", f.default).unwrap_or(min.max(1));
    let max = match f.max {
        Some(m) => c.positive(&format!("{path}.max"), m),
        None => None,
    };
    if default < min {
        c.err(
            format!("{path}.default"),
            format!("{default} is below min ({min})"),
        );
    }
    if let Some(m) = max {
        if m < default {
            c.err(
                format!("{path}.max"),
                format!("{m} is below default ({default}): an absent value would be refused"),
            );
        }
        if m < min {
            c.err(format!("{path}.max"), format!("{m} is below min ({min})"));
        }
    }
    let source = source?;
    (c.errors.len() == before).then_some(CostFrom {
        source,
        default,
        min,
        max,
    })
}

fn source(c: &mut Check, path: &str, f: &RawCostFrom) -> Option<CostSource> {
    if let Some(from) = &f.from {
        if from == "request_bytes" {
            return Some(CostSource::RequestBytes);
        }
        c.err(
            format!("{path}.from"),
            format!("\"{from}\" is not a cost source (request_bytes; or header, json, query)"),
        );
        return None;
    }
    if let Some(h) = &f.header {
        return c
            .header_name(&format!("{path}.header"), h)
            .map(CostSource::Header);
    }
    if let Some(q) = &f.query {
        if q.is_empty() {
            c.err(format!("{path}.query"), "must name a query parameter");
            return None;
        }
        return Some(CostSource::Query(q.clone()));
    }
    let text = f.json.as_deref().unwrap_or_default();
    let segments: Vec<String> = text.split('.').map(str::to_string).collect();
    if text.is_empty() || segments.iter().any(String::is_empty) {
        c.err(
            format!("{path}.json"),
            format!("\"{text}\" is not a dotted path (field names joined by '.', as batch.length)"),
        );
        return None;
    }
    Some(CostSource::Json(segments))
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    const BASE: &str = r#"
listen: ["127.0.0.1:8080"]
redis: { url: "redis://127.0.0.1:6379/0" }
tiers:
  free: { limit: 10, per: 1s }
upstreams:
  b: { backends: ["127.0.0.1:9001"] }
routes:
  - { path_prefix: "/", upstream: b, cost: COST }
limits:
  - { name: up, key: [tenant], limit: 5, per: 1s, RULE }
"#;

    fn errors(cost: &str, rule: &str) -> Vec<String> {
        let yaml = BASE.replace("COST", cost).replace("RULE", rule);
        match parse(&yaml) {
            Ok(_) => Vec::new(),
            Err(e) => e.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn fixed_and_read_costs_are_accepted() {
        assert_eq!(errors("3", "cost: 2"), Vec::<String>::new());
        let read = "{ header: X-Units, default: 1, max: 1000 }";
        assert_eq!(
            errors(read, "cost: { from: request_bytes }"),
            Vec::<String>::new()
        );
        let c = parse(
            &BASE
                .replace("COST", read)
                .replace("RULE", "cost: { json: batch.length, min: 0 }"),
        )
        .unwrap();
        let f = c.routes[0].cost_from.as_ref().unwrap();
        assert_eq!((f.default, f.min, f.max), (1, 1, Some(1000)));
        assert_eq!(c.routes[0].cost, 1);
    }

    #[test]
    fn nonsensical_costs_name_their_field() {
        let cases = [
            (
                "{ header: X-Units, default: 10, max: 5 }",
                "missing: skip",
                "routes[0].cost.max: 5 is below default (10)",
            ),
            (
                "{ default: 1 }",
                "missing: skip",
                "routes[0].cost: needs one of from",
            ),
            (
                "{ header: a, query: b }",
                "missing: skip",
                "routes[0].cost: takes one of",
            ),
            (
                "{ from: body }",
                "missing: skip",
                "routes[0].cost.from: \"body\" is not a cost source",
            ),
            (
                "{ json: \"a..b\" }",
                "missing: skip",
                "routes[0].cost.json: \"a..b\" is not a dotted path",
            ),
            (
                "{ query: units, min: 2, default: 1 }",
                "missing: skip",
                "routes[0].cost.default: 1 is below min (2)",
            ),
            (
                "{ query: units, default: -1 }",
                "missing: skip",
                "routes[0].cost.default: must not be negative",
            ),
            ("1", "cost: 0", "limits[0].cost: must be greater than zero"),
        ];
        for (cost, rule, want) in cases {
            let e = errors(cost, rule);
            assert!(
                e.iter().any(|e| e.starts_with(want)),
                "{cost} / {rule}: {e:?}"
            );
        }
        let yaml = BASE.replace("COST", "1").replace(
            "limit: 5, per: 1s, RULE",
            "max_in_flight: 2, cost: { from: request_bytes }",
        );
        let e: Vec<String> = parse(&yaml)
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert!(
            e.iter()
                .any(|e| e.starts_with("limits[0].cost: does not apply to a concurrency rule")),
            "{e:?}"
        );
    }
}
