//! Read-only inspection and reset of one tenant's policy state in Redis, for the admin API
//! (`GET /v1/tenants/{id}`, `POST /v1/explain`, `POST /v1/tenants/{id}/reset`).
//!
//! [`peek`] reads the raw state of the main limit and of every calendar quota with
//! `lua/peek.lua` (TIME, HMGET/LRANGE, GET: no write, no TTL change) and decides in Rust with the
//! reference functions of [`crate::limit`], which the algorithm scripts mirror step for step: the
//! same keys ([`keys::main_key`], [`keys::quota_key`]), the same clock (Redis TIME),
//! the same math. Nothing is debited.
//!
//! [`reset`] deletes every key the tenant can own: the main-limit key of each of the six
//! algorithms (a reload may have switched algorithm) and the calendar quota counters of the
//! current and previous window of every period (counters expire at their window's end, so no
//! older one exists).

use crate::limit::algorithm::{self, AlgoState, Algorithm};
use crate::limit::calendar::{self, CalendarQuota, Period};
use crate::limit::fixed_window::WindowState;
use crate::limit::gcra::TatState;
use crate::limit::sliding_window_counter::CounterState;
use crate::limit::{Decision, Rate, TokenBucketState};
use crate::store::redis::client::{LuaScript, RedisFault, RedisStore};
use crate::store::redis::keys;
use crate::store::redis::scripts::{PEEK_LUA, RESET_LUA};
use once_cell::sync::Lazy;
use redis::Value;
use std::collections::VecDeque;

static PEEK: Lazy<LuaScript> = Lazy::new(|| LuaScript::new(PEEK_LUA));
static RESET: Lazy<LuaScript> = Lazy::new(|| LuaScript::new(RESET_LUA));

/// The raw state read from Redis at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawState {
    /// Redis TIME, Unix ms.
    pub now_ms: u64,
    /// The main limit's state (`None`: no key, a full bucket).
    pub main: Option<AlgoState>,
    /// Tokens counted in each quota's current window, in the order given.
    pub quota_used: Vec<u64>,
}

/// What a tenant's policies look like now, and what they would decide for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peeked {
    pub state: RawState,
    /// The main limit as it stands: `remaining` tokens and `full_ms` until full.
    pub main_view: Decision,
    /// The main limit's decision for a request of `cost` tokens (not applied).
    pub main_decision: Decision,
    /// Per quota: as it stands (`remaining`, `full_ms`), and the decision for `cost` tokens.
    pub quotas: Vec<(Decision, Decision)>,
}

impl Peeked {
    /// True when every policy would admit (the all-or-nothing rule of `lua/policy.lua`).
    pub fn admitted(&self) -> bool {
        self.main_decision.admitted && self.quotas.iter().all(|(_, d)| d.admitted)
    }
}

/// Hash fields of each algorithm's key (the algorithm scripts' layout; the token bucket's are
/// the three numbers of its string); `None`: a list.
fn fields(alg: Algorithm) -> Option<&'static [&'static str]> {
    match alg {
        Algorithm::TokenBucket => Some(&["l", "s", "t"]),
        Algorithm::Gcra | Algorithm::LeakyBucket => Some(&["t", "r", "s", "p"]),
        Algorithm::FixedWindow => Some(&["w", "c", "l"]),
        Algorithm::SlidingWindowCounter => Some(&["w", "c", "p", "l"]),
        Algorithm::SlidingWindowLog => None,
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// A stored integer (scripts write them with `%d`: plain digits); a float text is floored.
fn number(v: &Value) -> Option<u64> {
    let t = text(v)?;
    let t = t.trim();
    t.parse::<u64>()
        .ok()
        .or_else(|| t.parse::<f64>().ok().map(|f| f.max(0.0) as u64))
}

/// The state of `alg` from the values of its key (the reply of HMGET with [`fields`], or of
/// LRANGE). `None` when the key does not exist. Errors: a malformed value.
pub fn parse_state(alg: Algorithm, values: &[Value]) -> Result<Option<AlgoState>, RedisFault> {
    if alg == Algorithm::SlidingWindowLog {
        let log = values.iter().map(number).collect::<Option<VecDeque<u64>>>();
        return match log {
            Some(l) if l.is_empty() => Ok(None),
            Some(l) => Ok(Some(AlgoState::SlidingWindowLog(l))),
            None => Err(RedisFault::Other),
        };
    }
    if values.first().is_none_or(|v| *v == Value::Nil) {
        return Ok(None);
    }
    let n: Vec<u64> = values
        .iter()
        .map(|v| number(v).unwrap_or(0))
        .collect::<Vec<_>>();
    let at = |i: usize| n.get(i).copied().ok_or(RedisFault::Other);
    Ok(Some(match alg {
        Algorithm::TokenBucket => AlgoState::TokenBucket(TokenBucketState {
            level: at(0)?,
            scale: at(1)?,
            last_ms: at(2)?,
        }),
        Algorithm::Gcra | Algorithm::LeakyBucket => {
            let s = TatState {
                tat_ms: at(0)?,
                rem: at(1)?,
                scale: at(2)?,
                per_ms: at(3).unwrap_or(0),
            };
            if alg == Algorithm::Gcra {
                AlgoState::Gcra(s)
            } else {
                AlgoState::LeakyBucket(s)
            }
        }
        Algorithm::FixedWindow => AlgoState::FixedWindow(WindowState {
            start_ms: at(0)?,
            count: at(1)?,
            len_ms: at(2).unwrap_or(0),
        }),
        Algorithm::SlidingWindowCounter => AlgoState::SlidingWindowCounter(CounterState {
            start_ms: at(0)?,
            cur: at(1)?,
            prev: at(2)?,
            len_ms: at(3).unwrap_or(0),
        }),
        Algorithm::SlidingWindowLog => unreachable!("handled above"),
    }))
}

/// Decides on `state` without keeping the result: for a request of `cost` tokens, and as the
/// policy stands (a request larger than the burst is refused by every algorithm without any
/// change, and its decision reports the current `remaining` and time to full).
pub fn evaluate(
    alg: Algorithm,
    state: &RawState,
    rate: &Rate,
    max_delay_ms: u64,
    quotas: &[CalendarQuota],
    cost: u64,
) -> Peeked {
    let run = |c: u64| {
        let mut s = state.main.clone();
        algorithm::decide(alg, &mut s, state.now_ms, rate, c, max_delay_ms).decision
    };
    let now = state.now_ms;
    let quotas = quotas
        .iter()
        .zip(&state.quota_used)
        .map(|(q, &used)| {
            let (_, end) = q.period.window(now);
            let view = Decision {
                admitted: true,
                remaining: q.limit.saturating_sub(used),
                retry_after_ms: 0,
                full_ms: if used > 0 { end - now } else { 0 },
            };
            (view, calendar::decide(used, q.limit, cost, now, end))
        })
        .collect();
    Peeked {
        main_view: run(rate.burst.saturating_add(1)),
        main_decision: run(cost),
        quotas,
        state: state.clone(),
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One call of `lua/peek.lua` with quota windows taken at `at_ms`.
async fn read_at(
    store: &RedisStore,
    tenant: &str,
    alg: Algorithm,
    quotas: &[CalendarQuota],
    at_ms: u64,
) -> Result<RawState, RedisFault> {
    let prefix = store.key_prefix();
    let mut names = vec![keys::main_key(prefix, tenant, alg)];
    names.extend(
        quotas
            .iter()
            .map(|q| keys::quota_key(prefix, tenant, q.period, q.period.window(at_ms).0)),
    );
    read_names(store, &names, alg, quotas.len()).await
}

/// One call of `lua/peek.lua` on `names`: the state of `alg` at `names[0]`, then `n_quotas`
/// calendar quota counters.
async fn read_names(
    store: &RedisStore,
    names: &[String],
    alg: Algorithm,
    n_quotas: usize,
) -> Result<RawState, RedisFault> {
    let args: Vec<&str> = match fields(alg) {
        // A token bucket's key is a string (`lua/lib/refill.lua`), read back as [l, s, t].
        Some(_) if alg == Algorithm::TokenBucket => vec!["bucket"],
        Some(f) => std::iter::once("hash").chain(f.iter().copied()).collect(),
        None => vec!["list"],
    };
    let reply: Vec<Value> = store.eval(&PEEK, names, &args).await?;
    let [secs, micros, Value::Array(main), Value::Array(counters)] = &reply[..] else {
        return Err(RedisFault::Other);
    };
    let (secs, micros) = (
        number(secs).ok_or(RedisFault::Other)?,
        number(micros).ok_or(RedisFault::Other)?,
    );
    let mut quota_used: Vec<u64> = counters.iter().map(|v| number(v).unwrap_or(0)).collect();
    quota_used.resize(n_quotas, 0);
    Ok(RawState {
        now_ms: secs * 1000 + micros / 1000,
        main: parse_state(alg, main)?,
        quota_used,
    })
}

/// Reads the state of one bucket of algorithm `alg` at `key` (a limit rule's) without changing
/// anything. Errors: the Redis fault (no retry, no breaker).
pub async fn read_key(
    store: &RedisStore,
    key: &str,
    alg: Algorithm,
) -> Result<RawState, RedisFault> {
    read_names(store, &[key.to_string()], alg, 0).await
}

/// Reads the state of `tenant`'s main limit (`alg`) and `quotas` without changing anything.
/// Quota windows are those of Redis TIME: if the gateway's clock put a window elsewhere, the
/// read is repeated at Redis's time. Errors: the Redis fault (no retry, no breaker: an admin
/// read must not count as request traffic).
pub async fn read(
    store: &RedisStore,
    tenant: &str,
    alg: Algorithm,
    quotas: &[CalendarQuota],
) -> Result<RawState, RedisFault> {
    let state = read_at(store, tenant, alg, quotas, unix_ms()).await?;
    let stale = quotas
        .iter()
        .any(|q| q.period.window(unix_ms()).0 != q.period.window(state.now_ms).0);
    if stale {
        return read_at(store, tenant, alg, quotas, state.now_ms).await;
    }
    Ok(state)
}

/// Every key `tenant` may own at Redis time `now_ms`: the main key of each algorithm, and each
/// period's quota counter of the current and the previous window.
pub fn tenant_keys(store: &RedisStore, tenant: &str, now_ms: u64) -> Vec<String> {
    let prefix = store.key_prefix();
    let mut all: Vec<String> = Algorithm::ALL
        .iter()
        .map(|a| keys::main_key(prefix, tenant, *a))
        .collect();
    for period in [Period::Hour, Period::Day, Period::Week, Period::Month] {
        let (start, _) = period.window(now_ms);
        all.push(keys::quota_key(prefix, tenant, period, start));
        let (previous, _) = period.window(start.saturating_sub(1));
        all.push(keys::quota_key(prefix, tenant, period, previous));
    }
    all
}

/// Deletes every key of `tenant` ([`tenant_keys`]) and `also` (more keys under the tenant's
/// hash tag: its limit rules' buckets) in one script call; returns how many existed. Tokens
/// still leased out to instances stay out: the token bucket is refilled to its capacity less
/// them rather than deleted (`lua/reset.lua`). Idempotent but for such a bucket: a second call
/// deletes 0 other keys.
pub async fn reset(store: &RedisStore, tenant: &str, also: &[String]) -> Result<u64, RedisFault> {
    let now = read_at(store, tenant, Algorithm::TokenBucket, &[], unix_ms())
        .await?
        .now_ms;
    let mut names = tenant_keys(store, tenant, now);
    names.extend(also.iter().cloned());
    // The token bucket's key, which may record tokens leased out (lua/reset.lua), 1-based.
    let tb = 1 + Algorithm::ALL
        .iter()
        .position(|a| *a == Algorithm::TokenBucket)
        .unwrap_or(0);
    let deleted: i64 = store.eval(&RESET, &names, &[tb]).await?;
    Ok(deleted.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn parses_each_layout() {
        let tb = parse_state(
            Algorithm::TokenBucket,
            &[bulk("7200000"), bulk("3600000"), bulk("1000")],
        )
        .unwrap();
        assert_eq!(
            tb,
            Some(AlgoState::TokenBucket(TokenBucketState {
                level: 7_200_000,
                scale: 3_600_000,
                last_ms: 1_000
            }))
        );
        assert_eq!(
            parse_state(Algorithm::Gcra, &[Value::Nil, Value::Nil, Value::Nil]).unwrap(),
            None
        );
        let log = parse_state(Algorithm::SlidingWindowLog, &[bulk("5"), bulk("9")]).unwrap();
        assert_eq!(
            log,
            Some(AlgoState::SlidingWindowLog(VecDeque::from([5, 9])))
        );
        assert_eq!(parse_state(Algorithm::SlidingWindowLog, &[]).unwrap(), None);
        assert!(parse_state(Algorithm::SlidingWindowLog, &[bulk("x")]).is_err());
    }

    /// The view equals what the algorithm reports, and evaluating never changes the state.
    #[test]
    fn view_and_decision_without_debit() {
        let rate = Rate::new(1, 3_600_000, 3);
        let quotas = [CalendarQuota {
            limit: 10,
            period: Period::Day,
        }];
        for alg in Algorithm::ALL {
            let mut s = None;
            let now = 1_796_083_200_000 + 5_000;
            algorithm::decide(alg, &mut s, now, &rate, 1, 0);
            let raw = RawState {
                now_ms: now + 10,
                main: s.clone(),
                quota_used: vec![1],
            };
            let p = evaluate(alg, &raw, &rate, 0, &quotas, 1);
            assert_eq!(p.main_view.remaining, 2, "{alg:?}");
            assert!(p.main_view.full_ms > 0, "{alg:?}");
            assert!(p.admitted(), "{alg:?}");
            assert_eq!(p.main_decision.remaining, 1, "{alg:?}");
            assert_eq!(p.quotas[0].0.remaining, 9);
            assert_eq!(p.quotas[0].1.remaining, 8);
            assert_eq!(p.state.main, s, "{alg:?}");
            let fresh = RawState {
                now_ms: now,
                main: None,
                quota_used: vec![0],
            };
            let p = evaluate(alg, &fresh, &rate, 0, &quotas, 1);
            assert_eq!(
                (p.main_view.remaining, p.main_view.full_ms),
                (3, 0),
                "{alg:?}"
            );
            assert_eq!(p.quotas[0].0.full_ms, 0);
        }
    }

    #[test]
    fn quota_refuses_when_used_up() {
        let rate = Rate::new(10, 1_000, 10);
        let quotas = [CalendarQuota {
            limit: 2,
            period: Period::Hour,
        }];
        let raw = RawState {
            now_ms: 1_796_083_200_000 + 60_000,
            main: None,
            quota_used: vec![2],
        };
        let p = evaluate(Algorithm::Gcra, &raw, &rate, 0, &quotas, 1);
        assert!(p.main_decision.admitted && !p.admitted());
        assert_eq!(p.quotas[0].1.retry_after_ms, 3_540_000);
    }
}
