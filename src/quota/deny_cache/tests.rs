use super::*;

fn rejected(retry: u64) -> Decision {
    Decision {
        admitted: false,
        remaining: 0,
        retry_after_ms: retry,
        full_ms: 10_000,
    }
}

#[test]
fn denies_only_until_the_known_retry_time_and_same_shape() {
    let c = DenyCache::new(100);
    let rate = Rate::new(6, 60_000, 2);
    c.remember("t", rate, 1, (1_000, 1_000), &rejected(500));
    let d = c.check("t", &rate, 1, 1_200).unwrap();
    assert_eq!(d.retry_after_ms, 300);
    assert_eq!(d.retry_after_s(), Some(1));
    assert!(c.check("t", &rate, 2, 1_200).is_none());
    assert!(c.check("t", &Rate::new(60, 60_000, 2), 1, 1_200).is_none());
    assert!(c.check("t", &rate, 1, 1_500).is_none());
    assert!(c.check("other", &rate, 1, 1_200).is_none());
}

/// An admin reset or a lease refund can add tokens: a long denial is trusted for one second
/// after Redis answered, reporting the full Retry-After meanwhile, then Redis is asked again.
#[test]
fn a_long_denial_is_trusted_for_at_most_max_deny_ms() {
    let c = DenyCache::new(100);
    let rate = Rate::new(1, 3_600_000, 2);
    c.remember("t", rate, 1, (1_000, 1_100), &rejected(3_000_000));
    let d = c.check("t", &rate, 1, 1_100 + MAX_DENY_MS - 1).unwrap();
    assert_eq!(d.retry_after_ms, 3_000_000 - MAX_DENY_MS + 1);
    assert!(c.check("t", &rate, 1, 1_100 + MAX_DENY_MS).is_none());
}

#[test]
fn slow_reply_denies_from_sent_but_reports_from_received() {
    let c = DenyCache::new(100);
    let rate = Rate::new(6, 60_000, 2);
    c.remember("t", rate, 1, (0, 700), &rejected(1_300));
    let d = c.check("t", &rate, 1, 1_000).unwrap();
    assert_eq!(d.retry_after_ms, 1_000);
    assert!(c.check("t", &rate, 1, 1_300).is_none());
}

/// An admission Redis reports for the tenant (any cost) took tokens: the remembered refusal
/// no longer describes the bucket and is dropped; a refusal that can never be admitted (and
/// shows no room) leaves it as it is.
#[test]
fn an_admission_drops_the_remembered_refusal() {
    let c = DenyCache::new(100);
    let rate = Rate::new(3, 3_600_000, 3);
    c.remember("t", rate, 3, (1_000, 1_000), &rejected(3_000_000));
    assert!(c.check("t", &rate, 3, 1_100).is_some());
    let never = Decision {
        retry_after_ms: u64::MAX,
        ..rejected(0)
    };
    c.remember("t", rate, 4, (1_050, 1_050), &never);
    assert!(c.check("t", &rate, 3, 1_100).is_some());
    let admitted = Decision {
        admitted: true,
        remaining: 1,
        retry_after_ms: 0,
        full_ms: 2_400_000,
    };
    c.remember("t", rate, 1, (1_100, 1_100), &admitted);
    assert!(c.check("t", &rate, 3, 1_150).is_none());
}

/// A refusal that leaves room for a cheaper request (`remaining` ≥ 1) is not remembered:
/// another instance could admit that request and change the bucket unseen. It also drops an
/// earlier remembered refusal (it shows tokens that one did not know of).
#[test]
fn a_refusal_with_room_left_is_not_remembered() {
    let c = DenyCache::new(100);
    let rate = Rate::new(3, 3_600_000, 3);
    let room = Decision {
        remaining: 2,
        ..rejected(1_200_000)
    };
    c.remember("t", rate, 3, (1_000, 1_000), &room);
    assert!(c.check("t", &rate, 3, 1_001).is_none());
    c.remember("t", rate, 3, (1_000, 1_000), &rejected(3_000_000));
    assert!(c.check("t", &rate, 3, 1_001).is_some());
    c.remember("t", rate, 3, (1_010, 1_010), &room);
    assert!(c.check("t", &rate, 3, 1_011).is_none());
}

/// An empty bucket's refusal of a costly request is trusted only until the next whole token
/// is due (then another instance could admit a cheaper request), not until the cost's wait.
/// One token per second, burst 5, half a token left: cost 3 waits 2.5 s, the next token is
/// due in 0.5 s (less 2 ms for the roundings).
#[test]
fn an_empty_bucket_is_trusted_until_the_next_token_is_due() {
    let c = DenyCache::new(100);
    let rate = Rate::new(1, 1_000, 5);
    let d = Decision {
        full_ms: 4_500,
        ..rejected(2_500)
    };
    c.remember("t", rate, 3, (1_000, 1_000), &d);
    assert!(c.check("t", &rate, 3, 1_497).is_some());
    assert!(c.check("t", &rate, 3, 1_498).is_none());
    // Cost 1: its own wait is the next token's.
    c.remember("u", rate, 1, (1_000, 1_000), &rejected(500));
    assert!(c.check("u", &rate, 1, 1_497).is_some());
    assert!(c.check("u", &rate, 1, 1_498).is_none());
}

/// The cached answer is what Redis would say at that moment, or longer: nothing left, the
/// wait and the time until full counted down from when Redis's answer arrived.
#[test]
fn the_cached_answer_is_re_derived_from_the_time_elapsed() {
    let c = DenyCache::new(100);
    let rate = Rate::new(1, 10_000, 3);
    let d = Decision {
        full_ms: 29_000,
        ..rejected(9_000)
    };
    c.remember("t", rate, 1, (1_000, 1_040), &d);
    let at = c.check("t", &rate, 1, 1_600).unwrap();
    assert!(!at.admitted);
    assert_eq!(at.remaining, 0);
    assert_eq!(at.retry_after_ms, 9_000 - 560);
    assert_eq!(at.full_ms, 29_000 - 560);
    assert_eq!((at.retry_after_s(), at.reset_s()), (Some(9), 29));
}
