use super::*;
use crate::limit::calendar::Period;

#[test]
fn composed_script_embeds_the_algorithm_once() {
    for alg in Algorithm::ALL {
        let s = compose(alg);
        assert!(!s.contains("--@@MAIN@@"));
        assert_eq!(s.matches("local function main_policy").count(), 1);
    }
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
    assert_eq!(
        a,
        ["5", "10", "1000", "5", "2", "300", "2", "1", "day", "100"]
    );
}

#[test]
fn reply_parsing() {
    let r = parse_reply(&[0, 5, 1, 3, 0, 900, 0, 1, 0, 0, 5000, 5000], 10).unwrap();
    assert!(!r.admitted && r.main.decision.admitted);
    assert_eq!(r.quotas[0].retry_after_ms, 5000);
    let r = parse_reply(&[1, 7, 1, 0, 0, 400, 200, 1234, 2, 0], 10).unwrap();
    assert_eq!(r.main.delay_ms, 200);
    assert_eq!(r.reservation.unwrap().tat_ms, 1234);
    assert!(parse_reply(&[1, 4, 1, 0, 0], 10).is_none());
}
