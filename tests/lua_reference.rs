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

mod common;

use common::RedisServer;
use rand::{rngs::StdRng, Rng, SeedableRng};
use tollgate::limit::token_bucket::{decide, Decision, TokenBucketState};
use tollgate::limit::Rate;
use tollgate::quota::redis_store::TOKEN_BUCKET_LUA;

fn redis_now_ms(con: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    s * 1000 + us / 1000
}

fn to_decision(reply: &[i64]) -> Decision {
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
            Some(s)
        };

        let before = redis_now_ms(&mut con);
        let reply: Vec<i64> = script
            .key(&key)
            .arg(rate.limit)
            .arg(rate.per_ms)
            .arg(rate.burst)
            .arg(cost)
            .invoke(&mut con)
            .unwrap();
        let after = redis_now_ms(&mut con);
        let got = to_decision(&reply);
        let stored: Vec<(String, String)> =
            redis::cmd("HGETALL").arg(&key).query(&mut con).unwrap();
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
            let ok = if want.full_ms > 100 {
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
            // A rejection writes nothing, except a rebase; a bucket written due full within ms
            // (admitted, or rebased from a future stamp) may already be gone.
            let vanished = stored.is_empty() && got.full_ms <= after - before + 2;
            if got.admitted {
                assert!(vanished, "case {case}: admitted key vanished");
            } else if state.is_some_and(|s| s.last_ms > before) && vanished {
                // Rebased, written, expired.
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
    let (l, sc, t): (Option<u64>, Option<u64>, Option<u64>) = redis::cmd("HMGET")
        .arg(key)
        .arg("l")
        .arg("s")
        .arg("t")
        .query(con)
        .unwrap();
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
         redis.call('HSET', KEYS[1], 't', ARGV[1]) redis.call('PEXPIRE', KEYS[1], ttl) return 1",
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
            let reply: Vec<i64> = script
                .key(&key)
                .arg(rate.limit)
                .arg(rate.per_ms)
                .arg(rate.burst)
                .arg(cost)
                .invoke(&mut con)
                .unwrap();
            let after = redis_now_ms(&mut con);
            let got = to_decision(&reply);
            let stored = stored_state(&mut con, &key);
            let read_at = redis_now_ms(&mut con);
            // The instant the script used: the stamp it wrote, else any instant in the window.
            let candidates: Vec<u64> = match stored {
                Some(s) if Some(s) != model => vec![s.last_ms],
                _ => (before..=after).collect(),
            };
            let found = candidates.iter().find_map(|&now| {
                let (want, next) = decide(model, now, &rate, cost);
                (want == got).then_some((now, next))
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
