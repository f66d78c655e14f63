//! The Redis side of the tenant stage: one Lua script call per decision, through
//! [`RedisStore::eval`], on whichever connection kind `redis.mode` asks for (see
//! [`redis_conn`](super::conn)).
//!
//! Connections are created lazily on first use, inside the serving runtime, and shared by all
//! worker threads; concurrent decisions pipeline on them. Every call is bounded by
//! `redis.timeout_ms`, connection establishment included. Scripts run with EVALSHA; on NOSCRIPT
//! (Redis restart, `SCRIPT FLUSH`, failover, a cluster node that never saw the script) the
//! script is loaded on the node that answered and the call retried once, so no request fails
//! because of it.

use super::conn::{key_slot, RedisConn};
use super::home;
use super::keys::bucket_key;
use super::late::{self, Late, Pending, Undo};
use super::node::{is_wrong_role, Credentials};
use super::scripts::{REFUND_LUA, TOKEN_BUCKET_LUA};
use super::sentinel::is_failover_hold;
use crate::config::RedisSettings;
use crate::limit::token_bucket::{decide_batch, take_at_level};
use crate::limit::{Decision, Rate};
use redis::{Cmd, FromRedisValue, ToRedisArgs, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why a Redis call failed; the label of `tollgate_redis_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisFault {
    /// No answer within `redis.timeout_ms`.
    Timeout,
    /// Connection refused, dropped or not established.
    Connection,
    /// The script failed (or NOSCRIPT persisted after a reload).
    Script,
    /// The server is not a writable master (`READONLY`, `MASTERDOWN`, `LOADING`): a failover
    /// is under way; the connection is replaced.
    NotMaster,
    /// Not sent: the sentinels are failing over the master it would go to, and every write
    /// that master takes now may be lost (sentinel mode; docs/redis.md#what-each-mode-does-when-the-master-changes).
    Failover,
    /// A script's keys span several Cluster slots (a key layout bug; never sent).
    CrossSlot,
    /// Wrong ACL credentials or missing permissions (`redis.username_env` / `password_env`).
    Auth,
    /// Anything else (unexpected reply shape, protocol error).
    Other,
}

impl RedisFault {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RedisFault::Timeout => "timeout",
            RedisFault::Connection => "connection",
            RedisFault::Script => "script",
            RedisFault::NotMaster => "not_master",
            RedisFault::Failover => "failover",
            RedisFault::CrossSlot => "cross_slot",
            RedisFault::Auth => "auth",
            RedisFault::Other => "other",
        }
    }

    fn classify(e: &redis::RedisError) -> Self {
        if is_failover_hold(e) {
            RedisFault::Failover
        } else if e.is_timeout() {
            RedisFault::Timeout
        } else if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
            RedisFault::Connection
        } else if matches!(
            e.kind(),
            redis::ErrorKind::AuthenticationFailed
                | redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
        ) {
            RedisFault::Auth
        } else if is_wrong_role(e) {
            RedisFault::NotMaster
        } else if matches!(e.kind(), redis::ErrorKind::Server(_)) {
            RedisFault::Script
        } else {
            RedisFault::Other
        }
    }
}

/// A Lua script run by [`RedisStore::eval`]: its source and SHA-1 (for EVALSHA).
#[derive(Debug, Clone)]
pub struct LuaScript {
    source: &'static str,
    sha1: String,
}

impl LuaScript {
    /// Wraps a script source (one of [`scripts`](super::scripts), or composed from them).
    pub fn new(source: &'static str) -> Self {
        LuaScript {
            source,
            sha1: redis::Script::new(source).get_hash().to_string(),
        }
    }

    /// The Lua source.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// Hex SHA-1 of the source, as Redis names it.
    pub fn sha1(&self) -> &str {
        &self.sha1
    }
}

/// A call in flight: when dropped before its reply (cut by a bound), handed off with `late`.
struct Sent<'a, M: FnOnce() -> Late> {
    call: Option<Pending>,
    conn: &'a Arc<RedisConn>,
    late: Option<M>,
}

impl<M: FnOnce() -> Late> Drop for Sent<'_, M> {
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        self.conn.unanswered();
        if let Some(late) = self.late.take() {
            late::hand_off(self.conn.clone(), call, late());
        }
    }
}

/// The store of tenant buckets: one Redis deployment (standalone, cluster or sentinel).
pub struct RedisStore {
    conn: Arc<RedisConn>,
    timeout: Duration,
    key_prefix: String,
    token_bucket: LuaScript,
    /// Whether the last call failed (its error is logged once, not per request).
    failing: AtomicBool,
}

impl RedisStore {
    /// Prepares the client; connects nothing yet. Reads the ACL credentials from the
    /// environment and the CA file. Errors: (field path, reason).
    pub fn new(settings: &RedisSettings) -> Result<Self, (String, String)> {
        let creds = Credentials::load(
            &settings.username_env,
            &settings.password_env,
            &settings.tls_ca_file,
            "redis",
        )?;
        Ok(RedisStore {
            conn: Arc::new(RedisConn::new(settings, creds)?),
            timeout: settings.timeout,
            key_prefix: settings.key_prefix.clone(),
            token_bucket: LuaScript::new(TOKEN_BUCKET_LUA),
            failing: AtomicBool::new(false),
        })
    }

    /// The configured key prefix (the first part of every key, [`keys`](super::keys)).
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// One `PING` to the master (connecting first when there is no connection yet), bounded by
    /// `limit`: whether it answered. Made at [`home`](super::home), so the connection a warm-up
    /// makes is the serving runtime's.
    pub async fn ping(&self, limit: Duration) -> bool {
        let conn = self.conn.clone();
        let call = home::at_home(Box::pin(
            async move { conn.query(&redis::cmd("PING")).await },
        ));
        matches!(tokio::time::timeout(limit, call).await, Ok(Ok(_)))
    }

    /// Runs `script` with `keys` and `args` on the master holding the keys: EVALSHA, and on
    /// NOSCRIPT (restart, failover, a cluster node that never saw it) SCRIPT LOAD on the node
    /// serving the keys' slot and EVALSHA again (and, should that still meet NOSCRIPT, e.g. on
    /// the target of an ASK redirect mid-migration, EVAL with the source). The one entry point
    /// for every script, whatever `redis.mode`.
    ///
    /// All keys must hash to one Cluster slot (same `{tag}`); otherwise the call is refused
    /// here ([`RedisFault::CrossSlot`]) in every mode, so a key layout that would break on a
    /// cluster fails in tests against a single Redis too. Bounded by `redis.timeout_ms`.
    pub async fn eval<T: FromRedisValue, A: ToRedisArgs>(
        &self,
        script: &LuaScript,
        keys: &[String],
        args: &[A],
    ) -> Result<T, RedisFault> {
        self.eval_undoable(script, keys, args, None::<fn() -> Late>)
            .await
    }

    /// [`eval`](Self::eval) of a script that debits: should the call go unanswered within its
    /// bound (`redis.timeout_ms`, or a shorter one of the caller's that drops this future),
    /// `late` is asked what to do with its reply and the call is handed off to wait for it
    /// ([`late`](super::late)). `late` is called only then, never for a call answered in time.
    pub async fn eval_undoable<T: FromRedisValue, A: ToRedisArgs, M: FnOnce() -> Late>(
        &self,
        script: &LuaScript,
        keys: &[String],
        args: &[A],
        late: Option<M>,
    ) -> Result<T, RedisFault> {
        let call = evalsha(script, keys, args)?;
        self.send_undoable(script, call, late).await
    }

    /// [`eval_undoable`](Self::eval_undoable) of a command already built by [`evalsha`] for
    /// `script` (a caller that sends the same call many times builds it once and clones it).
    pub async fn send_undoable<T: FromRedisValue, M: FnOnce() -> Late>(
        &self,
        script: &LuaScript,
        call: Cmd,
        late: Option<M>,
    ) -> Result<T, RedisFault> {
        // Owned, so that a call this bound cuts can be handed off with its reply to come.
        let mut sent = Sent {
            call: Some(late::run(self.conn.clone(), call, script.source)),
            conn: &self.conn,
            late,
        };
        let attempt = sent.call.as_mut().expect("set above");
        let value = match tokio::time::timeout(self.timeout, attempt).await {
            Err(_) => return Err(self.failed(RedisFault::Timeout, &"no reply within timeout_ms")),
            Ok(answered) => {
                sent.call = None;
                match answered {
                    Err(e) => return Err(self.failed(RedisFault::classify(&e), &e)),
                    Ok(v) => v,
                }
            }
        };
        // Read first: the usual case (not failing) writes nothing to the shared line.
        if self.failing.load(Ordering::Relaxed) && self.failing.swap(false, Ordering::Relaxed) {
            tracing::info!("redis calls succeed again");
        }
        T::from_redis_value(value).map_err(|e| self.failed(RedisFault::Other, &e))
    }

    /// Logs the first failure after a success (with the error text, which never holds a
    /// credential: redis-rs does not put passwords in errors) and returns `fault`.
    fn failed(&self, fault: RedisFault, error: &dyn std::fmt::Display) -> RedisFault {
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(kind = fault.as_str(), error = %error, "redis call failed");
        }
        fault
    }

    /// Decides `n` requests of `cost` tokens each for `tenant` in one token bucket script call
    /// (request coalescing, [`crate::quota::coalesce`]): their decisions in order, as `n` consecutive
    /// calls at Redis's instant would give them. `n` = 1 is a plain [`token_bucket`] call.
    ///
    /// [`token_bucket`]: Self::token_bucket
    pub async fn token_bucket_batch(
        &self,
        tenant: &str,
        rate: &Rate,
        cost: u64,
        n: usize,
    ) -> Result<Vec<Decision>, RedisFault> {
        if n == 1 {
            return Ok(vec![self.token_bucket(tenant, rate, cost).await?]);
        }
        let keys = [bucket_key(&self.key_prefix, tenant)];
        let args = [rate.limit, rate.per_ms, rate.burst, cost, n as u64];
        let late = || bucket_late(&[(&keys[0], *rate)], cost, |r| r.first().copied());
        let reply: Vec<i64> = self
            .eval_undoable(&self.token_bucket, &keys, &args, Some(late))
            .await?;
        let [admitted, level] = reply[..] else {
            return Err(RedisFault::Other);
        };
        let (decisions, _) = decide_batch(level.max(0) as u64, rate, cost, n);
        // The script debited what it admitted; the headers must say the same.
        if decisions.iter().filter(|d| d.admitted).count() as i64 != admitted {
            return Err(self.failed(RedisFault::Other, &"batch reply disagrees with its level"));
        }
        Ok(decisions)
    }

    /// Runs the token bucket script for `tenant`: one EVALSHA (plus SCRIPT LOAD and a retry on
    /// NOSCRIPT). Bounded by the configured timeout.
    ///
    /// Sends limit, per_ms, burst and the cost (left out when 1, the script's default: every
    /// argument costs Redis a string to convert); the script answers the level it decided on,
    /// from which [`decide_batch`] derives the decision (an array reply costs Redis about as
    /// much as a command).
    pub async fn token_bucket(
        &self,
        tenant: &str,
        rate: &Rate,
        cost: u64,
    ) -> Result<Decision, RedisFault> {
        let keys = [bucket_key(&self.key_prefix, tenant)];
        let args = [rate.limit, rate.per_ms, rate.burst, cost];
        let args = if cost == 1 { &args[..3] } else { &args[..] };
        let rate_of = *rate;
        let late = || {
            bucket_late(&[(&keys[0], *rate)], cost, move |r| {
                single_decision(r, &rate_of, cost).map(|d| i64::from(d.admitted))
            })
        };
        let reply: Value = self
            .eval_undoable(&self.token_bucket, &keys, args, Some(late))
            .await?;
        let decision = match reply {
            Value::Int(level) => Some(decision_at(level, rate, cost)),
            other => integers(other).and_then(|r| single_decision(&r, rate, cost)),
        };
        decision
            .ok_or_else(|| self.failed(RedisFault::Other, &"token bucket reply of another shape"))
    }
}

/// `EVALSHA <sha> <key count> <keys> <args>` of `script`, as [`RedisStore::eval`] sends it.
/// Errors: [`RedisFault::CrossSlot`] when there is no key, or the keys hash to several Redis
/// Cluster slots (refused in every mode, so a layout that would break on a cluster fails
/// against a single Redis too).
pub fn evalsha<A: ToRedisArgs>(
    script: &LuaScript,
    keys: &[String],
    args: &[A],
) -> Result<Cmd, RedisFault> {
    let Some(first) = keys.first() else {
        return Err(RedisFault::CrossSlot);
    };
    // One key is always in one slot (no hash to compute).
    let slot = if keys.len() > 1 { key_slot(first) } else { 0 };
    if keys[1..].iter().any(|k| key_slot(k) != slot) {
        tracing::error!(keys = ?keys, "script keys span several cluster slots");
        return Err(RedisFault::CrossSlot);
    }
    // Sized up front: growing the command's buffers (realloc and copy) cost more than writing
    // it. Arguments are numbers here; a longer one only grows the buffer.
    let data = 7 + 40 + 4 + keys.iter().map(String::len).sum::<usize>() + 16 * args.len();
    let mut call = Cmd::with_capacity(3 + keys.len() + args.len(), data);
    call.arg("EVALSHA")
        .arg(script.sha1())
        .arg(keys.len())
        .arg(keys)
        .arg(args);
    Ok(call)
}

/// What undoes a late call debiting token buckets (`buckets`: each key with its size), each by
/// `cost` tokens a request: the `admitted(reply)` requests' tokens go back to every bucket
/// (`lua/refund.lua`, at most up to the burst). A token bucket decision (`buckets`: the
/// tenant's), a burst pool's (the pool and the tenant's share), a lease grant (`admitted`: the
/// tokens granted, `cost` 1).
pub fn bucket_late(
    buckets: &[(&str, Rate)],
    cost: u64,
    admitted: impl Fn(&[i64]) -> Option<i64> + Send + 'static,
) -> Late {
    let buckets: Vec<(String, Rate)> = buckets.iter().map(|(k, r)| (k.to_string(), *r)).collect();
    Box::new(move |reply| {
        let reply = integers(reply)?;
        let n = u64::try_from(admitted(&reply)?).ok().filter(|n| *n > 0)?;
        let mut args = vec![buckets.len().to_string()];
        let mut keys = Vec::with_capacity(buckets.len());
        for (key, rate) in buckets {
            // The token bucket's entry (algorithm 1); its clock is not read.
            let entry = [1, 0, rate.limit, rate.per_ms, rate.burst, n * cost];
            args.extend(entry.iter().map(u64::to_string));
            keys.push(key);
        }
        Some(Undo {
            script: REFUND_LUA,
            keys,
            args,
        })
    })
}

/// A script's reply as integers: an array's, or one integer as a one-element list.
pub fn integers(reply: Value) -> Option<Vec<i64>> {
    match reply {
        Value::Int(n) => Some(vec![n]),
        other => Vec::<i64>::from_redis_value(other).ok(),
    }
}

/// The decision of one token bucket call (`lua/token_bucket.lua` without `n`) from its reply:
/// the level it decided on, in units of 1/per_ms token ([`decide_batch`] with n = 1 derives
/// the rest, as the script decided), or the four values of [`decision_of`]. `None`: a reply
/// of another shape.
pub fn single_decision(reply: &[i64], rate: &Rate, cost: u64) -> Option<Decision> {
    match *reply {
        [level] => Some(decision_at(level, rate, cost)),
        _ => decision_of(reply).ok(),
    }
}

/// The decision of one request against the `level` a token bucket call answered.
fn decision_at(level: i64, rate: &Rate, cost: u64) -> Decision {
    let mut level = (level.max(0) as u64).min(rate.burst * rate.per_ms);
    take_at_level(&mut level, rate, cost)
}

/// The decision a token bucket script answered: `[admitted (0|1), tokens left, ms until a retry
/// can pass (negative: never), ms until full]`. Errors: a reply of another shape.
pub fn decision_of(reply: &[i64]) -> Result<Decision, RedisFault> {
    let [admitted, remaining, retry_ms, full_ms] = reply[..] else {
        return Err(RedisFault::Other);
    };
    Ok(Decision {
        admitted: admitted == 1,
        remaining: remaining.max(0) as u64,
        retry_after_ms: wait_ms(retry_ms),
        full_ms: full_ms.max(0) as u64,
    })
}

/// A script's wait in ms, where a negative value means "never" (`u64::MAX`).
pub fn wait_ms(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(u64::MAX)
}
