use super::*;
use crate::limit::calendar::Period;

#[test]
fn composed_script_embeds_every_algorithm_once() {
    let s = compose();
    assert!(!s.contains("--@@"));
    assert_eq!(s.matches("function(KEYS, ARGV, redis)").count(), 6);
    // Once per GCRA and leaky bucket script, once for the closed form.
    assert_eq!(s.matches(OWED_LUA).count(), 3);
    for alg in Algorithm::ALL {
        let own = algorithm_lua(alg).replacen("FOUR_VALUES = false", "FOUR_VALUES = true", 1);
        assert_eq!(s.matches(&own).count(), 1, "{alg:?}");
    }
    // The token bucket answers one integer stand-alone, its four values composed.
    assert_eq!(
        algorithm_lua(Algorithm::TokenBucket)
            .matches("local FOUR_VALUES = false")
            .count(),
        1
    );
    assert_eq!(s.matches("local FOUR_VALUES = true").count(), 1);
}

/// Every algorithm's script has its shared parts in place, each once: the prelude in all but
/// the token bucket (whose arithmetic differs), the TAT block in `gcra` and `leaky_bucket`.
#[test]
fn algorithm_scripts_carry_their_shared_parts() {
    for alg in Algorithm::ALL {
        let s = algorithm_lua(alg);
        assert!(!s.contains("--@@"), "{alg:?} has a placeholder left");
        let prelude = usize::from(alg != Algorithm::TokenBucket);
        assert_eq!(s.matches(PRELUDE_LUA).count(), prelude, "{alg:?}");
        let tat = usize::from(matches!(alg, Algorithm::Gcra | Algorithm::LeakyBucket));
        assert_eq!(s.matches(TAT_LUA).count(), tat, "{alg:?}");
        assert_eq!(s.matches(OWED_LUA).count(), tat, "{alg:?}");
        assert_eq!(
            s.matches("redis.replicate_commands()").count(),
            1,
            "{alg:?}"
        );
    }
}

#[test]
fn keys_and_args_layout() {
    let quotas = [CalendarQuota {
        limit: 100,
        period: Period::Day,
    }];
    let call = PolicyCall {
        tenant: "acme",
        algorithm: Algorithm::LeakyBucket,
        rate: Rate::new(10, 1_000, 5),
        cost: 2,
        max_delay_ms: 300,
        quotas: &quotas,
    };
    let (k, a) = keys_and_args("tg", &call, None);
    assert_eq!(k, ["tg:{acme}:lb", "tg:{acme}:q:day"]);
    // Packed: every argument but the request count in one, separated by spaces.
    assert_eq!(a, ["1 6 0 5 10 1000 5 2 300 2 1 day 100", "1"]);
}

#[test]
fn reply_parsing() {
    let r = parse_reply(&[0, 9, 1, 5, 1, 3, 0, 900, 0, 1, 0, 0, 5000, 5000], 10).unwrap();
    assert!(!r.admitted && r.main.decision.admitted);
    assert_eq!(r.quotas[0].retry_after_ms, 5000);
    let r = parse_reply(&[1, 9, 1, 7, 1, 0, 0, 400, 200, 1234, 2, 0], 10).unwrap();
    assert_eq!(r.main.delay_ms, 200);
    assert_eq!(r.reservation.unwrap().tat_ms, 1234);
    assert!(parse_reply(&[1, 9, 1, 4, 1, 0, 0], 10).is_none());
    assert!(parse_reply(&[1, 9, 2, 4, 1, 0, 0, 0, 4, 1, 0, 0, 0, 0], 10).is_none());
    let b = parse_batch(&[0, 9, 2, 4, 1, 3, 0, 0, 4, 0, 0, 700, 800, 0], &[10, 5]).unwrap();
    assert_eq!(b.now_ms, 9);
    assert!(b.entries[0].0.decision.admitted && !b.entries[1].0.decision.admitted);
    assert_eq!(b.entries[1].0.decision.retry_after_ms, 700);
}

/// A coalesced call's reply is one block per request, each parsed as a single call's.
#[test]
fn replies_of_several_requests_parse_in_turn() {
    let one = [1, 9, 1, 4, 1, 1, 0, 900, 1, 1, 0, 0, 5000];
    let two = [0, 9, 1, 4, 0, 0, 300, 900, 1, 0, 0, 5000, 5000];
    let reply: Vec<i64> = one.iter().chain(&two).copied().collect();
    let d = parse_batches(&reply, &[10], 2).unwrap();
    assert!(d[0].admitted && !d[1].admitted);
    assert_eq!(d[1].entries[0].0.decision.retry_after_ms, 300);
    assert_eq!(d[1].quotas[0].retry_after_ms, 5000);
    // Too few blocks, or something left over, is a malformed reply.
    assert!(parse_batches(&reply, &[10], 3).is_none());
    assert!(parse_batches(&reply, &[10], 1).is_none());
}

#[test]
fn batch_and_refund_layout() {
    let e = |key: &str, algorithm, shadow| LimitEntry {
        key: key.into(),
        algorithm,
        rate: Rate::new(10, 1_000, 20),
        cost: 1,
        max_delay_ms: 0,
        shadow,
    };
    let (a, b) = (
        e("k1", Algorithm::Gcra, false),
        e("k2", Algorithm::SlidingWindowLog, true),
    );
    let (k, args) = batch_keys_and_args("tg", &[&a, &b], None, None);
    assert_eq!(k, ["k1", "k2"]);
    let expected = [
        "2", "2", "0", "4", "10", "1000", "20", "1", "4", "1", "4", "10", "1000", "20", "1", "0",
        "0",
    ];
    assert_eq!(args, [expected.join(" ").as_str(), "1"]);
    let key = call_key("tg", &[&a, &b], None);
    assert_eq!(key.keys, k);
    assert_eq!(key.args, expected.join(" ") + " ");
    assert_eq!(key.packed(), expected.join(" "));
    assert_eq!(key.arg_list().collect::<Vec<_>>(), expected);
    let three = key.args_for(3);
    assert_eq!(three, [expected.join(" ").as_str(), "3"]);
    let mut count = itoa::Buffer::new();
    assert_eq!(key.args_with(&mut count, 3), three);
    let spec = key.spec().expect("a policy call's arguments");
    assert_eq!(Some(spec), replay::CallSpec::parse(key.arg_list()).as_ref());
    assert_eq!(spec.entries.len(), 2);
    assert!(!spec.entries[0].shadow && spec.entries[1].shadow);
    let (k, args) = refund_keys_and_args("tg", &[&b], None, 77);
    assert_eq!(k, ["k2"]);
    assert_eq!(args, ["1", "4", "77", "10", "1000", "20", "1"]);
    let quotas = [CalendarQuota {
        limit: 100,
        period: Period::Hour,
    }];
    let part = QuotaPart {
        tenant: "acme",
        quotas: &quotas,
        cost: 3,
    };
    let (k, args) = refund_keys_and_args("tg", &[], Some(part), 3_600_001);
    assert_eq!(k, ["tg:{acme}:q:hour:3600000"]);
    assert_eq!(args, ["1", "0", "3600001", "0", "0", "0", "3"]);
}

/// A late reply deciding two requests, the first admitted: its undo gives back exactly what a
/// refused request's refund would (its entry and its quota window, at the call's clock); a
/// reply where nothing was admitted, or of another shape, undoes nothing.
#[test]
fn a_late_reply_is_undone_like_a_refused_request() {
    let entry = LimitEntry {
        key: "tg:{acme}:gcra".into(),
        algorithm: Algorithm::Gcra,
        rate: Rate::new(10, 1_000, 20),
        cost: 2,
        max_delay_ms: 0,
        shadow: false,
    };
    let quotas = [CalendarQuota {
        limit: 100,
        period: Period::Hour,
    }];
    let part = QuotaPart {
        tenant: "acme",
        quotas: &quotas,
        cost: 2,
    };
    let key = Arc::new(call_key("tg", &[&entry], Some(part)));
    let value = |v: &[i64]| redis::Value::Array(v.iter().map(|&i| redis::Value::Int(i)).collect());
    let one = [1, 9, 1, 4, 1, 1, 0, 900, 1, 1, 0, 0, 5000];
    let two = [0, 9, 1, 4, 0, 0, 300, 900, 1, 0, 0, 5000, 5000];
    let reply: Vec<i64> = one.iter().chain(&two).copied().collect();
    let undo = late_refund(key.clone(), 2)(value(&reply)).expect("one admitted");
    let (keys, args) = refund_keys_and_args("tg", &[&entry], Some(part), 9);
    assert_eq!((undo.keys, undo.args), (keys, args));
    assert!(late_refund(key.clone(), 1)(value(&two)).is_none());
    // In closed form (one string): the first of two admitted, the quota then full.
    let closed = redis::Value::BulkString(b"-1 9 1 0 98".to_vec());
    let undo = late_refund(key.clone(), 2)(closed).expect("one admitted");
    let (keys, args) = refund_keys_and_args("tg", &[&entry], Some(part), 9);
    assert_eq!((undo.keys, undo.args), (keys, args));
    assert!(
        late_refund(key, 2)(value(&one)).is_none(),
        "a reply of one request"
    );
}

#[test]
fn arguments_are_read_back_as_written() {
    let entry = |key: &str, algorithm| LimitEntry {
        key: key.into(),
        algorithm,
        rate: Rate::new(10, 1000, 20),
        cost: 3,
        max_delay_ms: 250,
        shadow: false,
    };
    let (a, b) = (
        entry("tg:{t}:a", Algorithm::Gcra),
        entry("tg:{t}:b", Algorithm::LeakyBucket),
    );
    let quotas = [CalendarQuota {
        period: Period::Day,
        limit: 5000,
    }];
    let part = QuotaPart {
        tenant: "t",
        quotas: &quotas,
        cost: 3,
    };
    let key = call_key("tg", &[&a, &b], Some(part));
    let split: Vec<&str> = key.args.split_terminator(' ').collect();
    assert_eq!(key.arg_list().collect::<Vec<_>>(), split);
    let mut count = itoa::Buffer::new();
    assert_eq!(
        key.args_with(&mut count, 7),
        [split.join(" ").as_str(), "7"]
    );
    // Read back alike, packed or one argument each.
    let spec = replay::CallSpec::parse(split.iter().copied()).expect("unpacked");
    assert_eq!(Some(&spec), key.spec());
    let packed = replay::CallSpec::parse(key.args_with(&mut count, 7)).expect("packed");
    assert_eq!(packed, spec);
}

#[test]
fn a_kept_command_is_the_one_built_from_the_arguments() {
    let entry = LimitEntry {
        key: "tg:{t}:gcra".into(),
        algorithm: Algorithm::Gcra,
        rate: Rate::new(10, 1000, 20),
        cost: 1,
        max_delay_ms: 0,
        shadow: false,
    };
    let key = call_key("tg", &[&entry], None);
    for n in [1, 3, 1, 12] {
        let mut count = itoa::Buffer::new();
        let built = evalsha(policy_script(), &key.keys, &key.args_with(&mut count, n)).unwrap();
        let kept = key.command(n).unwrap();
        assert_eq!(kept.get_packed_command(), built.get_packed_command(), "{n}");
    }
}

/// The closed form's one string of integers reads as the integers an array would carry; any
/// other text is refused.
#[test]
fn a_reply_string_reads_as_its_integers() {
    let text = |t: &str| PolicyReply::from_redis_value(redis::Value::BulkString(t.into()));
    assert_eq!(
        text("-1 1796083200123 3 9007199254740992 0").unwrap(),
        PolicyReply(vec![-1, 1_796_083_200_123, 3, 9_007_199_254_740_992, 0])
    );
    let array = redis::Value::Array(vec![redis::Value::Int(1), redis::Value::Int(-4)]);
    assert_eq!(
        PolicyReply::from_redis_value(array).unwrap(),
        PolicyReply(vec![1, -4])
    );
    for bad in [
        "",
        "1  2",
        "1 2 ",
        "-",
        "1.5",
        "1e3",
        "x",
        "1234567890123456789",
    ] {
        assert!(text(bad).is_err(), "{bad:?}");
    }
}
