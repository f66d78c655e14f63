//! The immutable runtime snapshot built from a validated config ([`Snapshot::build`]: a bag of
//! built layers), and the process-lived state around it ([`App`], in `app.rs`).
//!
//! One request loads one snapshot (an `Arc`) at its start and uses it to the end; a reload builds
//! a complete new snapshot off the request threads and swaps it in atomically (arc-swap).

mod app;

use crate::config::{Config, ConfigError};
use crate::hashing::HashMap;
use crate::identity::Authenticator;
use crate::observe::series::{DecisionSeries, RouteSeries, RuleSeries};
use crate::policy::rules::memo::PlanMemo;
use crate::quota::QuotaService;
use crate::region::RegionBudget;
use crate::response::{HeaderBlock, QuotaHeaders};
use crate::routing::Router;
use crate::tls::upstream::PeerTls;
use crate::tls::ListenerTls;
use crate::upstream::Upstream;
pub use app::App;
use std::sync::Arc;

/// Everything a request needs, built from one config.
pub struct Snapshot {
    pub config: Config,
    pub router: Router,
    pub upstreams: HashMap<String, Arc<Upstream>>,
    /// The upstream of each route, by route index (`config.routes`): resolved once here rather
    /// than looked up by name on every request.
    route_upstreams: Vec<Option<Arc<Upstream>>>,
    pub auth: Authenticator,
    /// Tenant stage; `None` when no tier is configured.
    pub quota: Option<Arc<QuotaService>>,
    /// Certificates and client CAs of the TLS listeners, by listener index (read from their
    /// files at every build, so a reload picks up renewed certificates).
    pub listener_tls: Vec<Option<ListenerTls>>,
    /// This region's part of every budget (`multi_region:`); `None` enforces whole limits.
    pub region: Option<Arc<RegionBudget>>,
    /// The admin API's Bearer tokens, read from `admin.token_env` and `admin.tokens` at this
    /// build; `None` while the API is off.
    pub admin_token: Option<crate::identity::admin_token::AdminTokens>,
    /// The decision HTTP API's token (`decision.http.token_env`); `None`: that API is off.
    pub decision_token: Option<crate::identity::admin_token::AdminToken>,
    /// Request series by route index (`config.routes`), then one for `none` (no route).
    pub route_series: Vec<RouteSeries>,
    /// Decision series of this config's tiers.
    pub decision_series: DecisionSeries,
    /// Decision series of this config's limit rules, by position.
    pub rule_series: RuleSeries,
    /// Limit-rule plans kept for reuse while this config lasts.
    pub rule_plans: PlanMemo,
    /// Live API keys (`store.keys`), kept across reloads while `store:` and `redis:` are
    /// unchanged; `None` when off (or without a quota store).
    pub live: Option<Arc<crate::live::LiveKeys>>,
    /// Blocks set through the admin API (`store.blocks`), kept across reloads while `redis:`
    /// is unchanged (the set in force survives a reload); `None` when off.
    pub blocks: Option<Arc<crate::live::blocks::LiveBlocks>>,
}

impl Snapshot {
    /// Builds a snapshot, reusing `previous`'s state where the config is unchanged: upstream pools
    /// and slots, and the Redis service (connection, breaker) while `redis:` is identical; a
    /// changed `redis:` section keeps the local fallback buckets (see [`QuotaService::succeed`]).
    ///
    /// Errors: secrets or key files that cannot be read or parsed, an invalid Redis URL; each
    /// names its field path. Does blocking file I/O: call it off the request threads.
    pub fn build(
        config: Config,
        previous: Option<&Snapshot>,
    ) -> Result<Snapshot, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let auth = match Authenticator::build_after(
            &config.identity,
            &config.tiers,
            &config.tenants,
            previous.map(|p| &p.auth),
        ) {
            Ok(a) => Some(a),
            Err(e) => {
                errors.extend(e);
                None
            }
        };
        // Tiers or limit rules (proxied or decision-service ones) need the quota store.
        let unlimited = config.tiers.is_empty() && config.limits.is_empty();
        let quota = match (&config.redis, unlimited) {
            (Some(redis), false) => {
                let built = match previous.and_then(|p| p.quota.as_ref()) {
                    Some(q) if q.settings == *redis => Ok(q.clone()),
                    Some(q) => QuotaService::succeed(redis, q).map(Arc::new),
                    None => QuotaService::new(redis).map(Arc::new),
                };
                match built {
                    Ok(q) => Some(q),
                    Err((field, reason)) => {
                        errors.push(ConfigError::new(field, reason));
                        None
                    }
                }
            }
            _ => None,
        };
        let listener_tls = crate::tls::load_listeners(&config).map_err(|e| errors.extend(e));
        let mut peer_tls = HashMap::default();
        for (name, settings) in &config.upstreams {
            if let Some(tls) = &settings.tls {
                match PeerTls::load(&format!("upstreams.{name}"), tls) {
                    Ok(t) => drop(peer_tls.insert(name.clone(), Arc::new(t))),
                    Err(e) => errors.push(e),
                }
            }
        }
        let region = match Self::region(&config, previous) {
            Ok(r) => r,
            Err((field, reason)) => {
                errors.push(ConfigError::new(field, reason));
                None
            }
        };
        let (Some(auth), Ok(listener_tls), true) = (auth, listener_tls, errors.is_empty()) else {
            return Err(errors);
        };
        let upstreams: HashMap<String, Arc<Upstream>> = config
            .upstreams
            .iter()
            .map(|(name, settings)| {
                let prev = previous.and_then(|p| p.upstreams.get(name)).map(|u| &**u);
                let tls = peer_tls.get(name).cloned();
                (name.clone(), Arc::new(Upstream::build(settings, prev, tls)))
            })
            .collect();
        let route_upstreams = config
            .routes
            .iter()
            .map(|r| upstreams.get(&r.upstream).cloned())
            .collect();
        let route_ids = config.routes.iter().map(|r| r.id.as_str());
        let route_series = route_ids.chain(["none"]).map(RouteSeries::new).collect();
        let live = Self::live(&config, quota.is_some(), previous);
        let blocks = Self::blocks(&config, quota.is_some(), previous);
        Ok(Snapshot {
            live,
            blocks,
            route_series,
            decision_series: DecisionSeries::new(config.tiers.keys()),
            rule_series: RuleSeries::new(config.limits.iter().map(|r| r.name.as_str())),
            rule_plans: PlanMemo::default(),
            router: Router::new(config.routes.clone()),
            upstreams,
            route_upstreams,
            auth,
            quota,
            listener_tls,
            region,
            admin_token: crate::identity::admin_token::AdminTokens::load(&config.admin_tokens),
            decision_token: config.decision.http.as_ref().and_then(|h| {
                crate::identity::admin_token::AdminToken::load_for(
                    "decision.http.token_env",
                    Some(&h.token_env),
                )
            }),
            config,
        })
    }

    /// The upstream of the route at `route` (an index into `config.routes`).
    pub fn route_upstream(&self, route: usize) -> Option<&Upstream> {
        self.route_upstreams.get(route)?.as_deref()
    }

    /// The limits set live for `tenant` (`store.overrides`) in force now: from this instance's
    /// copy, no Redis call.
    pub fn live_limits(&self, tenant: &str) -> Option<Arc<crate::config::LimitOverride>> {
        let o = self.live.as_ref()?.overrides.as_ref()?;
        o.of(tenant, crate::observe::tier_fit::unix_ms() / 1000)
    }

    /// The live overrides when any key of a limit rule has one (`store.overrides`): `None`
    /// (one atomic flag read) when none has, so rules pay nothing for the feature unused.
    pub fn rule_key_overrides(&self) -> Option<&crate::live::overrides::Overrides> {
        let o = self.live.as_ref()?.overrides.as_ref()?;
        o.any_rule_key().then_some(o)
    }

    /// The bucket of key `key` (its encoded key text) of `rule` with the live override of that
    /// key (docs/live-state.md#one-key-of-a-limit-rule) merged over `base` (the rule's own or
    /// `by_tier` bucket), field by field; `None` when no override for it is in force.
    pub fn live_rule_rate(
        overrides: &crate::live::overrides::Overrides,
        rule: &crate::config::LimitRule,
        key: &str,
        base: crate::limit::Rate,
    ) -> Option<crate::limit::Rate> {
        Self::live_rule_override(overrides, rule, key).map(|o| o.merged(base))
    }

    /// The live override of key `key` (its encoded key text) of `rule` in force now, the
    /// fields it sets; `None` for none, and always for a concurrency rule (never overridden).
    pub fn live_rule_override(
        overrides: &crate::live::overrides::Overrides,
        rule: &crate::config::LimitRule,
        key: &str,
    ) -> Option<crate::config::TenantOverride> {
        if rule.max_in_flight.is_some() {
            return None;
        }
        let now = crate::observe::tier_fit::unix_ms() / 1000;
        overrides.of_rule_key(&rule.name, key, now)
    }

    /// The live state of `config` (`store.keys` or `store.overrides` with a quota store), kept
    /// from `previous` (its cache and version) while `store:` and `redis:` (the key prefix
    /// included) are unchanged: another Redis has other keys and overrides.
    fn live(
        config: &Config,
        has_quota: bool,
        previous: Option<&Snapshot>,
    ) -> Option<Arc<crate::live::LiveKeys>> {
        let store = config
            .store
            .as_ref()
            .filter(|s| (s.keys || s.overrides) && has_quota)?;
        let prefix = config.redis.as_ref()?.key_prefix.as_str();
        let same_redis = previous.is_some_and(|p| p.config.redis == config.redis);
        match previous.and_then(|p| p.live.as_ref()) {
            Some(l) if l.settings == *store && l.prefix() == prefix && same_redis => {
                Some(l.clone())
            }
            _ => Some(Arc::new(crate::live::LiveKeys::new(store, prefix))),
        }
    }

    /// The blocks of `config` (`store.blocks` with a quota store), kept from `previous` while
    /// `redis:` (the key prefix included) is unchanged.
    fn blocks(
        config: &Config,
        has_quota: bool,
        previous: Option<&Snapshot>,
    ) -> Option<Arc<crate::live::blocks::LiveBlocks>> {
        config.store.as_ref().filter(|s| s.blocks && has_quota)?;
        let prefix = config.redis.as_ref()?.key_prefix.as_str();
        let same_redis = previous.is_some_and(|p| p.config.redis == config.redis);
        match previous.and_then(|p| p.blocks.as_ref()) {
            Some(b) if b.prefix() == prefix && same_redis => Some(b.clone()),
            _ => Some(Arc::new(crate::live::blocks::LiveBlocks::new(prefix))),
        }
    }

    /// The regional budget of `config`, kept from `previous` (synced shares and demand) while
    /// `multi_region:` and the key prefix are unchanged.
    fn region(
        config: &Config,
        previous: Option<&Snapshot>,
    ) -> Result<Option<Arc<RegionBudget>>, (String, String)> {
        let Some(settings) = &config.multi_region else {
            return Ok(None);
        };
        let prefix = config
            .redis
            .as_ref()
            .map(|r| r.key_prefix.as_str())
            .unwrap_or("tollgate");
        let same_prefix = previous.is_some_and(|p| {
            p.config
                .redis
                .as_ref()
                .map(|r| r.key_prefix.as_str())
                .unwrap_or("tollgate")
                == prefix
        });
        match previous.and_then(|p| p.region.as_ref()) {
            Some(r) if r.settings == *settings && same_prefix => Ok(Some(r.clone())),
            _ => RegionBudget::new(settings, prefix).map(|r| Some(Arc::new(r))),
        }
    }

    /// The rate-limit header pairs of `q` for `response.headers`, each regional share marked
    /// with this region when `multi_region:` cut the budget ([`QuotaHeaders::pairs_in`]).
    pub fn quota_pairs(&self, q: &QuotaHeaders) -> Vec<(&'static str, String)> {
        self.quota_fields(q).into_pairs()
    }

    /// [`Snapshot::quota_pairs`] as one [`HeaderBlock`] (every value in one buffer).
    pub fn quota_fields(&self, q: &QuotaHeaders) -> HeaderBlock {
        let region = self.region.as_ref().map(|r| r.region());
        let fields = q.fields_in(self.config.response.headers, region);
        let openai = self.config.response.openai;
        let tier = self.config.tiers.get(&q.policy_name);
        let leased = !q.degraded && tier.is_some_and(|t| t.policy.lease.is_some());
        if !openai && !leased {
            return fields;
        }
        let mut pairs = fields.into_pairs();
        if openai {
            pairs.extend(q.openai_pairs());
        }
        if leased {
            crate::response::ratelimit::annotate_leased(&mut pairs, &q.policy_name);
        }
        HeaderBlock::from_pairs(pairs)
    }
}
