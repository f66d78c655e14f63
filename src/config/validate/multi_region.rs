//! Validation of `multi_region:` (docs/DESIGN.md 4b): every problem with its field path.

use super::common::{redis_url_problem, Check};
use crate::config::duration::parse_duration;
use crate::config::model::{MultiRegionSettings, RegionMode, RouteSettings, Tier};
use crate::config::raw::RawMultiRegion;
use crate::config::ConfigError;
use std::collections::BTreeMap;
use std::time::Duration;

/// Default `multi_region.sync_interval`.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(1);
/// Shortest accepted `sync_interval` (the exchange itself takes a cross-region round trip).
pub const MIN_SYNC_INTERVAL: Duration = Duration::from_millis(100);
/// Largest accepted share weight: Σ shares × any limit stays far below 2^64 in u128 arithmetic,
/// and weights this large make no sense for a handful of regions.
pub const MAX_SHARE: i64 = 1_000_000;

/// `multi_region:` → settings (`None` when absent or invalid), then the route costs against
/// this region's part of the tiers' bursts ([`check_costs`]).
pub(super) fn settings(
    c: &mut Check,
    raw: Option<&RawMultiRegion>,
    tiers: &BTreeMap<String, Tier>,
    routes: &[RouteSettings],
) -> Option<MultiRegionSettings> {
    let multi_region = raw.and_then(|m| match region_settings(m) {
        Ok(s) => Some(s),
        Err(e) => {
            c.errors.extend(e);
            None
        }
    });
    if let Some(m) = &multi_region {
        c.errors.extend(check_costs(m, tiers, routes));
    }
    multi_region
}

/// `multi_region:` → settings. Errors name `multi_region.<field>`.
fn region_settings(raw: &RawMultiRegion) -> Result<MultiRegionSettings, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let mut err = |path: String, reason: String| errors.push(ConfigError::new(path, reason));
    if raw.shares.is_empty() {
        err(
            "multi_region.shares".into(),
            "needs at least one region".into(),
        );
    }
    let mut shares = BTreeMap::new();
    for (name, &weight) in &raw.shares {
        let path = format!("multi_region.shares.{name}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            err(
                format!("multi_region.shares[{name:?}]"),
                "a region name is letters, digits, '-' and '_'".into(),
            );
        } else if weight <= 0 {
            err(path, format!("must be greater than zero (got {weight})"));
        } else if weight > MAX_SHARE {
            err(path, format!("must be at most {MAX_SHARE} (got {weight})"));
        } else {
            shares.insert(name.clone(), weight as u64);
        }
    }
    if !raw.shares.contains_key(&raw.region) {
        let known: Vec<&str> = raw.shares.keys().map(String::as_str).collect();
        err(
            "multi_region.region".into(),
            format!(
                "\"{}\" is not one of the regions in multi_region.shares ({})",
                raw.region,
                known.join(", ")
            ),
        );
    }
    let mode = match raw.mode.as_deref() {
        None | Some("static") => RegionMode::Static,
        Some("sync") => RegionMode::Sync,
        Some(other) => {
            err(
                "multi_region.mode".into(),
                format!("\"{other}\" is not a mode (static, sync)"),
            );
            RegionMode::Static
        }
    };
    let global_url = raw.global.as_ref().map(|g| g.url.clone());
    match (&global_url, mode) {
        (None, RegionMode::Sync) => err(
            "multi_region.global".into(),
            "is required when mode is sync (global: { url: \"redis://...\" })".into(),
        ),
        (Some(url), _) => {
            if let Some(problem) = redis_url_problem(url) {
                err("multi_region.global.url".into(), problem)
            }
        }
        _ => {}
    }
    let sync_interval = match raw.sync_interval.as_deref() {
        None => DEFAULT_SYNC_INTERVAL,
        Some(text) => match parse_duration(text) {
            Ok(d) if d < MIN_SYNC_INTERVAL => {
                err(
                    "multi_region.sync_interval".into(),
                    format!("must be at least {} ms", MIN_SYNC_INTERVAL.as_millis()),
                );
                DEFAULT_SYNC_INTERVAL
            }
            Ok(d) => d,
            Err(e) => {
                err("multi_region.sync_interval".into(), e);
                DEFAULT_SYNC_INTERVAL
            }
        },
    };
    if errors.is_empty() {
        Ok(MultiRegionSettings {
            region: raw.region.clone(),
            shares,
            mode,
            global_url,
            sync_interval,
        })
    } else {
        Err(errors)
    }
}

/// Routes whose `cost` exceeds this region's static part of every tier's burst: such requests
/// could never be admitted here (the split is applied before the bucket is consulted).
fn check_costs(
    m: &MultiRegionSettings,
    tiers: &BTreeMap<String, Tier>,
    routes: &[RouteSettings],
) -> Vec<ConfigError> {
    let Some(share) = crate::limit::share::static_share(&m.shares, &m.region) else {
        return Vec::new();
    };
    let Some(largest) = tiers.values().map(|t| share.of(t.rate.burst)).max() else {
        return Vec::new();
    };
    routes
        .iter()
        .filter(|r| r.cost > largest)
        .map(|r| {
            ConfigError::new(
                format!("{}.cost", r.field),
                format!(
                    "{} exceeds region \"{}\"'s part of every tier's burst (largest {largest}, \
                     multi_region.shares): such requests could never be admitted here",
                    r.cost, m.region
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::config::parse;
    use crate::config::tests::BASE;

    fn errors(extra: &str) -> Vec<String> {
        crate::config::parse_errors(&format!("{BASE}{extra}"))
    }

    #[test]
    fn static_split_parses_with_defaults() {
        let c = parse(&format!(
            "{BASE}multi_region: {{ region: eu, shares: {{ eu: 2, us: 1, ap: 1 }} }}\n"
        ))
        .unwrap();
        let m = c.multi_region.unwrap();
        assert_eq!(m.region, "eu");
        assert_eq!(m.mode, super::RegionMode::Static);
        assert_eq!(m.shares.values().sum::<u64>(), 4);
        assert_eq!(m.sync_interval, super::DEFAULT_SYNC_INTERVAL);
    }

    #[test]
    fn a_route_cost_above_the_regional_burst_is_refused() {
        let e = errors(
            "redis: { url: \"redis://127.0.0.1:6379\" }\n\
             tiers: { t: { limit: 10, per: 1s, burst: 10 } }\n\
             multi_region: { region: us, shares: { eu: 3, us: 1 } }\n",
        );
        assert!(e.is_empty(), "{e:?}");
        let yaml = format!(
            "{}redis: {{ url: \"redis://127.0.0.1:6379\" }}\n\
             tiers: {{ t: {{ limit: 10, per: 1s, burst: 10 }} }}\n\
             multi_region: {{ region: us, shares: {{ eu: 3, us: 1 }} }}\n",
            BASE.replace("upstream: orders }", "upstream: orders, cost: 3 }")
        );
        let e: Vec<String> = parse(&yaml)
            .err()
            .unwrap_or_default()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("routes[0].cost: 3 exceeds region \"us\"'s part"),
            "{e:?}"
        );
    }

    #[test]
    fn region_must_be_among_the_shares() {
        let e = errors("multi_region: { region: sa, shares: { eu: 2, us: 1 } }\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("multi_region.region: \"sa\" is not one of"),
            "{e:?}"
        );
    }

    #[test]
    fn shares_must_be_positive_each_at_its_path() {
        let e = errors("multi_region: { region: eu, shares: { eu: 0, us: -1 } }\n");
        assert!(
            e.iter()
                .any(|e| e.starts_with("multi_region.shares.eu: must be greater than zero")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|e| e.starts_with("multi_region.shares.us: must be greater than zero")),
            "{e:?}"
        );
    }

    #[test]
    fn sync_needs_a_global_url_and_a_sane_interval() {
        let e = errors("multi_region: { region: eu, shares: { eu: 1 }, mode: sync }\n");
        assert!(
            e.iter()
                .any(|e| e.starts_with("multi_region.global: is required")),
            "{e:?}"
        );
        let e = errors(
            "multi_region: { region: eu, shares: { eu: 1 }, mode: sync, global: { url: \"http://x\" }, sync_interval: 10ms }\n",
        );
        assert!(
            e.iter().any(|e| e.starts_with("multi_region.global.url:")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|e| e.starts_with("multi_region.sync_interval: must be at least")),
            "{e:?}"
        );
        let e = errors("multi_region: { region: eu, shares: { eu: 1 }, mode: eventual }\n");
        assert!(
            e.iter()
                .any(|e| e.starts_with("multi_region.mode: \"eventual\"")),
            "{e:?}"
        );
    }
}
