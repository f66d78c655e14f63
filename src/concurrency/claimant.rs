//! Who a request counts as at the upstream slots: its tenant and the tier `weight` it queues with.

use crate::config::Config;
use crate::identity::Identity;

/// The tenant and weight a request claims a slot as: the identity's tenant (anonymous requests
/// are one tenant per client key, see `Authenticator::anonymous`) and the `weight` of its tier
/// (1 when it has no tier or the tier is gone).
pub fn claimant_of<'a>(config: &Config, identity: &'a Identity) -> (&'a str, u32) {
    let weight = identity
        .tier
        .as_deref()
        .and_then(|t| config.tiers.get(t))
        .map_or(1, |t| t.weight);
    (&identity.tenant, weight)
}
