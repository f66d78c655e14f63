//! The limit rules of the admin views, read without debiting: which rules apply to an
//! explained request and the state of each one's bucket (`POST /v1/explain`), and which rules
//! a tenant's requests can meet (`GET /v1/tenants/{id}`).

use super::limit_source::{mark_source, rate_override_json};
use crate::config::{KeyPart, LimitRule};
use crate::limit::Rate;
use crate::live::overrides::Overrides;
use crate::policy::rules::AppliedRule;
use crate::quota::peek;
use crate::quota::rules::RuleCall;
use crate::quota::QuotaService;
use crate::snapshot::Snapshot;
use crate::store::redis::keys;
use serde_json::{json, Value};

/// The size fields of a rule's bucket (of its lease set, for a concurrency rule).
fn size_json(rule: &LimitRule, rate: &Rate) -> Value {
    if let Some(max) = rule.max_in_flight {
        return json!({
            "name": rule.name,
            "mode": rule.mode.as_str(),
            "key_parts": rule.key.iter().map(KeyPart::spec).collect::<Vec<_>>(),
            "max_in_flight": max,
            "on_failure": rule.on_failure.as_str(),
        });
    }
    let mut v = json!({
        "name": rule.name,
        "mode": rule.mode.as_str(),
        "algorithm": rule.algorithm.as_str(),
        "key_parts": rule.key.iter().map(KeyPart::spec).collect::<Vec<_>>(),
        "limit": rate.limit,
        "per_ms": rate.per_ms,
        "burst": rate.burst,
        "on_failure": rule.on_failure.as_str(),
    });
    counting_json(rule, &mut v);
    v
}

/// A rate rule's counting fields (docs/rules.md#counting-by-outcome, #penalty-box), when set:
/// `count_status` (codes, and classes as `"5xx"`), `refund_on`, `block_for_ms`.
fn counting_json(rule: &LimitRule, v: &mut Value) {
    if let Some(set) = rule.counting.status {
        let spec = set.spec().into_iter().map(|s| match s {
            Ok(code) => json!(code),
            Err(class) => json!(class),
        });
        v["count_status"] = Value::Array(spec.collect());
        v["counted"] = json!("after_response");
    }
    let r = rule.counting.refund_on;
    let listed = [
        ("backend_5xx", r.backend_5xx),
        ("upstream_unavailable", r.upstream_unavailable),
        ("client_gone_before_response", r.client_gone_before_response),
    ];
    let refund_on: Vec<&str> = listed
        .iter()
        .filter(|(_, on)| *on)
        .map(|(n, _)| *n)
        .collect();
    if !refund_on.is_empty() {
        v["refund_on"] = json!(refund_on);
    }
    if let Some(b) = rule.block_for {
        v["block_for_ms"] = json!(b.ms);
    }
}

/// `v` with the state of the bucket at `key` (`remaining`, `seconds_until_full`) and, with
/// `cost`, what a request of that cost would get; on a Redis fault, `state: unknown`.
async fn with_state(
    quota: &QuotaService,
    mut v: Value,
    key: &str,
    rule: &LimitRule,
    rate: &Rate,
    cost: Option<u64>,
) -> Value {
    v["key"] = json!(key);
    if let Some(max) = rule.max_in_flight {
        match quota.inflight_at(key).await {
            Ok(held) => {
                v["held"] = json!(held);
                if cost.is_some() {
                    v["would_admit"] = json!(held < max);
                }
            }
            Err(fault) => {
                v["state"] = json!("unknown");
                v["why"] = json!(format!("quota store fault: {}", fault.as_str()));
            }
        }
        return v;
    }
    let raw = match peek::read_key(&quota.redis, key, rule.algorithm).await {
        Ok(raw) => raw,
        Err(fault) => {
            v["state"] = json!("unknown");
            v["why"] = json!(format!("quota store fault: {}", fault.as_str()));
            return v;
        }
    };
    let p = peek::evaluate(rule.algorithm, &raw, rate, 0, &[], cost.unwrap_or(1));
    v["remaining"] = json!(p.main_view.remaining);
    v["seconds_until_full"] = json!(p.main_view.full_ms.div_ceil(1000));
    // A penalty box in force refuses whatever the bucket holds (read, never extended here).
    let blocked_ms = match rule.block_for {
        Some(_) => quota
            .block_left(&keys::block_key(key), None)
            .await
            .unwrap_or(0),
        None => 0,
    };
    if blocked_ms > 0 {
        v["blocked_for_s"] = json!(blocked_ms.div_ceil(1000));
    }
    if cost.is_some() {
        let d = &p.main_decision;
        v["would_admit"] = json!(d.admitted && blocked_ms == 0);
        v["remaining_after"] = json!(d.remaining);
        v["retry_after_s"] = match (d.admitted, blocked_ms) {
            (true, 0) => json!(0),
            (_, ms) if ms > 0 => json!(ms.div_ceil(1000)),
            _ => d.retry_after_s().map_or(Value::Null, |s| json!(s)),
        };
    }
    v
}

/// Marks a rule's entry with where its bucket comes from ([`mark_source`]): the live override
/// of its key `text` in `overrides` (the snapshot's, when any key has one), else the file.
fn mark_rule(v: &mut Value, overrides: Option<&Overrides>, rule: &LimitRule, text: &str) {
    let set = overrides.and_then(|o| Snapshot::live_rule_override(o, rule, text));
    mark_source(v, set.as_ref().and_then(rate_override_json));
}

/// Each applied rule with its bucket's state and what this request (of its cost) would get,
/// and whether every enforced one would admit. Its bucket is the one the proxy uses (`a.rate`,
/// a key's live override included), marked by `overrides` (the snapshot's rule key overrides).
pub async fn explained(
    quota: &QuotaService,
    applied: &[(AppliedRule<'_>, RuleCall)],
    overrides: Option<&Overrides>,
) -> (Vec<Value>, bool) {
    let mut out = Vec::with_capacity(applied.len());
    let mut admitted = true;
    for (a, call) in applied {
        let mut v = size_json(a.rule, &a.rate);
        if a.rule.max_in_flight.is_none() {
            v["cost"] = json!(call.entry.cost);
        }
        mark_rule(&mut v, overrides, a.rule, &a.key);
        let v = with_state(
            quota,
            v,
            &call.entry.key,
            a.rule,
            &a.rate,
            Some(call.entry.cost),
        )
        .await;
        if !a.rule.mode.is_shadow() && v["would_admit"] == json!(false) {
            admitted = false;
        }
        out.push(v);
    }
    (out, admitted)
}

/// Every rule a request of `tenant` in `tier` can meet, sized for the tier. A rule keyed by
/// the tenant alone has one bucket per tenant, shown with its state and sized as the proxy
/// sizes it (the live override of the tenant's key in `overrides`, when any, marked); other
/// rules have one bucket per value of their other parts, shown with the file's size (see
/// `POST /v1/explain` for one request's).
pub async fn of_tenant(
    quota: &QuotaService,
    rules: &[LimitRule],
    tenant: &str,
    tier: &str,
    overrides: Option<&Overrides>,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(rules.len());
    for rule in rules {
        let mut rate = rule.rate_for(Some(tier));
        if rule.key != [KeyPart::Tenant] {
            let mut v = size_json(rule, &rate);
            mark_source(&mut v, None);
            out.push(v);
            continue;
        }
        let text = tenant_key_text(tenant);
        if let Some(r) = overrides.and_then(|o| Snapshot::live_rule_rate(o, rule, &text, rate)) {
            rate = r;
        }
        let mut v = size_json(rule, &rate);
        mark_rule(&mut v, overrides, rule, &text);
        let key = tenant_rule_key(quota, rule, tenant);
        out.push(with_state(quota, v, &key, rule, &rate, None).await);
    }
    out
}

/// The key text of `tenant` in a rule keyed by the tenant alone.
fn tenant_key_text(tenant: &str) -> String {
    keys::rule_key_text(&[("tenant", tenant.as_bytes())])
}

/// The bucket (or lease set) of `tenant` in a rule keyed by the tenant alone.
fn tenant_rule_key(quota: &QuotaService, rule: &LimitRule, tenant: &str) -> String {
    let text = tenant_key_text(tenant);
    let prefix = quota.redis.key_prefix();
    match rule.max_in_flight {
        Some(_) => keys::inflight_rule_key(prefix, &rule.name, Some(tenant), &text),
        None => keys::rule_key(prefix, &rule.name, rule.algorithm, Some(tenant), &text),
    }
}

/// The buckets a tenant reset deletes besides the tier's: those of every rule keyed by the
/// tenant alone (a rule with more parts has one bucket per value, left to expire).
pub fn tenant_rule_keys(quota: &QuotaService, rules: &[LimitRule], tenant: &str) -> Vec<String> {
    rules
        .iter()
        .filter(|r| r.key == [KeyPart::Tenant])
        .map(|r| tenant_rule_key(quota, r, tenant))
        .collect()
}
