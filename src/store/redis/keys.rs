//! Every Redis key the gateway writes or reads, as pure functions of the key prefix
//! (`redis.key_prefix`) and the names in it. The Lua scripts and the integration tests depend on
//! these exact strings.
//!
//! The part in braces is the Redis Cluster hash tag: every key one script touches shares it, so
//! one call stays on one slot. Tenant keys are tagged by the tenant, written percent-encoded
//! ([`tenant_id::encode`]: no `{`/`}` inside) so the tag is exactly the tenant. The policy path's
//! keys ([`policy_main_key`], [`policy_quota_key`]) are the exception: they hold the tenant as
//! given.

use crate::limit::algorithm::Algorithm;
use crate::limit::calendar::Period;
use crate::tenant_id;

/// `<prefix>:{<encoded tenant>}:<suffix>`: a key of one tenant; every key of a tenant shares its
/// Cluster slot.
pub fn tenant_key(prefix: &str, tenant: &str, suffix: &str) -> String {
    format!("{prefix}:{{{}}}:{suffix}", tenant_id::encode(tenant))
}

/// `<prefix>:{<encoded tenant>}:tb`: the tenant's token bucket (exact decisions and leases).
pub fn bucket_key(prefix: &str, tenant: &str) -> String {
    tenant_key(prefix, tenant, "tb")
}

/// `<prefix>:{<encoded tenant>}:<tb|gcra|fw|swl|swc|lb>`: the main limit's state of algorithm
/// `alg`, as the admin API reads and deletes it.
pub fn main_key(prefix: &str, tenant: &str, alg: Algorithm) -> String {
    tenant_key(prefix, tenant, alg.key_suffix())
}

/// `<prefix>:{<encoded tenant>}:q:<period>:<window start ms>`: one calendar quota counter, as
/// the admin API reads and deletes it.
pub fn quota_key(prefix: &str, tenant: &str, period: Period, start_ms: u64) -> String {
    format!(
        "{prefix}:{{{}}}:q:{}:{start_ms}",
        tenant_id::encode(tenant),
        period.as_str()
    )
}

/// `<prefix>:{<tenant>}:<tb|gcra|fw|swl|swc|lb>`: the main limit's key of a policy call
/// (`lua/policy.lua`) and of the leaky bucket refund, the tenant written as given (not encoded).
pub fn policy_main_key(prefix: &str, tenant: &str, alg: Algorithm) -> String {
    format!("{prefix}:{{{tenant}}}:{}", alg.key_suffix())
}

/// `<prefix>:{<tenant>}:q:<period>`: the key base of a calendar quota in a policy call, the
/// tenant written as given (not encoded); `lua/policy.lua` appends `:<window start ms>`.
pub fn policy_quota_key(prefix: &str, tenant: &str, period: Period) -> String {
    format!("{prefix}:{{{tenant}}}:q:{}", period.as_str())
}

/// `<prefix>:{pool:<tier>}:tb`: a tier's burst pool bucket, in its own hash tag.
pub fn pool_key(prefix: &str, tier: &str) -> String {
    format!("{prefix}:{{pool:{tier}}}:tb")
}

/// `<prefix>:{pool:<tier>}:share:<encoded tenant>`: the tenant's share of the pool, in the pool's
/// hash tag so the pool script touches one slot.
pub fn share_key(prefix: &str, tier: &str, tenant: &str) -> String {
    format!(
        "{prefix}:{{pool:{tier}}}:share:{}",
        tenant_id::encode(tenant)
    )
}

/// `<prefix>:{<encoded tenant>}:region:<region>`: the tenant's recent demand in `region`, in
/// the `global` store of `multi_region.mode: sync`.
pub fn region_key(prefix: &str, tenant: &str, region: &str) -> String {
    format!("{prefix}:{{{}}}:region:{region}", tenant_id::encode(tenant))
}

/// `<prefix>:{fleet}:members`: the fleet membership sorted set (`redis.fleet_size: auto`).
pub fn fleet_members_key(prefix: &str) -> String {
    format!("{prefix}:{{fleet}}:members")
}

#[cfg(test)]
mod tests;
