//! Stage 4 with limit rules: when rules (`limits:`) apply to a request, its tier's policies and
//! every applied rule are decided together, all or nothing (docs/DESIGN.md 4e "Rules").
//!
//! [`plan`] (pure) says which rules apply and where their buckets are, [`run`] asks the quota
//! store, [`judge`] (pure) turns the answer into the tenant stage's [`Verdict`]: every applied
//! policy in `RateLimit-Policy`, the least room in `RateLimit`, the longest wait in
//! `Retry-After`, the refusing names in `violated-policies`. Shadow rules are decided, counted
//! (`tollgate_rule_decisions_total{outcome="shadow_limited"}`) and logged, never refuse, and
//! are not listed in the headers.

use super::tenant::{self, Plan, Verdict};
use super::usage;
use super::{Layer, Outcome, Rejection};
use crate::config::{LimitRule, UsageBudget};
use crate::observe::series::RuleSeries;
use crate::observe::tier_fit::TierFit;
use crate::policy::rules::memo::{Prepared, MAX_FINGERPRINT_BYTES};
use crate::policy::rules::{self as rules, AppliedRule, PartFault, RequestView};
use crate::quota::policy_script::LimitEntry;
use crate::quota::rules::{Combined, RuleCall, RuleOutcome};
use crate::quota::QuotaService;
use crate::response::{self, Problem, QuotaHeaders, QuotaReport, ReportKind};
use crate::snapshot::Snapshot;
use crate::store::redis::keys::{inflight_rule_key, rule_key, rule_usage_key};
use serde_json::json;
use std::sync::Arc;

/// The rules that apply to a request, with their quota calls, and the kept plan they come
/// from.
#[derive(Debug, Default)]
pub struct Planned<'a> {
    pub rules: Vec<(AppliedRule<'a>, RuleCall)>,
    /// The memo's plan these rules were copied from (`None`: built for this request alone,
    /// under `multi_region:` or without rules).
    pub prepared: Option<Arc<Prepared>>,
}

/// The rules that apply to `req`, with their quota calls (costing `cost` tokens each; a
/// concurrency rule's entry key is its lease set). Empty when no rule's `match` holds (or no
/// rules are configured). Outside `multi_region:` the plan is kept in the snapshot's memo
/// ([`rules::memo`]) and reused by requests with the same fingerprint
/// ([`rules::fingerprint`]). Errors: 400 when a rule with `missing: refuse` lacks a key part.
pub fn plan<'a>(
    snap: &'a Snapshot,
    req: &RequestView<'_>,
    cost: u64,
) -> Result<Planned<'a>, Rejection> {
    if snap.quota.is_none() || snap.config.limits.is_empty() {
        return Ok(Planned::default());
    }
    let limits = &snap.config.limits;
    let mut fingerprint = Vec::with_capacity(128);
    fingerprint.extend_from_slice(&cost.to_le_bytes());
    let keep = snap.region.is_none()
        && rules::fingerprint(limits, req, &mut fingerprint)
        && fingerprint.len() <= MAX_FINGERPRINT_BYTES;
    if !keep {
        return Ok(Planned {
            rules: build(snap, req, cost, true)?,
            prepared: None,
        });
    }
    let prepared = match snap.rule_plans.get(&fingerprint) {
        Some(p) => p,
        None => {
            let kept = build(snap, req, cost, false)?
                .into_iter()
                .map(|(a, call)| (a.index, a.key, call))
                .collect();
            snap.rule_plans.insert(&fingerprint, Prepared::new(kept))
        }
    };
    let rules = prepared
        .rules
        .iter()
        .map(|(index, key, call)| {
            let a = AppliedRule {
                rule: &limits[*index],
                index: *index,
                key: key.clone(),
                rate: call.entry.rate,
                // Kept plans exist only outside `multi_region:`: the rule's own cap.
                max_in_flight: limits[*index].max_in_flight,
            };
            (a, call.clone())
        })
        .collect();
    let mut planned = Planned {
        rules,
        prepared: Some(prepared),
    };
    // The kept plan holds the file's numbers: a key with a live override gets its own, and
    // the kept calls (which carry the file's) are not reused for this request.
    if let Some(overrides) = snap.rule_key_overrides() {
        let mut any = false;
        for (a, call) in &mut planned.rules {
            if let Some(rate) = Snapshot::live_rule_rate(overrides, a.rule, &a.key, a.rate) {
                (a.rate, call.entry.rate, any) = (rate, rate, true);
            }
        }
        if any {
            planned.prepared = None;
        }
    }
    Ok(planned)
}

/// [`plan`]'s rules built for `req` (the memo's miss), with the live overrides of their keys
/// when `live` (never for a plan the memo keeps: overrides change under it).
fn build<'a>(
    snap: &'a Snapshot,
    req: &RequestView<'_>,
    cost: u64,
    live: bool,
) -> Result<Vec<(AppliedRule<'a>, RuleCall)>, Rejection> {
    let Some(quota) = &snap.quota else {
        return Ok(Vec::new());
    };
    let region = snap.region.as_deref();
    let share = region.map(|r| {
        move |tenant: Option<&str>| tenant.map_or_else(|| r.static_share(), |t| r.share(t))
    });
    let share = share.as_ref().map(|f| f as &rules::ShareOf);
    let applied = rules::applicable(&snap.config.limits, req, share).map_err(|m| {
        let (detail, reason) = match m.why {
            PartFault::Missing => (
                format!(
                    "limit rule \"{}\" is keyed by {}, which this request lacks",
                    m.rule, m.part
                ),
                "missing-limit-key",
            ),
            PartFault::Repeated => (
                format!(
                    "limit rule \"{}\" is keyed by {}, which this request gives more than once; send it once",
                    m.rule, m.part
                ),
                "ambiguous-limit-key",
            ),
        };
        let p = Problem::status(400, detail)
            .with("reason", json!(reason))
            .with("policy", json!(m.rule))
            .with("key-part", json!(m.part));
        Rejection::new(Layer::Tenant, Outcome::Rejected, p)
    })?;
    let prefix = &quota.settings.key_prefix;
    let overrides = snap.rule_key_overrides().filter(|_| live);
    Ok(applied
        .into_iter()
        .map(|mut a| {
            let r = a.rule;
            if let Some(o) = overrides {
                let base = r.rate_for(req.tier);
                if let Some(rate) = Snapshot::live_rule_rate(o, r, &a.key, base) {
                    // This region's share of the overridden bucket, as of the file's.
                    a.rate = match &share {
                        Some(s) => s(req.tenant.filter(|_| r.per_tenant())).apply(rate),
                        None => rate,
                    };
                }
            }
            let tenant = req.tenant.filter(|_| r.per_tenant());
            let key = match r.max_in_flight {
                Some(_) => inflight_rule_key(prefix, &r.name, tenant, &a.key),
                None => rule_key(prefix, &r.name, r.algorithm, tenant, &a.key),
            };
            let call = RuleCall {
                name: r.name.as_str().into(),
                entry: LimitEntry {
                    key: key.into(),
                    algorithm: r.algorithm,
                    rate: a.rate,
                    cost,
                    max_delay_ms: 0,
                    shadow: r.mode.is_shadow(),
                },
                on_failure: r.on_failure,
            };
            (a, call)
        })
        .collect())
}

/// The usage budgets (`limits[].usage`) of the applied `rules`: for each, its rule's name, the
/// budget and its reserve's entry (under the rule bucket's hash tag, or the tenant's for a rule
/// keyed by `tenant`; costing [`usage::reserve_for`] of the request's `body`), in rule order.
pub fn usage_calls<'a>(
    prefix: &str,
    rules: &[(AppliedRule<'a>, RuleCall)],
    tenant: Option<&str>,
    body: Option<&[u8]>,
) -> Vec<(&'a str, &'a UsageBudget, RuleCall)> {
    rules
        .iter()
        .filter_map(|(a, call)| {
            let r: &'a LimitRule = a.rule;
            let u = r.usage.as_ref()?;
            let t = tenant.filter(|_| r.per_tenant());
            let key = rule_usage_key(prefix, &r.name, r.algorithm, t, &a.key, &u.name);
            let reserve = usage::reserve_for(u, body);
            let entry = usage::entry_at(key, u, reserve, call.entry.shadow, call.on_failure);
            Some((r.name.as_str(), u, entry))
        })
        .collect()
}

/// Decides the tier's policies (`tier`, when one applies) and `rules` in the quota store, then
/// [`judge`]s. `status` is the refusal status; `shadow` (a shadow route) makes any refusal a
/// shadow one. `prepared`: the kept plan `rules` are exactly the rules of, whose script calls
/// are then built once and reused (not with `usage` entries, which differ per request).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    quota: &QuotaService,
    series: &RuleSeries,
    fit: &TierFit,
    tier: Option<&Plan<'_>>,
    rules: &[(AppliedRule<'_>, RuleCall)],
    prepared: Option<&Prepared>,
    usage: &[&RuleCall],
    status: u16,
    shadow: bool,
) -> Verdict {
    let request = tier.map(|p| p.request());
    let tier_shadow = tier.is_some_and(|p| p.limits.tier.mode.is_shadow());
    let asked = request.as_ref().map(|q| (q, tier_shadow));
    let calls: Vec<&RuleCall> = rules
        .iter()
        .map(|(_, c)| c)
        .chain(usage.iter().copied())
        .collect();
    // Boxed, as the tenant stage's call (see `tenant::run`).
    let prepared = prepared.filter(|_| usage.is_empty()).map(|p| &p.calls);
    let combined = Box::pin(quota.decide_with_rules(asked, &calls, prepared)).await;
    if let (Some(p), Some(o)) = (tier, &combined.tier) {
        let tier = p.limits.tier.name.as_str();
        o.record_fit(fit, p.tenant, tier, crate::observe::tier_fit::unix_ms());
    }
    judge(series, tier, rules, usage, combined, status, shadow)
}

/// The verdict on `combined` (each rule's decision counted in `series`): an admission with
/// every enforced policy's headers, a 429-style (`status`) `quota-exceeded` refusal naming the
/// refusing policies, or a 503 when a refusing policy failed closed; shadowed when `shadow`. A shadow tier's own refusal of an admitted
/// request is a shadow refusal, as without rules. `usage` are the usage budget entries (the
/// tier's, then the rules', docs/DESIGN.md 4e "Usage cost"), decided after the rules; their
/// reports follow theirs.
#[allow(clippy::too_many_arguments)]
pub fn judge(
    series: &RuleSeries,
    tier: Option<&Plan<'_>>,
    rules: &[(AppliedRule<'_>, RuleCall)],
    usage: &[&RuleCall],
    combined: Combined,
    status: u16,
    shadow: bool,
) -> Verdict {
    let mut reports = Vec::with_capacity(rules.len() + usage.len());
    let mut closed = None;
    let mut refused_rules = Vec::new();
    for (i, ((a, call), o)) in rules.iter().zip(&combined.rules).enumerate() {
        series.inc(a.index, &call.name, rule_label(o, call.entry.shadow));
        if matches!(o, RuleOutcome::Decided { decision, .. } if !decision.admitted && !call.entry.shadow)
        {
            refused_rules.push(i);
        }
        match *o {
            RuleOutcome::Decided { decision, .. } if call.entry.shadow && !decision.admitted => {
                tracing::info!(rule = %call.name, remaining = decision.remaining, "shadow limit rule would refuse");
            }
            RuleOutcome::Decided { .. } if call.entry.shadow => {}
            RuleOutcome::Decided {
                decision,
                rate,
                degraded,
            } => reports.push(report(call, ReportKind::Rule, decision, rate, degraded)),
            RuleOutcome::FailedClosed { retry_after_s } if !call.entry.shadow => {
                closed = closed.max(Some(retry_after_s));
            }
            _ => {}
        }
    }
    let mut usage_reserved = vec![false; usage.len()];
    let usage_outcomes = combined.rules.iter().skip(rules.len());
    for ((call, o), reserved) in usage.iter().zip(usage_outcomes).zip(&mut usage_reserved) {
        match *o {
            RuleOutcome::Decided {
                decision,
                rate,
                degraded,
            } if !call.entry.shadow || decision.admitted => {
                *reserved = decision.admitted && !degraded;
                reports.push(report(call, ReportKind::Usage, decision, rate, degraded));
            }
            RuleOutcome::FailedClosed { retry_after_s } if !call.entry.shadow => {
                closed = closed.max(Some(retry_after_s));
            }
            _ => {}
        }
    }
    let tier_outcome = combined.tier.clone();
    let debited_at = combined.debited_at;
    let mut tier_verdict = match (tier, tier_outcome) {
        (Some(p), Some(o)) => {
            let tier_shadow = p.limits.tier.mode.is_shadow();
            Some(tenant::judge(p, status, o, None, shadow || tier_shadow))
        }
        _ => None,
    };
    let degraded = reports.iter().any(|(_, _, d)| *d);
    // The tier's headers move into the merged ones (its verdict takes those back below).
    let tier_headers = tier_verdict.as_mut().and_then(|v| v.headers.take());
    let headers = merge_headers(tier_headers, reports);
    if combined.admitted {
        let mut v = match tier_verdict {
            // The tier's verdict stands (an admission, a delay, or a shadow tier's refusal).
            Some(v) => Verdict { headers, ..v },
            None => Verdict::admit(Outcome::Admitted, headers),
        };
        if degraded && v.outcome == Outcome::Admitted {
            v.outcome = Outcome::Fallback;
        }
        v.usage_reserved = usage_reserved;
        v.debited_at = debited_at;
        return v;
    }
    let tier_closed = tier_verdict
        .as_ref()
        .is_some_and(|v| v.outcome == Outcome::FailedClosed);
    // Refused by the tier itself (its limit or its own usage budget, the first usage entry),
    // or only by rules (counted under each rule, not as the tier's refusal).
    let tier_usage = tier.is_some_and(|p| p.limits.usage().is_some());
    let refused = |o: Option<&RuleOutcome>| matches!(o, Some(RuleOutcome::Decided { decision, .. }) if !decision.admitted);
    let tier_refused = tier_verdict
        .as_ref()
        .is_some_and(|v| v.outcome == Outcome::Limited)
        || (tier_usage && refused(combined.rules.get(rules.len())));
    let outcome = match tier_refused {
        true => Outcome::Limited,
        false => Outcome::RuleLimited,
    };
    if let (Some(s), false) = (closed, tier_closed) {
        return Verdict::refuse(
            Rejection::failed_closed("a limit rule", s),
            shadow,
            Outcome::FailedClosed,
            None,
        );
    }
    if tier_closed {
        let mut v = tier_verdict.expect("tier failed closed");
        v.headers = None;
        return v;
    }
    let Some(h) = headers else {
        // Refused with nothing decided to show (cannot happen: a refusal comes from a decided
        // policy or a closed one); answer as failed closed rather than admit.
        return Verdict::refuse(
            Rejection::failed_closed("a limit rule", 1),
            shadow,
            Outcome::FailedClosed,
            None,
        );
    };
    let cost = rules.first().map_or(1, |(_, c)| c.entry.cost);
    let detail = if h.decision.admitted {
        h.quota_detail(cost)
    } else {
        format!(
            "\"{}\" exhausted: {} of {} tokens left, this request costs {cost}",
            h.policy_name, h.decision.remaining, h.rate.burst
        )
    };
    let problem = Problem::typed(status, response::QUOTA_EXCEEDED, "Quota exceeded", detail)
        .with("violated-policies", json!(h.violated()));
    let r = Rejection::new(Layer::Tenant, outcome, problem).retry_after(h.retry_after_s());
    let mut v = Verdict::refuse(r, shadow, outcome, Some(h));
    v.refused_rules = refused_rules;
    v
}

/// One decided policy's part of the headers, with its bucket and whether it was degraded.
fn report(
    call: &RuleCall,
    kind: ReportKind,
    decision: crate::limit::Decision,
    rate: crate::limit::Rate,
    degraded: bool,
) -> (QuotaReport, crate::limit::Rate, bool) {
    let r = QuotaReport {
        name: String::from(&*call.name),
        kind,
        limit: rate.burst,
        window_s: rate.window_s(),
        decision,
    };
    (r, rate, degraded)
}

/// The tier's headers with the rules' reports after its own policies; without a tier's
/// headers, the first rule's report leads.
fn merge_headers(
    tier: Option<QuotaHeaders>,
    reports: Vec<(QuotaReport, crate::limit::Rate, bool)>,
) -> Option<QuotaHeaders> {
    let degraded = reports.iter().any(|(_, _, d)| *d);
    match tier {
        Some(mut h) => {
            h.quotas.reserve_exact(reports.len());
            h.quotas.extend(reports.into_iter().map(|(r, _, _)| r));
            h.degraded |= degraded;
            Some(h)
        }
        None => {
            let mut it = reports.into_iter();
            let (first, rate, _) = it.next()?;
            Some(QuotaHeaders {
                policy_name: first.name,
                rate,
                decision: first.decision,
                degraded,
                quotas: it.map(|(r, _, _)| r).collect(),
                listed_before: None,
            })
        }
    }
}

/// The metric outcome of one rule's decision.
fn rule_label(o: &RuleOutcome, shadow: bool) -> &'static str {
    match o {
        RuleOutcome::Decided { decision, .. } if !decision.admitted && shadow => "shadow_limited",
        RuleOutcome::Decided { decision, .. } if !decision.admitted => "limited",
        RuleOutcome::Decided { degraded: true, .. } => "fallback",
        RuleOutcome::Decided { .. } => "admitted",
        RuleOutcome::FailedOpen => "failed_open",
        RuleOutcome::FailedClosed { .. } => "failed_closed",
        RuleOutcome::Unasked => "unasked",
    }
}

#[cfg(test)]
mod tests;
