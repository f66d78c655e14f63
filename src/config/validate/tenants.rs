//! `tenants:`: per-tenant tier and rate overrides, checked against every tier a tenant may land
//! in.

use super::common::{key_path, Check};
use super::policy;
use crate::config::model::{TenantOverride, Tier};
use crate::config::raw::RawTenant;
use crate::limit::bounds::{self, RateBoundError};
use std::collections::BTreeMap;

/// `tenants:` → overrides by tenant id. `tier_ref` checks (and reports) each tier named at a
/// path.
pub(super) fn settings(
    c: &mut Check,
    raw: Option<&BTreeMap<String, RawTenant>>,
    tiers: &BTreeMap<String, Tier>,
    tier_ref: &mut impl FnMut(&mut Check, &str, &str),
) -> BTreeMap<String, TenantOverride> {
    let mut tenants = BTreeMap::new();
    for (id, t) in raw.into_iter().flatten() {
        let path = key_path("tenants", id);
        c.tenant_id(&path, id);
        if let Some(tier) = &t.tier {
            tier_ref(c, &format!("{path}.tier"), tier);
        }
        let o = TenantOverride {
            tier: t.tier.clone(),
            ..c.rate_fields(&path, t.limit, t.per.as_deref(), t.burst)
        };
        if let Some(Err(e)) = o.per_ms.map(bounds::check_per) {
            c.err(format!("{path}.per"), e.to_string());
        } else {
            merged_rates(c, &path, &o, tiers);
            // The algorithm's own bounds, in every tier the tenant may land in; the first
            // failing tier is reported.
            for tier in tiers.values() {
                let before = c.errors.len();
                let p = &tier.policy;
                policy::check_bounds(c, &path, p.algorithm, &o.merged(tier.rate), p.max_delay_ms);
                if c.errors.len() > before {
                    break;
                }
            }
        }
        tenants.insert(id.clone(), o);
    }
    tenants
}

/// Checks that the effective rate of the tenant at `path` (its override merged into every tier,
/// since a tier claim or an API key's tier can put a tenant in any tier) passes
/// [`bounds::check`]; a failure is reported once, at the override's field that takes the blame.
fn merged_rates(c: &mut Check, path: &str, o: &TenantOverride, tiers: &BTreeMap<String, Tier>) {
    for tier in tiers.values() {
        let merged = o.merged(tier.rate);
        let Err(e) = bounds::check(&merged) else {
            continue;
        };
        let field = blamed_field(o, &e);
        c.err(
            format!("{path}.{field}"),
            format!(
                "{e}: the effective rate in tier \"{}\" is limit {} per {} ms, burst {}",
                tier.name, merged.limit, merged.per_ms, merged.burst
            ),
        );
        return;
    }
}

/// The field of override `o` that takes the blame for `e`, a bound its merged rate broke: the
/// field named by the bound when `o` sets it, else the first of `per`, `burst`, `limit` it sets.
pub(super) fn blamed_field(o: &TenantOverride, e: &RateBoundError) -> &'static str {
    match e {
        RateBoundError::BurstTooLarge if o.burst.is_some() => "burst",
        RateBoundError::LimitTooLarge if o.limit.is_some() => "limit",
        _ if o.per_ms.is_some() => "per",
        _ if o.burst.is_some() => "burst",
        _ => "limit",
    }
}
