//! `tiers:`: each tier's rate, policy, lease and burst pool.

use super::common::{FailurePolicy, Mode};
use crate::limit::algorithm::Algorithm;
use crate::limit::calendar::CalendarQuota;
use crate::limit::Rate;

/// A tier: the size of every tenant bucket in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tier {
    pub name: String,
    pub rate: Rate,
    pub on_failure: FailurePolicy,
    /// Algorithm, shaping and calendar quotas (docs/DESIGN.md 4c "Policies").
    pub policy: TierPolicy,
    /// Share at fair upstream queues (`weight`, 1..=1000, default 1).
    pub weight: u32,
    /// Burst pool shared by the tier's tenants (`pool`), consulted when a tenant's bucket refuses.
    pub pool: Option<PoolSettings>,
    /// `tiers.<name>.mode`: shadow counts and logs refusals without enforcing them. Not part of
    /// any bucket key or script argument, so a reload switches it without touching state.
    pub mode: Mode,
    /// `max_in_flight`: requests of one tenant in flight at once across the fleet (leases in
    /// Redis, docs/DESIGN.md 4e "Fleet-wide concurrency"); `None`: no such cap.
    pub max_in_flight: Option<u64>,
    /// `usage`: a budget of backend-reported units, reserved at admission and settled when the
    /// response ends (docs/DESIGN.md 4e "Usage cost"); `None`: no such budget.
    pub usage: Option<UsageBudget>,
    /// `refund_on`: the outcomes whose request count is given back, for every policy of the
    /// request's decision (docs/rules.md#counting-by-outcome).
    pub refund_on: RefundOn,
}

/// `tiers.<name>.usage`: a token bucket of units the backend reports (LLM tokens).
#[derive(Debug, Clone, PartialEq)]
pub struct UsageBudget {
    /// The policy name in headers and problems: `<tier>.<usage.name>` (`pro.tokens`).
    pub policy: String,
    /// The name alone (`tokens`), part of the Redis key.
    pub name: String,
    /// The bucket, in units (`limit` per `per`, `burst`).
    pub rate: Rate,
    /// Units debited at admission (1..=burst); with [`from_json`](Self::from_json), the
    /// default for a request whose body does not state one.
    pub reserve: u64,
    /// `reserve: { from_json: <field>, default: <n> }`: the reserve is read from this top-level
    /// field of the request's JSON body (a non-negative integer, clamped to 1..=min(max,
    /// burst)); `None`: `reserve` always.
    pub from_json: Option<String>,
    /// Where the count is read from the backend's response.
    pub source: UsageSource,
    /// A larger reported count is clamped to this (≥ reserve).
    pub max: u64,
    /// When the whole reserve is given back.
    pub refund_on: RefundOn,
    /// Units charged for a stream that ends without a count, or a body that cannot be read
    /// (`uncounted`, ≤ max; default `max`).
    pub uncounted: u64,
    /// `from: { openai: true }` with `include_usage` on (the default): a streamed request's
    /// JSON body gets `stream_options.include_usage: true` on its way to the backend.
    pub include_usage: bool,
}

/// Where the backend's response states the count it used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageSource {
    /// A response header with a decimal count (name stored lower case).
    Header(String),
    /// `usage.total_tokens` of a JSON body or of an SSE stream's event carrying `usage`.
    OpenAi,
}

/// `refund_on` (of a usage budget, a tier or a rule): the outcomes that give the debit back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RefundOn {
    /// The backend answered with a 5xx status.
    pub backend_5xx: bool,
    /// No backend answered (connect failure, timeout, no healthy backend). A refusal the
    /// gateway makes itself after admission always refunds.
    pub upstream_unavailable: bool,
    /// The client left before the response head was sent.
    pub client_gone_before_response: bool,
}

/// `tiers.<name>.pool`: a token bucket shared by all tenants of a tier.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSettings {
    /// The pool bucket (`limit`, `per`, `burst`; burst defaults to limit).
    pub rate: Rate,
    /// Fraction of the pool one tenant may drain (0 < s ≤ 1, default 0.5): the tenant's share
    /// bucket is `max_share` × the pool's limit and burst.
    pub max_share: f64,
}

/// How a tier decides: its main limit's algorithm and the calendar quotas decided with it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TierPolicy {
    pub algorithm: Algorithm,
    /// `leaky_bucket` only: longest delay until a request's slot, ms (0 = refuse instead).
    pub max_delay_ms: u64,
    /// Calendar quotas, in file order, at most one per period.
    pub quotas: Vec<CalendarQuota>,
    /// Opt-in token leasing (`lease`; token_bucket tiers without quotas only).
    pub lease: Option<LeaseSettings>,
}

/// `tiers.<name>.lease`: an instance takes up to `tokens` from the tenant's bucket in one
/// script call and admits locally from them for at most `max_hold_ms` (docs/DESIGN.md 4c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSettings {
    /// Tokens taken per lease call (1..=the tier's burst).
    pub tokens: u64,
    /// How long a lease may be used, ms (1 ms..=1 min); unused tokens then go back.
    pub max_hold_ms: u64,
}
