//! Validation of a tier's policy fields (`algorithm`, `max_delay`, `quotas`) and of
//! `edge.algorithm`, including the bounds that keep every algorithm's arithmetic exact in Lua
//! doubles and `sliding_window_log`'s memory bounded.

use super::common::Check;
use crate::config::raw::RawTier;
use crate::config::TierPolicy;
use crate::limit::algorithm::Algorithm;
use crate::limit::calendar::{CalendarQuota, Period};
use crate::limit::sliding_window_log::MAX_LOG_ENTRIES;
use crate::limit::Rate;

/// Largest `limit` for `gcra` and `leaky_bucket`: remainders are converted with
/// `rem × limit` (< limit²) when a reload changes `limit`, which must stay below 2^52.
pub const MAX_GCRA_LIMIT: u64 = 1 << 26;
/// Largest `burst × W` for `sliding_window_counter` (its estimate is compared multiplied by `W`,
/// up to three such terms, below 2^52).
pub const MAX_COUNTER_SCALED: u128 = 1 << 50;
const MAX_SCALED: u128 = 1 << 52;

fn algorithm_list() -> String {
    Algorithm::ALL
        .iter()
        .map(|a| a.as_str())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Checks the bounds `alg` needs for `rate` (also for per-tenant overrides); errors name the
/// field at `path` (`<path>.burst`, `<path>.limit`).
pub(super) fn check_bounds(
    c: &mut Check,
    path: &str,
    alg: Algorithm,
    rate: &Rate,
    max_delay_ms: u64,
) {
    match alg {
        Algorithm::SlidingWindowLog if rate.burst > MAX_LOG_ENTRIES => c.err(
            format!("{path}.burst"),
            format!(
                "{} is too large for sliding_window_log: it keeps one entry per token in the window, at most {MAX_LOG_ENTRIES} (use sliding_window_counter for large windows)",
                rate.burst
            ),
        ),
        Algorithm::SlidingWindowCounter
            if rate.burst as u128 * rate.window_ms() as u128 > MAX_COUNTER_SCALED =>
        {
            c.err(
                format!("{path}.burst"),
                "burst × window (burst × per / limit, in ms) is too large for sliding_window_counter (max 2^50)",
            )
        }
        Algorithm::Gcra | Algorithm::LeakyBucket if rate.limit > MAX_GCRA_LIMIT => c.err(
            format!("{path}.limit"),
            format!(
                "{} is too large for {} (max {MAX_GCRA_LIMIT} per period; use a shorter per)",
                rate.limit,
                alg.as_str()
            ),
        ),
        Algorithm::LeakyBucket
            if rate.burst as u128 * rate.per_ms as u128
                + max_delay_ms as u128 * rate.limit as u128
                > MAX_SCALED =>
        {
            c.err(
                format!("{path}.max_delay"),
                "burst × per + max_delay × limit is too large (max 2^52 token·ms)",
            )
        }
        _ => {}
    }
}

/// `<path>.algorithm`: any of [`Algorithm::ALL`], `token_bucket` when absent or unknown (then
/// with an error).
pub(super) fn algorithm(c: &mut Check, path: &str, name: Option<&str>) -> Algorithm {
    match name {
        None => Algorithm::TokenBucket,
        Some(name) => Algorithm::parse(name).unwrap_or_else(|| {
            c.err(
                format!("{path}.algorithm"),
                format!(
                    "unknown algorithm \"{name}\" (expected {})",
                    algorithm_list()
                ),
            );
            Algorithm::TokenBucket
        }),
    }
}

/// The policy of tier `path` (`tiers.<name>`) with main limit `rate` (None when invalid).
pub(super) fn tier_policy(
    c: &mut Check,
    path: &str,
    t: &RawTier,
    rate: Option<&Rate>,
) -> TierPolicy {
    let algorithm = algorithm(c, path, t.algorithm.as_deref());
    let max_delay_ms = match t.max_delay.as_deref() {
        None => 0,
        Some(_) if algorithm != Algorithm::LeakyBucket => {
            c.err(
                format!("{path}.max_delay"),
                format!(
                    "only applies to algorithm leaky_bucket (this tier uses {})",
                    algorithm.as_str()
                ),
            );
            0
        }
        Some(text) => {
            let d = c.duration(&format!("{path}.max_delay"), text);
            let ms = d.map_or(0, |d| d.as_millis() as u64);
            if ms > 60_000 {
                c.err(
                    format!("{path}.max_delay"),
                    "must be at most 1m (a delayed request holds its connection)",
                );
            }
            ms
        }
    };
    if let Some(rate) = rate {
        check_bounds(c, path, algorithm, rate, max_delay_ms);
    }
    let mut quotas: Vec<CalendarQuota> = Vec::new();
    for (i, q) in t.quotas.iter().flatten().enumerate() {
        let qpath = format!("{path}.quotas[{i}]");
        let limit = c.positive(&format!("{qpath}.limit"), q.limit);
        let Some(period) = Period::parse(&q.period) else {
            c.err(
                format!("{qpath}.period"),
                format!(
                    "unknown period \"{}\" (expected hour | day | week | month)",
                    q.period
                ),
            );
            continue;
        };
        if quotas.iter().any(|o| o.period == period) {
            c.err(
                format!("{qpath}.period"),
                format!("a {} quota is already configured for this tier", q.period),
            );
            continue;
        }
        if let Some(limit) = limit {
            if limit as u128 > MAX_SCALED {
                c.err(format!("{qpath}.limit"), "is too large (max 2^52)");
            }
            quotas.push(CalendarQuota { limit, period });
        }
    }
    let lease = t
        .lease
        .as_ref()
        .and_then(|l| super::lease::lease_settings(c, path, l, algorithm, &quotas, rate));
    TierPolicy {
        algorithm,
        max_delay_ms,
        quotas,
        lease,
    }
}

/// `edge.algorithm`: `token_bucket` (default) or `gcra`.
pub(super) fn edge_algorithm(c: &mut Check, name: Option<&str>, rate: Option<&Rate>) -> Algorithm {
    let alg = match name {
        None | Some("token_bucket") => Algorithm::TokenBucket,
        Some("gcra") => Algorithm::Gcra,
        Some(other) => {
            c.err(
                "edge.algorithm",
                format!("\"{other}\" is not available at the edge (expected token_bucket | gcra)"),
            );
            Algorithm::TokenBucket
        }
    };
    if let Some(rate) = rate {
        check_bounds(c, "edge", alg, rate, 0);
    }
    alg
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    const BASE: &str = "listen: [\"127.0.0.1:1\"]\nupstreams: { u: { backends: [\"127.0.0.1:2\"] } }\nroutes: [ { path_prefix: \"/\", upstream: u } ]\nredis: { url: \"redis://127.0.0.1:6379\" }\n";

    fn errors(extra: &str) -> Vec<String> {
        crate::config::parse_errors(&format!("{BASE}{extra}"))
    }

    #[test]
    fn policy_fields_are_validated_with_their_paths() {
        let e = errors("tiers:\n  a: { limit: 5, per: 1s, algorithm: sliding }\n");
        assert!(
            e[0].starts_with("tiers.a.algorithm: unknown algorithm \"sliding\""),
            "{e:?}"
        );
        let e = errors("tiers:\n  a: { limit: 5, per: 1s, max_delay: 100ms }\n");
        assert!(
            e[0].starts_with("tiers.a.max_delay: only applies to algorithm leaky_bucket"),
            "{e:?}"
        );
        let e =
            errors("tiers:\n  a: { limit: 5, per: 1s, algorithm: leaky_bucket, max_delay: 5x }\n");
        assert!(e[0].starts_with("tiers.a.max_delay:"), "{e:?}");
        let e = errors("tiers:\n  a: { limit: 20000, per: 1h, algorithm: sliding_window_log }\n");
        assert!(
            e[0].starts_with("tiers.a.burst: 20000 is too large for sliding_window_log"),
            "{e:?}"
        );
        let e = errors("tiers:\n  a: { limit: 5, per: 1s, quotas: [ { limit: 0, period: day }, { limit: 5, period: year }, { limit: 5, period: hour }, { limit: 6, period: hour } ] }\n");
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].starts_with("tiers.a.quotas[0].limit: must be greater than zero"));
        assert!(e[1].starts_with("tiers.a.quotas[1].period: unknown period \"year\""));
        assert!(e[2].starts_with("tiers.a.quotas[3].period: a hour quota is already configured"));
        let e = errors("edge: { limit: 5, per: 1s, algorithm: fixed_window }\n");
        assert!(
            e[0].starts_with("edge.algorithm: \"fixed_window\" is not available"),
            "{e:?}"
        );
    }

    #[test]
    fn valid_policies_parse() {
        let c = parse(&format!("{BASE}tiers:\n  a: {{ limit: 10, per: 1s, burst: 2, algorithm: leaky_bucket, max_delay: 500ms, quotas: [ {{ limit: 100, period: day }} ] }}\n  b: {{ limit: 5, per: 1s }}\nedge: {{ limit: 5, per: 1s, algorithm: gcra }}\n")).unwrap();
        let a = &c.tiers["a"].policy;
        assert_eq!(a.algorithm.as_str(), "leaky_bucket");
        assert_eq!(a.max_delay_ms, 500);
        assert_eq!(a.quotas.len(), 1);
        assert_eq!(c.tiers["b"].policy, Default::default());
        assert_eq!(c.edge.unwrap().algorithm.as_str(), "gcra");
    }
}
