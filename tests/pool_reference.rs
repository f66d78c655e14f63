//! `lua/pool_bucket.lua` in a real Redis against the pure Rust reference
//! (`tollgate::limit::pool::decide`) on random (pool state, share state, elapsed, cost) cases:
//! decisions and the written states must be identical. As in tests/lua_reference.rs, an admitted
//! decision is compared at the `now` the script stored; a refusal (which writes nothing) must
//! equal the reference at some instant between a Redis `TIME` read before and after the call.

mod common;

use common::RedisServer;
use rand::{rngs::StdRng, Rng, SeedableRng};
use tollgate::limit::pool::{decide, share_rate};
use tollgate::limit::token_bucket::{Decision, TokenBucketState};
use tollgate::limit::Rate;
use tollgate::store::redis::keys::{pool_key, share_key};
use tollgate::store::redis::scripts::POOL_BUCKET_LUA;

fn redis_now_ms(con: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    s * 1000 + us / 1000
}

fn read(con: &mut redis::Connection, key: &str) -> Option<TokenBucketState> {
    let pairs = common::key_fields(con, key);
    let field = |f: &str| {
        let v = pairs.iter().find(|(n, _)| n == f)?;
        Some(v.1.parse::<u64>().unwrap())
    };
    let (l, s, t) = (field("l"), field("s"), field("t"));
    Some(TokenBucketState {
        level: l?,
        scale: s?,
        last_ms: t?,
    })
}

fn random_state(
    rng: &mut StdRng,
    con: &mut redis::Connection,
    key: &str,
    rate: &Rate,
    now: u64,
) -> Option<TokenBucketState> {
    if rng.random_bool(0.2) {
        return None;
    }
    let capacity = rate.burst * rate.per_ms;
    let level = rng.random_range(0..=capacity);
    let to_full = capacity.div_ceil(rate.limit);
    let last = if rng.random_bool(0.1) {
        now + rng.random_range(1..=60_000)
    } else {
        now - rng.random_range(0..=to_full.min(5_000))
    };
    common::set_bucket(con, key, level as i64, rate.per_ms, last);
    Some(TokenBucketState {
        level,
        scale: rate.per_ms,
        last_ms: last,
    })
}

#[test]
fn pool_script_matches_rust_reference_on_random_cases() {
    let redis = RedisServer::start();
    let mut con = redis.conn();
    let script = redis::Script::new(POOL_BUCKET_LUA);
    let mut rng = StdRng::seed_from_u64(0x9001);
    let (mut admitted, mut refused) = (0, 0);
    for case in 0..2_000 {
        let per_ms = [1_000, 60_000, 3_600_000][rng.random_range(0..3)];
        let pool = Rate::new(rng.random_range(1..=200), per_ms, rng.random_range(1..=100));
        let share = share_rate(&pool, [0.25, 0.5, 1.0][rng.random_range(0..3)]);
        let tier = format!("t{case}");
        let (pk, sk) = (pool_key("ref", &tier), share_key("ref", &tier, "acme"));
        let now0 = redis_now_ms(&mut con);
        let p0 = random_state(&mut rng, &mut con, &pk, &pool, now0);
        let s0 = random_state(&mut rng, &mut con, &sk, &share, now0);
        let cost = rng.random_range(1..=share.burst + 1);

        let before = redis_now_ms(&mut con);
        let reply: Vec<i64> = script
            .key(&pk)
            .key(&sk)
            .arg(pool.limit)
            .arg(pool.per_ms)
            .arg(pool.burst)
            .arg(share.limit)
            .arg(share.burst)
            .arg(cost)
            .invoke(&mut con)
            .unwrap();
        let after = redis_now_ms(&mut con);
        let got = Decision {
            admitted: reply[0] == 1,
            remaining: reply[1] as u64,
            retry_after_ms: if reply[2] < 0 {
                u64::MAX
            } else {
                reply[2] as u64
            },
            full_ms: reply[3] as u64,
        };
        let (p1, s1) = (read(&mut con, &pk), read(&mut con, &sk));
        if got.admitted {
            let used_now = p1.expect("admission writes the pool").last_ms;
            let (want, next) = decide(p0, s0, used_now, &pool, &share, cost);
            assert_eq!(got, want, "case {case}: {pool:?} {share:?} cost {cost}");
            let (np, ns) = next.expect("reference admits too");
            assert_eq!(
                p1.map(|s| s.level),
                Some(np.level),
                "case {case}: pool level"
            );
            assert_eq!(
                s1.map(|s| s.level),
                Some(ns.level),
                "case {case}: share level"
            );
            assert_eq!(s1.map(|s| s.last_ms), Some(used_now));
            let ttl: i64 = redis::cmd("PTTL").arg(&sk).query(&mut con).unwrap();
            assert!(
                ttl > 0 || ttl == -2,
                "case {case}: share key without TTL ({ttl})"
            );
            admitted += 1;
        } else {
            let ok = (before..=after).any(|now| decide(p0, s0, now, &pool, &share, cost).0 == got);
            assert!(
                ok,
                "case {case}: {pool:?} {share:?} cost {cost} p0 {p0:?} s0 {s0:?} lua {got:?} ref {:?}",
                decide(p0, s0, before, &pool, &share, cost).0
            );
            assert_eq!(p1, p0, "case {case}: a refusal wrote the pool");
            assert_eq!(s1, s0, "case {case}: a refusal wrote the share");
            refused += 1;
        }
        let _: () = redis::cmd("DEL").arg(&pk).arg(&sk).query(&mut con).unwrap();
    }
    assert!(
        admitted > 300 && refused > 300,
        "admitted {admitted}, refused {refused}"
    );
}
