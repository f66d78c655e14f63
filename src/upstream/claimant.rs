//! Who a request counts as at the upstream slots: its tenant and the tier `weight` it queues with.

use crate::config::Config;
use crate::edge::client_ip;
use crate::identity::tenant_id;
use std::net::IpAddr;

/// The tenant and weight a request claims a slot as: the identified tenant (or, when none,
/// one anonymous tenant per client key: the IP, IPv6 reduced to `edge.ipv6_prefix`, as the
/// tenant stage does) and the `weight` of its tier (1 when it has no tier or the tier is gone).
pub fn claimant_of(
    config: &Config,
    tenant: Option<&str>,
    tier: Option<&str>,
    client: IpAddr,
) -> (String, u32) {
    let tenant = match tenant {
        Some(t) => t.to_string(),
        None => {
            let prefix = config.edge.as_ref().map(|e| e.ipv6_prefix).unwrap_or(64);
            tenant_id::anonymous(&client_ip::key_of(client, prefix).to_string())
        }
    };
    let tier = tier.or(tenant
        .starts_with(tenant_id::ANONYMOUS_PREFIX)
        .then_some("anonymous"));
    let weight = tier
        .and_then(|t| config.tiers.get(t))
        .map_or(1, |t| t.weight);
    (tenant, weight)
}
