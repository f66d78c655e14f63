//! A request's tier policies and limit rules decided together, all or nothing
//! (docs/DESIGN.md 4e "Rules", "Keys").
//!
//! Entries are grouped by Redis Cluster slot: the tier's main limit, its calendar quotas and
//! every rule keyed by `tenant` share the tenant's hash tag and go in one call of
//! `lua/policy.lua`; each other rule's bucket has a tag of its own. Groups are asked in turn
//! (the tenant's first) and the asking stops at the first refusal. When the request is refused
//! after a group was debited (a later group refused, or a fallback decision did), that group's
//! debits are given back with `lua/refund.lua` before the answer: nothing stays debited on a
//! refusal (a refunded token may be unavailable to others for that one round trip).
//!
//! A group Redis cannot decide follows each entry's failure policy: `open` admits without
//! headers, `closed` refuses (503), `local` decides in this instance's memory at a
//! `1 / fleet size` share: rules first only looked at, then the tier's fallback decided, then
//! the rules debited, so a local refusal debits nothing locally either.

use super::policy_script::{
    self as policy, BatchDecision, CallKey, LimitEntry, PolicyCall, QuotaPart,
};
use super::TenantQuota;
use super::{PolicyExtras, QuotaOutcome, QuotaService, Reservation};
use crate::config::FailurePolicy;
use crate::limit::algorithm::Algorithm;
use crate::limit::calendar::CalendarQuota;
use crate::limit::{Decision, Rate};
use crate::store::redis::conn::key_slot;
use std::sync::{Arc, OnceLock};

/// One limit rule to decide with a request.
#[derive(Debug, Clone)]
pub struct RuleCall {
    /// Its policy name.
    pub name: Arc<str>,
    /// Its bucket (key under the tenant's or its own hash tag), size, cost and mode.
    pub entry: LimitEntry,
    pub on_failure: FailurePolicy,
}

/// What became of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleOutcome {
    /// Its bucket decided: in Redis, or (`degraded`) in the local fallback sized `rate`.
    Decided {
        decision: Decision,
        rate: Rate,
        degraded: bool,
    },
    /// Redis could not decide, policy `open`.
    FailedOpen,
    /// Redis could not decide, policy `closed`: 503 with this Retry-After (s).
    FailedClosed { retry_after_s: u64 },
    /// Not asked: an earlier call had already refused the request.
    Unasked,
}

/// The decision over a request's tier policies and rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Combined {
    /// The tier's outcome (`None`: no tier applies).
    pub tier: Option<QuotaOutcome>,
    /// Each rule's outcome, in the order asked.
    pub rules: Vec<RuleOutcome>,
    /// True when every enforced policy admitted (and all were debited); shadow entries do not
    /// count.
    pub admitted: bool,
    /// Per entry (the tier's first, then each rule's), when the request is admitted: the clock
    /// (Redis's, Unix ms) of the call that debited it in Redis, to give that debit back later
    /// ([`QuotaService::give_back_debit`]); `None` for an entry not debited in Redis (refused in
    /// shadow, failed open, decided by the local fallback). Empty on a refusal.
    pub debited_at: Vec<Option<u64>>,
}

/// A group of entries under one slot, by index into the request's entries (the tier's at 0).
#[derive(Debug)]
struct Group {
    slot: u16,
    members: Vec<usize>,
}

/// A request's script calls as [`QuotaService::decide_with_rules`] builds them (its entries
/// grouped by slot, each group's call identity), kept with a rule plan
/// ([`Prepared`](crate::policy::rules::memo::Prepared)) for the next requests of that plan.
/// Reused only when the tier's part (its entry and quotas) is the one it was built with.
#[derive(Debug)]
pub struct PreparedCalls {
    /// The key prefix the keys were built under.
    prefix: String,
    tier_entry: Option<LimitEntry>,
    quotas: Option<(String, Vec<CalendarQuota>, u64)>,
    groups: Vec<Group>,
    keys: Vec<Arc<CallKey>>,
}

impl PreparedCalls {
    /// Groups the entries (the tier's first, when `tier_entry`, then `rules`) and builds each
    /// group's call.
    fn build(
        prefix: &str,
        tier_entry: Option<LimitEntry>,
        rules: &[&RuleCall],
        quotas: Option<QuotaPart<'_>>,
    ) -> Self {
        let entries = entries_of(tier_entry.as_ref(), rules);
        let groups = groups_of(&entries);
        let keys = groups
            .iter()
            .map(|g| {
                let members: Vec<&LimitEntry> = g.members.iter().map(|&i| entries[i]).collect();
                let q = quotas.filter(|_| tier_entry.is_some() && g.members.contains(&0));
                Arc::new(policy::call_key(prefix, &members, q))
            })
            .collect();
        PreparedCalls {
            prefix: prefix.to_string(),
            quotas: quotas.map(|q| (q.tenant.to_string(), q.quotas.to_vec(), q.cost)),
            tier_entry,
            groups,
            keys,
        }
    }

    /// True when built for this tier part: its policy call (whose entry's key is
    /// [`main_key`](crate::store::redis::keys::main_key) of its tenant and algorithm, under the
    /// prefix both were built with) and shadow mode; compared without building that key.
    fn fits(&self, prefix: &str, tier: Option<(&PolicyCall<'_>, bool)>) -> bool {
        if self.prefix != prefix {
            return false;
        }
        match (&self.tier_entry, &self.quotas, tier) {
            (None, None, None) => true,
            (Some(e), Some((tenant, quotas, cost)), Some((call, shadow))) => {
                e.algorithm == call.algorithm
                    && e.rate == call.rate
                    && e.cost == call.cost
                    && e.max_delay_ms == call.max_delay_ms
                    && e.shadow == shadow
                    && tenant == call.tenant
                    && *cost == call.cost
                    && quotas.as_slice() == call.quotas
            }
            _ => false,
        }
    }

    /// The request's entries: the tier's first (when there is one), then `rules`'.
    fn entries<'a>(&'a self, rules: &[&'a RuleCall]) -> Vec<&'a LimitEntry> {
        entries_of(self.tier_entry.as_ref(), rules)
    }
}

/// `tier_entry` (when there is one), then `rules`' entries, in the order the calls take them.
fn entries_of<'a>(
    tier_entry: Option<&'a LimitEntry>,
    rules: &[&'a RuleCall],
) -> Vec<&'a LimitEntry> {
    tier_entry
        .into_iter()
        .chain(rules.iter().map(|r| &r.entry))
        .collect()
}

/// What Redis said to one group.
enum Asked {
    Answered(BatchDecision),
    Failed { retry_in_ms: u64 },
    Unasked,
}

impl QuotaService {
    /// Decides `rules` with the tier's policies (`tier`: the tenant's quota request and whether
    /// the tier is in shadow mode), all or nothing. Never fails: Redis faults become each
    /// policy's declared failure outcome. `prepared`: where the calls of these very `rules` are
    /// kept once built (a rule plan's), reused while the tier's part is the same.
    pub async fn decide_with_rules(
        &self,
        tier: Option<(&TenantQuota<'_>, bool)>,
        rules: &[&RuleCall],
        prepared: Option<&OnceLock<PreparedCalls>>,
    ) -> Combined {
        let prefix = self.redis.key_prefix();
        let tier_call = tier.map(|(q, shadow)| (self.policy_call(q), shadow));
        let quotas = tier_call.as_ref().map(|(c, _)| c.quota_part());
        // The tier's entry (its key a string built per request) only for calls built here.
        let build = || {
            let tier_entry = tier_call.as_ref().map(|(c, shadow)| LimitEntry {
                shadow: *shadow,
                ..c.entry(prefix)
            });
            PreparedCalls::build(prefix, tier_entry, rules, quotas)
        };
        let tier_part = tier_call.as_ref().map(|(c, shadow)| (c, *shadow));
        let local;
        let calls = match prepared.map(|p| p.get_or_init(build)) {
            Some(p) if p.fits(prefix, tier_part) => p,
            _ => {
                local = build();
                &local
            }
        };
        let groups = &calls.groups;
        // After an outage under `local`: what the tier's local fallback admitted, carried into
        // Redis as without rules (one relaxed load each otherwise).
        let mut carried = None;
        if let Some((q, _)) = tier {
            self.carry_local_spending(q).await;
            if self.policy_carry.pending() && !self.breaker.degraded() {
                carried = self.policy_carry.take(q.tenant, self.now_ms());
            }
        }
        let mut asked: Vec<Asked> = Vec::with_capacity(groups.len());
        for (g, key) in groups.iter().zip(&calls.keys) {
            // The tier's entry is the first of its group's call: the carry's entry.
            let key = match &carried {
                Some(c) if g.members.first() == Some(&0) => Arc::new(CallKey::new(
                    key.keys.clone(),
                    format!("{}{}", key.args, c.words()),
                )),
                _ => key.clone(),
            };
            if asked
                .iter()
                .any(|a| matches!(a, Asked::Answered(b) if !b.admitted))
            {
                asked.push(Asked::Unasked);
                continue;
            }
            asked.push(match self.ask_policy(key).await {
                Ok(value) => Asked::Answered(value),
                Err(retry_in_ms) => Asked::Failed { retry_in_ms },
            });
        }
        if let Some((q, _)) = tier {
            // A debit of the tier's bucket (kept or given back below) changes it: a refusal
            // remembered for the tenant no longer describes it.
            if asked
                .iter()
                .any(|a| matches!(a, Asked::Answered(b) if b.admitted))
            {
                self.deny.forget(q.tenant);
            }
        }
        let tier_offset = usize::from(tier.is_some());
        let mut outcome = self.outcomes(tier, rules, groups, &asked, tier_offset);
        if !outcome.admitted {
            let entries = calls.entries(rules);
            for (g, a) in groups.iter().zip(&asked) {
                if let Asked::Answered(b) = a {
                    if b.admitted {
                        let members: Vec<&LimitEntry> =
                            g.members.iter().map(|&i| entries[i]).collect();
                        let q = quotas.filter(|_| tier.is_some() && g.members.contains(&0));
                        self.refund(g.slot, &members, q, b.now_ms).await;
                    }
                }
            }
            // A refunded tier admission keeps no leaky bucket delay or reservation.
            if let Some(QuotaOutcome::Decided { extras, .. }) = &mut outcome.tier {
                extras.delay_ms = 0;
                extras.reservation = None;
            }
        } else {
            let n = rules.len() + usize::from(tier.is_some());
            outcome.debited_at = debited_at(n, groups, &asked);
        }
        outcome
    }

    /// Gives back one admitted request's debit of `entry` (with the tier's calendar quotas
    /// `quotas` when it is the tier's entry) made by the call at clock `at` (Unix ms), as a
    /// refusal's debits are: never more than was taken. False when Redis failed the call
    /// (logged; the debit stands).
    pub async fn give_back_debit(
        &self,
        entry: &LimitEntry,
        quotas: Option<QuotaPart<'_>>,
        at: u64,
    ) -> bool {
        self.refund(key_slot(&entry.key), &[entry], quotas, at)
            .await
    }

    /// The tier's entry in the policy call for `q` (its key, algorithm, rate and cost), as
    /// [`decide_with_rules`](Self::decide_with_rules) asks it.
    pub fn tier_entry(&self, q: &TenantQuota<'_>) -> LimitEntry {
        self.policy_call(q).entry(self.redis.key_prefix())
    }

    /// Gives back what a group's call debited (errors are logged: the worst case is tokens
    /// not given back, an under-admission); false on such an error.
    async fn refund(
        &self,
        slot: u16,
        members: &[&LimitEntry],
        q: Option<QuotaPart<'_>>,
        at: u64,
    ) -> bool {
        let (keys, args) = policy::refund_keys_and_args(self.redis.key_prefix(), members, q, at);
        let script = policy::debit_refund_script();
        match self.redis.eval::<i64, _>(script, &keys, &args).await {
            Ok(n) => {
                tracing::debug!(slot, given_back = n, "debits given back");
                true
            }
            Err(e) => {
                tracing::warn!(slot, fault = e.as_str(), "debits not given back");
                false
            }
        }
    }

    /// Every entry's outcome from what the groups answered, with the failure policies of those
    /// that could not be asked, and whether the request is admitted.
    fn outcomes(
        &self,
        tier: Option<(&TenantQuota<'_>, bool)>,
        rules: &[&RuleCall],
        groups: &[Group],
        asked: &[Asked],
        tier_offset: usize,
    ) -> Combined {
        let at = |i: usize| {
            groups.iter().zip(asked).find_map(|(g, a)| {
                let pos = g.members.iter().position(|&m| m == i)?;
                Some((a, pos))
            })
        };
        let mut admitted = asked.iter().all(|a| match a {
            Asked::Answered(b) => b.admitted,
            Asked::Failed { .. } => true,
            Asked::Unasked => false,
        });
        let mut rule_outcomes = Vec::with_capacity(rules.len());
        let mut local = Vec::new();
        for (r, rule) in rules.iter().enumerate() {
            let o = match at(tier_offset + r) {
                Some((Asked::Answered(b), pos)) => RuleOutcome::Decided {
                    decision: b.entries[pos].0.decision,
                    rate: rule.entry.rate,
                    degraded: false,
                },
                Some((Asked::Failed { retry_in_ms }, _)) => match rule.on_failure {
                    FailurePolicy::Open => RuleOutcome::FailedOpen,
                    FailurePolicy::Closed => RuleOutcome::FailedClosed {
                        retry_after_s: retry_in_ms.div_ceil(1000).max(1),
                    },
                    FailurePolicy::Local => {
                        let rate = rule.entry.rate.divided(self.fleet_size());
                        let e = &rule.entry;
                        let peek = self.local_policies.peek(
                            &e.key.to_string(),
                            e.algorithm,
                            self.now_ms(),
                            &rate,
                            e.cost,
                            0,
                        );
                        local.push(r);
                        RuleOutcome::Decided {
                            decision: peek.decision,
                            rate,
                            degraded: true,
                        }
                    }
                },
                _ => RuleOutcome::Unasked,
            };
            let enforced = !rule.entry.shadow;
            admitted &= !enforced
                || match o {
                    RuleOutcome::Decided { decision, .. } => decision.admitted,
                    RuleOutcome::FailedOpen => true,
                    _ => false,
                };
            rule_outcomes.push(o);
        }
        let tier_outcome = tier.map(|(q, shadow)| {
            let o = match at(0) {
                Some((Asked::Answered(b), _)) => answered_tier(q, b, admitted),
                Some((Asked::Failed { retry_in_ms }, _)) if admitted || shadow => {
                    self.tier_fallback(q, *retry_in_ms)
                }
                // Refused elsewhere: the tier's fallback is not asked (nothing debited).
                Some((Asked::Failed { .. }, _)) | Some((Asked::Unasked, _)) | None => {
                    QuotaOutcome::FailedOpen
                }
            };
            if !shadow {
                admitted &= tier_admits(&o);
            }
            o
        });
        if admitted {
            for r in local {
                let e = &rules[r].entry;
                let rate = e.rate.divided(self.fleet_size());
                let now = self.now_ms();
                let (o, _) = self.local_policies.decide(
                    &e.key.to_string(),
                    e.algorithm,
                    now,
                    &rate,
                    e.cost,
                    0,
                );
                rule_outcomes[r] = RuleOutcome::Decided {
                    decision: o.decision,
                    rate,
                    degraded: true,
                };
            }
        }
        Combined {
            tier: tier_outcome,
            rules: rule_outcomes,
            admitted,
            debited_at: Vec::new(),
        }
    }

    /// The tier's failure outcome when its group could not be asked: as without rules.
    fn tier_fallback(&self, q: &TenantQuota<'_>, retry_in_ms: u64) -> QuotaOutcome {
        if q.tier_policy.algorithm == Algorithm::TokenBucket && q.tier_policy.quotas.is_empty() {
            self.fallback(q, retry_in_ms)
        } else {
            self.policy_fallback(q, retry_in_ms)
        }
    }
}

/// The tier's outcome from its group's answer (`admitted`: the whole request so far).
fn answered_tier(q: &TenantQuota<'_>, b: &BatchDecision, admitted: bool) -> QuotaOutcome {
    let (main, reservation) = b.entries[0];
    let admitted = admitted && b.admitted;
    QuotaOutcome::Decided {
        decision: main.decision,
        rate: q.rate,
        degraded: false,
        extras: PolicyExtras {
            quotas: b.quotas.clone(),
            delay_ms: if admitted { main.delay_ms } else { 0 },
            reservation: reservation.filter(|_| admitted).map(|state| Reservation {
                state,
                local: false,
            }),
        },
    }
}

/// True when the tier's outcome lets the request through.
fn tier_admits(o: &QuotaOutcome) -> bool {
    match o {
        QuotaOutcome::Decided {
            decision, extras, ..
        } => decision.admitted && extras.quotas.iter().all(|q| q.admitted),
        QuotaOutcome::FailedOpen => true,
        QuotaOutcome::FailedClosed { .. } => false,
    }
}

/// Per entry (`n` of them), the clock of the call that debited it: an answered, admitting
/// group's clock for each of its members whose own decision admitted.
fn debited_at(n: usize, groups: &[Group], asked: &[Asked]) -> Vec<Option<u64>> {
    let mut at = vec![None; n];
    for (g, a) in groups.iter().zip(asked) {
        if let Asked::Answered(b) = a {
            for (pos, &i) in g.members.iter().enumerate() {
                let admitted = b.entries.get(pos).is_some_and(|e| e.0.decision.admitted);
                if b.admitted && admitted {
                    at[i] = Some(b.now_ms);
                }
            }
        }
    }
    at
}

/// `entries` grouped by Cluster slot, in order of first appearance (the tier's first).
fn groups_of(entries: &[&LimitEntry]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::with_capacity(1);
    for (i, e) in entries.iter().enumerate() {
        let slot = key_slot(&e.key);
        match groups.iter_mut().find(|g| g.slot == slot) {
            Some(g) => g.members.push(i),
            None => {
                let mut members = Vec::with_capacity(entries.len() - i);
                members.push(i);
                groups.push(Group { slot, members });
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests;
