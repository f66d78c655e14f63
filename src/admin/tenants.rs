//! `GET /v1/tenants/{id}` (tier, every policy's state read without debiting, tier fit) and
//! `POST /v1/tenants/{id}/reset` (delete the tenant's keys).
//!
//! Which tenants are known ([`tier_of`]): a tenant listed in `tenants:` or named by an API key
//! (tier as the identity stage resolves it: the key's tier, then `tenants.<id>.tier`, then
//! `identity.default_tier`); an anonymous `ip:<address>` tenant when the `anonymous` tier
//! exists; any other id (e.g. a JWT subject) only when `identity.default_tier` is set and the
//! tenant has state in Redis or was seen by this instance. Everything else is 404.

use super::limit_source::{mark_source, rate_override_json};
use super::reply::store_problem;
use super::rules_view;
use crate::config::{Config, LimitOverride, TierPolicy, UsageBudget};
use crate::limit::algorithm::Algorithm;
use crate::limit::Rate;
use crate::policy;
use crate::quota::peek::{self, Peeked};
use crate::quota::QuotaService;
use crate::response::Problem;
use crate::snapshot::{App, Snapshot};
use crate::store::redis::client::RedisFault;
use crate::store::redis::keys::usage_key;
use crate::tenant_id::ANONYMOUS_PREFIX;
use serde_json::{json, Value};

/// How a tenant's tier was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// From the config (`tenants:`, an API key, the anonymous tier).
    Configured(String),
    /// Only `identity.default_tier`: known if it has state or was seen.
    IfSeen(String),
}

/// The tier of `tenant` by the rule in the module docs; `None`: unknown.
pub fn tier_of(config: &Config, tenant: &str) -> Option<Known> {
    if tenant.starts_with(ANONYMOUS_PREFIX) {
        return config
            .tiers
            .contains_key("anonymous")
            .then(|| Known::Configured("anonymous".to_string()));
    }
    let listed = config.tenants.get(tenant);
    let key = config
        .identity
        .api_keys
        .as_ref()
        .and_then(|k| k.keys.iter().find(|k| k.tenant == tenant));
    let default = config.identity.default_tier.clone();
    if listed.is_none() && key.is_none() {
        return default.map(Known::IfSeen);
    }
    key.and_then(|k| k.tier.clone())
        .or_else(|| listed.and_then(|t| t.tier.clone()))
        .or(default)
        .map(Known::Configured)
}

fn not_found(tenant_known: bool) -> Problem {
    let why = if tenant_known {
        "this tenant's tier is not configured"
    } else {
        "unknown tenant: not in tenants:, not named by an API key, and no state in the quota store"
    };
    Problem::status(404, why)
}

/// Where the tier an answer is given for came from (`tier_source` in the JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierSource {
    /// The `?tier=` query parameter.
    Query,
    /// The config: the API key's tier, or (when no JWT can carry another one) `tenants:` and
    /// `identity.default_tier`.
    Config,
    /// The tier this instance last decided the tenant's request with.
    LastDecision,
}

impl TierSource {
    /// The `tier_source` value.
    pub fn as_str(self) -> &'static str {
        match self {
            TierSource::Query => "query",
            TierSource::Config => "config",
            TierSource::LastDecision => "last_decision",
        }
    }
}

/// The tenant's policies under `tier`, read without debiting: the numbers in force (the
/// proxy's [`policy::resolve`], live overrides included).
pub struct KnownTier {
    pub tier: String,
    pub source: TierSource,
    pub rate: Rate,
    pub policy: TierPolicy,
    pub peeked: Peeked,
    /// The tier's usage budget, with the live override's bucket.
    pub usage: Option<UsageBudget>,
    /// The tier's concurrency cap, with the live override's.
    pub max_in_flight: Option<u64>,
    /// The tenant's live override in force, if any (what marks its numbers' `source`).
    pub live: Option<std::sync::Arc<LimitOverride>>,
}

/// What [`inspect`] found.
pub enum Inspected {
    /// The tenant's policies under its tier (boxed: the variants differ much in size).
    Known(Box<KnownTier>),
    /// The tenant is known, but not its tier: a JWT may name any tier, and this instance has
    /// not decided a request of the tenant since it started. Never another tier's numbers.
    TierUnknown,
}

/// The detail of a [`Inspected::TierUnknown`] answer.
pub const TIER_UNKNOWN: &str = "tier unknown: this tenant's tier comes from its JWT \
     (identity.jwt.tier_claim) and this instance has not decided a request of it since it \
     started; ask with ?tier=<name> for that tier's numbers";

/// The tier named by `tenant`'s API key, a fact whatever else the config says.
fn key_tier(config: &Config, tenant: &str) -> Option<String> {
    let keys = config.identity.api_keys.as_ref()?;
    keys.keys
        .iter()
        .find(|k| k.tenant == tenant)
        .and_then(|k| k.tier.clone())
}

/// What the tenant stage would see for `tenant` now, and for a request of `cost` tokens, under
/// the tier `asked` (`?tier=`), else the API key's tier, else the tier this instance last
/// decided it with, else the configured tier when no JWT tier claim can override it, else
/// [`Inspected::TierUnknown`]. Errors: 404 (unknown tenant or tier, or no tier named
/// `asked`), 503 (no quota store, or it failed).
pub async fn inspect(
    app: &App,
    snap: &Snapshot,
    tenant: &str,
    asked: Option<&str>,
    cost: u64,
) -> Result<Inspected, Problem> {
    let config = &snap.config;
    let live = snap.live_limits(tenant);
    if let Some(t) = asked.filter(|t| !config.tiers.contains_key(*t)) {
        return Err(Problem::status(404, format!("no tier named {t:?} (tier=)")));
    }
    let known = tier_of(config, tenant);
    let remembered = app.tier_fit.tier_of(tenant);
    let claims_tier = config
        .identity
        .jwt
        .as_ref()
        .is_some_and(|j| j.tier_claim.is_some())
        && !tenant.starts_with(ANONYMOUS_PREFIX);
    let configured = match &known {
        Some(Known::Configured(t) | Known::IfSeen(t)) if !claims_tier => Some(t.clone()),
        _ => None,
    };
    let chosen = asked
        .map(|t| (t.to_string(), TierSource::Query))
        .or_else(|| key_tier(config, tenant).map(|t| (t, TierSource::Config)))
        .or_else(|| remembered.clone().map(|t| (t, TierSource::LastDecision)))
        .or_else(|| configured.map(|t| (t, TierSource::Config)));
    // Known without state: configured, or decided here. Otherwise it must have state.
    let must_have_state = remembered.is_none() && !matches!(known, Some(Known::Configured(_)));
    let (tier_name, source) = match (chosen, &known) {
        (Some(c), _) => c,
        (None, None) => return Err(not_found(false)),
        (None, Some(_)) if !must_have_state => return Ok(Inspected::TierUnknown),
        (None, Some(Known::Configured(t) | Known::IfSeen(t))) => {
            // Whether it has state, read with the configured tier's keys.
            let limits =
                policy::resolve(config, snap.region.as_deref(), live.as_deref(), tenant, t)
                    .ok_or_else(|| not_found(true))?;
            let quota = snap.quota.as_ref().ok_or_else(no_store)?;
            let policy = limits.policy();
            let raw = peek::read(&quota.redis, tenant, policy.algorithm, &policy.quotas)
                .await
                .map_err(store_problem)?;
            return match raw.main.is_some() || raw.quota_used.iter().any(|&u| u > 0) {
                true => Ok(Inspected::TierUnknown),
                false => Err(not_found(false)),
            };
        }
    };
    let limits = policy::resolve(
        config,
        snap.region.as_deref(),
        live.as_deref(),
        tenant,
        &tier_name,
    )
    .ok_or_else(|| not_found(true))?;
    let quota = snap.quota.as_ref().ok_or_else(no_store)?;
    let (rate, policy) = (limits.rate, limits.policy().clone());
    let (usage, max_in_flight) = (limits.usage().cloned(), limits.max_in_flight);
    let raw = peek::read(&quota.redis, tenant, policy.algorithm, &policy.quotas)
        .await
        .map_err(store_problem)?;
    if must_have_state {
        let stored = raw.main.is_some() || raw.quota_used.iter().any(|&u| u > 0);
        if !stored && app.tier_fit.report(tenant, raw.now_ms).is_none() {
            return Err(not_found(false));
        }
    }
    let peeked = peek::evaluate(
        policy.algorithm,
        &raw,
        &rate,
        policy.max_delay_ms,
        &policy.quotas,
        cost,
    );
    Ok(Inspected::Known(Box::new(KnownTier {
        tier: limits.tier.name.clone(),
        source,
        rate,
        policy,
        peeked,
        usage,
        max_in_flight,
        live,
    })))
}

fn no_store() -> Problem {
    Problem::status(503, "no quota store is configured (redis:)")
}

/// The per-policy JSON of `peeked`: the main limit first (named after the tier), then each
/// calendar quota (`<tier>.<period>`), each with what a request of the peeked cost would get
/// (`would_admit`, `remaining_after`, `retry_after_s`: the Retry-After of its refusal) and
/// where its numbers come from ([`mark_source`], `live`: the tenant's live override).
pub fn policies_json(
    tier: &str,
    rate: &Rate,
    policy: &TierPolicy,
    peeked: &Peeked,
    live: Option<&LimitOverride>,
) -> Vec<Value> {
    let secs = |ms: u64| ms.div_ceil(1000);
    let retry = |ms: u64| {
        if ms == u64::MAX {
            Value::Null
        } else {
            json!(secs(ms))
        }
    };
    let mut main = json!({
        "name": tier,
        "algorithm": policy.algorithm.as_str(),
        "limit": rate.limit,
        "per_ms": rate.per_ms,
        "burst": rate.burst,
        "remaining": peeked.main_view.remaining,
        "seconds_until_full": secs(peeked.main_view.full_ms),
    });
    if policy.algorithm == crate::limit::algorithm::Algorithm::LeakyBucket {
        main["max_delay_ms"] = json!(policy.max_delay_ms);
    }
    let d = &peeked.main_decision;
    main["would_admit"] = json!(d.admitted);
    main["remaining_after"] = json!(d.remaining);
    main["retry_after_s"] = if d.admitted {
        json!(0)
    } else {
        retry(d.retry_after_ms)
    };
    mark_source(&mut main, live.and_then(|l| rate_override_json(&l.rate)));
    let mut out = vec![main];
    for (q, (view, d)) in policy.quotas.iter().zip(&peeked.quotas) {
        let (_, end) = q.period.window(peeked.state.now_ms);
        let mut v = json!({
            "name": format!("{tier}.{}", q.period.as_str()),
            "algorithm": "calendar_quota",
            "period": q.period.as_str(),
            "limit": q.limit,
            "per_ms": end - q.period.window(peeked.state.now_ms).0,
            "burst": q.limit,
            "remaining": view.remaining,
            "seconds_until_full": secs(view.full_ms),
            "window_ends_in_s": secs(end - peeked.state.now_ms),
        });
        v["would_admit"] = json!(d.admitted);
        v["remaining_after"] = json!(d.remaining);
        v["retry_after_s"] = if d.admitted {
            json!(0)
        } else {
            retry(d.retry_after_ms)
        };
        let set = live.and_then(|l| l.quotas.iter().find(|o| o.period == q.period));
        mark_source(&mut v, set.map(|o| json!({"limit": o.limit})));
        out.push(v);
    }
    out
}

/// The tier's usage budget `budget` (in force: with the live override's bucket) as a policy
/// entry (`"usage_budget": true`, named `<tier>.<usage.name>`, a token bucket in units): its
/// state read without debiting and what a request reserving `reserve` units would get, marked
/// by [`mark_source`]. Errors: the quota store's fault, as for the main limit's read.
pub async fn usage_json(
    quota: &QuotaService,
    tenant: &str,
    budget: &UsageBudget,
    reserve: u64,
    live: Option<&LimitOverride>,
) -> Result<Value, RedisFault> {
    let key = usage_key(quota.redis.key_prefix(), tenant, &budget.name);
    let mut v = usage_state_json(quota, &budget.policy, &key, &budget.rate, reserve).await?;
    let set = live.and_then(|l| l.usage.as_ref());
    mark_source(&mut v, set.and_then(rate_override_json));
    Ok(v)
}

/// A usage budget's bucket at `key` (a token bucket of `rate`, in units) as a policy entry
/// named `name` (`"usage_budget": true`): its state read without debiting and what a request
/// reserving `reserve` units would get. The tier's ([`usage_json`]) and a limit rule's (the
/// explain of its request). Errors: the quota store's fault.
pub async fn usage_state_json(
    quota: &QuotaService,
    name: &str,
    key: &str,
    rate: &Rate,
    reserve: u64,
) -> Result<Value, RedisFault> {
    let raw = peek::read_key(&quota.redis, key, Algorithm::TokenBucket).await?;
    let p = peek::evaluate(Algorithm::TokenBucket, &raw, rate, 0, &[], reserve);
    let d = &p.main_decision;
    let retry = match d.admitted {
        true => json!(0),
        false => d.retry_after_s().map_or(Value::Null, |s| json!(s)),
    };
    Ok(json!({
        "name": name,
        "algorithm": Algorithm::TokenBucket.as_str(),
        "usage_budget": true,
        "limit": rate.limit,
        "per_ms": rate.per_ms,
        "burst": rate.burst,
        "reserve": reserve,
        "remaining": p.main_view.remaining,
        "seconds_until_full": p.main_view.full_ms.div_ceil(1000),
        "would_admit": d.admitted,
        "remaining_after": d.remaining,
        "retry_after_s": retry,
    }))
}

/// The tier's concurrency cap in force (`max`, this region's share under `multi_region:`) with
/// the leases `held` now, marked by [`mark_source`]; `null` without a cap or a quota store.
pub async fn in_flight_json(
    quota: Option<&QuotaService>,
    tenant: &str,
    max: Option<u64>,
    live: Option<&LimitOverride>,
) -> Value {
    let (Some(q), Some(max)) = (quota, max) else {
        return Value::Null;
    };
    let mut v = match q.inflight_of(tenant).await {
        Ok(held) => json!({"max": max, "held": held}),
        Err(fault) => {
            json!({"max": max, "held": null, "why": format!("quota store fault: {}", fault.as_str())})
        }
    };
    let set = live.and_then(|l| l.max_in_flight);
    mark_source(&mut v, set.map(|m| json!({"max": m})));
    v
}

/// `GET /v1/tenants/{id}` (`asked`: the `?tier=` parameter). A tenant whose tier is unknown
/// ([`Inspected::TierUnknown`]) is answered with `"tier": null` and `"why"`, no numbers.
pub async fn get(
    app: &App,
    snap: &Snapshot,
    tenant: &str,
    asked: Option<&str>,
) -> Result<Value, Problem> {
    let region = snap.region.as_ref().map(|r| r.region().to_string());
    let Inspected::Known(known) = inspect(app, snap, tenant, asked, 1).await? else {
        return Ok(json!({
            "tenant": tenant,
            "tier": null,
            "tier_source": "unknown",
            "why": TIER_UNKNOWN,
            "policies": [],
            "rules": [],
            "in_flight": null,
            "fit": null,
            "region": region,
        }));
    };
    let KnownTier {
        tier,
        source,
        rate,
        policy,
        peeked,
        usage,
        max_in_flight,
        live,
    } = *known;
    let fit = app
        .tier_fit
        .report(tenant, crate::observe::tier_fit::unix_ms())
        .unwrap_or_default();
    let overrides = snap.rule_key_overrides();
    let rules = match &snap.quota {
        Some(q) => rules_view::of_tenant(q, &snap.config.limits, tenant, &tier, overrides).await,
        None => Vec::new(),
    };
    let live = live.as_deref();
    let mut policies = policies_json(&tier, &rate, &policy, &peeked, live);
    if let (Some(q), Some(u)) = (&snap.quota, &usage) {
        let usage = usage_json(q, tenant, u, u.reserve, live).await;
        policies.push(usage.map_err(store_problem)?);
    }
    // This region's share of the cap under `multi_region:`, as the proxy enforces it.
    let in_flight = in_flight_json(snap.quota.as_deref(), tenant, max_in_flight, live).await;
    Ok(json!({
        "tenant": tenant,
        "tier": tier,
        "tier_source": source.as_str(),
        // With what the next request (cost 1) would get: its Retry-After when refused.
        "policies": policies,
        "rules": rules,
        "in_flight": in_flight,
        "fit": fit,
        "region": region,
    }))
}

/// `POST /v1/tenants/{id}/reset`: deletes every key of the tenant (all algorithms' main keys,
/// every calendar quota counter) and forgets this instance's cached refusal. Idempotent: the
/// body says how many keys existed. A tenant `GET /v1/tenants/{id}` answers 404 for (the same
/// [`inspect`]) is 404 here too, e.g. an id known only through `identity.default_tier` that has
/// no state and was not seen.
pub async fn reset(app: &App, snap: &Snapshot, tenant: &str) -> Result<Value, Problem> {
    inspect(app, snap, tenant, None, 1).await?;
    let quota = snap.quota.as_ref().ok_or_else(no_store)?;
    let rules = rules_view::tenant_rule_keys(quota, &snap.config.limits, tenant);
    let deleted = peek::reset(&quota.redis, tenant, &rules)
        .await
        .map_err(store_problem)?;
    quota.forget(tenant);
    tracing::info!(tenant = %crate::tenant_id::encode(tenant), deleted, "admin: tenant limits reset");
    Ok(json!({ "tenant": tenant, "reset": true, "deleted_keys": deleted }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(identity: &str) -> Config {
        let yaml = format!(
            "listen: [\"127.0.0.1:8080\"]\n\
             tiers: {{ free: {{ limit: 1, per: 1h }}, pro: {{ limit: 9, per: 1h }}, anonymous: {{ limit: 1, per: 1m }} }}\n\
             redis: {{ url: \"redis://127.0.0.1:6379\" }}\n\
             tenants: {{ listed: {{ tier: pro }}, bare: {{ burst: 1 }} }}\n\
             identity:\n  api_keys: {{ keys: [{{ sha256: \"{}\", tenant: keyed, tier: free }}] }}\n{identity}\
             upstreams: {{ a: {{ backends: [\"127.0.0.1:9001\"] }} }}\n\
             routes: [{{ path_prefix: \"/\", upstream: a }}]\n",
            "a".repeat(64)
        );
        crate::config::parse(&yaml).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn known_tenants_and_their_tiers() {
        let c = config("");
        let configured = |t: &str| Some(Known::Configured(t.to_string()));
        assert_eq!(tier_of(&c, "listed"), configured("pro"));
        assert_eq!(tier_of(&c, "keyed"), configured("free"));
        assert_eq!(tier_of(&c, "ip:10.0.0.1"), configured("anonymous"));
        // Listed without a tier and no default tier: no tier to show.
        assert_eq!(tier_of(&c, "bare"), None);
        assert_eq!(tier_of(&c, "jwt-subject"), None);
        let c = config("  default_tier: free\n");
        assert_eq!(tier_of(&c, "bare"), configured("free"));
        assert_eq!(tier_of(&c, "listed"), configured("pro"));
        assert_eq!(
            tier_of(&c, "jwt-subject"),
            Some(Known::IfSeen("free".into()))
        );
    }
}
