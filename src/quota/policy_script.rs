//! The Redis side of a tier's policies (docs/DESIGN.md 4c): one script call decides the main
//! limit, whatever its algorithm, together with the tier's calendar quotas, all or nothing.
//!
//! Each algorithm's script (`lua/<algorithm>.lua`, with the shared `lua/lib/*.lua` parts put
//! in by [`expand`]; the sources are in [`scripts`](crate::store::redis::scripts)) is composed at
//! load time into `lua/policy.lua`, which checks every policy and debits only when all admit.
//! Keys: [`policy_main_key`] and, per quota, [`policy_quota_key`] (the script appends the window
//! start), all under the tenant's hash tag. Replies are integers (ms, tokens).

use crate::limit::algorithm::{Algorithm, Outcome};
pub use crate::limit::calendar::CalendarQuota;
use crate::limit::gcra::TatState;
use crate::limit::{Decision, Rate};
use crate::store::redis::client::LuaScript;
use crate::store::redis::keys::{policy_main_key, policy_quota_key};
use crate::store::redis::scripts::{
    FIXED_WINDOW_LUA, GCRA_LUA, LEAKY_BUCKET_LUA, LEAKY_REFUND_LUA, POLICY_LUA, PRELUDE_LUA,
    SLIDING_WINDOW_COUNTER_LUA, SLIDING_WINDOW_LOG_LUA, TAT_LUA, TOKEN_BUCKET_LUA,
};
use std::sync::OnceLock;

/// The template `lua/<alg>.lua` as written.
fn template(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::TokenBucket => TOKEN_BUCKET_LUA,
        Algorithm::Gcra => GCRA_LUA,
        Algorithm::FixedWindow => FIXED_WINDOW_LUA,
        Algorithm::SlidingWindowLog => SLIDING_WINDOW_LOG_LUA,
        Algorithm::SlidingWindowCounter => SLIDING_WINDOW_COUNTER_LUA,
        Algorithm::LeakyBucket => LEAKY_BUCKET_LUA,
    }
}

/// `template` with its `--@@PRELUDE@@` and `--@@TAT@@` lines replaced by the shared parts.
pub fn expand(template: &str) -> String {
    template
        .replacen("--@@PRELUDE@@\n", PRELUDE_LUA, 1)
        .replacen("--@@TAT@@\n", TAT_LUA, 1)
}

/// The stand-alone script of `alg` (ARGV: limit, per_ms, burst, cost[, max_delay_ms]): its
/// template with the shared parts in place, built once per process (the sources are leaked
/// once so they live as long as the process, like the embedded scripts).
pub fn algorithm_lua(alg: Algorithm) -> &'static str {
    static SOURCES: OnceLock<Vec<&'static str>> = OnceLock::new();
    let all = SOURCES.get_or_init(|| {
        Algorithm::ALL
            .iter()
            .map(|a| &*Box::leak(expand(template(*a)).into_boxed_str()))
            .collect()
    });
    all[alg as usize]
}

/// `lua/policy.lua` with `alg`'s script as its main policy.
pub fn compose(alg: Algorithm) -> String {
    let main = format!(
        "local function main_policy(KEYS, ARGV, redis)\n{}\nend",
        algorithm_lua(alg)
    );
    POLICY_LUA.replacen("--@@MAIN@@", &main, 1)
}

/// The composed script of `alg` (built once per process; its SHA is stable). The six sources
/// are leaked once so they live as long as the process, like the embedded scripts.
pub fn policy_script(alg: Algorithm) -> &'static LuaScript {
    static SCRIPTS: OnceLock<Vec<LuaScript>> = OnceLock::new();
    let all = SCRIPTS.get_or_init(|| {
        Algorithm::ALL
            .iter()
            .map(|a| LuaScript::new(Box::leak(compose(*a).into_boxed_str())))
            .collect()
    });
    &all[alg as usize]
}

/// The refund script (`lua/leaky_refund.lua`).
pub fn refund_script() -> &'static LuaScript {
    static SCRIPT: OnceLock<LuaScript> = OnceLock::new();
    SCRIPT.get_or_init(|| LuaScript::new(LEAKY_REFUND_LUA))
}

/// Everything one policy call needs.
#[derive(Debug, Clone, Copy)]
pub struct PolicyCall<'a> {
    pub tenant: &'a str,
    pub algorithm: Algorithm,
    pub rate: Rate,
    pub cost: u64,
    /// `leaky_bucket` only: longest delay until a request's slot.
    pub max_delay_ms: u64,
    pub quotas: &'a [CalendarQuota],
}

/// What one policy call decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDecision {
    /// True when every policy admitted (and all were debited).
    pub admitted: bool,
    /// The main limit's own decision (it may admit while a quota refuses).
    pub main: Outcome,
    /// `leaky_bucket`, admitted: the state its reservation wrote (to give the slot back).
    pub reservation: Option<TatState>,
    /// Each quota's decision, in config order.
    pub quotas: Vec<Decision>,
}

/// KEYS and ARGV of a policy call; `test_now_ms` only from tests (fixes the script's clock).
pub fn keys_and_args(
    prefix: &str,
    call: &PolicyCall<'_>,
    test_now_ms: Option<u64>,
) -> (Vec<String>, Vec<String>) {
    let mut keys = vec![policy_main_key(prefix, call.tenant, call.algorithm)];
    let r = &call.rate;
    let mut main = vec![r.limit, r.per_ms, r.burst, call.cost];
    if call.algorithm == Algorithm::LeakyBucket {
        main.push(call.max_delay_ms);
    }
    let mut args = vec![main.len().to_string()];
    args.extend(main.iter().map(u64::to_string));
    args.push(call.cost.to_string());
    args.push(call.quotas.len().to_string());
    for q in call.quotas {
        keys.push(policy_quota_key(prefix, call.tenant, q.period));
        args.push(q.period.as_str().to_string());
        args.push(q.limit.to_string());
    }
    if let Some(now) = test_now_ms {
        args.push(now.to_string());
    }
    (keys, args)
}

fn decision(v: &[i64]) -> Decision {
    Decision {
        admitted: v[0] == 1,
        remaining: v[1].max(0) as u64,
        retry_after_ms: if v[2] < 0 { u64::MAX } else { v[2] as u64 },
        full_ms: v[3].max(0) as u64,
    }
}

/// Parses the reply of `lua/policy.lua` for a main limit of `limit` tokens per period; `None`
/// when it has an unexpected shape.
pub fn parse_reply(reply: &[i64], limit: u64) -> Option<PolicyDecision> {
    let n = *reply.get(1)? as usize;
    let main = reply.get(2..2 + n)?;
    if n < 4 {
        return None;
    }
    let nq = *reply.get(2 + n)? as usize;
    let rest = reply.get(3 + n..)?;
    if rest.len() != 4 * nq {
        return None;
    }
    let reservation = (n >= 7 && main[0] == 1).then(|| TatState {
        tat_ms: main[5].max(0) as u64,
        rem: main[6].max(0) as u64,
        scale: limit,
    });
    Some(PolicyDecision {
        admitted: reply[0] == 1,
        main: Outcome {
            decision: decision(main),
            delay_ms: main.get(4).map_or(0, |d| (*d).max(0) as u64),
        },
        reservation,
        quotas: rest.chunks(4).map(decision).collect(),
    })
}

#[cfg(test)]
mod tests;
