use super::*;
use crate::quota::policy_script::{batch_keys_and_args, LimitEntry, QuotaPart};

fn entry(key: &str, algorithm: Algorithm, rate: Rate, cost: u64, shadow: bool) -> LimitEntry {
    LimitEntry {
        key: key.into(),
        algorithm,
        rate,
        cost,
        max_delay_ms: 0,
        shadow,
    }
}

#[test]
fn a_call_spec_is_read_back_from_the_arguments_that_made_it() {
    let tb = entry(
        "a",
        Algorithm::TokenBucket,
        Rate::new(10, 1000, 20),
        2,
        false,
    );
    let mut lb = entry(
        "b",
        Algorithm::LeakyBucket,
        Rate::new(5, 60_000, 5),
        1,
        true,
    );
    lb.max_delay_ms = 1500;
    let quotas = [CalendarQuota {
        limit: 100,
        period: Period::Day,
    }];
    let part = QuotaPart {
        tenant: "acme",
        quotas: &quotas,
        cost: 2,
    };
    let (_, args) = batch_keys_and_args("p", &[&tb, &lb], Some(part), None);
    let spec = CallSpec::parse(args.iter().map(String::as_str)).unwrap();
    assert_eq!(spec.entries.len(), 2);
    assert_eq!(
        spec.entries[0],
        EntrySpec {
            algorithm: Algorithm::TokenBucket,
            shadow: false,
            rate: Rate::new(10, 1000, 20),
            cost: 2,
            max_delay_ms: 0
        }
    );
    assert_eq!(spec.entries[1].algorithm, Algorithm::LeakyBucket);
    assert!(spec.entries[1].shadow);
    assert_eq!(spec.entries[1].max_delay_ms, 1500);
    assert_eq!((spec.quota_cost, spec.quotas.clone()), (2, quotas.to_vec()));
    let words: Vec<&str> = args[0].split(' ').collect();
    assert!(CallSpec::parse(words[..3].iter().copied()).is_none());
    assert_eq!(CallSpec::parse(words), Some(spec));
    assert!(CallSpec::parse(["1", "9"]).is_none());
}

fn spec(entries: Vec<EntrySpec>, quota: Option<(u64, u64)>) -> CallSpec {
    CallSpec {
        entries,
        quota_cost: quota.map_or(0, |q| q.1),
        quotas: quota
            .map(|(limit, _)| CalendarQuota {
                limit,
                period: Period::Day,
            })
            .into_iter()
            .collect(),
    }
}

fn es(algorithm: Algorithm, burst: u64, shadow: bool) -> EntrySpec {
    EntrySpec {
        algorithm,
        shadow,
        rate: Rate::new(1, 3_600_000, burst),
        cost: 1,
        max_delay_ms: 0,
    }
}

/// A fresh token bucket of burst 3 and a GCRA of burst 5: the first three of five requests
/// are admitted, the last two refused by the token bucket alone; the GCRA is debited three times.
#[test]
fn the_least_room_admits_the_first_k_and_debits_each_entry_k_times() {
    let s = spec(
        vec![
            es(Algorithm::TokenBucket, 3, false),
            es(Algorithm::Gcra, 5, false),
        ],
        None,
    );
    // A fresh bucket's level is its capacity (burst × per_ms), a fresh GCRA owes nothing.
    let d = replay(&[-1, 1_000, 3, 10_800_000, 0], &s, 5).unwrap();
    let admitted: Vec<bool> = d.iter().map(|b| b.admitted).collect();
    assert_eq!(admitted, [true, true, true, false, false]);
    let tb: Vec<u64> = d
        .iter()
        .map(|b| b.entries[0].0.decision.remaining)
        .collect();
    let gcra: Vec<u64> = d
        .iter()
        .map(|b| b.entries[1].0.decision.remaining)
        .collect();
    assert_eq!(tb, [2, 1, 0, 0, 0]);
    assert_eq!(gcra, [4, 3, 2, 1, 1], "a refused request debits nothing");
    assert!(d.iter().all(|b| b.now_ms == 1_000));
    // The script's k must agree with the derived decisions.
    assert!(replay(&[-1, 1_000, 2, 10_800_000, 0], &s, 5).is_none());
    assert!(replay(&[-1, 1_000, 3, 10_800_000, 0], &s, 5).is_some());
}

/// A shadow entry never refuses, and is debited only for the requests it admits itself; a
/// quota counts what was used before the call.
#[test]
fn shadow_entries_and_quotas_replay_as_the_script_loop_decides() {
    let s = spec(
        vec![
            es(Algorithm::FixedWindow, 10, false),
            es(Algorithm::TokenBucket, 1, true),
        ],
        Some((4, 1)),
    );
    // The quota has 2 of 4 used: two admitted.
    let d = replay(&[-1, 5_000, 2, 0, 3_600_000, 2], &s, 3).unwrap();
    assert_eq!(d.iter().filter(|b| b.admitted).count(), 2);
    assert!(d[0].entries[1].0.decision.admitted);
    assert!(
        !d[1].entries[1].0.decision.admitted,
        "the shadow bucket is empty"
    );
    assert!(d[1].admitted, "a shadow refusal does not refuse");
    assert_eq!(d[0].quotas[0].remaining, 1);
    assert!(!d[2].quotas[0].admitted);
}

/// A stored state is read in the order each script reads its hash; a sliding window log or a
/// leaky bucket never answers in closed form.
#[test]
fn stored_state_is_taken_as_each_algorithm_stores_it() {
    let s = spec(vec![es(Algorithm::TokenBucket, 3, false)], None);
    // Level 1 token (scale 3 600 000) at the call's clock: one admitted.
    let d = replay(&[-1, 1_000, 1, 3_600_000], &s, 2).unwrap();
    assert_eq!(d.iter().filter(|b| b.admitted).count(), 1);
    assert!(
        replay(&[-1, 1_000, 1, -1], &s, 2).is_none(),
        "a negative level"
    );
    assert!(replay(&[-1, 1_000, 1], &s, 2).is_none(), "no level");
    // A GCRA owing 2 of its 5 tokens (and a fraction): two admitted, the last one leaves 0.
    let g = spec(vec![es(Algorithm::Gcra, 5, false)], None);
    let d = replay(&[-1, 1_000, 2, 2 * 3_600_000 + 7], &g, 3).unwrap();
    let left: Vec<u64> = d
        .iter()
        .map(|b| b.entries[0].0.decision.remaining)
        .collect();
    assert_eq!(left, [1, 0, 0]);
    assert_eq!(d.iter().filter(|b| b.admitted).count(), 2);
    // A fixed window's hash as read: {m, its m values}.
    let w = spec(vec![es(Algorithm::FixedWindow, 3, false)], None);
    let d = replay(&[-1, 1_000, 1, 3, 0, 2, 3_600_000], &w, 2).unwrap();
    assert_eq!(d.iter().filter(|b| b.admitted).count(), 1);
    assert!(
        replay(&[-1, 1_000, 1, 2, 0, 2], &w, 2).is_none(),
        "two values"
    );
    let log = spec(vec![es(Algorithm::SlidingWindowLog, 3, false)], None);
    assert!(replay(&[-1, 1_000, 1, 1, 900], &log, 2).is_none());
    assert!(
        replay(&[-1, 1_000, 3, 3_600_000, 7], &s, 3).is_none(),
        "a quota not in the call"
    );
}
