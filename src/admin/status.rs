//! `GET /v1/status` (this instance at a glance: config version and last reload, Redis mode and
//! breaker, decisions per tier since start and per minute over the last minutes, the tenants
//! refused in the last hour, upstream slots and queues) and `GET /v1/whoami` (what the presented
//! token may do).
//!
//! Read-only, and nothing is computed twice: decision and rejection counts are read from the
//! same Prometheus counters `/metrics` exports (the last minutes as differences of samples of
//! them, [`super::recent`]), the last hour's requests and refusals from the
//! [tier fit](crate::observe::tier_fit) tracker `GET /v1/tenants/{id}` reports, slots and queues
//! from the upstreams' live [`Slots`](crate::concurrency::slots::Slots), as `POST /v1/explain`
//! reads them. No Redis call is made: the page that polls it costs the store nothing.

use super::config_view::rfc3339;
use super::recent::{Minute, Totals, OUTCOMES};
use crate::observe::metrics::METRICS;
use crate::observe::tier_fit::{unix_ms, FitReport};
use crate::snapshot::{App, Snapshot};
use crate::store::redis::breaker::BreakerState;
use prometheus::core::Collector;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Tenants listed in `refused_tenants` at most (most refusals in the last hour first).
pub const MAX_REFUSED_TENANTS: usize = 20;

/// Every series of a counter vector: its label values (in the order of `labels`) and value.
/// Reads the collector without creating a series.
fn counter_series(vec: &impl Collector, labels: &[&str]) -> Vec<(Vec<String>, u64)> {
    let mut out = Vec::new();
    for family in vec.collect() {
        for m in family.get_metric() {
            let values = labels
                .iter()
                .map(|name| {
                    m.get_label()
                        .iter()
                        .find(|l| l.name() == *name)
                        .map(|l| l.value().to_string())
                        .unwrap_or_default()
                })
                .collect();
            out.push((values, m.get_counter().value() as u64));
        }
    }
    out
}

/// `tollgate_decisions_total` since the process started, as `tier → layer → outcome → count`
/// (tier `-`: decisions taken before a tier was known).
pub fn decisions_by_tier() -> BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>> {
    let mut out: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>> = BTreeMap::new();
    for (labels, n) in counter_series(&METRICS.decisions, &["tier", "layer", "outcome"]) {
        if n == 0 {
            continue;
        }
        let [tier, layer, outcome] = <[String; 3]>::try_from(labels).unwrap_or_default();
        *out.entry(tier)
            .or_default()
            .entry(layer)
            .or_default()
            .entry(outcome)
            .or_default() += n;
    }
    out
}

/// The tenant-layer totals of `tollgate_decisions_total` by tier and outcome (what
/// [`super::recent`] samples).
pub fn tenant_totals() -> Totals {
    let mut out = Totals::new();
    for (tier, layers) in decisions_by_tier() {
        for (outcome, n) in layers.get("tenant").into_iter().flatten() {
            out.insert((tier.clone(), outcome.clone()), *n);
        }
    }
    out
}

/// The last hour by tier (requests and refusals of the tenants this instance tracks), and the
/// [`MAX_REFUSED_TENANTS`] tenants with the most refusals in it (ties: tenant id).
pub fn last_hour(all: &[(String, FitReport, String)]) -> (BTreeMap<String, Value>, Vec<Value>) {
    let mut by_tier: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for (_, report, tier) in all {
        let e = by_tier.entry(tier.clone()).or_default();
        if report.hour.requests > 0 {
            e.0 += report.hour.requests;
            e.1 += report.hour.refused;
            e.2 += 1;
        }
    }
    let tiers = by_tier
        .into_iter()
        .map(|(t, (requests, refused, tenants))| {
            let v = json!({"requests": requests, "refused": refused, "tenants": tenants});
            (t, v)
        })
        .collect();
    let mut refused: Vec<&(String, FitReport, String)> =
        all.iter().filter(|(_, r, _)| r.hour.refused > 0).collect();
    refused.sort_by(|a, b| b.1.hour.refused.cmp(&a.1.hour.refused).then(a.0.cmp(&b.0)));
    let tenants = refused
        .into_iter()
        .take(MAX_REFUSED_TENANTS)
        .map(|(tenant, r, tier)| {
            json!({"tenant": tenant, "tier": tier, "requests": r.hour.requests, "refused": r.hour.refused})
        })
        .collect();
    (tiers, tenants)
}

/// One minute of `last_minutes`: its start (RFC 3339), every tenant decision of the tier in
/// it, and those of each failure-policy and refusal outcome.
pub fn minute_json(m: &Minute) -> Value {
    let mut v = json!({"minute": rfc3339(m.minute * 60), "decisions": m.decisions});
    for (name, n) in OUTCOMES.iter().zip(m.outcomes) {
        v[*name] = json!(n);
    }
    v
}

/// The body of `GET /v1/status`.
pub fn status(app: &App, snap: &Snapshot) -> Value {
    let config = &snap.config;
    let reloads: BTreeMap<String, u64> = counter_series(&METRICS.reloads, &["result"])
        .into_iter()
        .map(|(l, n)| (l.into_iter().next().unwrap_or_default(), n))
        .collect();
    let succeeded_at = METRICS.last_reload.get();
    let redis = config.redis.as_ref().map(|r| {
        let (breaker, degraded) = snap
            .quota
            .as_ref()
            .map(|q| (q.breaker_state(), q.degraded()))
            .unwrap_or((BreakerState::Closed, false));
        json!({
            "mode": r.mode.as_str(),
            "breaker": breaker.as_str(),
            "degraded": degraded,
            "on_failure": r.on_failure.as_str(),
        })
    });
    let decisions = decisions_by_tier();
    let now = unix_ms();
    let tracked: Vec<(String, FitReport, String)> = app
        .tier_fit
        .all(now)
        .into_iter()
        .map(|(tenant, report)| {
            let tier = app.tier_fit.tier_of(&tenant).unwrap_or_default();
            (tenant, report, tier)
        })
        .collect();
    let (hour, refused_tenants) = last_hour(&tracked);
    let names: Vec<&str> = config.tiers.keys().map(String::as_str).collect();
    let minutes = super::recent::report_now(now, tenant_totals, &names);
    let tiers: Vec<Value> = config
        .tiers
        .values()
        .map(|t| {
            json!({
                "name": t.name,
                "on_failure": t.on_failure.as_str(),
                "mode": t.mode.as_str(),
                "decisions": decisions.get(&t.name).cloned().unwrap_or_default(),
                "last_hour": hour.get(&t.name).cloned()
                    .unwrap_or_else(|| json!({"requests": 0, "refused": 0, "tenants": 0})),
                "last_minutes": minutes.get(&t.name).map_or_else(Vec::new, |m| {
                    m.iter().map(minute_json).collect()
                }),
            })
        })
        .collect();
    let rejections = counter_series(&METRICS.upstream_rejections, &["upstream", "reason"]);
    let upstreams: Vec<Value> = config
        .upstreams
        .values()
        .map(|s| {
            let slots = snap.upstreams.get(&s.name).and_then(|u| u.slots.clone());
            let mut refused = Map::new();
            for (labels, n) in &rejections {
                if labels[0] == s.name && *n > 0 {
                    refused.insert(labels[1].clone(), json!(n));
                }
            }
            json!({
                "name": s.name,
                "backends": s.backends.len(),
                "max_concurrency": s.max_concurrency,
                "max_concurrency_per_tenant": s.max_concurrency_per_tenant,
                "in_flight": slots.as_ref().map(|s| s.in_flight()),
                "waiting": slots.as_ref().map(|s| s.waiting()),
                "queue_max": s.queue.as_ref().map(|q| q.max),
                "rejections": refused,
            })
        })
        .collect();
    json!({
        "config": {
            "sha256": config.source.sha256,
            "loaded_at": rfc3339(config.source.loaded_at_s),
            "last_reload": {
                "ok": METRICS.last_reload_ok.get() == 1,
                "succeeded_at": (succeeded_at > 0).then(|| rfc3339(succeeded_at as u64)),
                "loads_ok": reloads.get("ok").copied().unwrap_or(0),
                "loads_failed": reloads.get("error").copied().unwrap_or(0),
            },
        },
        "redis": redis,
        "tiers": tiers,
        "refused_tenants": refused_tenants,
        "upstreams": upstreams,
        "shutting_down": app.shutting_down.load(std::sync::atomic::Ordering::Relaxed),
    })
}

/// The body of `GET /v1/whoami`: the scope of the presented token (`read` or `write`,
/// docs/admin-api.md#tokens-and-scopes); a client shows write controls only for `write`.
pub fn whoami(scope: crate::config::AdminScope) -> Value {
    json!({"scope": scope.as_str()})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::tier_fit::WindowFit;

    fn report(requests: u64, refused: u64) -> FitReport {
        let w = WindowFit {
            requests,
            refused,
            ..Default::default()
        };
        FitReport { hour: w, day: w }
    }

    #[test]
    fn the_last_hour_sums_by_tier_and_lists_the_most_refused_first() {
        let all = vec![
            ("a".to_string(), report(5, 1), "free".to_string()),
            ("b".to_string(), report(9, 4), "free".to_string()),
            ("c".to_string(), report(3, 0), "pro".to_string()),
            ("d".to_string(), report(2, 1), "pro".to_string()),
        ];
        let (tiers, tenants) = last_hour(&all);
        assert_eq!(
            tiers["free"],
            json!({"requests": 14, "refused": 5, "tenants": 2})
        );
        assert_eq!(
            tiers["pro"],
            json!({"requests": 5, "refused": 1, "tenants": 2})
        );
        let order: Vec<&str> = tenants
            .iter()
            .map(|t| t["tenant"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["b", "a", "d"], "c was never refused");
    }

    #[test]
    fn decisions_are_read_from_the_exported_counter() {
        let tier = "status-test-tier";
        METRICS
            .decisions
            .with_label_values(&["tenant", "failed_open", tier])
            .inc_by(3);
        let d = decisions_by_tier();
        assert_eq!(d[tier]["tenant"]["failed_open"], 3);
    }
}
