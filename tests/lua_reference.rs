//! `lua/token_bucket.lua` in a real Redis against the pure Rust reference
//! (`tollgate::limit::token_bucket::decide`) on thousands of random (state, elapsed, cost)
//! cases: decisions, header values and the written state must be identical.
//!
//! The script reads the clock from Redis `TIME`. An admitted decision writes the `now` it used
//! (field `t`), so those cases are compared exactly at that instant; a rejection writes nothing,
//! so it must equal the reference at some instant between a `TIME` read before and after the call
//! (usually the same millisecond). A refusal that found the stored stamp in the future writes the
//! rebased state (`t` = its `now`), and is compared exactly like an admission.
//!
//! A second test drives random call sequences per bucket with clock steps between calls: the
//! stored stamp is moved forwards or backwards against Redis `TIME` (what a step of the store's
//! clock looks like to the bucket), and the Rust model, moved by the same amount, must agree with
//! the script on every decision and every stored field.
//!
//! `scripts/test.sh` runs this file twice: on `redis-server` and on Valkey's `valkey-server`
//! (`TOLLGATE_TEST_REDIS_SERVER`, see [`common::redis_server_binary`]).

mod common;

use common::{redis_server_binary, RedisServer};
use rand::{rngs::StdRng, Rng, SeedableRng};
use tollgate::limit::token_bucket::{decide, decide_batch, Decision, TokenBucketState};
use tollgate::limit::Rate;
use tollgate::store::redis::scripts::TOKEN_BUCKET_LUA;

fn redis_now_ms(con: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    s * 1000 + us / 1000
}

/// A script's decision: the stand-alone token bucket answers one integer, the level it decided
/// on, from which the gateway derives the decision with `decide_batch` (n = 1); the others four
/// values.
fn to_decision(reply: redis::Value, rate: &Rate, cost: u64) -> Decision {
    if let redis::Value::Int(level) = reply {
        return decide_batch(level as u64, rate, cost, 1).0.remove(0);
    }
    let reply: Vec<i64> = redis::from_redis_value(reply).unwrap();
    Decision {
        admitted: reply[0] == 1,
        remaining: reply[1] as u64,
        retry_after_ms: if reply[2] < 0 {
            u64::MAX
        } else {
            reply[2] as u64
        },
        full_ms: reply[3] as u64,
    }
}

const PERIODS: [u64; 8] = [1, 250, 1_000, 7_000, 60_000, 600_000, 3_600_000, 86_400_000];

fn random_rate(rng: &mut StdRng) -> Rate {
    let per_ms = PERIODS[rng.random_range(0..PERIODS.len())];
    Rate::new(
        rng.random_range(1..=2_000),
        per_ms,
        rng.random_range(1..=500),
    )
}

/// The server the tests talk to is the one the harness was told to start: a `valkey-server` binary
/// answers `INFO server` as Valkey, any other as Redis (so a Valkey pass cannot silently test Redis).
#[test]
fn the_server_under_test_is_the_binary_the_harness_names() {
    let redis = RedisServer::start();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut redis.conn())
        .expect("INFO server");
    let field = |name: &str| {
        info.lines().find_map(|l| {
            l.trim()
                .strip_prefix(&format!("{name}:"))
                .map(str::to_string)
        })
    };
    let binary = redis_server_binary();
    let name = std::path::Path::new(&binary)
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if name.contains("valkey") {
        assert_eq!(field("server_name").as_deref(), Some("valkey"), "{info}");
        let version = field("valkey_version").expect("valkey_version");
        eprintln!("testing against Valkey {version} ({binary})");
    } else {
        assert_eq!(
            field("server_name"),
            None,
            "{binary} is not redis-server:\n{info}"
        );
        let version = field("redis_version").expect("redis_version");
        eprintln!("testing against Redis {version} ({binary})");
    }
}

#[test]
fn lua_script_matches_rust_reference_on_random_cases() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let script = redis::Script::new(TOKEN_BUCKET_LUA);
    let mut rng = StdRng::seed_from_u64(0x70_11_6a_7e);
    let (mut exact, mut windowed) = (0, 0);

    for case in 0..3_000 {
        let rate = random_rate(&mut rng);
        let key = format!("ref:{{t{case}}}:tb");
        let cost = rng.random_range(1..=rate.burst + 2);
        let now0 = redis_now_ms(&mut con);
        // A random prior state: missing, or any level written with this or another period,
        // last refilled up to ~2× the time-to-full ago (or up to a day in the future).
        let state = if rng.random_bool(0.15) {
            None
        } else {
            let scale = if rng.random_bool(0.8) {
                rate.per_ms
            } else {
                PERIODS[rng.random_range(0..PERIODS.len())]
            };
            let capacity = rate.burst * scale;
            let top = if rng.random_bool(0.5) {
                capacity / 8
            } else {
                capacity + capacity / 4
            };
            let level = rng.random_range(0..=top);
            let to_full = (rate.burst * rate.per_ms).div_ceil(rate.limit);
            let back = if rng.random_bool(0.5) {
                rng.random_range(0..=to_full.min(50))
            } else {
                rng.random_range(0..=to_full.saturating_mul(2).min(10_000_000))
            };
            // Stamps in the future (state written under a clock ahead of this one): 1 ms to 1 day.
            let last = if rng.random_bool(0.2) {
                now0 + rng.random_range(1..=86_400_000)
            } else {
                now0 - back
            };
            let s = TokenBucketState {
                level,
                scale,
                last_ms: last,
            };
            if rng.random_bool(0.1) {
                // The hash layout of earlier versions: read once, replaced by the string.
                let _: () = redis::cmd("HSET")
                    .arg(&key)
                    .arg("l")
                    .arg(level)
                    .arg("s")
                    .arg(scale)
                    .arg("t")
                    .arg(last)
                    .query(&mut con)
                    .unwrap();
            } else {
                common::set_bucket(&mut con, &key, level as i64, scale, last);
            }
            Some(s)
        };

        let before = redis_now_ms(&mut con);
        let reply: redis::Value = script
            .key(&key)
            .arg(rate.limit)
            .arg(rate.per_ms)
            .arg(rate.burst)
            .arg(cost)
            .invoke(&mut con)
            .unwrap();
        let after = redis_now_ms(&mut con);
        let got = to_decision(reply, &rate, cost);
        let stored = common::key_fields(&mut con, &key);
        // A key due full within the time the reads took may be gone by the time they run: on a
        // loaded host that is more than the script call's own span.
        let read_at = redis_now_ms(&mut con);
        let field = |name: &str| -> Option<u64> {
            stored
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.parse().unwrap())
        };

        // The script writes when it admits, and when a refusal rebases a stamp in the future.
        let wrote =
            field("t").is_some() && (got.admitted || field("t") != state.map(|s| s.last_ms));
        if wrote {
            let used_now = field("t").expect("a write stores t");
            let (want, next) = decide(state, used_now, &rate, cost);
            assert_eq!(
                got, want,
                "case {case}: {rate:?} cost {cost} state {state:?} now {used_now}"
            );
            let next = next.expect("reference writes too");
            assert_eq!(field("l"), Some(next.level), "case {case}: level");
            assert_eq!(field("s"), Some(next.scale), "case {case}: scale");
            let pttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
            // PEXPIRE = ms until full (a key of a bucket that is about to be full may already be gone).
            let pttl_at = redis_now_ms(&mut con);
            let ok = if want.full_ms > pttl_at - before + 2 {
                pttl > 0
            } else {
                pttl > 0 || pttl == -2 || pttl == 0
            };
            assert!(
                ok && pttl <= want.full_ms as i64,
                "case {case}: pttl {pttl} vs {}",
                want.full_ms
            );
            exact += 1;
        } else {
            let matches = (before..=after).any(|now| decide(state, now, &rate, cost).0 == got);
            assert!(
                matches,
                "case {case}: {rate:?} cost {cost} state {state:?} lua {got:?} reference@{before} {:?}",
                decide(state, before, &rate, cost).0
            );
            // A rejection writes nothing but a rebase and the key's TTL (the time until full);
            // a bucket due full within ms (admitted, rebased, or refused) may already be gone.
            let vanished = stored.is_empty() && got.full_ms <= read_at - before + 2;
            if got.admitted {
                assert!(vanished, "case {case}: admitted key vanished");
            } else if state.is_some() && vanished {
                // Rebased and written, or given the TTL of its time until full: expired.
            } else if let Some(s) = state {
                assert_eq!(
                    field("l"),
                    Some(s.level),
                    "case {case}: rejection changed the bucket"
                );
            } else {
                assert!(stored.is_empty(), "case {case}: rejection created a key");
            }
            windowed += 1;
        }
        let _: () = redis::cmd("DEL").arg(&key).query(&mut con).unwrap();
    }
    assert!(
        exact > 500 && windowed > 500,
        "admitted {exact}, rejected {windowed}"
    );
}

/// Reads the bucket hash as a state (`None` when the key is absent).
fn stored_state(con: &mut redis::Connection, key: &str) -> Option<TokenBucketState> {
    let pairs = common::key_fields(con, key);
    let field = |f: &str| {
        let v = pairs.iter().find(|(n, _)| n == f)?;
        Some(v.1.parse::<u64>().unwrap())
    };
    let (l, sc, t) = (field("l"), field("s"), field("t"));
    Some(TokenBucketState {
        level: l?,
        scale: sc?,
        last_ms: t?,
    })
}

#[test]
fn lua_script_matches_rust_reference_across_clock_steps() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let script = redis::Script::new(TOKEN_BUCKET_LUA);
    // A clock step as the bucket sees it, atomically: the stamp moves by ARGV[2] ms and so does
    // the key's remaining TTL (Redis keeps expiry as an absolute time); a TTL that would end
    // within 5 ms deletes the key. Returns 1 when the key is kept.
    let shift = redis::Script::new(
        "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end \
         local ttl = redis.call('PTTL', KEYS[1]) + tonumber(ARGV[2]) \
         if ttl <= 5 then redis.call('DEL', KEYS[1]) return 0 end \
         local l, s, t, tail = string.match(redis.call('GET', KEYS[1]), '^(%-?%d+) (%d+) (%d+)(.*)$') \
         redis.call('SET', KEYS[1], l .. ' ' .. s .. ' ' .. ARGV[1] .. tail, 'PX', ttl) return 1",
    );
    let mut rng = StdRng::seed_from_u64(0xc10c_57e9);
    let (mut rebased_writes, mut calls) = (0, 0);

    for seq in 0..300 {
        let rate = random_rate(&mut rng);
        let key = format!("steps:{{s{seq}}}:tb");
        // The model: the state the script should have stored, on Redis' clock.
        let mut model: Option<TokenBucketState> = None;
        for step in 0..12 {
            let cost = if rng.random_bool(0.3) {
                rng.random_range(1..=rate.burst)
            } else {
                rng.random_range(1..=rate.burst.min(3))
            };
            // A clock step between calls: the store's clock jumps back (stamp ahead of TIME) or
            // forwards (stamp further behind), by up to a minute, or up to a whole refill.
            if let (Some(mut s), true) = (model, step > 0) {
                let span = if rng.random_bool(0.5) {
                    60_000
                } else {
                    (rate.burst * rate.per_ms)
                        .div_ceil(rate.limit)
                        .clamp(1, 86_400_000)
                };
                let delta = rng.random_range(0..=span);
                let back = rng.random_bool(0.5);
                let shifted = if back {
                    s.last_ms as i64 + delta as i64
                } else {
                    s.last_ms as i64 - delta as i64
                };
                let shift_delta = if back { delta as i64 } else { -(delta as i64) };
                let kept: i64 = shift
                    .key(&key)
                    .arg(shifted)
                    .arg(shift_delta)
                    .invoke(&mut con)
                    .unwrap();
                model = if kept == 1 {
                    s.last_ms = shifted as u64;
                    Some(s)
                } else {
                    // Expired by the step (or already): both sides start from a full bucket.
                    None
                };
            }
            let before = redis_now_ms(&mut con);
            let reply: redis::Value = script
                .key(&key)
                .arg(rate.limit)
                .arg(rate.per_ms)
                .arg(rate.burst)
                .arg(cost)
                .invoke(&mut con)
                .unwrap();
            let after = redis_now_ms(&mut con);
            let got = to_decision(reply, &rate, cost);
            let stored = stored_state(&mut con, &key);
            let read_at = redis_now_ms(&mut con);
            // The instant the script used: the stamp it wrote, else any instant in the window.
            let candidates: Vec<u64> = match stored {
                Some(s) if Some(s) != model => vec![s.last_ms],
                _ => (before..=after).collect(),
            };
            // The instant must also agree on what was written: a script that wrote nothing
            // ran when the stamp was not ahead of it, even if an earlier instant of the
            // window (the stamp still 1 ms ahead) would decide the same and rebase.
            let found = candidates.iter().find_map(|&now| {
                let (want, next) = decide(model, now, &rate, cost);
                let writes_agree = match stored {
                    Some(s) if Some(s) == model => next.is_none() || next == stored,
                    _ => true,
                };
                (want == got && writes_agree).then_some((now, next))
            });
            let Some((now, next)) = found else {
                panic!(
                    "seq {seq} step {step}: {rate:?} cost {cost} model {model:?} lua {got:?} \
                     stored {stored:?} reference@{before} {:?}",
                    decide(model, before, &rate, cost).0
                );
            };
            if let Some(n) = next {
                if model.is_some_and(|m| m.last_ms > now) && !got.admitted {
                    rebased_writes += 1;
                }
                model = Some(n);
            }
            match stored {
                // A bucket written full-in-a-ms may have expired already: the model is full too.
                None => assert!(
                    model.is_none() || decide(model, read_at, &rate, 0).0.full_ms == 0,
                    "seq {seq} step {step}: key vanished, model {model:?}"
                ),
                Some(s) => assert_eq!(Some(s), model, "seq {seq} step {step}: stored state"),
            }
            calls += 1;
        }
        let _: () = redis::cmd("DEL").arg(&key).query(&mut con).unwrap();
    }
    eprintln!("{calls} calls, {rebased_writes} refusals that rebased a future stamp");
    assert!(
        calls == 3_600 && rebased_writes > 50,
        "rebased refusals {rebased_writes}"
    );
}

// ---------------------------------------------------------------------------------------------
// Every algorithm (issue 13): `lua/policy.lua` composed with each `lua/<algorithm>.lua` against
// `tollgate::limit::algorithm::decide`, and calendar quotas against `limit::calendar`.

use tollgate::limit::algorithm::{self, AlgoState, Algorithm};
use tollgate::limit::calendar::{self, Period};
use tollgate::limit::fixed_window::WindowState;
use tollgate::limit::gcra::TatState;
use tollgate::limit::sliding_window_counter::CounterState;
use tollgate::quota::policy_script::{self as policy, CalendarQuota, PolicyCall};
use tollgate::store::redis::keys::main_key;

fn hset(con: &mut redis::Connection, key: &str, fields: &[(&str, u64)]) {
    let mut cmd = redis::cmd("HSET");
    cmd.arg(key);
    for (f, v) in fields {
        cmd.arg(*f).arg(*v);
    }
    let _: () = cmd.query(con).unwrap();
}

fn write_state(con: &mut redis::Connection, key: &str, state: &AlgoState) {
    write_fields(con, key, state);
    let _: () = redis::cmd("PEXPIRE")
        .arg(key)
        .arg(600_000)
        .query(con)
        .unwrap();
}

fn write_fields(con: &mut redis::Connection, key: &str, state: &AlgoState) {
    match state {
        AlgoState::TokenBucket(s) => {
            common::set_bucket(con, key, s.level as i64, s.scale, s.last_ms)
        }
        AlgoState::Gcra(s) | AlgoState::LeakyBucket(s) => {
            let mut f = vec![("t", s.tat_ms), ("r", s.rem), ("s", s.scale)];
            f.extend((s.per_ms != 0).then_some(("p", s.per_ms)));
            hset(con, key, &f)
        }
        AlgoState::FixedWindow(s) => {
            let mut f = vec![("w", s.start_ms), ("c", s.count)];
            f.extend((s.len_ms != 0).then_some(("l", s.len_ms)));
            hset(con, key, &f)
        }
        AlgoState::SlidingWindowCounter(s) => {
            let mut f = vec![("w", s.start_ms), ("c", s.cur), ("p", s.prev)];
            f.extend((s.len_ms != 0).then_some(("l", s.len_ms)));
            hset(con, key, &f)
        }
        AlgoState::SlidingWindowLog(log) => {
            if !log.is_empty() {
                let _: () = redis::cmd("RPUSH")
                    .arg(key)
                    .arg(log.iter().copied().collect::<Vec<_>>())
                    .query(con)
                    .unwrap();
            }
        }
    }
}

fn read_state(con: &mut redis::Connection, key: &str, alg: Algorithm) -> Option<AlgoState> {
    if alg == Algorithm::SlidingWindowLog {
        let log: Vec<u64> = redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query(con)
            .unwrap();
        return (!log.is_empty()).then(|| AlgoState::SlidingWindowLog(log.into()));
    }
    let h: std::collections::HashMap<String, u64> = common::key_fields(con, key)
        .into_iter()
        .map(|(f, v)| (f, v.parse().unwrap()))
        .collect();
    if h.is_empty() {
        return None;
    }
    let f = |n: &str| h[n];
    let opt = |n: &str| h.get(n).copied().unwrap_or(0);
    Some(match alg {
        Algorithm::TokenBucket => AlgoState::TokenBucket(TokenBucketState {
            level: f("l"),
            scale: f("s"),
            last_ms: f("t"),
        }),
        Algorithm::Gcra | Algorithm::LeakyBucket => {
            let s = TatState {
                tat_ms: f("t"),
                rem: f("r"),
                scale: f("s"),
                per_ms: opt("p"),
            };
            if alg == Algorithm::Gcra {
                AlgoState::Gcra(s)
            } else {
                AlgoState::LeakyBucket(s)
            }
        }
        Algorithm::FixedWindow => AlgoState::FixedWindow(WindowState {
            start_ms: f("w"),
            count: f("c"),
            len_ms: opt("l"),
        }),
        Algorithm::SlidingWindowCounter => AlgoState::SlidingWindowCounter(CounterState {
            start_ms: f("w"),
            cur: f("c"),
            prev: f("p"),
            len_ms: opt("l"),
        }),
        Algorithm::SlidingWindowLog => unreachable!(),
    })
}

fn small_rate(rng: &mut StdRng) -> Rate {
    let per_ms = PERIODS[rng.random_range(0..PERIODS.len())];
    Rate::new(rng.random_range(1..=300), per_ms, rng.random_range(1..=60))
}

/// Runs the composed policy script for `alg` with no quotas at the fixed clock `now`.
fn run_policy(
    con: &mut redis::Connection,
    call: &PolicyCall<'_>,
    now: u64,
) -> policy::PolicyDecision {
    let one = run_policy_n(con, call, now, 1).remove(0);
    policy::PolicyDecision::from_batch(one)
}

#[test]
fn every_algorithm_script_matches_its_reference_on_random_cases() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let mut rng = StdRng::seed_from_u64(0x13_a1_60);
    let base = redis_now_ms(&mut con);
    for alg in Algorithm::ALL {
        let (mut admitted, mut refused) = (0, 0);
        for case in 0..700 {
            let tenant = format!("{}{case}", alg.key_suffix());
            let old = small_rate(&mut rng);
            let rate = if rng.random_bool(0.7) {
                old
            } else {
                small_rate(&mut rng)
            };
            let max_delay = if rng.random_bool(0.3) {
                0
            } else {
                rng.random_range(0..=5_000)
            };
            // A prior state from random traffic under the old config.
            let mut state = None;
            let mut t = base - rng.random_range(0..=3 * old.window_ms().min(20_000_000));
            for _ in 0..rng.random_range(0..=old.burst + 3) {
                t += rng.random_range(0..=old.window_ms() / 4 + 1);
                let c = rng.random_range(1..=old.burst);
                algorithm::decide(alg, &mut state, t, &old, c, max_delay);
            }
            let now = if rng.random_bool(0.05) {
                t.saturating_sub(rng.random_range(1..=20_000))
            } else {
                t + rng.random_range(0..=2 * rate.window_ms().min(10_000_000))
            };
            let cost = rng.random_range(1..=rate.burst + 1);
            let key = main_key("ref", &tenant, alg);
            if let Some(s) = &state {
                write_state(&mut con, &key, s);
            }
            let before = state.clone();
            let want = algorithm::decide(alg, &mut state, now, &rate, cost, max_delay);
            let call = PolicyCall {
                tenant: &tenant,
                algorithm: alg,
                rate,
                cost,
                max_delay_ms: max_delay,
                quotas: &[],
            };
            let got = run_policy(&mut con, &call, now);
            let ctx = format!("{alg:?} case {case}: {rate:?} cost {cost} max_delay {max_delay} now {now} state {before:?}");
            assert_eq!(got.main, want, "{ctx}");
            assert_eq!(got.admitted, want.decision.admitted, "{ctx}");
            let stored = read_state(&mut con, &key, alg);
            if stored.is_none() && state.is_some() {
                assert!(want.decision.full_ms < 100, "{ctx}: key vanished");
            } else {
                assert_eq!(stored, state, "{ctx}: stored state");
            }
            if stored.is_some() {
                let pttl = redis.pttl(&key);
                assert!(pttl != -1, "{ctx}: no TTL");
            }
            if want.decision.admitted {
                admitted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(
            admitted > 100 && refused > 100,
            "{alg:?}: admitted {admitted}, refused {refused}"
        );
    }
}

/// The stand-alone scripts on the Redis `TIME` clock: the decision equals the reference at some
/// instant between a `TIME` read before and after the call.
#[test]
fn every_algorithm_script_on_redis_time_matches_its_reference() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let mut rng = StdRng::seed_from_u64(0x71_3e);
    for alg in Algorithm::ALL {
        let script = redis::Script::new(policy::algorithm_lua(alg));
        for case in 0..150 {
            let rate = small_rate(&mut rng);
            let max_delay = rng.random_range(0..=3_000);
            let key = format!("solo:{{{}{case}}}:{}", alg.key_suffix(), alg.key_suffix());
            let base = redis_now_ms(&mut con);
            let mut state = None;
            let mut t = base - rng.random_range(0..=2 * rate.window_ms().min(5_000_000));
            for _ in 0..rng.random_range(0..=rate.burst + 2) {
                t += rng.random_range(0..=rate.window_ms() / 5 + 1);
                let t = t.min(base);
                algorithm::decide(alg, &mut state, t, &rate, 1, max_delay);
            }
            if let Some(s) = &state {
                write_state(&mut con, &key, s);
            }
            let cost = rng.random_range(1..=rate.burst);
            let before = redis_now_ms(&mut con);
            let mut inv = script.prepare_invoke();
            inv.key(&key)
                .arg(rate.limit)
                .arg(rate.per_ms)
                .arg(rate.burst)
                .arg(cost);
            if alg == Algorithm::LeakyBucket {
                inv.arg(max_delay);
            }
            let reply: redis::Value = inv.invoke(&mut con).unwrap();
            let after = redis_now_ms(&mut con);
            // The leaky bucket's fifth value: the delay it set.
            let delay = match &reply {
                redis::Value::Array(v) => v.get(4).cloned(),
                _ => None,
            }
            .map(|d| redis::from_redis_value::<i64>(d).unwrap());
            let got = to_decision(reply.clone(), &rate, cost);
            let matches = (before..=after).any(|now| {
                let mut s = state.clone();
                let want = algorithm::decide(alg, &mut s, now, &rate, cost, max_delay);
                want.decision == got && delay.is_none_or(|d| d as u64 == want.delay_ms)
            });
            assert!(
                matches,
                "{alg:?} case {case}: {rate:?} cost {cost} state {state:?} lua {reply:?}"
            );
        }
    }
}

/// Calendar quotas in the policy script: the window and its key at each UTC boundary, exact
/// counts, and all or nothing with the main limit.
#[test]
fn quotas_follow_calendar_windows_and_debit_all_or_nothing() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let boundary = 1_796_083_200_000u64; // 2026-12-01T00:00:00Z (Tuesday; a month, day, hour start)
    let quotas = [
        CalendarQuota {
            limit: 3,
            period: Period::Day,
        },
        CalendarQuota {
            limit: 5,
            period: Period::Month,
        },
    ];
    let rate = Rate::new(1, 3_600_000, 100); // main limit roomy
    let call = |tenant: &'static str, alg, quotas: &'static [CalendarQuota]| PolicyCall {
        tenant,
        algorithm: alg,
        rate,
        cost: 1,
        max_delay_ms: 0,
        quotas,
    };
    let quotas: &'static [CalendarQuota] = Box::leak(Box::new(quotas));
    for alg in Algorithm::ALL {
        redis.flushall();
        let c = call("q", alg, quotas);
        // Three on Nov 30 at 23:59:00.000: the day quota allows 3. (Quota keys expire at the
        // window end on the real clock: a minute leaves room for a slow machine.)
        let t = boundary - 60_000;
        let got: Vec<bool> = (0..4)
            .map(|_| run_policy(&mut con, &c, t).admitted)
            .collect();
        assert_eq!(got, [true, true, true, false], "{alg:?}");
        let refused = run_policy(&mut con, &c, t);
        assert!(
            refused.main.decision.admitted,
            "{alg:?}: main alone would admit"
        );
        assert_eq!(
            refused.quotas[0],
            calendar::decide(3, 3, 1, t, boundary),
            "{alg:?}"
        );
        assert_eq!(refused.quotas[0].retry_after_ms, 60_000);
        // A policy that would admit reports what would be left after this request.
        assert_eq!(refused.quotas[1].remaining, 1, "{alg:?}: month counted 3");
        // The refusal by the day quota debited neither the main limit nor the month.
        let main = main_key("ref", "q", alg);
        let m = run_policy(&mut con, &c, t).main.decision.remaining;
        assert_eq!(m, 96, "{alg:?}: 3 admitted, this one would be the 4th");
        let day_key = format!("ref:{{q}}:q:day:{}", boundary - 86_400_000);
        let month_key = format!("ref:{{q}}:q:month:{}", boundary - 30 * 86_400_000);
        let exists: bool = redis::cmd("EXISTS").arg(&main).query(&mut con).unwrap();
        assert!(exists, "{alg:?}: main key {main}");
        let day: u64 = redis::cmd("GET").arg(&day_key).query(&mut con).unwrap();
        let month: u64 = redis::cmd("GET").arg(&month_key).query(&mut con).unwrap();
        assert_eq!((day, month), (3, 3), "{alg:?}");
        let ttl = redis.pttl(&day_key);
        assert!(ttl > 0, "{alg:?}: quota key TTL {ttl}");
        // At 00:00:00.000 UTC a new day (and month) begins: new keys, fresh counts.
        let got: Vec<bool> = (0..4)
            .map(|_| run_policy(&mut con, &c, boundary).admitted)
            .collect();
        assert_eq!(got, [true, true, true, false], "{alg:?} next day");
        let new_month = format!("ref:{{q}}:q:month:{boundary}");
        let month: u64 = redis::cmd("GET").arg(&new_month).query(&mut con).unwrap();
        assert_eq!(month, 3);
    }
    // The other way round: a main limit that refuses debits no quota.
    redis.flushall();
    let tight = PolicyCall {
        rate: Rate::new(1, 3_600_000, 1),
        ..call("m", Algorithm::FixedWindow, quotas)
    };
    assert!(run_policy(&mut con, &tight, boundary).admitted);
    let r = run_policy(&mut con, &tight, boundary);
    assert!(!r.admitted && !r.main.decision.admitted && r.quotas[0].admitted);
    let day: u64 = redis::cmd("GET")
        .arg(format!("ref:{{m}}:q:day:{boundary}"))
        .query(&mut con)
        .unwrap();
    assert_eq!(day, 1);
    // Week windows start on Monday 00:00 UTC (2026-11-30).
    redis.flushall();
    let weekly: &'static [CalendarQuota] = Box::leak(Box::new([CalendarQuota {
        limit: 1,
        period: Period::Week,
    }]));
    let w = call("w", Algorithm::Gcra, weekly);
    let monday = boundary - 86_400_000;
    assert!(run_policy(&mut con, &w, monday - 1).admitted);
    assert!(run_policy(&mut con, &w, monday).admitted);
    let r = run_policy(&mut con, &w, monday + 1);
    assert!(!r.admitted);
    assert_eq!(r.quotas[0].retry_after_ms, 7 * 86_400_000 - 1);
    // (The previous week's key expired 1 ms after the injected clock's boundary: TTLs are real.)
    let week: u64 = redis::cmd("GET")
        .arg(format!("ref:{{w}}:q:week:{monday}"))
        .query(&mut con)
        .unwrap();
    assert_eq!(week, 1);
}

/// `lua/leaky_refund.lua` against `leaky_bucket::refund`: the latest reservation goes back
/// exactly, an earlier one (or a stale state) changes nothing.
#[test]
fn leaky_refund_script_matches_its_reference() {
    use tollgate::limit::leaky_bucket;
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let mut rng = StdRng::seed_from_u64(0x1eaf);
    let base = redis_now_ms(&mut con);
    let (mut given, mut kept) = (0, 0);
    for case in 0..1_500 {
        let rate = small_rate(&mut rng);
        let max_delay = rng.random_range(0..=20_000);
        let key = format!("refund:{{t{case}}}:lb");
        let mut state = None;
        let mut reservations = vec![];
        let mut t = base;
        for _ in 0..rng.random_range(1..=6) {
            t += rng.random_range(0..=50);
            let cost = rng.random_range(1..=rate.burst);
            let o = leaky_bucket::decide(state, t, &rate, cost, max_delay);
            if let Some(next) = o.next {
                if o.decision.admitted {
                    reservations.push((next, cost));
                }
                state = Some(next);
            }
        }
        let Some(stored) = state else { continue };
        write_state(&mut con, &key, &AlgoState::LeakyBucket(stored));
        let Some(&(reserved, cost)) =
            reservations.get(rng.random_range(0..reservations.len().max(1)))
        else {
            continue;
        };
        let want = leaky_bucket::refund(Some(stored), reserved, &rate, cost);
        let done: i64 = redis::Script::new(policy::refund_script().source())
            .key(&key)
            .arg(reserved.tat_ms)
            .arg(reserved.rem)
            .arg(reserved.scale)
            .arg(cost)
            .arg(rate.per_ms)
            .invoke(&mut con)
            .unwrap();
        let after = read_state(&mut con, &key, Algorithm::LeakyBucket);
        match want {
            Some(next) => {
                assert_eq!(done, 1, "case {case}");
                assert_eq!(after, Some(AlgoState::LeakyBucket(next)), "case {case}");
                given += 1;
            }
            None => {
                assert_eq!(done, 0, "case {case}");
                assert_eq!(after, Some(AlgoState::LeakyBucket(stored)), "case {case}");
                kept += 1;
            }
        }
    }
    assert!(given > 100 && kept > 100, "given back {given}, kept {kept}");
}

/// Request coalescing: the script with `n` (ARGV[5]) decides n requests at one instant as the
/// Rust reference does one after the other (`decide_batch`), and stores what it admitted. The
/// stored stamp is put in the future so the level is known exactly (a future stamp refills
/// nothing and is rebased).
#[test]
fn batch_form_matches_consecutive_decisions() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let script = redis::Script::new(TOKEN_BUCKET_LUA);
    let mut rng = StdRng::seed_from_u64(0xba7c_4e55);
    for case in 0..400 {
        let rate = random_rate(&mut rng);
        let capacity = rate.burst * rate.per_ms;
        let level = rng.random_range(0..=capacity);
        let cost = rng.random_range(1..=rate.burst + 1);
        let n = rng.random_range(2..=12usize);
        let key = format!("tb:{{batch{case}}}");
        let future = redis_now_ms(&mut con) + 3_600_000;
        common::set_bucket(&mut con, &key, level as i64, rate.per_ms, future);
        let reply: Vec<i64> = script
            .key(&key)
            .arg(rate.limit)
            .arg(rate.per_ms)
            .arg(rate.burst)
            .arg(cost)
            .arg(n)
            .invoke(&mut con)
            .unwrap();
        let (expected, left) = decide_batch(level, &rate, cost, n);
        let admitted = expected.iter().filter(|d| d.admitted).count() as i64;
        assert_eq!(
            reply,
            vec![admitted, level as i64],
            "{rate:?} level {level} cost {cost} n {n}"
        );
        // The key expires when the bucket is full again (PEXPIRE = ms until full), which for a
        // fast refill can be before it is read back.
        let Some(stored) = stored_state(&mut con, &key) else {
            let full_ms = expected.last().map_or(0, |d| d.full_ms);
            assert!(
                full_ms < 1_000,
                "{rate:?} level {level} cost {cost} n {n}: key gone"
            );
            continue;
        };
        assert_eq!(
            stored.level, left,
            "{rate:?} level {level} cost {cost} n {n}"
        );
        if cost > rate.burst {
            // Never admissible: nothing written, the future stamp stays.
            assert_eq!(stored.last_ms, future);
        } else {
            // Admitted or rebased: the stamp is Redis's now.
            assert!(stored.last_ms < future);
        }
    }
}

/// Runs the composed policy script deciding `n` requests of `call` in one call at `now`.
fn run_policy_n(
    con: &mut redis::Connection,
    call: &PolicyCall<'_>,
    now: u64,
    n: usize,
) -> Vec<policy::BatchDecision> {
    let entry = call.entry("ref");
    run_entries_n(con, &[entry], Some(call.quota_part()), now, n, false).0
}

/// `lua/policy.lua` over `entries` (and a quota part) deciding `n` requests at `now`: each
/// request's decisions, and whether the script answered in closed form. `by_loop`: decided
/// request by request even where the closed form would (the script's test-only `loop`).
fn run_entries_n(
    con: &mut redis::Connection,
    entries: &[policy::LimitEntry],
    quotas: Option<policy::QuotaPart<'_>>,
    now: u64,
    n: usize,
    by_loop: bool,
) -> (Vec<policy::BatchDecision>, bool) {
    let refs: Vec<&policy::LimitEntry> = entries.iter().collect();
    let (keys, mut args) = policy::batch_keys_and_args("ref", &refs, quotas, Some(now));
    let at = args.len() - 2;
    args[at] = n.to_string();
    if by_loop {
        args.push("loop".to_string());
    }
    let script = redis::Script::new(policy::policy_script().source());
    let mut inv = script.prepare_invoke();
    for k in &keys {
        inv.key(k);
    }
    for a in &args {
        inv.arg(a);
    }
    let policy::PolicyReply(reply) = inv.invoke(con).expect("policy call");
    let decisions =
        policy::decode_reply(&reply, args.iter().map(String::as_str), n).expect("reply shape");
    let closed_form = reply.first() == Some(&-1);
    assert!(!(by_loop && closed_form), "closed form asked for the loop");
    (decisions, closed_form)
}

/// Several entries (random algorithms, costs, shadow entries, earlier traffic, a calendar
/// quota) with a coalesced request count (one included): whether the script answers in closed
/// form (every entry's algorithm scalable) or request by request, the decisions and the state
/// left are those of n consecutive calls at the same instant, each decided by the loop.
#[test]
fn several_entries_decided_together_match_consecutive_calls() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let mut rng = StdRng::seed_from_u64(0x5ca1_ab1e);
    let base = redis_now_ms(&mut con);
    let scalable = [
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindowCounter,
    ];
    let quota: &'static [CalendarQuota] = Box::leak(Box::new([CalendarQuota {
        limit: 9,
        period: Period::Day,
    }]));
    let (mut closed, mut admitted, mut refused) = (0, 0, 0);
    for case in 0..240u64 {
        let specs: Vec<(Algorithm, Rate, u64, bool)> = (0..rng.random_range(1..=4))
            .map(|_| {
                let alg = if rng.random_bool(0.85) {
                    scalable[rng.random_range(0..scalable.len())]
                } else {
                    Algorithm::ALL[rng.random_range(0..Algorithm::ALL.len())]
                };
                let rate = Rate::new(
                    rng.random_range(1..=20),
                    3_600_000,
                    rng.random_range(1..=12),
                );
                let over = u64::from(rng.random_bool(0.05));
                let cost = rng.random_range(1..=rate.burst.min(3) + over);
                (alg, rate, cost, rng.random_bool(0.2))
            })
            .collect();
        let entries = |tenant: &str| -> Vec<policy::LimitEntry> {
            specs
                .iter()
                .enumerate()
                .map(|(i, (alg, rate, cost, shadow))| policy::LimitEntry {
                    key: format!("ref:{{{tenant}}}:e{i}").into(),
                    algorithm: *alg,
                    rate: *rate,
                    cost: *cost,
                    max_delay_ms: if *alg == Algorithm::LeakyBucket {
                        2_000
                    } else {
                        0
                    },
                    shadow: *shadow,
                })
                .collect()
        };
        let tenants = [format!("n{case}"), format!("s{case}")];
        let quota_cost = rng.random_range(1..=3);
        let part = |t: &'static str| {
            (case % 3 == 0).then_some(policy::QuotaPart {
                tenant: t,
                quotas: quota,
                cost: quota_cost,
            })
        };
        let [together, apart]: [&'static str; 2] = tenants.map(|t| &*Box::leak(t.into_boxed_str()));
        let (te, ae) = (entries(together), entries(apart));
        let now = base + case * 10;
        // Some states the closed form must leave to the loop, the same on both sides: a token
        // bucket in debt (a usage budget settled over its reserve) or written with another
        // scale, a GCRA remainder written with another limit or period, window counters
        // written with another window length (a changed config, converted by the loop's
        // scripts; far enough ahead that the converted key outlives the test's fixed clock).
        // And states it decides itself
        // whose refusal writes (a clock stepped back): a token bucket stamped in the future
        // (rebased), a GCRA TAT beyond its tolerance (capped).
        let odd = rng.random_range(0..8);
        for (i, (alg, rate, _, _)) in specs.iter().enumerate() {
            for t in [together, apart] {
                let key = format!("ref:{{{t}}}:e{i}");
                let (per, limit, ago) = (rate.per_ms as i64, rate.limit as i64, now - 5);
                let fields: Vec<(&str, i64)> = match (alg, odd) {
                    (Algorithm::TokenBucket, 1) => {
                        vec![("l", -3 * per), ("s", per), ("t", ago as i64)]
                    }
                    (Algorithm::TokenBucket, 2) => {
                        vec![("l", 2 * per), ("s", 3 * per), ("t", ago as i64)]
                    }
                    (Algorithm::Gcra, 2) => {
                        vec![("t", now as i64 + 60_000), ("r", 1), ("s", limit + 1)]
                    }
                    (Algorithm::Gcra, 4) => vec![
                        ("t", now as i64 + 60_000),
                        ("r", 1),
                        ("s", limit),
                        ("p", per / 2),
                    ],
                    (Algorithm::FixedWindow, 4) => {
                        vec![("w", now as i64 - 10), ("c", 1), ("l", 60_000)]
                    }
                    (Algorithm::SlidingWindowCounter, 4) => {
                        vec![("w", now as i64 - 10), ("c", 1), ("p", 1), ("l", 60_000)]
                    }
                    (Algorithm::TokenBucket, 3) => {
                        vec![
                            ("l", 2 * per + per / 2),
                            ("s", per),
                            ("t", now as i64 + 60_000),
                        ]
                    }
                    (Algorithm::Gcra, 3) => {
                        let ahead = 3 * (rate.burst as i64) * per / limit + 1;
                        vec![("t", now as i64 + ahead), ("r", 0), ("s", limit)]
                    }
                    _ => continue,
                };
                if *alg == Algorithm::TokenBucket {
                    let [l, s, t] = [0, 1, 2].map(|j| fields[j].1);
                    common::set_bucket(&mut con, &key, l, s as u64, t as u64);
                    continue;
                }
                let mut cmd = redis::cmd("HSET");
                cmd.arg(&key);
                for (f, v) in &fields {
                    cmd.arg(*f).arg(*v);
                }
                let _: () = cmd.query(&mut con).expect("HSET");
            }
        }
        // Earlier traffic, the same on both sides (none on a stepped clock: it would write
        // the state the batch must write).
        let earlier = rng.random_range(0..6);
        for _ in 0..if odd == 3 { 0 } else { earlier } {
            run_entries_n(&mut con, &te, part(together), now - 5, 1, false);
            run_entries_n(&mut con, &ae, part(apart), now - 5, 1, true);
        }
        let n = rng.random_range(1..=10usize);
        let (batch, in_closed_form) = run_entries_n(&mut con, &te, part(together), now, n, false);
        closed += usize::from(in_closed_form);
        for (i, got) in batch.into_iter().enumerate() {
            let (mut one, _) = run_entries_n(&mut con, &ae, part(apart), now, 1, true);
            let one = one.remove(0);
            if one.admitted {
                admitted += 1
            } else {
                refused += 1
            }
            assert_eq!(got, one, "case {case} ({specs:?}) request {i} of {n}");
        }
        for i in 0..specs.len() {
            // A key's fields (every algorithm's state but the sliding window log's; a token
            // bucket's string as its fields).
            let mut fields = |t: &str| -> (String, Vec<(String, String)>) {
                let key = format!("ref:{{{t}}}:e{i}");
                let kind: String = redis::cmd("TYPE").arg(&key).query(&mut con).expect("TYPE");
                if kind != "hash" && kind != "string" {
                    return (kind, vec![]);
                }
                (kind, common::key_fields(&mut con, &key))
            };
            let (got, want) = (fields(together), fields(apart));
            // A state that expires in a moment (its PEXPIRE counts real milliseconds, not the
            // injected clock) may vanish on one side between the two runs on a loaded machine;
            // the other side's must then be about to expire too.
            let mut ttl = |t: &str| -> i64 {
                redis::cmd("PTTL")
                    .arg(format!("ref:{{{t}}}:e{i}"))
                    .query(&mut con)
                    .expect("PTTL")
            };
            if got != want && (got.0 == "none" || want.0 == "none") {
                let left = if got.0 == "none" {
                    ttl(apart)
                } else {
                    ttl(together)
                };
                assert!(
                    (0..=5_000).contains(&left),
                    "case {case} ({specs:?}): entry {i} vanished on one side only; \
                     the other expires in {left} ms: {got:?} vs {want:?}"
                );
                continue;
            }
            assert_eq!(
                got, want,
                "case {case} ({specs:?}): entry {i}'s state after {n}"
            );
        }
        let later = now + 200_000;
        assert_eq!(
            run_entries_n(&mut con, &te, part(together), later, 1, false).0,
            run_entries_n(&mut con, &ae, part(apart), later, 1, true).0,
            "case {case} ({specs:?}): state after {n}"
        );
    }
    assert!(closed > 120, "closed form in {closed} of 240 cases");
    assert!(
        admitted > 200 && refused > 200,
        "{admitted} admitted, {refused} refused"
    );
}

/// `lua/policy.lua` deciding n requests in one call (coalesced requests) answers and leaves
/// state exactly as n calls at the same instant do, for every algorithm, with and without a
/// calendar quota.
#[test]
fn policy_requests_in_one_call_match_consecutive_calls() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let mut rng = StdRng::seed_from_u64(0xc0a1_e5ce);
    let base = redis_now_ms(&mut con);
    let day: &'static [CalendarQuota] = Box::leak(Box::new([CalendarQuota {
        limit: 6,
        period: Period::Day,
    }]));
    for alg in Algorithm::ALL {
        for case in 0..60 {
            // Slow refill: keys expire (on Redis's real clock) long after this test.
            let rate = Rate::new(
                rng.random_range(1..=20),
                3_600_000,
                rng.random_range(1..=12),
            );
            let together = PolicyCall {
                tenant: Box::leak(format!("n{alg:?}{case}").into_boxed_str()),
                algorithm: alg,
                rate,
                cost: rng.random_range(1..=rate.burst.min(4)),
                max_delay_ms: if alg == Algorithm::LeakyBucket {
                    2_000
                } else {
                    0
                },
                quotas: if case % 3 == 0 { day } else { &[] },
            };
            let apart = PolicyCall {
                tenant: Box::leak(format!("s{alg:?}{case}").into_boxed_str()),
                ..together
            };
            let n = rng.random_range(2..=8usize);
            let now = base + case * 10;
            let batch = run_policy_n(&mut con, &together, now, n);
            for (i, got) in batch.into_iter().enumerate() {
                let one = run_policy(&mut con, &apart, now);
                assert_eq!(
                    policy::PolicyDecision::from_batch(got),
                    one,
                    "{alg:?} case {case} request {i} of {n}"
                );
            }
            // The state left behind is the same: the next decision, a little later, agrees.
            let later = now + 200_000;
            assert_eq!(
                run_policy(&mut con, &together, later),
                run_policy(&mut con, &apart, later),
                "{alg:?} case {case}: state after {n}"
            );
        }
    }
}

/// `lua/refund.lua` gives back exactly what one debit of `lua/policy.lua` took, for every
/// algorithm and for a calendar quota: after debit + refund the bucket admits its whole burst
/// again, and not one more.
#[test]
fn a_refund_gives_back_exactly_one_debit_for_every_algorithm() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let now = redis_now_ms(&mut con);
    let quotas = [CalendarQuota {
        limit: 3,
        period: Period::Day,
    }];
    for alg in Algorithm::ALL {
        let tenant = format!("refund-{}", alg.key_suffix());
        let call = PolicyCall {
            tenant: &tenant,
            algorithm: alg,
            rate: Rate::new(1, 3_600_000, 3),
            cost: 1,
            max_delay_ms: 0,
            quotas: &quotas,
        };
        assert!(run_policy(&mut con, &call, now).admitted, "{alg:?}");
        let entry = call.entry("ref");
        let (keys, args) =
            policy::refund_keys_and_args("ref", &[&entry], Some(call.quota_part()), now);
        let script = redis::Script::new(policy::debit_refund_script().source());
        let mut inv = script.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        for a in &args {
            inv.arg(a);
        }
        let given: i64 = inv.invoke(&mut con).expect("refund");
        assert_eq!(given, 2, "{alg:?}: the limit and the quota");
        for i in 0..3 {
            let d = run_policy(&mut con, &call, now);
            assert!(d.admitted, "{alg:?}: request {i} after the refund");
        }
        let d = run_policy(&mut con, &call, now);
        assert!(
            !d.admitted,
            "{alg:?}: the refund gave back more than it took"
        );
    }
}

/// A bucket still in the hash layout of earlier versions (fields `l`, `s`, `t`) is read once by
/// the token bucket, lease, usage-settle and policy scripts: the decision counts its level, and
/// the write replaces the hash with the string (docs/redis.md, upgrading from the hash layout).
#[test]
fn a_bucket_in_the_old_hash_layout_is_read_once_then_replaced() {
    use tollgate::store::redis::scripts::{LEASE_LUA, USAGE_SETTLE_LUA};
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let per: u64 = 86_400_000;
    let policy_lua = policy::compose();
    let scripts: [(&str, &str, Vec<u64>); 4] = [
        ("tb", TOKEN_BUCKET_LUA, vec![1, per, 10, 1]),
        ("lease", LEASE_LUA, vec![1, per, 10, 1, 1, 0]),
        // used 1 more than reserved
        ("usage", USAGE_SETTLE_LUA, vec![1, per, 10, 1]),
        // one token bucket entry, no shadow, its four arguments; cost 1, no quota, 1 request
        (
            "policy",
            &policy_lua,
            vec![1, 1, 0, 4, 1, per, 10, 1, 1, 0, 1],
        ),
    ];
    for (name, lua, args) in scripts {
        let key = format!("old:{{{name}}}:tb");
        let now = redis_now_ms(&mut con);
        let _: () = redis::cmd("HSET")
            .arg(&key)
            .arg(&["l", &(3 * per).to_string(), "s", &per.to_string()])
            .arg(&["t", &now.to_string()])
            .query(&mut con)
            .unwrap();
        let _: redis::Value = redis::Script::new(lua)
            .key(&key)
            .arg(args)
            .invoke(&mut con)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let kind: String = redis::cmd("TYPE").arg(&key).query(&mut con).unwrap();
        assert_eq!(kind, "string", "{name}");
        let level: i64 = common::key_field(&mut con, &key, "l")
            .unwrap()
            .parse()
            .unwrap();
        // (plus the units refilled since: 1 a ms)
        assert_eq!(level / per as i64, 2, "{name}: 3 tokens less the one taken");
        assert_eq!(
            common::key_field(&mut con, &key, "s"),
            Some(per.to_string()),
            "{name}"
        );
    }
}

/// `lua/policy.lua` with a carry (what the `local` fallback admitted, `carried` with times on
/// the script's clock) deciding one request of `call` at `now`.
fn run_carrying(
    con: &mut redis::Connection,
    call: &PolicyCall<'_>,
    now: u64,
    carried: &tollgate::limit::carry::Carried,
    quota: &[(u64, u64)],
    by_loop: bool,
) -> policy::PolicyDecision {
    use tollgate::quota::policy_carry::PolicyCarried;
    let entry = call.entry("ref");
    let (keys, mut args) =
        policy::batch_keys_and_args("ref", &[&entry], Some(call.quota_part()), Some(now));
    let ages = |l: &[(u64, u64)]| l.iter().map(|&(t, n)| (now - t, n)).collect();
    let words = PolicyCarried {
        debt: carried.debt,
        admissions: ages(&carried.admissions),
        quota: ages(quota),
    }
    .words();
    let at = args.len() - 2;
    args.splice(at..at, words.split_terminator(' ').map(str::to_string));
    if by_loop {
        args.push("loop".to_string());
    }
    let script = redis::Script::new(policy::policy_script().source());
    let mut inv = script.prepare_invoke();
    for k in &keys {
        inv.key(k);
    }
    for a in &args {
        inv.arg(a);
    }
    let policy::PolicyReply(reply) = inv.invoke(con).expect("policy call");
    let spec = policy::replay::CallSpec::parse(args.iter().map(String::as_str)).expect("spec");
    let mut d = policy::decode_reply_of(&reply, &spec, 1).expect("reply shape");
    policy::PolicyDecision::from_batch(d.remove(0))
}

/// The carry of `lua/policy.lua` against its Rust mirror (`limit::carry::apply`) on random
/// prior states and random local admissions, for every algorithm, in closed form and by the
/// loop: the carried state decides the request as the reference does, and is stored as it.
#[test]
fn the_carry_of_local_admissions_matches_its_reference() {
    use tollgate::limit::carry::{self, Carried};
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let mut rng = StdRng::seed_from_u64(0xca_77_1e);
    let base = redis_now_ms(&mut con);
    for alg in Algorithm::ALL {
        let mut changed = 0;
        for case in 0..400 {
            let tenant = format!("c{}{case}", alg.key_suffix());
            let rate = small_rate(&mut rng);
            let max_delay = if rng.random_bool(0.5) {
                0
            } else {
                rng.random_range(0..=5_000)
            };
            let w = rate.window_ms().min(20_000_000);
            let mut state = None;
            let mut t = base - rng.random_range(0..=3 * w);
            for _ in 0..rng.random_range(0..=rate.burst + 3) {
                t += rng.random_range(0..=w / 4 + 1);
                let c = rng.random_range(1..=rate.burst);
                algorithm::decide(alg, &mut state, t, &rate, c, max_delay);
            }
            let now = t + rng.random_range(0..=2 * w);
            let mut admissions: Vec<(u64, u64)> = (0..rng.random_range(0..=5))
                .map(|_| {
                    let at = now - rng.random_range(0..=(3 * w).min(now));
                    (at, rng.random_range(1..=rate.burst))
                })
                .collect();
            admissions.sort();
            let carried = Carried {
                debt: rng.random_range(0..=rate.burst + 2),
                admissions,
            };
            let cost = rng.random_range(1..=rate.burst);
            let key = main_key("ref", &tenant, alg);
            if let Some(s) = &state {
                write_state(&mut con, &key, s);
            }
            let before = state.clone();
            carry::apply(alg, &mut state, now, &rate, max_delay, &carried);
            if state != before {
                changed += 1;
            }
            let want = algorithm::decide(alg, &mut state, now, &rate, cost, max_delay);
            let call = PolicyCall {
                tenant: &tenant,
                algorithm: alg,
                rate,
                cost,
                max_delay_ms: max_delay,
                quotas: &[],
            };
            let got = run_carrying(&mut con, &call, now, &carried, &[], rng.random_bool(0.5));
            let ctx = format!(
                "{alg:?} case {case}: {rate:?} cost {cost} max_delay {max_delay} now {now} \
                 state {before:?} carried {carried:?}"
            );
            assert_eq!(got.main, want, "{ctx}");
            let stored = read_state(&mut con, &key, alg);
            if stored.is_none() && state.is_some() {
                assert!(want.decision.full_ms < 100, "{ctx}: key vanished");
            } else {
                assert_eq!(stored, state, "{ctx}: stored state");
            }
            if stored.is_some() {
                assert!(redis.pttl(&key) != -1, "{ctx}: no TTL");
            }
        }
        assert!(changed > 100, "{alg:?}: the carry changed {changed} states");
    }
}

/// The carry into calendar quotas: the local admissions of the current period are added to its
/// counter (never beyond the limit), those of an earlier period are not.
#[test]
fn the_carry_adds_the_current_periods_admissions_to_each_quota() {
    use tollgate::limit::carry::Carried;
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let boundary = 1_796_083_200_000u64; // 2026-12-01T00:00:00Z
    let quotas: &'static [CalendarQuota] = Box::leak(Box::new([CalendarQuota {
        limit: 10,
        period: Period::Day,
    }]));
    let call = PolicyCall {
        tenant: "q",
        algorithm: Algorithm::Gcra,
        rate: Rate::new(1, 3_600_000, 100),
        cost: 1,
        max_delay_ms: 0,
        quotas,
    };
    let now = boundary + 60_000;
    for _ in 0..3 {
        assert!(run_policy(&mut con, &call, now).admitted);
    }
    let none = Carried::default();
    // 2 tokens yesterday, 4 today: 3 + 4 counted, then this request.
    let local = [(boundary - 1, 2), (boundary, 4)];
    for by_loop in [false, true] {
        let d = run_carrying(&mut con, &call, now, &none, &local, by_loop);
        let day: u64 = redis::cmd("GET")
            .arg(format!("ref:{{q}}:q:day:{boundary}"))
            .query(&mut con)
            .unwrap();
        if !by_loop {
            assert!(d.admitted);
            assert_eq!((d.quotas[0].remaining, day), (2, 8));
        } else {
            // 8 + 4, lowered to the limit: full.
            assert!(!d.admitted);
            assert_eq!((d.quotas[0].remaining, day), (0, 10));
        }
    }
    let ttl = redis.pttl(&format!("ref:{{q}}:q:day:{boundary}"));
    assert!(ttl > 0, "quota key TTL {ttl}");
}
