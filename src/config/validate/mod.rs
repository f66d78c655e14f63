//! Validation of the raw YAML into a [`Config`]: every problem found, each with its field path.
//!
//! One file per top-level section of `gateway.yaml`, validated in the order of [`validate`];
//! [`common`] holds what they share, and `host`, `lease`, `policy` and `tls` the checks of
//! fields that several sections (or one large one) use.

use super::model::{Config, FailurePolicy};
use super::raw::RawConfig;
use super::ConfigError;
use common::Check;
use std::collections::BTreeSet;

mod admin;
mod common;
mod cost;
mod counting;
mod decision;
mod edge;
mod host;
mod identity;
mod lease;
mod limits;
mod listen;
mod live;
mod multi_region;
mod observability;
mod policy;
mod redis;
mod reload;
mod response;
mod routes;
mod server;
mod store;
mod tenants;
mod tiers;
mod tls;
mod upstreams;
mod usage;

pub use live::{live_override, live_rule_override, RawLimitOverride, RawRateOverride};

/// Validates a parsed file. Returns every error found, each naming its field path.
pub fn validate(raw: RawConfig) -> Result<Config, Vec<ConfigError>> {
    let mut c = Check::default();

    let listen = listen::settings(&mut c, &raw.listen);
    let (admin_listen, admin_token_env, admin_tokens) = admin::settings(&mut c, raw.admin.as_ref());
    let server = server::settings(&mut c, raw.server.as_ref());
    let redis = raw.redis.as_ref().map(|r| redis::settings(&mut c, r));
    let edge = raw.edge.as_ref().and_then(|e| edge::settings(&mut c, e));
    let default_policy = redis
        .as_ref()
        .map(|r| r.on_failure)
        .unwrap_or(FailurePolicy::Local);

    let tiers = tiers::settings(&mut c, raw.tiers.as_ref(), default_policy);
    let tier_names: BTreeSet<&String> = raw.tiers.iter().flatten().map(|(n, _)| n).collect();
    if !tier_names.is_empty() && raw.redis.is_none() {
        c.err("redis", "is required when tiers are configured");
    }
    // A tier named by `identity` or `tenants` must exist (even when its own settings are invalid).
    let mut tier_ref = |c: &mut Check, path: &str, name: &str| {
        if !tier_names.contains(&name.to_string()) {
            c.err(path, format!("no tier named \"{name}\""));
        }
    };

    let identity = identity::settings(&mut c, raw.identity.as_ref(), &mut tier_ref);
    let tenants = tenants::settings(&mut c, raw.tenants.as_ref(), &tiers, &mut tier_ref);
    let upstreams = upstreams::settings(&mut c, &raw.upstreams);
    let routes = routes::settings(&mut c, &raw.routes, &raw.upstreams);
    let rules = raw.limits.as_deref().unwrap_or_default();
    if !rules.is_empty() && raw.redis.is_none() {
        c.err("limits", "redis is required when limits are configured");
    }
    let limits = limits::settings(&mut c, rules, &tier_names, default_policy);

    routes::check_costs(&mut c, &tiers, &routes);
    tls::check_mtls_listener(&mut c, &identity, &listen);
    routes::check_auth(&mut c, &identity, &routes);

    let response = response::settings(&mut c, raw.response.as_ref());
    let observability = observability::settings(&mut c, raw.observability.as_ref());
    let multi_region = multi_region::settings(&mut c, raw.multi_region.as_ref(), &tiers, &routes);
    let reload = reload::settings(&mut c, raw.reload.as_ref());
    let decision = decision::settings(&mut c, raw.decision.as_ref());
    if (decision.grpc.is_some() || decision.http.is_some()) && raw.redis.is_none() {
        c.err("decision", "redis is required for the decision service");
    }
    let has_quota = raw.redis.is_some() && !tiers.is_empty();
    let store = store::settings(&mut c, raw.store.as_ref(), has_quota);

    if c.errors.is_empty() {
        Ok(Config {
            listen,
            admin_listen,
            admin_token_env,
            admin_tokens,
            source: Default::default(),
            old_spellings: std::mem::take(&mut c.old_spellings),
            server,
            redis,
            edge,
            identity,
            tiers,
            limits,
            tenants,
            upstreams,
            routes,
            response,
            observability,
            multi_region,
            reload,
            decision,
            store,
        })
    } else {
        Err(c.errors)
    }
}
