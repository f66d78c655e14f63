//! `tiers:`: each tier's main limit, failure policy, algorithm and quotas ([`super::policy`]),
//! lease, weight, burst pool and mode, and the rules for tier names.

use super::common::{key_path, Check};
use super::policy;
use crate::config::model::{FailurePolicy, PoolSettings, Tier};
use crate::config::raw::{RawPool, RawTier};
use crate::limit::algorithm::Algorithm;
use std::collections::BTreeMap;

/// Longest tier name accepted.
pub const MAX_TIER_NAME: usize = 64;

/// A tier name is 1 to [`MAX_TIER_NAME`] ASCII letters, digits, `-` and `_` (no `.`, which
/// would make `a.day` and the `day` quota of tier `a` the same policy name): it is sent in
/// `RateLimit-Policy` / `RateLimit` sf-string items (`"<tier>"`, quota policies `"<tier>.<period>"`),
/// the `X-Tollgate-Tier` header, metric labels and Redis keys, and must be valid in all of them.
pub fn tier_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-".contains(c);
    if name.is_empty() || name.len() > MAX_TIER_NAME || !name.chars().all(allowed) {
        return Err(format!(
            "a tier name is 1 to {MAX_TIER_NAME} letters, digits, '-' and '_' \
             (it is sent in RateLimit headers and X-Tollgate-Tier)"
        ));
    }
    Ok(())
}

/// `tiers:` → the tiers whose rate is valid, by name. `default_policy` is the `on_failure` of a
/// tier that sets none (that of `redis:`).
pub(super) fn settings(
    c: &mut Check,
    raw: Option<&BTreeMap<String, RawTier>>,
    default_policy: FailurePolicy,
) -> BTreeMap<String, Tier> {
    let mut tiers = BTreeMap::new();
    for (name, t) in raw.into_iter().flatten() {
        if let Err(why) = tier_name(name) {
            c.err(key_path("tiers", name), why);
        }
        let path = format!("tiers.{name}");
        let on_failure = c.policy(
            &format!("{path}.on_failure"),
            t.on_failure.as_deref(),
            default_policy,
        );
        let rate = c.rate(&path, t.limit, &t.per, t.burst);
        let tier_policy = policy::tier_policy(c, &path, t, rate.as_ref());
        // The burst pool lends token-bucket tokens when the tenant's own bucket refuses; it
        // cannot stand in for another algorithm's refusal or debit a calendar quota.
        if t.pool.is_some()
            && (tier_policy.algorithm != Algorithm::TokenBucket || !tier_policy.quotas.is_empty())
        {
            c.err(
                format!("{path}.pool"),
                "a burst pool needs algorithm token_bucket and no quotas in its tier",
            );
        }
        let usage = t
            .usage
            .as_ref()
            .and_then(|u| super::usage::settings(c, &path, name, u));
        // A leased tier admits from tokens taken in advance, outside the policy call that
        // reserves the usage budget.
        if t.usage.is_some() && tier_policy.lease.is_some() {
            c.err(
                format!("{path}.usage"),
                "a usage budget cannot be combined with lease in its tier",
            );
        }
        if let Some(rate) = rate {
            tiers.insert(
                name.clone(),
                Tier {
                    name: name.clone(),
                    rate,
                    on_failure,
                    policy: tier_policy,
                    weight: tier_weight(c, &path, t.weight),
                    pool: t.pool.as_ref().and_then(|p| pool_settings(c, &path, p)),
                    mode: c.mode(&format!("{path}.mode"), t.mode.as_deref()),
                    max_in_flight: t
                        .max_in_flight
                        .and_then(|m| c.positive(&format!("{path}.max_in_flight"), m)),
                    usage,
                    refund_on: super::counting::tier(c, &path, t),
                },
            );
        }
    }
    tiers
}

/// Largest accepted tier `weight`: a share ratio beyond 1000:1 is a misconfiguration.
const MAX_WEIGHT: i64 = 1000;

/// `tiers.<name>.weight`: 1..=1000, default 1.
fn tier_weight(c: &mut Check, path: &str, weight: Option<i64>) -> u32 {
    match weight {
        None => 1,
        Some(w) if (1..=MAX_WEIGHT).contains(&w) => w as u32,
        Some(w) => {
            c.err(
                format!("{path}.weight"),
                format!("must be between 1 and {MAX_WEIGHT} (got {w})"),
            );
            1
        }
    }
}

/// `tiers.<name>.pool`: a valid bucket and `0 < max_share <= 1` (default 0.5).
fn pool_settings(c: &mut Check, tier_path: &str, p: &RawPool) -> Option<PoolSettings> {
    let path = format!("{tier_path}.pool");
    let rate = c.rate(&path, p.limit, &p.per, p.burst);
    let max_share = p.max_share.unwrap_or(0.5);
    if !(max_share > 0.0 && max_share <= 1.0) {
        c.err(
            format!("{path}.max_share"),
            format!("must be greater than 0 and at most 1 (got {max_share})"),
        );
        return None;
    }
    Some(PoolSettings {
        rate: rate?,
        max_share,
    })
}
