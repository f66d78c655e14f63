//! `tenants:`: per-tenant overrides.

use crate::limit::Rate;

/// Per-tenant override of tier and bucket size.
#[derive(Debug, Clone, PartialEq)]
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
