//! `limits:`: limit rules keyed by request attributes (docs/DESIGN.md 4d–4e "Rules"). Every rule
//! whose `match` holds applies to a request, together with its tier's own policies, all or
//! nothing.

use super::common::{FailurePolicy, Mode};
use super::counting::{BlockFor, Counting};
use super::routes::HostMatch;
use super::tiers::UsageBudget;
use crate::limit::algorithm::Algorithm;
use crate::limit::Rate;
use std::collections::BTreeMap;

/// One entry of `limits:`.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitRule {
    /// Policy name in `RateLimit-Policy` and in Redis keys: `[a-z0-9_-]{1,40}`, unique.
    pub name: String,
    /// When the rule applies (every given condition must hold).
    pub matcher: RuleMatch,
    /// The parts whose values make the rule's bucket key, in file order (at least one).
    pub key: Vec<KeyPart>,
    /// The bucket of a request whose tier is not in [`by_tier`](Self::by_tier) (or has no tier).
    pub rate: Rate,
    pub algorithm: Algorithm,
    /// Per-tier bucket sizes (`by_tier.<tier>`: `limit`, `per`, `burst`), by tier name.
    pub by_tier: BTreeMap<String, Rate>,
    /// What a request lacking one of the key's parts gets.
    pub missing: Missing,
    pub mode: Mode,
    /// When Redis cannot decide (default: `redis.on_failure`).
    pub on_failure: FailurePolicy,
    /// `max_in_flight`: a concurrency rule, capping the requests in flight per key across the
    /// fleet (leases in Redis, docs/DESIGN.md 4e); then `rate`, `algorithm` and `by_tier` do not
    /// apply (`rate` is a placeholder of one token).
    pub max_in_flight: Option<u64>,
    /// `usage`: a budget of backend-reported units per key, reserved with the rule's bucket and
    /// settled when the response ends (docs/usage-cost.md#usage-budgets-in-limit-rules); its
    /// policy is `<rule>.<usage name>`. `None`: no such budget.
    pub usage: Option<UsageBudget>,
    /// `count` and `refund_on`: which admitted requests stay counted (docs/rules.md#counting-by-outcome).
    pub counting: Counting,
    /// `block_for`: a refusal by the rule blocks its key for a while (docs/rules.md#penalty-box).
    pub block_for: Option<BlockFor>,
    /// `cost`: what a request costs this rule, instead of the route's cost
    /// (docs/rules.md#costs-read-from-the-request). `None`: the route's.
    pub cost: Option<super::cost::RuleCost>,
}

impl LimitRule {
    /// The bucket of a request in tier `tier` (`None`: no tier).
    pub fn rate_for(&self, tier: Option<&str>) -> Rate {
        tier.and_then(|t| self.by_tier.get(t))
            .copied()
            .unwrap_or(self.rate)
    }

    /// True when the key holds `tenant`: the rule's buckets live under the tenant's hash tag and
    /// are decided in the same script call as the tier's policies.
    pub fn per_tenant(&self) -> bool {
        self.key.contains(&KeyPart::Tenant)
    }
}

/// `limits[].match`: all given conditions must hold; an empty match applies to every request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleMatch {
    /// Path prefixes (segment-wise, as `routes[].path_prefix` matches); empty: any path.
    pub routes: Vec<String>,
    /// Methods, upper case; empty: any method.
    pub methods: Vec<String>,
    /// Hosts, as `routes[].host` matches them; empty: any host.
    pub hosts: Vec<HostMatch>,
    /// Header name (lower case) and the exact value it must have.
    pub headers: Vec<(String, String)>,
    /// A decision-service rule's domain (`None`: a rule of proxied requests). Such a rule
    /// applies to rate limit service calls of this domain only, and to no proxied request.
    pub domain: Option<String>,
    /// With `domain`: the descriptor entries the rule matches, in order: the key, and the value
    /// when pinned (`None`: any value). A descriptor matches when its keys are exactly these.
    pub descriptors: Vec<(String, Option<String>)>,
}

/// One part of a rule's key (`limits[].key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// The tenant id (the identity stage's tenant, `ip:<address>` when anonymous).
    Tenant,
    /// The client address (after `edge.trusted_proxies`; IPv6 aggregated to `edge.ipv6_prefix`).
    ClientIp,
    /// The path prefix of the route that matched.
    Route,
    /// The request method.
    Method,
    /// The request host, lower case, without port.
    Host,
    /// `header:<name>`: the header's value (name lower case; several values joined by `, `).
    Header(String),
    /// `claim:<name>`: a JWT claim (a string as is, another JSON value as its JSON text).
    Claim(String),
    /// `query:<name>`: the first value of the query parameter, percent-decoded.
    Query(String),
    /// `descriptor:<key>`: the value of a rate limit service descriptor's entry (decision-service
    /// rules only).
    Descriptor(String),
}

impl KeyPart {
    /// The part as written in `key:` (`tenant`, `header:x-user`, ...).
    pub fn spec(&self) -> String {
        let (kind, name) = self.spec_pieces();
        [kind, name].concat()
    }

    /// [`spec`](Self::spec) in two pieces, without allocating: the kind with its colon when
    /// a name follows (`header:`), and the name (empty for `tenant`, `client_ip`, ...).
    pub fn spec_pieces(&self) -> (&'static str, &str) {
        match self {
            KeyPart::Tenant => ("tenant", ""),
            KeyPart::ClientIp => ("client_ip", ""),
            KeyPart::Route => ("route", ""),
            KeyPart::Method => ("method", ""),
            KeyPart::Host => ("host", ""),
            KeyPart::Header(n) => ("header:", n),
            KeyPart::Claim(n) => ("claim:", n),
            KeyPart::Query(n) => ("query:", n),
            KeyPart::Descriptor(n) => ("descriptor:", n),
        }
    }

    /// True for values the client chooses freely (`header:`, `query:`): a rule keyed only by
    /// these lets a client mint new buckets.
    pub fn client_chosen(&self) -> bool {
        matches!(self, KeyPart::Header(_) | KeyPart::Query(_))
    }
}

/// `limits[].missing`: a request without a value for one of the key's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Missing {
    /// The rule does not apply to it (default).
    #[default]
    Skip,
    /// It is refused: 400 `missing-limit-key` naming the part.
    Refuse,
}
