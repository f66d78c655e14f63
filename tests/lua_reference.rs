//! `lua/token_bucket.lua` in a real Redis against the pure Rust reference
//! (`tollgate::limit::token_bucket::decide`) on thousands of random (state, elapsed, cost)
//! cases: decisions, header values and the written state must be identical.
//!
//! The script reads the clock from Redis `TIME`. An admitted decision writes the `now` it used
//! (field `t`), so those cases are compared exactly at that instant; a rejection writes nothing,
//! so it must equal the reference at some instant between a `TIME` read before and after the call
//! (usually the same millisecond).

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
        // last refilled up to ~2× the time-to-full ago (or slightly in the future).
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
            let last = if rng.random_bool(0.05) {
                now0 + 5_000
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

        if got.admitted && field("t").is_some() {
            let used_now = field("t").expect("admitted decision writes t");
            let (want, next) = decide(state, used_now, &rate, cost);
            assert_eq!(
                got, want,
                "case {case}: {rate:?} cost {cost} state {state:?} now {used_now}"
            );
            let next = next.expect("reference admits too");
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
            // A rejection writes nothing (an admitted bucket due full within ms may be gone).
            if got.admitted {
                assert!(
                    got.full_ms <= after - before + 2,
                    "case {case}: admitted key vanished"
                );
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
