//! Costs read from the request (`routes[].cost` and `limits[].cost` written as
//! `{ from | header | json | query, default, min, max }`, docs/rules.md#costs-read-from-the-request):
//! what a request states, bounded and defaulted, and the refusals of a cost that cannot be
//! charged. Pure: the proxy reads the body ([`BodyState`]) and debits the result with the
//! request's other policies, all or nothing.

use super::tenant::Plan;
use super::{Layer, Outcome, Rejection};
use crate::config::{CostFrom, CostSource, RouteSettings, RuleCost};
use crate::http::request_json::{count_at, decimal_count, Stated};
use crate::limit::Rate;
use crate::policy::rules::{query_value, AppliedRule};
use crate::quota::rules::RuleCall;
use crate::response::Problem;
use http::HeaderMap;
use serde_json::json;

/// The request body as far as a cost needs it.
#[derive(Debug, Clone, Copy)]
pub enum BodyState<'a> {
    /// Not read (no cost reads it, or its `Content-Length` sufficed).
    NotRead,
    /// Read whole (`None`: the request has no body).
    Whole(Option<&'a [u8]>),
    /// Longer than the `limit` bytes that may be buffered before the decision.
    TooLarge { limit: usize },
}

/// What a cost reads of a request.
#[derive(Debug, Clone, Copy)]
pub struct CostInput<'a> {
    pub headers: &'a HeaderMap,
    /// The raw query (after `?`), if any.
    pub query: Option<&'a str>,
    /// The body's declared length (`Content-Length` without `Transfer-Encoding`), bytes.
    pub declared_len: Option<u64>,
    pub body: BodyState<'a>,
}

/// A cost charged: the tokens, and why the `default` was charged when it was
/// (`absent`, `malformed`: the reason label of `tollgate_cost_defaulted_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    pub tokens: u64,
    pub defaulted: Option<&'static str>,
}

/// Why a stated cost cannot be charged (the request is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostFault {
    /// The request states more than `max` (413).
    AboveMax { stated: u64, max: u64 },
    /// The header or query parameter is given more than once (400).
    Repeated,
    /// The JSON body is longer than `limit` bytes (413).
    BodyTooLarge { limit: usize },
    /// A body without `Content-Length` is longer than `limit` bytes (411).
    LengthRequired { limit: usize },
}

/// Does reading `source` need the body read, given its declared length?
pub fn needs_body(source: &CostSource, declared_len: Option<u64>) -> bool {
    match source {
        CostSource::Json(_) => true,
        CostSource::RequestBytes => declared_len.is_none(),
        _ => false,
    }
}

/// The tokens `from` charges for `input`: the stated value, at least `min`; `default` when
/// absent or malformed. Errors: a value above `max`, a repeated field, a body that could not
/// be read.
pub fn charge(from: &CostFrom, input: &CostInput<'_>) -> Result<Charge, CostFault> {
    let stated = match &from.source {
        CostSource::RequestBytes => match (input.declared_len, input.body) {
            (Some(n), _) => Stated::Count(n),
            (None, BodyState::Whole(b)) => Stated::Count(b.map_or(0, |b| b.len() as u64)),
            (None, BodyState::TooLarge { limit }) => {
                return Err(CostFault::LengthRequired { limit })
            }
            (None, BodyState::NotRead) => Stated::Count(0),
        },
        CostSource::Json(path) => match input.body {
            BodyState::Whole(Some(b)) => count_at(b, path),
            BodyState::Whole(None) | BodyState::NotRead => Stated::Absent,
            BodyState::TooLarge { limit } => return Err(CostFault::BodyTooLarge { limit }),
        },
        CostSource::Header(name) => {
            let mut values = input.headers.get_all(name).iter();
            match (values.next(), values.next()) {
                (None, _) => Stated::Absent,
                (Some(v), None) => decimal_count(v.as_bytes()),
                (Some(_), Some(_)) => return Err(CostFault::Repeated),
            }
        }
        CostSource::Query(name) => match input.query.map(|q| query_value(q, name)) {
            None | Some(Ok(None)) => Stated::Absent,
            Some(Ok(Some(v))) => decimal_count(&v),
            Some(Err(_)) => return Err(CostFault::Repeated),
        },
    };
    let defaulted = |reason| Charge {
        tokens: from.default,
        defaulted: Some(reason),
    };
    Ok(match stated {
        Stated::Count(v) if from.max.is_some_and(|m| v > m) => {
            let max = from.max.unwrap_or(u64::MAX);
            return Err(CostFault::AboveMax { stated: v, max });
        }
        Stated::Count(v) => Charge {
            tokens: v.max(from.min),
            defaulted: None,
        },
        Stated::Absent => defaulted("absent"),
        Stated::Malformed => defaulted("malformed"),
    })
}

/// The refusal of `fault`, for the cost of `owner` (`route "upload"`, `limit rule "bytes"`)
/// read from `source`. No `Retry-After`: the same request would be refused again.
pub fn refusal(fault: CostFault, owner: &str, source: &CostSource) -> Rejection {
    let spelled = source.spelling();
    let (status, reason, outcome, detail) = match fault {
        CostFault::AboveMax { stated, max } => (
            413,
            "cost-above-max",
            Outcome::Rejected,
            format!("this request states a cost of {stated} ({spelled}), more than the {max} the cost of {owner} allows"),
        ),
        CostFault::Repeated => (
            400,
            "ambiguous-cost",
            Outcome::Rejected,
            format!("the cost of {owner} is read from {spelled}, which this request gives more than once; send it once"),
        ),
        CostFault::BodyTooLarge { limit } => (
            413,
            "cost-body-too-large",
            Outcome::BodyTooLarge,
            format!("the cost of {owner} is read from the JSON body ({spelled}), which must be at most {limit} bytes"),
        ),
        CostFault::LengthRequired { limit } => (
            411,
            "cost-length-required",
            Outcome::BodyTooLarge,
            format!("the cost of {owner} is the body's length: a body over {limit} bytes needs a Content-Length"),
        ),
    };
    let p = Problem::status(status, detail)
        .with("reason", json!(reason))
        .with("cost-source", json!(spelled));
    Rejection::new(Layer::Tenant, outcome, p)
}

/// The refusal of a request costing `cost` tokens, more than policy `name`'s bucket (`rate`)
/// can ever hold: 413 with `"reason": "cost-above-burst"`, the policy in `violated-policies`,
/// and no `Retry-After` (no wait would admit it). `None` when it fits.
pub fn above_burst(name: &str, rate: &Rate, cost: u64) -> Option<Rejection> {
    if cost <= rate.burst {
        return None;
    }
    let detail = format!(
        "this request costs {cost} tokens, more than the {} tokens policy \"{name}\" can ever hold",
        rate.burst
    );
    let p = Problem::status(413, detail)
        .with("reason", json!("cost-above-burst"))
        .with("violated-policies", json!([name]));
    Some(Rejection::new(Layer::Tenant, Outcome::Rejected, p))
}

/// The cost `rule` reads from the request, if any (a concurrency rule's cost is ignored).
fn rule_from<'r>(a: &AppliedRule<'r>) -> Option<&'r CostFrom> {
    match &a.rule.cost {
        Some(RuleCost::From(f)) if a.rule.max_in_flight.is_none() => Some(f),
        _ => None,
    }
}

/// Does some cost of the request (its route's, an applied rule's) read from it?
pub fn reads(route: Option<&RouteSettings>, rules: &[(AppliedRule<'_>, RuleCall)]) -> bool {
    route.is_some_and(|r| r.cost_from.is_some())
        || rules.iter().any(|(a, _)| rule_from(a).is_some())
}

/// Must the body be read for the request's costs, given its declared length?
pub fn body_wanted(
    route: Option<&RouteSettings>,
    rules: &[(AppliedRule<'_>, RuleCall)],
    declared_len: Option<u64>,
) -> bool {
    route
        .and_then(|r| r.cost_from.as_ref())
        .into_iter()
        .chain(rules.iter().filter_map(|(a, _)| rule_from(a)))
        .any(|f| needs_body(&f.source, declared_len))
}

/// A request's costs ([`apply`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Costs {
    /// The tokens the route's cost charges the tier (and rules without a cost of their own).
    pub route: u64,
    /// Some cost was read from the request.
    pub read: bool,
    /// The costs charged their `default`: owner (`route:<id>`, `rule:<name>`) and reason
    /// (`absent`, `malformed`), for `tollgate_cost_defaulted_total`.
    pub defaulted: Vec<(String, &'static str)>,
}

/// The request's costs (docs/rules.md#costs-read-from-the-request), read from `input`: the
/// route's tokens, returned, and each applied rate rule's, written into its call (a rule
/// without a cost of its own pays the route's). The proxy and `POST /v1/explain` both charge
/// through this. Errors: the refusal of a cost that cannot be charged ([`refusal`]).
pub fn apply(
    route: Option<&RouteSettings>,
    rules: &mut [(AppliedRule<'_>, RuleCall)],
    input: &CostInput<'_>,
) -> Result<Costs, Rejection> {
    let mut defaulted = Vec::new();
    let mut charge = |f: &CostFrom, owner: String, spelled: String| match charge(f, input) {
        Ok(c) => {
            if let Some(reason) = c.defaulted {
                defaulted.push((owner, reason));
            }
            Ok(c.tokens)
        }
        Err(fault) => Err(refusal(fault, &spelled, &f.source)),
    };
    let cost = match route {
        Some(r) => match &r.cost_from {
            Some(f) => charge(f, format!("route:{}", r.id), format!("route \"{}\"", r.id))?,
            None => r.cost,
        },
        None => 1,
    };
    for (a, call) in rules.iter_mut() {
        if a.rule.max_in_flight.is_some() {
            continue;
        }
        call.entry.cost = match &a.rule.cost {
            None => cost,
            Some(RuleCost::Fixed(n)) => *n,
            Some(RuleCost::From(f)) => {
                let name = &a.rule.name;
                charge(f, format!("rule:{name}"), format!("limit rule \"{name}\""))?
            }
        };
    }
    Ok(Costs {
        route: cost,
        read: reads(route, rules),
        defaulted,
    })
}

/// The refusal of a request whose cost exceeds the burst of an enforced policy it is charged
/// to (the tier's in `plan`, or a rule's): no wait would admit it ([`above_burst`]). Shadow
/// policies, and every policy on a shadow route, are not checked.
pub fn above_any_burst(
    shadow_route: bool,
    plan: Option<&Plan<'_>>,
    rules: &[(AppliedRule<'_>, RuleCall)],
) -> Option<Rejection> {
    if shadow_route {
        return None;
    }
    let tier = plan
        .filter(|p| !p.limits.tier.mode.is_shadow())
        .and_then(|p| above_burst(&p.limits.tier.name, &p.limits.rate, p.cost));
    tier.or_else(|| {
        rules
            .iter()
            .filter(|(a, c)| a.rule.max_in_flight.is_none() && !c.entry.shadow)
            .find_map(|(a, c)| above_burst(&a.rule.name, &a.rate, c.entry.cost))
    })
}

#[cfg(test)]
mod tests;
