//! Usage cost (`tiers.<name>.usage` and `limits[].usage`, docs/DESIGN.md 4e "Usage cost",
//! docs/usage-cost.md): reserve at admission, settle or refund when the response ends.
//!
//! [`entry`] is the tier's usage budget's entry in the all-or-nothing policy call (its debit is
//! the reserve, [`reserve_for`]); a rule's is [`entry_at`] its own key. An admitted request
//! carries a [`UsageMeter`] per budget reserved: the response head and body pass
//! through it (read only, never held), and when the request ends [`UsageMeter::settle`] decides
//! with the pure [`settlement`] and spawns the one settlement call, so the response never
//! waits for it. Every settlement is counted in `tollgate_usage_settlements_total{tier,outcome}`
//! (`tier`: the tier, or the limit rule).

use crate::config::{FailurePolicy, UsageBudget, UsageSource};
use crate::http::content_coding::{Coding, Decoding};
use crate::http::request_json::top_level_count;
use crate::http::usage_count::{classify, BodyScan, Count};
use crate::limit::algorithm::Algorithm;
use crate::observe::metrics::METRICS;
use crate::quota::policy_script::LimitEntry;
use crate::quota::rules::RuleCall;
use crate::quota::QuotaService;
use crate::store::redis::keys::usage_key;
use std::sync::Arc;

/// The usage budget's entry (a token bucket under the tenant's hash tag whose debit is
/// `reserve`, see [`reserve_for`]), decided with the tier's other policies in one call.
pub fn entry(
    prefix: &str,
    tenant: &str,
    budget: &UsageBudget,
    reserve: u64,
    shadow: bool,
    on_failure: FailurePolicy,
) -> RuleCall {
    let key = usage_key(prefix, tenant, &budget.name);
    entry_at(key, budget, reserve, shadow, on_failure)
}

/// A usage budget's entry at `key` (a token bucket whose debit is `reserve`): the tier's
/// ([`entry`]) or a limit rule's (`limits[].usage`, under the rule bucket's hash tag).
pub fn entry_at(
    key: String,
    budget: &UsageBudget,
    reserve: u64,
    shadow: bool,
    on_failure: FailurePolicy,
) -> RuleCall {
    RuleCall {
        name: budget.policy.as_str().into(),
        entry: LimitEntry {
            key: key.into(),
            algorithm: Algorithm::TokenBucket,
            rate: budget.rate,
            cost: reserve,
            max_delay_ms: 0,
            shadow,
        },
        on_failure,
    }
}

/// The reserve of one request: with `reserve: { from_json: <field>, .. }` the field of the
/// request's JSON `body` (when it was read and states a non-negative integer), clamped to at
/// least 1 (so a spent budget admits nothing) and at most `max` and the burst (so a full
/// bucket can always admit it); otherwise the budget's `reserve` (the default).
pub fn reserve_for(budget: &UsageBudget, body: Option<&[u8]>) -> u64 {
    let stated = budget
        .from_json
        .as_deref()
        .zip(body)
        .and_then(|(field, body)| top_level_count(body, field));
    match stated {
        Some(n) => n.clamp(1, budget.max.min(budget.rate.burst).max(1)),
        None => budget.reserve,
    }
}

/// How the request ended, as far as the usage is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The response was sent whole.
    Complete,
    /// No response head came from the backend, and the client had left.
    ClientGoneBeforeResponse,
    /// No response head came from the backend (it could not be reached or timed out).
    UpstreamUnavailable,
    /// The response was cut after its head (the client left, or the backend broke off).
    CutMidStream,
    /// The gateway answered the request itself after admission (a later refusal: a full
    /// upstream, a body over the route's limit, a body read timeout), before any response head
    /// from the backend.
    Refused,
}

/// What the response said about its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A count, as stated.
    Count(Count),
    /// No count in a response that is not a stream (a JSON body, or no count header).
    Nothing,
    /// No count in a streamed (`text/event-stream`) response.
    NothingInStream,
    /// The body could not be read: a content coding not decoded, or a coded body that does not
    /// decode.
    Unreadable,
}

/// What a settlement did (the `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// The reported count replaced the reserve.
    Settled,
    /// The reported count was above `max` (or too large to read) and counted as `max`.
    Clamped,
    /// No count: the reserve is kept.
    Missing,
    /// A negative or unreadable count: the reserve is kept.
    Invalid,
    /// A `refund_on` case: the whole reserve is given back.
    Refunded,
    /// Cut mid-stream before any count: the reserve is kept.
    ClientGone,
    /// A stream without a count: charged `uncounted`.
    Uncounted,
    /// A body that could not be read: charged `uncounted`.
    Unreadable,
}

impl Settlement {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Settlement::Settled => "settled",
            Settlement::Clamped => "clamped",
            Settlement::Missing => "missing",
            Settlement::Invalid => "invalid",
            Settlement::Refunded => "refunded",
            Settlement::ClientGone => "client_gone",
            Settlement::Uncounted => "uncounted",
            Settlement::Unreadable => "unreadable",
        }
    }
}

/// The settlement of a request that reserved `budget.reserve` units: its outcome and the units
/// to debit beyond the reserve (negative: to give back). `status` is the backend's response
/// status (none when no head came), `found` what its response said of the count.
pub fn settlement(
    budget: &UsageBudget,
    status: Option<u16>,
    found: Found,
    ending: Ending,
) -> (Settlement, i64) {
    let reserve = budget.reserve as i64;
    let refund = (Settlement::Refunded, -reserve);
    let keep = |s| (s, 0);
    let r = &budget.refund_on;
    match ending {
        Ending::ClientGoneBeforeResponse if r.client_gone_before_response => return refund,
        Ending::ClientGoneBeforeResponse => return keep(Settlement::ClientGone),
        Ending::UpstreamUnavailable if r.upstream_unavailable => return refund,
        Ending::UpstreamUnavailable => return keep(Settlement::Missing),
        Ending::Refused => return refund,
        _ => {}
    }
    if r.backend_5xx && status.is_some_and(|s| (500..600).contains(&s)) {
        return refund;
    }
    let (max, uncounted) = (budget.max as i64, budget.uncounted as i64);
    match found {
        Found::Count(Count::Units(n)) if n > budget.max => (Settlement::Clamped, max - reserve),
        Found::Count(Count::Units(n)) => (Settlement::Settled, n as i64 - reserve),
        Found::Count(Count::Huge) => (Settlement::Clamped, max - reserve),
        Found::Count(Count::Negative | Count::Invalid) => keep(Settlement::Invalid),
        // Whether the stream ended or was cut: the client must not choose what it costs by
        // leaving out the count, or by leaving just before it.
        Found::NothingInStream => (Settlement::Uncounted, uncounted - reserve),
        Found::Unreadable => (Settlement::Unreadable, uncounted - reserve),
        Found::Nothing if ending == Ending::CutMidStream => keep(Settlement::ClientGone),
        Found::Nothing => keep(Settlement::Missing),
    }
}

/// How the response body is read for its count.
enum BodyRead {
    /// Scanned as it passes (no content coding).
    Plain(BodyScan),
    /// Decoded as it passes, the decoded bytes scanned.
    Coded(Box<Decoding<BodyScan>>),
    /// A coding not decoded, or a coded body that failed to decode.
    Unreadable,
}

impl BodyRead {
    /// A reader of a body with this `Content-Type` and these `Content-Encoding` values.
    fn new<'a>(content_type: Option<&[u8]>, codings: impl Iterator<Item = &'a [u8]>) -> BodyRead {
        let scan = BodyScan::for_content_type(content_type);
        match Coding::of(codings) {
            Coding::Identity => BodyRead::Plain(scan),
            Coding::Unsupported => BodyRead::Unreadable,
            coding => match Decoding::new(coding, scan) {
                Ok(d) => BodyRead::Coded(Box::new(d)),
                Err(_) => BodyRead::Unreadable,
            },
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        match self {
            BodyRead::Plain(scan) => scan.feed(bytes),
            BodyRead::Coded(d) => {
                if d.write(bytes).is_err() {
                    *self = BodyRead::Unreadable;
                }
            }
            BodyRead::Unreadable => {}
        }
    }

    /// The body ended: `whole` when it ended as the backend meant it to (a truncated coding then
    /// makes the body unreadable; cut short, what was decoded counts).
    fn finish(&mut self, whole: bool) {
        match self {
            BodyRead::Plain(scan) => scan.finish(),
            BodyRead::Coded(d) => {
                let finished = d.finish();
                d.sink_mut().finish();
                if finished.is_err() && whole {
                    *self = BodyRead::Unreadable;
                }
            }
            BodyRead::Unreadable => {}
        }
    }

    fn found(&self) -> Found {
        let scan = match self {
            BodyRead::Plain(scan) => scan,
            BodyRead::Coded(d) => d.sink(),
            BodyRead::Unreadable => return Found::Unreadable,
        };
        match (scan.found(), scan.is_stream()) {
            (Some(count), _) => Found::Count(count),
            (None, true) => Found::NothingInStream,
            (None, false) => Found::Nothing,
        }
    }
}

/// One admitted request's reserve, and what its response has said so far.
pub struct UsageMeter {
    quota: Arc<QuotaService>,
    tier: String,
    key: String,
    budget: UsageBudget,
    status: Option<u16>,
    header: Option<Count>,
    body: Option<BodyRead>,
    ended: bool,
}

impl UsageMeter {
    /// The meter of a request whose reserve `call` (its [`entry`]) was debited in Redis;
    /// `owner` (the tier, or the limit rule) labels its settlement.
    pub fn new(
        quota: Arc<QuotaService>,
        owner: &str,
        budget: &UsageBudget,
        call: &RuleCall,
    ) -> Self {
        UsageMeter {
            quota,
            tier: owner.to_string(),
            key: call.entry.key.to_string(),
            // Settled against this request's own reserve (read from its body or the default).
            budget: UsageBudget {
                reserve: call.entry.cost,
                ..budget.clone()
            },
            status: None,
            header: None,
            body: None,
            ended: false,
        }
    }

    /// The backend's response head: its status, and its count header or body scanner.
    pub fn head(&mut self, status: u16, headers: &http::HeaderMap) {
        self.status = Some(status);
        match &self.budget.source {
            UsageSource::Header(name) => {
                self.header = headers.get(name.as_str()).map(|v| classify(v.as_bytes()));
            }
            UsageSource::OpenAi => {
                let ct = headers
                    .get(http::header::CONTENT_TYPE)
                    .map(|v| v.as_bytes());
                let codings = headers
                    .get_all(http::header::CONTENT_ENCODING)
                    .iter()
                    .map(|v| v.as_bytes());
                self.body = Some(BodyRead::new(ct, codings));
            }
        }
    }

    /// A chunk of the response body on its way to the client (read, never held).
    pub fn body(&mut self, chunk: Option<&[u8]>, end_of_stream: bool) {
        if let (Some(scan), Some(bytes)) = (&mut self.body, chunk) {
            scan.feed(bytes);
        }
        if end_of_stream {
            if let Some(read) = &mut self.body {
                read.finish(true);
            }
            self.ended = true;
        }
    }

    /// How a request ends that the gateway answered itself: [`Ending::Refused`] before the
    /// backend's response head, cut mid-stream after it.
    pub fn refused(&self) -> Ending {
        match self.status {
            None => Ending::Refused,
            Some(_) => Ending::CutMidStream,
        }
    }

    /// How the request ended: `client_gone` when it ended on a client error.
    pub fn ending(&self, failed: bool, client_gone: bool) -> Ending {
        match (self.status, self.ended || !failed) {
            (None, _) if client_gone => Ending::ClientGoneBeforeResponse,
            (None, _) => Ending::UpstreamUnavailable,
            (Some(_), true) => Ending::Complete,
            (Some(_), false) => Ending::CutMidStream,
        }
    }

    /// Settles the reserve off the response path: decides, counts, and spawns the settlement
    /// call (nothing to send when the reserve stands as debited).
    pub fn settle(mut self, ending: Ending) {
        if let (Some(read), Ending::CutMidStream) = (&mut self.body, ending) {
            // A count whose number was the last byte received.
            read.finish(false);
        }
        let found = match (self.header, &self.body) {
            (Some(count), _) => Found::Count(count),
            (None, Some(read)) => read.found(),
            (None, None) => Found::Nothing,
        };
        let (outcome, delta) = settlement(&self.budget, self.status, found, ending);
        let tier = self.tier;
        if delta == 0 {
            METRICS
                .usage_settlements
                .with_label_values(&[tier.as_str(), outcome.as_str()])
                .inc();
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (quota, key, rate) = (self.quota, self.key, self.budget.rate);
        crate::pending::spawn(&runtime, async move {
            let label = match quota.settle_usage(key, &rate, delta).await {
                Ok(s) => {
                    tracing::debug!(tier = %tier, delta, level = s.level, "usage settled");
                    outcome.as_str()
                }
                Err(e) => {
                    tracing::warn!(tier = %tier, delta, fault = e.as_str(), "usage not settled; the reserve stands");
                    "store_failed"
                }
            };
            METRICS
                .usage_settlements
                .with_label_values(&[tier.as_str(), label])
                .inc();
        });
    }
}

#[cfg(test)]
mod tests;
