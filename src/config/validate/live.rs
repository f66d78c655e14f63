//! Live limit overrides (`PUT /v1/tenants/{id}/limits`): checked by the same code as the file's
//! `tenants:` entries and tier quotas, against every tier the tenant may land in, with the
//! file's own `tenants:` entry for the tenant merged in first (what the override lands on).

use super::common::{key_path, Check};
use crate::config::model::{LimitOverride, TenantOverride, Tier};
use crate::config::raw::{RawQuota, RawTenant};
use crate::config::ConfigError;
use crate::limit::calendar::{CalendarQuota, Period};
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
    if c.errors.is_empty() {
        return Ok(LimitOverride {
            rate,
            quotas,
            max_in_flight,
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
