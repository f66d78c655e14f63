//! Property tests of the token bucket reference and of the numbers its headers carry (issue 11,
//! faults 2 and 3). Pure: an injected clock, no network, no Redis; stable toolchain (proptest).
//!
//! - Clock steps: random call sequences with the clock stepping backwards and forwards between
//!   calls. Whatever happened before, a refused client that waits exactly `Retry-After` (with no
//!   other traffic) is admitted, the wait is not longer than needed, and the bucket never goes
//!   below zero or above its burst.
//! - Bounds: for random tier + tenant-override numbers, config validation accepts exactly the
//!   effective rates that `limit::bounds::check` accepts, blaming the override's field; for
//!   every accepted one, each header number equals exact u128 arithmetic, and a double-precision
//!   emulation of `lua/token_bucket.lua` (Lua numbers are doubles) decides identically.

#[path = "common/config.rs"]
#[allow(dead_code)]
mod config_builder;

use config_builder::GatewayConfig;
use proptest::prelude::*;
use tollgate::config::HeaderMode;
use tollgate::limit::bounds;
use tollgate::limit::token_bucket::{decide, Decision, TokenBucketState};
use tollgate::limit::Rate;
use tollgate::response::QuotaHeaders;

const PERIODS: [u64; 8] = [1, 250, 1_000, 7_000, 60_000, 600_000, 3_600_000, 86_400_000];

fn small_rate() -> impl Strategy<Value = Rate> {
    (1u64..=2_000, 0..PERIODS.len(), 1u64..=50)
        .prop_map(|(limit, p, burst)| Rate::new(limit, PERIODS[p], burst))
}

/// A clock step in ms: small jitter, up to a refill, or a whole day, either way.
fn step(rate: Rate) -> impl Strategy<Value = i64> {
    let to_full = ((rate.burst * rate.per_ms).div_ceil(rate.limit) as i64).max(1);
    prop_oneof![
        0i64..=50,
        -to_full * 2..=to_full * 2,
        -86_400_000i64..=86_400_000,
    ]
}

fn calls() -> impl Strategy<Value = (Rate, Vec<(i64, u64)>)> {
    small_rate().prop_flat_map(|rate| {
        let call = (step(rate), 1..=rate.burst + 1);
        (Just(rate), prop::collection::vec(call, 1..40))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Issue 11 fault 2: "a client that waits exactly Retry-After is admitted" under clock steps.
    #[test]
    fn waiting_retry_after_admits_across_clock_steps((rate, calls) in calls()) {
        let capacity = rate.burst * rate.per_ms;
        let mut now: u64 = 10_000_000_000_000;
        let mut state: Option<TokenBucketState> = None;
        for (i, (step, cost)) in calls.into_iter().enumerate() {
            now = now.checked_add_signed(step).unwrap();
            let (d, next) = decide(state, now, &rate, cost);
            prop_assert!(d.remaining <= rate.burst, "call {i}: {d:?}");
            if let Some(n) = next {
                prop_assert!(n.level <= capacity, "call {i}: level {} > {capacity}", n.level);
                state = Some(n);
            }
            if cost > rate.burst {
                prop_assert!(d.never_admissible() && d.retry_after_s().is_none(), "call {i}: {d:?}");
                continue;
            }
            if d.admitted {
                continue;
            }
            // No other traffic: the client waits exactly Retry-After (whole seconds) ...
            let wait_s = d.retry_after_s().expect("refused, admissible: has Retry-After");
            let (later, _) = decide(state, now + wait_s * 1000, &rate, cost);
            prop_assert!(later.admitted, "call {i}: waited {wait_s} s after {d:?}, state {state:?}, got {later:?}");
            // ... and the millisecond wait is exact: enough, and one ms less is not.
            prop_assert!(decide(state, now + d.retry_after_ms, &rate, cost).0.admitted);
            prop_assert!(!decide(state, now + d.retry_after_ms - 1, &rate, cost).0.admitted);
        }
    }
}

/// The issue's reproduction on the reference: stamp 30 s ahead, one token, burst 2, 1/s.
#[test]
fn future_stamp_counts_as_now() {
    let rate = Rate::new(1, 1_000, 2);
    let now = 1_000_000;
    let state = Some(TokenBucketState {
        level: 1_000,
        scale: 1_000,
        last_ms: now + 30_000,
    });
    let (first, state) = decide(state, now, &rate, 1);
    assert!(first.admitted);
    assert_eq!(state.unwrap().last_ms, now, "rebased to now");
    let (refused, rebased) = decide(state, now + 10, &rate, 1);
    assert_eq!(
        (refused.admitted, refused.retry_after_s()),
        (false, Some(1))
    );
    assert_eq!(
        rebased, None,
        "stamp not in the future: a refusal writes nothing"
    );
    assert!(decide(state, now + 10 + 1_000, &rate, 1).0.admitted);
    // Refused while the stamp is ahead: the rebased state is stored, so waiting works.
    let empty = Some(TokenBucketState {
        level: 0,
        scale: 1_000,
        last_ms: now + 30_000,
    });
    let (refused, stored) = decide(empty, now, &rate, 1);
    assert_eq!(refused.retry_after_ms, 1_000);
    assert_eq!(
        stored,
        Some(TokenBucketState {
            level: 0,
            scale: 1_000,
            last_ms: now
        })
    );
    assert!(decide(stored, now + 1_000, &rate, 1).0.admitted);
}

// ---------------------------------------------------------------------------------------------
// Fault 3: bounds, exact header arithmetic, Lua double arithmetic
// ---------------------------------------------------------------------------------------------

/// `lua/token_bucket.lua` step for step in f64 (Lua 5.1 numbers): the decision and the written
/// (level, scale, stamp), or `None` for each when it does not write.
#[allow(clippy::type_complexity)]
fn lua_f64(
    stored: Option<(f64, f64, f64)>,
    now: f64,
    rate: &Rate,
    cost: u64,
) -> ([f64; 4], Option<(f64, f64, f64)>) {
    let (limit, scale, burst, cost) = (
        rate.limit as f64,
        rate.per_ms as f64,
        rate.burst as f64,
        cost as f64,
    );
    let capacity = burst * scale;
    let need = cost * scale;
    let ceil_div = |a: f64, b: f64| ((a + b - 1.0) / b).floor();
    let mut level = capacity;
    let mut rebased = false;
    if let Some((l, old_scale, last)) = stored {
        level = l;
        if old_scale != scale && old_scale > 0.0 {
            let whole = (level / old_scale).floor();
            let rest = level - whole * old_scale;
            level = whole * scale + (rest * scale / old_scale).floor();
        }
        if level > capacity {
            level = capacity;
        }
        if now > last {
            let mut elapsed = now - last;
            let to_full = ceil_div(capacity - level, limit);
            if elapsed > to_full {
                elapsed = to_full;
            }
            level += elapsed * limit;
        } else if now < last {
            rebased = true;
        }
    }
    if level > capacity {
        level = capacity;
    }
    if need > capacity {
        let full = ceil_div(capacity - level, limit);
        return ([0.0, (level / scale).floor(), -1.0, full], None);
    }
    if level < need {
        let full = ceil_div(capacity - level, limit);
        let write = rebased.then_some((level, scale, now));
        return (
            [
                0.0,
                (level / scale).floor(),
                ceil_div(need - level, limit),
                full,
            ],
            write,
        );
    }
    level -= need;
    let full = ceil_div(capacity - level, limit);
    (
        [1.0, (level / scale).floor(), 0.0, full],
        Some((level, scale, now)),
    )
}

/// The decision in exact u128 arithmetic, written independently of `decide`.
fn exact(state: Option<TokenBucketState>, now: u64, rate: &Rate, cost: u64) -> [u128; 4] {
    let (limit, scale, burst) = (rate.limit as u128, rate.per_ms as u128, rate.burst as u128);
    let capacity = burst * scale;
    let need = cost as u128 * scale;
    let level = match state {
        None => capacity,
        Some(s) => {
            let converted = if s.scale == 0 {
                s.level as u128
            } else {
                s.level as u128 * scale / s.scale as u128
            };
            let level = converted.min(capacity);
            let elapsed = now.saturating_sub(s.last_ms) as u128;
            (level + elapsed * limit).min(capacity)
        }
    };
    let full = |l: u128| (capacity - l).div_ceil(limit);
    if need > capacity {
        [0, level / scale, u128::MAX, full(level)]
    } else if level >= need {
        [1, (level - need) / scale, 0, full(level - need)]
    } else {
        [
            0,
            level / scale,
            (need - level).div_ceil(limit),
            full(level),
        ]
    }
}

/// Tier numbers and optional override numbers, from tiny to far beyond every bound.
fn number() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 1u64..=100,
        3 => 1u64..=1_000_000,
        3 => (0u32..=52).prop_map(|e| 1u64 << e),
        1 => 1u64..=(1 << 53),
        1 => Just(5_000_000_000_000),
        1 => Just((1 << 52) + 1),
    ]
}

fn per_ms() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (0..PERIODS.len()).prop_map(|i| PERIODS[i]),
        2 => 1u64..=86_400_000,
        1 => Just(86_400_001),
    ]
}

/// `<n>ms` duration text.
fn ms(n: u64) -> String {
    format!("{n}ms")
}

/// A config checked in-process: tier `T` at `tier` and tenant `t1` overriding the given
/// `(limit, per ms, burst)` fields.
fn config(tier: Rate, o: (Option<u64>, Option<u64>, Option<u64>)) -> String {
    let mut fields = Vec::new();
    if let Some(l) = o.0 {
        fields.push(format!("limit: {l}"));
    }
    if let Some(p) = o.1 {
        fields.push(format!("per: {}", ms(p)));
    }
    if let Some(b) = o.2 {
        fields.push(format!("burst: {b}"));
    }
    tier_config(tier)
        .tenant("t1", &format!("{{ {} }}", fields.join(", ")))
        .yaml()
}

/// Tier `T` at `tier`, no tenants; no admin listener (the config is only parsed).
fn tier_config(tier: Rate) -> GatewayConfig {
    GatewayConfig::new()
        .listen(&["\"127.0.0.1:8080\""])
        .no_admin()
        .no_server()
        .redis("redis://127.0.0.1:6379", "")
        .upstream("echo", "127.0.0.1:9001")
        .route("{ path_prefix: \"/\", upstream: echo }")
        .tier(
            "T",
            &format!(
                "{{ limit: {}, per: {}, burst: {} }}",
                tier.limit,
                ms(tier.per_ms),
                tier.burst
            ),
        )
}

/// States at the edges of the bucket: empty, one unit, almost full, full, converted from another
/// period, stamped in the past and in the future.
fn states(rate: &Rate, now: u64) -> Vec<Option<TokenBucketState>> {
    let capacity = rate.burst * rate.per_ms;
    let mut out = vec![None];
    for level in [0, 1, capacity / 2, capacity.saturating_sub(1), capacity] {
        for last in [now, now - 1, now - 86_400_000, now + 30_000] {
            out.push(Some(TokenBucketState {
                level,
                scale: rate.per_ms,
                last_ms: last,
            }));
        }
        for old in [1, 86_400_000] {
            out.push(Some(TokenBucketState {
                level: level.min(((1u64 << 52) / rate.per_ms).saturating_mul(old)),
                scale: old,
                last_ms: now - 1,
            }));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Issue 11 fault 3 as a property: validation accepts a tenant override exactly when the
    /// merged rate is in range (blaming a `tenants.t1.*` field otherwise), and then every header
    /// number is exact and the Lua arithmetic agrees.
    #[test]
    fn accepted_configs_have_exact_headers(
        tier in (number(), per_ms(), number()).prop_map(|(l, p, b)| Rate::new(l, p, b)),
        o in (prop::option::of(number()), prop::option::of(per_ms()), prop::option::of(number())),
        cost in prop_oneof![Just(1u64), 1u64..=5_000_000_000_000],
    ) {
        let merged = Rate {
            limit: o.0.unwrap_or(tier.limit),
            per_ms: o.1.unwrap_or(tier.per_ms),
            burst: o.2.unwrap_or(tier.burst),
        };
        let parsed = tollgate::config::parse(&config(tier, o));
        match (bounds::check(&tier), bounds::check(&merged)) {
            (Ok(()), Ok(())) => prop_assert!(parsed.is_ok(), "{tier:?} {o:?}: {parsed:?}"),
            (Ok(()), Err(_)) => {
                let errors = parsed.expect_err("merged rate out of range must be refused");
                prop_assert!(
                    errors.iter().all(|e| e.path.starts_with("tenants.t1.")),
                    "{tier:?} {o:?}: {errors:?}"
                );
                return Ok(());
            }
            (Err(_), _) => {
                prop_assert!(parsed.is_err());
                return Ok(());
            }
        }
        let rate = merged;
        // RateLimit-Policy w: seconds to fill the burst, exact.
        let units = rate.burst as u128 * rate.per_ms as u128;
        let w = units.div_ceil(rate.limit as u128).div_ceil(1000).max(1);
        prop_assert_eq!(rate.window_s() as u128, w);
        let now: u64 = 1_796_000_000_000;
        for state in states(&rate, now) {
            let (d, _) = decide(state, now, &rate, cost);
            let [admitted, remaining, retry_ms, full_ms] = exact(state, now, &rate, cost);
            let want = Decision {
                admitted: admitted == 1,
                remaining: u64::try_from(remaining).unwrap(),
                retry_after_ms: u64::try_from(retry_ms).unwrap_or(u64::MAX),
                full_ms: u64::try_from(full_ms).unwrap(),
            };
            prop_assert_eq!(d, want, "{:?} cost {} state {:?}", rate, cost, state);
            // Headers: RateLimit t / X-RateLimit-Reset and Retry-After from the exact values.
            let headers = QuotaHeaders {
                policy_name: "T".into(),
                rate,
                decision: d,
                degraded: false,
                quotas: Vec::new(),
                listed_before: None,
            }
            .pairs(HeaderMode::Both);
            let get = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone());
            prop_assert_eq!(get("RateLimit-Policy"), Some(format!("\"T\";q={};w={w}", rate.burst)));
            let t = full_ms.div_ceil(1000);
            prop_assert_eq!(get("RateLimit"), Some(format!("\"T\";r={remaining};t={t}")));
            prop_assert_eq!(get("X-RateLimit-Reset"), Some(t.to_string()));
            let retry = (admitted == 0 && retry_ms != u128::MAX).then(|| retry_ms.div_ceil(1000).max(1).to_string());
            prop_assert_eq!(get("Retry-After"), retry);
            // The script's doubles agree with the exact reference, stored state included.
            let stored = state.map(|s| (s.level as f64, s.scale as f64, s.last_ms as f64));
            let (lua, write) = lua_f64(stored, now as f64, &rate, cost);
            let lua_retry = if lua[2] < 0.0 { u128::MAX } else { lua[2] as u128 };
            prop_assert_eq!(
                [lua[0] as u128, lua[1] as u128, lua_retry, lua[3] as u128],
                [admitted, remaining, retry_ms, full_ms],
                "lua doubles: {:?} cost {} state {:?}", rate, cost, state
            );
            let next = decide(state, now, &rate, cost).1;
            prop_assert_eq!(
                write.map(|(l, s, t)| (l as u64, s as u64, t as u64)),
                next.map(|n| (n.level, n.scale, n.last_ms))
            );
        }
    }
}

/// Issue 11 fault 3, exactly as reported: accepted before the fix, refused at the override.
#[test]
fn issue_reproduction_is_refused_at_the_override() {
    let yaml = config(
        Rate::new(1, 86_400_000, 5),
        (None, None, Some(5_000_000_000_000)),
    );
    let errors = tollgate::config::parse(&yaml).expect_err("refused");
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{text:?}");
    assert!(
        text[0].starts_with("tenants.t1.burst: burst × per is too large"),
        "{text:?}"
    );
    // The same numbers on a tier name the tier's field.
    let tier = tier_config(Rate::new(1, 86_400_000, 5_000_000_000_000)).yaml();
    let text: Vec<String> = tollgate::config::parse(&tier)
        .expect_err("refused")
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert!(text[0].starts_with("tiers.T.burst: "), "{text:?}");
}
