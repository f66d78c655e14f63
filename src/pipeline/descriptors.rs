//! A decision-service call's descriptors decided as the proxy decides a request's rules
//! (docs/decision-service.md): [`plan`] (pure) finds each descriptor's rules
//! ([`policy::descriptor`](crate::policy::descriptor)) and their quota calls, [`decide`] asks
//! the quota store once for all of them, all or nothing, and [`rules::judge`](super::rules::judge)
//! counts each rule's decision and writes the headers, exactly as for a proxied request.

use super::rules::judge;
use super::tenant::Verdict;
use crate::limit::algorithm::Algorithm;
use crate::limit::Decision;
use crate::observe::series::RuleSeries;
use crate::policy::descriptor::{self, Entry};
use crate::policy::rules::AppliedRule;
use crate::quota::peek;
use crate::quota::policy_script::LimitEntry;
use crate::quota::rules::{Combined, RuleCall, RuleOutcome};
use crate::quota::usage::Settled;
use crate::quota::QuotaService;
use crate::snapshot::Snapshot;
use crate::store::redis::client::RedisFault;
use crate::store::redis::keys::rule_key;

/// One descriptor as asked: its entries and its hits (≥ 1).
#[derive(Debug, Clone)]
pub struct Asked {
    pub entries: Vec<Entry>,
    pub hits: u64,
}

/// The quota calls of one decision-service call.
#[derive(Debug, Default)]
pub struct Planned<'a> {
    /// Each distinct bucket (rule and key) once, its cost the sum of the hits of the
    /// descriptors that reach it, in the order first reached.
    pub rules: Vec<(AppliedRule<'a>, RuleCall)>,
    /// Per descriptor (in the call's order), the indices into `rules` of its buckets; empty for a
    /// descriptor no rule matches.
    pub by_descriptor: Vec<Vec<usize>>,
}

/// The buckets `asked` (the descriptors of one call in `domain`) reach. A bucket two
/// descriptors reach is asked once for both hits, so a call can never count a bucket twice
/// against one look at it. Without a quota store (no `redis:`) nothing is limited.
pub fn plan<'a>(snap: &'a Snapshot, domain: &str, asked: &[Asked]) -> Planned<'a> {
    let mut out = Planned::default();
    let Some(quota) = &snap.quota else {
        out.by_descriptor = vec![Vec::new(); asked.len()];
        return out;
    };
    let prefix = &quota.settings.key_prefix;
    let share = snap.region.as_ref().map(|r| r.static_share());
    let overrides = snap.rule_key_overrides();
    for d in asked {
        let mut mine = Vec::new();
        for found in descriptor::applicable(&snap.config.limits, domain, &d.entries) {
            let same = out
                .rules
                .iter()
                .position(|(a, _)| a.index == found.index && *a.key == *found.key);
            if let Some(i) = same {
                let cost = &mut out.rules[i].1.entry.cost;
                *cost = cost.saturating_add(d.hits);
                if !mine.contains(&i) {
                    mine.push(i);
                }
                continue;
            }
            let r = &snap.config.limits[found.index];
            // A live override of this key (docs/live-state.md#one-key-of-a-limit-rule).
            let base = overrides
                .and_then(|o| Snapshot::live_rule_rate(o, r, &found.key, r.rate))
                .unwrap_or(r.rate);
            let rate = share.map_or(base, |s| s.apply(base));
            let call = RuleCall {
                name: r.name.as_str().into(),
                entry: LimitEntry {
                    key: rule_key(prefix, &r.name, r.algorithm, None, &found.key).into(),
                    algorithm: r.algorithm,
                    rate,
                    cost: d.hits,
                    max_delay_ms: 0,
                    shadow: r.mode.is_shadow(),
                },
                on_failure: r.on_failure,
            };
            let applied = AppliedRule {
                rule: r,
                index: found.index,
                key: found.key.into(),
                rate,
                max_in_flight: None,
            };
            mine.push(out.rules.len());
            out.rules.push((applied, call));
        }
        out.by_descriptor.push(mine);
    }
    out
}

/// Decides every bucket of `planned` in the quota store, all or nothing (one script call per
/// hash tag, earlier debits refunded when a later call refuses), and judges it as the proxy
/// judges a request's rules (`status`: the refusal status the headers are written for). The
/// combined outcome comes back with the verdict: each bucket's decision, in `planned.rules`'
/// order. Penalty boxes (`block_for`) act as on the proxy's path: a blocked key is refused
/// before anything is decided (its bucket's decision then says the block's time left, nothing
/// debited), and a refusal by a rule with `block_for` blocks its key, its wait the longer of
/// the bucket's and the block's.
pub async fn decide(snap: &Snapshot, planned: &Planned<'_>, status: u16) -> (Combined, Verdict) {
    let combined = match &snap.quota {
        Some(quota) if !planned.rules.is_empty() => {
            match super::block::first_blocked(quota, &planned.rules, true).await {
                Some((i, left)) => blocked(planned, i, left),
                None => {
                    let calls: Vec<&RuleCall> = planned.rules.iter().map(|(_, c)| c).collect();
                    let mut c = Box::pin(quota.decide_with_rules(None, &calls, None)).await;
                    if !c.admitted {
                        block_refusing(quota, planned, &mut c).await;
                    }
                    c
                }
            }
        }
        _ => Combined {
            tier: None,
            rules: Vec::new(),
            admitted: true,
            debited_at: Vec::new(),
        },
    };
    let verdict = rules_only(&snap.rule_series, planned, combined.clone(), status);
    (combined, verdict)
}

/// The verdict on a call of rules alone (no tier, no usage, enforced), counted in `series`.
fn rules_only(
    series: &RuleSeries,
    planned: &Planned<'_>,
    combined: Combined,
    status: u16,
) -> Verdict {
    judge(series, None, &planned.rules, &[], combined, status, false)
}

/// The outcome of a call whose bucket `i` is blocked for another `left_ms`: that bucket
/// refused (nothing left, its wait the block's), the others not asked, nothing debited.
fn blocked(planned: &Planned<'_>, i: usize, left_ms: u64) -> Combined {
    let rules = planned
        .rules
        .iter()
        .enumerate()
        .map(|(j, (a, _))| match j == i {
            true => RuleOutcome::Decided {
                decision: Decision {
                    admitted: false,
                    remaining: 0,
                    retry_after_ms: left_ms,
                    full_ms: left_ms,
                },
                rate: a.rate,
                degraded: false,
            },
            false => RuleOutcome::Unasked,
        })
        .collect();
    Combined {
        tier: None,
        rules,
        admitted: false,
        debited_at: Vec::new(),
    }
}

/// Blocks the keys of the enforced buckets with `block_for` that refused in `combined`, and
/// makes each one's wait at least its block's time left.
async fn block_refusing(quota: &QuotaService, planned: &Planned<'_>, combined: &mut Combined) {
    for (outcome, (a, call)) in combined.rules.iter_mut().zip(&planned.rules) {
        let RuleOutcome::Decided { decision, .. } = outcome else {
            continue;
        };
        if decision.admitted || call.entry.shadow || a.rule.block_for.is_none() {
            continue;
        }
        if let Some(left) = super::block::record(quota, a.rule, call).await {
            decision.retry_after_ms = decision.retry_after_ms.max(left);
        }
    }
}

/// [`decide`] without debiting anything (a dry run): each bucket's state is read as the admin
/// tenant view reads it (`lua/peek.lua`: no write, no TTL change) and decided in Rust for its
/// cost by the reference functions the scripts mirror, all or nothing over enforced buckets.
/// Nothing is counted in the metrics. Errors: the Redis fault of the first bucket that could
/// not be read.
pub async fn decide_dry(
    snap: &Snapshot,
    planned: &Planned<'_>,
    status: u16,
) -> Result<(Combined, Verdict), RedisFault> {
    let mut rules = Vec::with_capacity(planned.rules.len());
    let in_force = match &snap.quota {
        // A look at the blocks that never starts one again.
        Some(quota) => super::block::first_blocked(quota, &planned.rules, false).await,
        None => None,
    };
    if let Some((i, left)) = in_force {
        let combined = blocked(planned, i, left);
        let series = &RuleSeries::muted();
        let verdict = rules_only(series, planned, combined.clone(), status);
        return Ok((combined, verdict));
    }
    if let Some(quota) = &snap.quota {
        for (a, call) in &planned.rules {
            let raw = peek::read_key(&quota.redis, &call.entry.key, call.entry.algorithm).await?;
            let p = peek::evaluate(call.entry.algorithm, &raw, &a.rate, 0, &[], call.entry.cost);
            rules.push(RuleOutcome::Decided {
                decision: p.main_decision,
                rate: a.rate,
                degraded: false,
            });
        }
    }
    let admitted = planned.rules.iter().zip(&rules).all(|((_, c), o)| {
        c.entry.shadow || matches!(o, RuleOutcome::Decided { decision, .. } if decision.admitted)
    });
    let combined = Combined {
        tier: None,
        rules,
        admitted,
        // Nothing was debited.
        debited_at: Vec::new(),
    };
    let verdict = rules_only(&RuleSeries::muted(), planned, combined.clone(), status);
    Ok((combined, verdict))
}

/// Why a cost cannot be reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportError {
    /// A bucket the call reaches is not a `token_bucket` (only it can carry a debt): its rule.
    NotTokenBucket(String),
    /// Redis did not answer; nothing is known to be debited.
    Store(RedisFault),
}

/// Debits each bucket of `planned` its cost after the fact, as a usage budget is settled
/// (`lua/usage_settle.lua`: refilled to now, then debited; the level may go below zero, and
/// later decisions are refused until the refill pays the debt). Nothing is refused. Returns
/// each bucket's level after the debit, in `planned.rules`' order. Errors: a bucket whose rule
/// is not a token bucket (checked before anything is debited), or a Redis fault.
pub async fn report(snap: &Snapshot, planned: &Planned<'_>) -> Result<Vec<Settled>, ReportError> {
    if let Some((a, _)) = planned
        .rules
        .iter()
        .find(|(_, c)| c.entry.algorithm != Algorithm::TokenBucket)
    {
        return Err(ReportError::NotTokenBucket(a.rule.name.clone()));
    }
    let Some(quota) = &snap.quota else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(planned.rules.len());
    for (a, call) in &planned.rules {
        let cost = i64::try_from(call.entry.cost).unwrap_or(i64::MAX);
        let settled = quota
            .settle_usage(call.entry.key.to_string(), &a.rate, cost)
            .await
            .map_err(ReportError::Store)?;
        out.push(settled);
    }
    Ok(out)
}
