//! Penalty boxes (`limits[].block_for`, docs/rules.md#penalty-box), in the tenant stage and the
//! decision service ([`super::descriptors`]): before the decision, [`check`] refuses a key its
//! rule has blocked ([`first_blocked`] finds it); after a refusal, [`after_refusal`] blocks the
//! keys of the refusing rules ([`record`]) and makes the `Retry-After` say how long.
//! [`blocked`] (pure) is the refusal.

use super::{Layer, Outcome, Rejection};
use crate::config::{FailurePolicy, LimitRule};
use crate::observe::series::RuleSeries;
use crate::policy::rules::AppliedRule;
use crate::quota::block::LocalBlocks;
use crate::quota::rules::RuleCall;
use crate::quota::QuotaService;
use crate::response::{self, Problem};
use crate::store::redis::keys::block_key;
use serde_json::json;
use std::time::{Duration, Instant};

/// The refusal (`status`, 429 by default) of a request whose key rule `rule` blocks for
/// another `left_ms`: a `quota-exceeded` problem naming the rule, `Retry-After` the block's end.
pub fn blocked(rule: &str, left_ms: u64, status: u16) -> Rejection {
    let secs = left_ms.div_ceil(1000).max(1);
    let detail = format!("\"{rule}\" refused this key and blocks it for {secs} more seconds");
    let p = Problem::typed(status, response::QUOTA_EXCEEDED, "Quota exceeded", detail)
        .with("violated-policies", json!([rule]))
        .with("reason", json!("blocked"));
    Rejection::new(Layer::Tenant, Outcome::RuleLimited, p).retry_after(Some(secs))
}

/// The first of `rules` (with `block_for`, enforced) whose key is blocked: its refusal. Asks
/// Redis per such rule; when Redis cannot answer, the blocks in this instance's memory decide.
pub async fn check(
    quota: &QuotaService,
    series: &RuleSeries,
    rules: &[(AppliedRule<'_>, RuleCall)],
    status: u16,
) -> Option<Rejection> {
    let (i, left) = first_blocked(quota, rules, true).await?;
    let (a, call) = &rules[i];
    series.inc(a.index, &call.name, "limited");
    Some(blocked(&a.rule.name, left, status))
}

/// True when one of `rules` can be blocked (`block_for`, enforced): only then is there a block
/// to [`check`] (the caller skips its boxed future otherwise).
pub fn any_blockable(rules: &[(AppliedRule<'_>, RuleCall)]) -> bool {
    rules
        .iter()
        .any(|(a, call)| a.rule.block_for.is_some() && !call.entry.shadow)
}

/// The first of `rules` (with `block_for`, enforced) whose key is blocked: its index and the
/// block's time left, ms. `extend`: a rule with `extend_on_refusal` starts its block again (a
/// refusal); false for a look that must not (a dry run). Asks Redis per such rule; when Redis
/// cannot answer, the blocks in this instance's memory decide.
pub async fn first_blocked(
    quota: &QuotaService,
    rules: &[(AppliedRule<'_>, RuleCall)],
    extend: bool,
) -> Option<(usize, u64)> {
    for (i, (a, call)) in rules.iter().enumerate() {
        let (Some(b), false) = (a.rule.block_for, call.entry.shadow) else {
            continue;
        };
        let key = block_key(&call.entry.key);
        let extend = (extend && b.extend_on_refusal).then_some(b.ms);
        let left = match quota.block_left(&key, extend).await {
            Ok(ms) => ms,
            Err(_) => {
                let d = extend.map(Duration::from_millis);
                LocalBlocks::global()
                    .left(&key, Instant::now(), d)
                    .as_millis() as u64
            }
        };
        if left > 0 {
            return Some((i, left));
        }
    }
    None
}

/// Blocks the keys of the refusing rules (`refused`: indices into `rules`) that have
/// `block_for`, and raises `r`'s `Retry-After` to the longest block. In Redis when it answers;
/// otherwise in memory when the rule's failure policy is `local` (else the block is lost and
/// logged: the bucket still refuses until it refills).
pub async fn after_refusal(
    quota: &QuotaService,
    rules: &[(AppliedRule<'_>, RuleCall)],
    refused: &[usize],
    r: &mut Rejection,
) {
    for (a, call) in refused.iter().filter_map(|&i| rules.get(i)) {
        if let Some(left) = record(quota, a.rule, call).await {
            let secs = left.div_ceil(1000).max(1);
            r.retry_after = r.retry_after.max(Some(secs));
        }
    }
}

/// Blocks the key of `rule` (its bucket `call`) after it refused, when it has `block_for`:
/// the block's time left, ms. In Redis when it answers; otherwise in memory when the rule's
/// failure policy is `local` (else `None`: the block is lost and logged, the bucket still
/// refuses until it refills).
pub async fn record(quota: &QuotaService, rule: &LimitRule, call: &RuleCall) -> Option<u64> {
    let b = rule.block_for?;
    let key = block_key(&call.entry.key);
    match quota.block(&key, b.ms, b.extend_on_refusal).await {
        Ok(ms) => Some(ms),
        Err(_) if rule.on_failure == FailurePolicy::Local => {
            let d = Duration::from_millis(b.ms);
            let now = Instant::now();
            let left = LocalBlocks::global().block(&key, now, d, b.extend_on_refusal);
            Some(left.as_millis() as u64)
        }
        Err(e) => {
            tracing::warn!(rule = %rule.name, fault = e.as_str(), "block not recorded");
            None
        }
    }
}

#[cfg(test)]
mod tests;
