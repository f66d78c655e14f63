//! The Redis side of a request's policies (docs/DESIGN.md 4c, 4e): one script call decides any
//! number of limits under one hash tag (a tier's main limit and limit rules, each with its own
//! algorithm) together with the tier's calendar quotas, all or nothing.
//!
//! Each algorithm's script (`lua/<algorithm>.lua`, with the shared `lua/lib/*.lua` parts put
//! in by [`expand`]; the sources are in [`scripts`](crate::store::redis::scripts)) is composed at
//! load time into `lua/policy.lua`, which checks every policy and debits only when all admit.
//! Keys: each entry's own (a tier's is [`main_key`]) and, per quota, [`quota_base_key`] (the
//! script appends the window start). `lua/refund.lua` gives a call's debits back when a later
//! call (another hash tag) refused the request. Replies are integers (ms, tokens).

use crate::limit::algorithm::{Algorithm, Outcome};
pub use crate::limit::calendar::CalendarQuota;
use crate::limit::gcra::TatState;
use crate::limit::{Decision, Rate};
use crate::store::redis::client::{evalsha, LuaScript, RedisFault};
use crate::store::redis::keys::{main_key, quota_base_key, quota_key};
use crate::store::redis::late::{Late, Undo};
use crate::store::redis::scripts::{
    FIXED_WINDOW_LUA, GCRA_LUA, LEAKY_BUCKET_LUA, LEAKY_REFUND_LUA, OWED_LUA, POLICY_LUA,
    PRELUDE_LUA, REFUND_LUA, SLIDING_WINDOW_COUNTER_LUA, SLIDING_WINDOW_LOG_LUA, TAT_LUA,
    TOKEN_BUCKET_LUA,
};
use redis::{Cmd, FromRedisValue};
use std::sync::{Arc, OnceLock};

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

/// `template` with its `--@@PRELUDE@@`, `--@@OWED@@` and `--@@TAT@@` lines replaced by the
/// shared parts.
pub fn expand(template: &str) -> String {
    template
        .replacen("--@@PRELUDE@@\n", PRELUDE_LUA, 1)
        .replacen("--@@OWED@@\n", OWED_LUA, 1)
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

/// `lua/policy.lua` with the six algorithms' scripts in place, as `ALGORITHMS[1..6]` (in the
/// order of [`Algorithm::ALL`]), and the GCRA debt (`lua/lib/owed.lua`) for its closed form.
pub fn compose() -> String {
    let mut table = String::from("local ALGORITHMS = {\n");
    for alg in Algorithm::ALL {
        table.push_str("function(KEYS, ARGV, redis)\n");
        // The token bucket answers its four values here (one integer stand-alone).
        table.push_str(&algorithm_lua(alg).replacen(
            "local FOUR_VALUES = false",
            "local FOUR_VALUES = true",
            1,
        ));
        table.push_str("\nend,\n");
    }
    table.push('}');
    POLICY_LUA
        .replacen("--@@OWED@@\n", OWED_LUA, 1)
        .replacen("--@@ALGORITHMS@@", &table, 1)
}

/// The composed policy script (built once per process; its SHA is stable). The source is
/// leaked once so it lives as long as the process, like the embedded scripts.
pub fn policy_script() -> &'static LuaScript {
    static SCRIPT: OnceLock<LuaScript> = OnceLock::new();
    SCRIPT.get_or_init(|| LuaScript::new(Box::leak(compose().into_boxed_str())))
}

/// The refund script of a leaky bucket slot (`lua/leaky_refund.lua`).
pub fn refund_script() -> &'static LuaScript {
    static SCRIPT: OnceLock<LuaScript> = OnceLock::new();
    SCRIPT.get_or_init(|| LuaScript::new(LEAKY_REFUND_LUA))
}

/// The script giving back an earlier call's debits (`lua/refund.lua`).
pub fn debit_refund_script() -> &'static LuaScript {
    static SCRIPT: OnceLock<LuaScript> = OnceLock::new();
    SCRIPT.get_or_init(|| LuaScript::new(REFUND_LUA))
}

/// One limit decided in a policy call: a tier's main limit or a limit rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitEntry {
    /// Its state's key (under the hash tag of its call).
    pub key: Arc<str>,
    pub algorithm: Algorithm,
    pub rate: Rate,
    /// Tokens this request takes from it.
    pub cost: u64,
    /// `leaky_bucket` only: longest delay until a request's slot.
    pub max_delay_ms: u64,
    /// A shadow entry is decided and debited, but its refusal does not refuse the call.
    pub shadow: bool,
}

impl LimitEntry {
    /// The algorithm's number in the scripts (1-based position in [`Algorithm::ALL`]).
    fn code(&self) -> usize {
        self.algorithm as usize + 1
    }
}

/// A tier's calendar quotas decided in a policy call, with the cost each is debited.
#[derive(Debug, Clone, Copy)]
pub struct QuotaPart<'a> {
    pub tenant: &'a str,
    pub quotas: &'a [CalendarQuota],
    pub cost: u64,
}

/// Everything one policy call needs (a tier's policies: its main limit and quotas).
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

impl PolicyCall<'_> {
    /// The tier's main limit as an entry, keyed [`main_key`].
    pub fn entry(&self, prefix: &str) -> LimitEntry {
        LimitEntry {
            key: main_key(prefix, self.tenant, self.algorithm).into(),
            algorithm: self.algorithm,
            rate: self.rate,
            cost: self.cost,
            max_delay_ms: self.max_delay_ms,
            shadow: false,
        }
    }

    /// The tier's quotas.
    pub fn quota_part(&self) -> QuotaPart<'_> {
        QuotaPart {
            tenant: self.tenant,
            quotas: self.quotas,
            cost: self.cost,
        }
    }
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

/// What one policy call over several entries decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchDecision {
    /// True when every enforced policy admitted (and every entry and quota was debited).
    pub admitted: bool,
    /// The call's clock (Redis `TIME`, Unix ms): what a refund of its debits needs.
    pub now_ms: u64,
    /// Each entry's own decision, in call order, with a `leaky_bucket` reservation.
    pub entries: Vec<(Outcome, Option<TatState>)>,
    /// Each quota's decision, in config order.
    pub quotas: Vec<Decision>,
}

/// A policy call's identity: its KEYS and ARGV (for one request). Requests whose calls are
/// equal are decided by one call of `lua/policy.lua` with a request count. The arguments are
/// kept as one text, each followed by a space (they are numbers and period names), so building,
/// hashing and comparing an identity per request costs one string, not one per argument; the
/// call sends that text as one argument (packed: `lua/policy.lua` splits it into its words),
/// then the request count. The identity is hashed once, when built ([`CallKey::new`]); its
/// `Hash` writes that digest.
#[derive(Debug, Clone)]
pub struct CallKey {
    pub keys: Vec<String>,
    /// ARGV without the request count, each argument followed by one space.
    pub args: String,
    /// The keys and arguments hashed with this process's random keys.
    digest: u64,
    /// The arguments read back, on first use ([`CallKey::spec`]).
    spec: OnceLock<Option<replay::CallSpec>>,
    /// Its `EVALSHA` of [`policy_script`] deciding one request, and without the request count,
    /// each built on first use ([`CallKey::command`]).
    single: OnceLock<Result<Cmd, RedisFault>>,
    base: OnceLock<Result<Cmd, RedisFault>>,
}

impl PartialEq for CallKey {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest && self.args == other.args && self.keys == other.keys
    }
}

impl Eq for CallKey {}

impl std::hash::Hash for CallKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest);
    }
}

impl CallKey {
    /// The identity of a call with these KEYS and ARGV (without the request count).
    pub fn new(keys: Vec<String>, args: String) -> Self {
        static HASHER: OnceLock<crate::hashing::RandomState> = OnceLock::new();
        let digest = HASHER
            .get_or_init(Default::default)
            .hash_one((&keys, &args));
        CallKey {
            keys,
            args,
            digest,
            spec: OnceLock::new(),
            single: OnceLock::new(),
            base: OnceLock::new(),
        }
    }

    /// What the call decides, read from its arguments once per identity (a kept plan's calls
    /// are read once, not once per call); `None` when they are not a policy call's.
    pub fn spec(&self) -> Option<&replay::CallSpec> {
        self.spec
            .get_or_init(|| replay::CallSpec::parse(self.arg_list()))
            .as_ref()
    }

    /// The arguments without the request count, one by one.
    pub fn arg_list(&self) -> impl Iterator<Item = &str> {
        self.args.split_terminator(' ')
    }

    /// The arguments without the request count, packed: one text, the words separated by
    /// single spaces (what the call sends as its first argument).
    pub fn packed(&self) -> &str {
        self.args.strip_suffix(' ').unwrap_or(&self.args)
    }

    /// ARGV deciding `requests` such requests in turn: the packed arguments, then the count
    /// (a coalesced call has no test clock).
    pub fn args_for(&self, requests: usize) -> Vec<String> {
        let mut count = itoa::Buffer::new();
        let args = self.args_with(&mut count, requests);
        args.into_iter().map(str::to_string).collect()
    }

    /// The `EVALSHA` of [`policy_script`] deciding `requests` such requests: built once per
    /// identity and copied per call (a kept plan's call is sent many times).
    /// Errors: [`RedisFault::CrossSlot`] for keys of several Cluster slots.
    pub fn command(&self, requests: usize) -> Result<Cmd, RedisFault> {
        let build = |requests: Option<usize>| {
            let mut count = itoa::Buffer::new();
            let mut args = self.args_with(&mut count, requests.unwrap_or(0));
            if requests.is_none() {
                args.pop();
            }
            evalsha(policy_script(), &self.keys, &args)
        };
        if requests == 1 {
            return self.single.get_or_init(|| build(Some(1))).clone();
        }
        let mut cmd = self.base.get_or_init(|| build(None)).clone()?;
        cmd.arg(requests);
        Ok(cmd)
    }

    /// [`args_for`](Self::args_for) borrowed from the identity, the count written to `count`.
    pub fn args_with<'a>(&'a self, count: &'a mut itoa::Buffer, requests: usize) -> Vec<&'a str> {
        vec![self.packed(), count.format(requests)]
    }
}

/// KEYS and ARGV of a tier's policy call; `test_now_ms` only from tests (fixes the script's
/// clock).
pub fn keys_and_args(
    prefix: &str,
    call: &PolicyCall<'_>,
    test_now_ms: Option<u64>,
) -> (Vec<String>, Vec<String>) {
    let entry = call.entry(prefix);
    batch_keys_and_args(prefix, &[&entry], Some(call.quota_part()), test_now_ms)
}

/// The identity of a policy call for one request, without a test clock: see
/// [`batch_keys_and_args`].
pub fn call_key(prefix: &str, entries: &[&LimitEntry], quotas: Option<QuotaPart<'_>>) -> CallKey {
    let mut keys: Vec<String> = entries.iter().map(|e| e.key.to_string()).collect();
    let mut args = String::with_capacity(16 + 48 * entries.len());
    // Each argument followed by one space.
    fn word(args: &mut String, w: &str) {
        args.push_str(w);
        args.push(' ');
    }
    let mut number = itoa::Buffer::new();
    let mut put = |args: &mut String, v: u64| word(args, number.format(v));
    put(&mut args, entries.len() as u64);
    for e in entries {
        let r = &e.rate;
        let leaky = e.algorithm == Algorithm::LeakyBucket;
        put(&mut args, e.code() as u64);
        put(&mut args, u64::from(e.shadow));
        put(&mut args, 4 + u64::from(leaky));
        for v in [r.limit, r.per_ms, r.burst, e.cost] {
            put(&mut args, v);
        }
        if leaky {
            put(&mut args, e.max_delay_ms);
        }
    }
    let q = quotas.unwrap_or(QuotaPart {
        tenant: "",
        quotas: &[],
        cost: 0,
    });
    put(&mut args, q.cost);
    put(&mut args, q.quotas.len() as u64);
    for quota in q.quotas {
        keys.push(quota_base_key(prefix, q.tenant, quota.period));
        word(&mut args, quota.period.as_str());
        put(&mut args, quota.limit);
    }
    CallKey::new(keys, args)
}

/// KEYS and ARGV of a policy call deciding one request over `entries` (all under one hash tag)
/// and, when given, a tier's quotas (under its tenant's tag).
pub fn batch_keys_and_args(
    prefix: &str,
    entries: &[&LimitEntry],
    quotas: Option<QuotaPart<'_>>,
    test_now_ms: Option<u64>,
) -> (Vec<String>, Vec<String>) {
    let key = call_key(prefix, entries, quotas);
    let mut args = key.args_for(1);
    if let Some(now) = test_now_ms {
        args.push(now.to_string());
    }
    (key.keys, args)
}

/// KEYS and ARGV of `lua/refund.lua` giving back the debits of `entries` and of `quotas` (a
/// tier's quota part) made by a call whose clock was `now_ms`.
pub fn refund_keys_and_args(
    prefix: &str,
    entries: &[&LimitEntry],
    quotas: Option<QuotaPart<'_>>,
    now_ms: u64,
) -> (Vec<String>, Vec<String>) {
    let mut keys: Vec<String> = entries.iter().map(|e| e.key.to_string()).collect();
    let mut values = Vec::new();
    for e in entries {
        let r = &e.rate;
        values.push([e.code() as u64, now_ms, r.limit, r.per_ms, r.burst, e.cost]);
    }
    for q in quotas.iter() {
        for quota in q.quotas {
            let (start, _) = quota.period.window(now_ms);
            keys.push(quota_key(prefix, q.tenant, quota.period, start));
            values.push([0, now_ms, 0, 0, 0, q.cost]);
        }
    }
    let mut args = vec![values.len().to_string()];
    args.extend(values.iter().flatten().map(u64::to_string));
    (keys, args)
}

/// What undoes a policy call with identity `key` deciding `requests` requests, should its reply
/// come after the request stopped waiting ([`late`](crate::store::redis::late)): every admitted
/// request's debits given back by `lua/refund.lua` (as [`refund_keys_and_args`] does for a
/// refused request's), in one call.
pub fn late_refund(key: Arc<CallKey>, requests: usize) -> Late {
    Box::new(move |reply| {
        let PolicyReply(reply) = PolicyReply::from_redis_value(reply).ok()?;
        let spec = key.spec()?;
        let decided = decode_reply_of(&reply, spec, requests)?;
        let (bases, ne) = (&key.keys[spec.entries.len()..], spec.entries.len());
        let mut keys = Vec::new();
        let mut values: Vec<[u64; 6]> = Vec::new();
        for d in decided.iter().filter(|d| d.admitted) {
            for (k, e) in key.keys[..ne].iter().zip(&spec.entries) {
                let r = &e.rate;
                keys.push(k.clone());
                let code = e.algorithm as u64 + 1;
                values.push([code, d.now_ms, r.limit, r.per_ms, r.burst, e.cost]);
            }
            for (base, quota) in bases.iter().zip(&spec.quotas) {
                let (start, _) = quota.period.window(d.now_ms);
                keys.push(format!("{base}:{start}"));
                values.push([0, d.now_ms, 0, 0, 0, spec.quota_cost]);
            }
        }
        if values.is_empty() {
            return None;
        }
        let mut args = vec![values.len().to_string()];
        args.extend(values.iter().flatten().map(u64::to_string));
        Some(Undo {
            script: REFUND_LUA,
            keys,
            args,
        })
    })
}

/// A reply of `lua/policy.lua`: its integers, from an array (decided request by request) or
/// from the closed form's one string of integers separated by single spaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyReply(pub Vec<i64>);

impl FromRedisValue for PolicyReply {
    fn from_redis_value_ref(v: &redis::Value) -> Result<Self, redis::ParsingError> {
        match v {
            redis::Value::BulkString(text) => integers(text)
                .map(PolicyReply)
                .ok_or_else(|| "a policy reply of other than integers".into()),
            v => Vec::<i64>::from_redis_value_ref(v).map(PolicyReply),
        }
    }

    fn from_redis_value(v: redis::Value) -> Result<Self, redis::ParsingError> {
        Self::from_redis_value_ref(&v)
    }
}

/// The integers of `text` (decimal, an optional `-`, at most 18 digits each, separated by
/// single spaces); `None` for anything else. One pass over the bytes.
fn integers(text: &[u8]) -> Option<Vec<i64>> {
    let mut out = Vec::with_capacity(text.len() / 4 + 1);
    let (mut v, mut digits, mut negative) = (0i64, 0usize, false);
    for (i, &b) in text.iter().enumerate() {
        match b {
            b'0'..=b'9' if digits < 18 => {
                v = v * 10 + i64::from(b - b'0');
                digits += 1;
            }
            b'-' if i == 0 || text[i - 1] == b' ' => negative = true,
            b' ' if digits > 0 => {
                out.push(if negative { -v } else { v });
                (v, digits, negative) = (0, 0, false);
            }
            _ => return None,
        }
    }
    if digits == 0 {
        return None;
    }
    out.push(if negative { -v } else { v });
    Some(out)
}

fn decision(v: &[i64]) -> Decision {
    Decision {
        admitted: v[0] == 1,
        remaining: v[1].max(0) as u64,
        retry_after_ms: if v[2] < 0 { u64::MAX } else { v[2] as u64 },
        full_ms: v[3].max(0) as u64,
    }
}

/// One entry's reply values (`n` ≥ 4): its outcome and, when an admitted `leaky_bucket` wrote
/// one, its reservation (`scale` = the entry's limit; the period is not in the reply, and a
/// refund does not compare it).
fn entry_outcome(v: &[i64], limit: u64) -> (Outcome, Option<TatState>) {
    let reservation = (v.len() >= 7 && v[0] == 1).then(|| TatState {
        tat_ms: v[5].max(0) as u64,
        rem: v[6].max(0) as u64,
        scale: limit,
        per_ms: 0,
    });
    let outcome = Outcome {
        decision: decision(v),
        delay_ms: v.get(4).map_or(0, |d| (*d).max(0) as u64),
    };
    (outcome, reservation)
}

/// Decodes the reply of `lua/policy.lua` to a call with these arguments (the first ones
/// suffice: the request count and a test clock are not read) deciding `requests` requests: in
/// closed form ([`replay`]) or one block per request ([`parse_batches`]). `None` when it has an
/// unexpected shape.
pub fn decode_reply<'a>(
    reply: &[i64],
    args: impl IntoIterator<Item = &'a str>,
    requests: usize,
) -> Option<Vec<BatchDecision>> {
    decode_reply_of(reply, &replay::CallSpec::parse(args)?, requests)
}

/// [`decode_reply`] of a call whose arguments read back as `spec`.
pub fn decode_reply_of(
    reply: &[i64],
    spec: &replay::CallSpec,
    requests: usize,
) -> Option<Vec<BatchDecision>> {
    if reply.first() == Some(&-1) {
        return replay::replay(reply, spec, requests);
    }
    let limits: Vec<u64> = spec.entries.iter().map(|e| e.rate.limit).collect();
    parse_batches(reply, &limits, requests)
}

/// Parses the reply of `lua/policy.lua` deciding `requests` requests over entries of these
/// `limits` (tokens per period, in call order): each request's decision, in turn; `None` when
/// it has an unexpected shape.
pub fn parse_batches(reply: &[i64], limits: &[u64], requests: usize) -> Option<Vec<BatchDecision>> {
    let mut decisions = Vec::with_capacity(requests);
    let mut rest = reply;
    for _ in 0..requests {
        let (d, used) = parse_one(rest, limits)?;
        decisions.push(d);
        rest = &rest[used..];
    }
    rest.is_empty().then_some(decisions)
}

/// Parses the reply of `lua/policy.lua` deciding one request over entries of these `limits`;
/// `None` when it has an unexpected shape.
pub fn parse_batch(reply: &[i64], limits: &[u64]) -> Option<BatchDecision> {
    parse_batches(reply, limits, 1)?.pop()
}

/// One request's block at the start of `reply`, and its length.
fn parse_one(reply: &[i64], limits: &[u64]) -> Option<(BatchDecision, usize)> {
    let ne = *reply.get(2)? as usize;
    if ne != limits.len() {
        return None;
    }
    let mut at = 3;
    let mut entries = Vec::with_capacity(ne);
    for limit in limits {
        let n = *reply.get(at)? as usize;
        let v = reply.get(at + 1..at + 1 + n)?;
        if n < 4 {
            return None;
        }
        entries.push(entry_outcome(v, *limit));
        at += 1 + n;
    }
    let nq = *reply.get(at)? as usize;
    let quotas = reply.get(at + 1..at + 1 + 4 * nq)?;
    let d = BatchDecision {
        admitted: reply[0] == 1,
        now_ms: reply[1].max(0) as u64,
        entries,
        quotas: quotas.chunks(4).map(decision).collect(),
    };
    Some((d, at + 1 + 4 * nq))
}

impl PolicyDecision {
    /// A tier's decision from a call whose first entry is its main limit.
    pub fn from_batch(b: BatchDecision) -> Self {
        let (main, reservation) = b.entries[0];
        PolicyDecision {
            admitted: b.admitted,
            main,
            reservation,
            quotas: b.quotas,
        }
    }
}

/// Parses the reply of a tier's policy call (one entry, main limit of `limit` tokens per
/// period); `None` when it has an unexpected shape.
pub fn parse_reply(reply: &[i64], limit: u64) -> Option<PolicyDecision> {
    parse_batch(reply, &[limit]).map(PolicyDecision::from_batch)
}

pub mod replay;

#[cfg(test)]
mod tests;
