//! Live limit overrides (`PUT /v1/tenants/{id}/limits`): checked by the same code as the file's
//! `tenants:` entries and tier quotas, against every tier the tenant may land in, with the
//! file's own `tenants:` entry for the tenant merged in first (what the override lands on);
//! and one key of a limit rule (`PUT /v1/rules/{rule}/keys/{key}/limits`), checked as the
//! rule's own buckets are.

use super::common::{key_path, Check};
use crate::config::model::{LimitOverride, LimitRule, TenantOverride, Tier};
use crate::config::raw::{RawQuota, RawTenant};
use crate::config::ConfigError;
use crate::limit::algorithm::Algorithm;
use crate::limit::bounds;
use crate::limit::calendar::{CalendarQuota, Period};
use crate::limit::Rate;
use std::collections::BTreeMap;

/// Largest quota limit (as in `tiers.<name>.quotas[]`: 2^52).
const MAX_QUOTA: u64 = 1 << 52;
/// Largest `max_in_flight` of an override.
pub const MAX_IN_FLIGHT: u64 = 1 << 32;

/// The fields of a live override as the admin API received them (`per` as a duration text).
#[derive(Debug, Default)]
pub struct RawLimitOverride {
    pub limit: Option<i64>,
    pub per: Option<String>,
    pub burst: Option<i64>,
    pub quotas: Vec<RawQuota>,
    pub max_in_flight: Option<i64>,
    /// The usage budget's bucket (`usage: {limit, per, burst}`), if given.
    pub usage: Option<RawRateOverride>,
}

/// The bucket fields of a live override (`limit`, `per` as a duration text, `burst`), each
/// optional: a tier's usage budget, or one key of a limit rule.
#[derive(Debug, Default, Clone)]
pub struct RawRateOverride {
    pub limit: Option<i64>,
    pub per: Option<String>,
    pub burst: Option<i64>,
}

/// The override of tenant `id` from `raw`, checked like `tenants.<id>` of the file (the merged
/// rate in every tier within the algorithm's bounds) and like a tier's `quotas`. `file` is the
/// tenant's `tenants:` entry, if any. Errors name the override's own fields (`limit`, `per`,
/// `burst`, `quotas[0].period`, `max_in_flight`; `tenant` for the id). An `ip:<address>` id
/// (an anonymous client's) is taken as valid.
pub fn live_override(
    id: &str,
    raw: &RawLimitOverride,
    file: Option<&TenantOverride>,
    tiers: &BTreeMap<String, Tier>,
) -> Result<LimitOverride, Vec<ConfigError>> {
    let mut c = Check::default();
    // An anonymous client's id (`ip:<address>`, checked by the caller) is never a `tenants:`
    // key; its override is checked like any other tenant's.
    let id = match id.starts_with(crate::tenant_id::ANONYMOUS_PREFIX) {
        true => "anonymous",
        false => id,
    };
    // What the override lands on: each tier with the file's entry for this tenant merged in.
    let landed: BTreeMap<String, Tier> = tiers
        .iter()
        .map(|(n, t)| {
            let mut t = t.clone();
            if let Some(f) = file {
                t.rate = f.merged(t.rate);
            }
            (n.clone(), t)
        })
        .collect();
    let rt = RawTenant {
        tier: None,
        limit: raw.limit,
        per: raw.per.clone(),
        burst: raw.burst,
    };
    let one = BTreeMap::from([(id.to_string(), rt)]);
    let mut no_tier = |_: &mut Check, _: &str, _: &str| {};
    let mut rate = super::tenants::settings(&mut c, Some(&one), &landed, &mut no_tier)
        .remove(id)
        .unwrap_or(TenantOverride {
            tier: None,
            limit: None,
            per_ms: None,
            burst: None,
        });
    rate.tier = None;
    let mut quotas: Vec<CalendarQuota> = Vec::new();
    for (i, q) in raw.quotas.iter().enumerate() {
        let path = format!("quotas[{i}]");
        let limit = c.positive(&format!("{path}.limit"), q.limit);
        let Some(period) = Period::parse(&q.period) else {
            c.err(
                format!("{path}.period"),
                format!(
                    "unknown period \"{}\" (expected hour | day | week | month)",
                    q.period
                ),
            );
            continue;
        };
        if quotas.iter().any(|o| o.period == period) {
            c.err(format!("{path}.period"), "listed twice");
            continue;
        }
        match limit {
            Some(l) if l > MAX_QUOTA => c.err(format!("{path}.limit"), "is too large (max 2^52)"),
            Some(limit) => quotas.push(CalendarQuota { limit, period }),
            None => {}
        }
    }
    let max_in_flight = raw
        .max_in_flight
        .and_then(|m| c.positive("max_in_flight", m));
    if max_in_flight.is_some_and(|m| m > MAX_IN_FLIGHT) {
        c.err("max_in_flight", format!("must be at most {MAX_IN_FLIGHT}"));
    }
    let usage = raw.usage.as_ref().map(|u| usage_override(&mut c, u, tiers));
    if c.errors.is_empty() {
        return Ok(LimitOverride {
            rate,
            quotas,
            max_in_flight,
            usage,
        });
    }
    let prefix = format!("{}.", key_path("tenants", id));
    let whole = key_path("tenants", id);
    Err(c
        .errors
        .into_iter()
        .map(|mut e| {
            if e.path == whole {
                e.path = "tenant".into();
            } else if let Some(rest) = e.path.strip_prefix(&prefix) {
                e.path = rest.to_string();
            }
            e
        })
        .collect())
}

/// The fields of `raw` at `path` (`<path>.limit`, `<path>.per`, `<path>.burst`) checked as the
/// file's `limit`, `per` and `burst` are, before they are merged with a base.
fn rate_fields(c: &mut Check, path: &str, raw: &RawRateOverride) -> TenantOverride {
    let o = c.rate_fields(path, raw.limit, raw.per.as_deref(), raw.burst);
    if let Some(Err(e)) = o.per_ms.map(bounds::check_per) {
        c.err(format!("{path}.per"), e.to_string());
    }
    o
}

/// `o` merged over `base` checked as a bucket of the file is ([`bounds::check`] and the
/// algorithm's own bounds); a failure is reported once, at the field of `o` that takes the
/// blame (`<path>.<field>`), naming `base_name` (a tier or a rule). Returns whether it passed.
fn merged_bucket(
    c: &mut Check,
    path: &str,
    o: &TenantOverride,
    base: Rate,
    algorithm: Algorithm,
    base_name: &str,
) -> bool {
    let merged = o.merged(base);
    if let Err(e) = bounds::check(&merged) {
        let field = super::tenants::blamed_field(o, &e);
        c.err(
            format!("{path}.{field}"),
            format!(
                "{e}: the effective bucket of {base_name} is limit {} per {} ms, burst {}",
                merged.limit, merged.per_ms, merged.burst
            ),
        );
        return false;
    }
    let before = c.errors.len();
    super::policy::check_bounds(c, path, algorithm, &merged, 0);
    c.errors.len() == before
}

/// `usage` of a tenant's override: checked like a tier's `usage` bucket (a token bucket) in
/// every tier that has a usage budget, and never below that budget's `reserve` (no request
/// could be admitted). Errors name `usage.limit`, `usage.per`, `usage.burst`. A tier without a
/// usage budget gets none (as a quota period a tier has no quota of).
fn usage_override(
    c: &mut Check,
    raw: &RawRateOverride,
    tiers: &BTreeMap<String, Tier>,
) -> TenantOverride {
    let o = rate_fields(c, "usage", raw);
    for (name, u) in tiers
        .iter()
        .filter_map(|(n, t)| Some((n, t.usage.as_ref()?)))
    {
        let tier = format!("tier \"{name}\"'s usage budget");
        if !merged_bucket(c, "usage", &o, u.rate, Algorithm::TokenBucket, &tier) {
            break;
        }
        let burst = o.merged(u.rate).burst;
        if burst < u.reserve {
            c.err(
                "usage.burst",
                format!(
                    "{burst} is less than the reserve ({}) of {tier}: no request could ever be admitted",
                    u.reserve
                ),
            );
            break;
        }
    }
    o
}

/// The override of one key of limit rule `rule` from `raw` (only `limit`, `per`, `burst`),
/// checked as the rule's own bucket is in the file: each field as the file's, then the rule's
/// bucket and each of its `by_tier` buckets with the override merged in, within the rule's
/// algorithm's bounds. Errors name `limit`, `per`, `burst`, or `rule` for a concurrency rule
/// (`max_in_flight`: no bucket to override).
pub fn live_rule_override(
    rule: &LimitRule,
    raw: &RawRateOverride,
) -> Result<TenantOverride, Vec<ConfigError>> {
    let mut c = Check::default();
    if rule.max_in_flight.is_some() {
        c.err(
            "rule",
            format!(
                "\"{}\" is a concurrency rule (max_in_flight): it has no bucket to override",
                rule.name
            ),
        );
        return Err(c.errors);
    }
    let o = rate_fields(&mut c, "o", raw);
    if c.errors.is_empty() {
        let own = format!("rule \"{}\"", rule.name);
        if merged_bucket(&mut c, "o", &o, rule.rate, rule.algorithm, &own) {
            for (tier, rate) in &rule.by_tier {
                let name = format!("rule \"{}\" in tier \"{tier}\"", rule.name);
                if !merged_bucket(&mut c, "o", &o, *rate, rule.algorithm, &name) {
                    break;
                }
            }
        }
    }
    if c.errors.is_empty() {
        return Ok(o);
    }
    Err(c
        .errors
        .into_iter()
        .map(|mut e| {
            if let Some(rest) = e.path.strip_prefix("o.") {
                e.path = rest.to_string();
            }
            e
        })
        .collect())
}
