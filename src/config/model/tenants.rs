//! `tenants:`: per-tenant overrides.

use crate::limit::Rate;

/// Per-tenant override of tier and bucket size.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TenantOverride {
    pub tier: Option<String>,
    pub limit: Option<u64>,
    pub per_ms: Option<u64>,
    pub burst: Option<u64>,
}

impl TenantOverride {
    /// `base` (a tier's rate) with this override's fields applied field by field: the tenant's
    /// effective rate. Validation checks it for every tier; the snapshot uses it per request.
    pub fn merged(&self, base: Rate) -> Rate {
        Rate {
            limit: self.limit.unwrap_or(base.limit),
            per_ms: self.per_ms.unwrap_or(base.per_ms),
            burst: self.burst.unwrap_or(base.burst),
        }
    }
}

/// Limits set live for one tenant through the admin API (docs/live-state.md#live-limit-overrides),
/// applied over the tier and the file's `tenants:` entry, field by field. Checked by
/// [`crate::config::validate::live_override`] exactly as the file's `tenants:` entries are.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LimitOverride {
    /// The main limit's fields (`limit`, `per` in ms, `burst`); `tier` is never set.
    pub rate: TenantOverride,
    /// Calendar quota limits by period: each replaces the limit of the tier's quota of that
    /// period (a period the tier has no quota of is not added).
    pub quotas: Vec<crate::limit::calendar::CalendarQuota>,
    /// Replaces the tier's `max_in_flight` (and sets one where the tier has none).
    pub max_in_flight: Option<u64>,
    /// The usage budget's bucket (`tiers.<name>.usage`: `limit`, `per` in ms, `burst`, in
    /// units), field by field over the tier's (a tier without a usage budget gets none).
    pub usage: Option<TenantOverride>,
}
