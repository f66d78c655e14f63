//! The lease bookkeeping on an injected clock (ms): no Redis, no time passing.

use super::*;

const RATE: Rate = Rate {
    limit: 1,
    per_ms: 3_600_000,
    burst: 100,
};
const HOLD: u64 = 250;

fn granted(granted: u64, remaining: u64) -> LeaseReply {
    LeaseReply {
        granted,
        remaining,
        retry_ms: 0,
        full_ms: 5_000,
    }
}

/// An empty book calls Redis with nothing to give back.
#[test]
fn an_empty_book_calls_redis() {
    let mut b = LeaseBook::default();
    assert_eq!(b.take(0, &RATE, 1), Step::Call { refund: 0 });
}

/// A lease of 10 admits the caller and then 9 more locally, each reporting the lease plus the
/// bucket's remaining as of the call; the 11th request calls Redis again.
#[test]
fn a_lease_admits_its_tokens_locally_then_calls_again() {
    let mut b = LeaseBook::default();
    let d = b.settle(0, HOLD, &RATE, 1, granted(10, 40));
    assert!(d.admitted);
    assert_eq!(d.remaining, 9 + 40);
    assert_eq!(b.held(), 9);
    for i in 1..=9u64 {
        match b.take(i, &RATE, 1) {
            Step::Local(d) => {
                assert!(d.admitted);
                assert_eq!(d.remaining, 9 - i + 40, "request {i}");
                assert_eq!(d.full_ms, 5_000 - i);
            }
            other => panic!("request {i}: {other:?}"),
        }
    }
    assert_eq!(b.held(), 0);
    assert_eq!(b.take(10, &RATE, 1), Step::Call { refund: 0 });
}

/// A request costing more than the lease holds hands the rest back with its call.
#[test]
fn a_costly_request_returns_the_rest_with_its_call() {
    let mut b = LeaseBook::default();
    b.settle(0, HOLD, &RATE, 1, granted(5, 0));
    assert_eq!(b.take(1, &RATE, 7), Step::Call { refund: 4 });
    assert_eq!(b.held(), 0);
}

/// At `max_hold` the lease is no longer used: the next request returns its tokens with its
/// call, and the sweep returns them when no request comes.
#[test]
fn an_expired_lease_is_returned() {
    let mut b = LeaseBook::default();
    b.settle(1_000, HOLD, &RATE, 1, granted(10, 0));
    assert!(matches!(b.take(1_000 + HOLD - 1, &RATE, 1), Step::Local(_)));
    assert_eq!(b.take(1_000 + HOLD, &RATE, 1), Step::Call { refund: 8 });

    let mut b = LeaseBook::default();
    b.settle(1_000, HOLD, &RATE, 1, granted(10, 0));
    assert_eq!(b.expired(1_000 + HOLD - 1), None);
    assert!(!b.idle(1_000 + HOLD - 1));
    assert_eq!(b.expired(1_000 + HOLD), Some((RATE, 9)));
    assert_eq!(b.expired(1_000 + HOLD), None, "given back once");
    assert!(b.idle(1_000 + HOLD));
}

/// A reload that resizes the bucket ends the lease: its tokens go back.
#[test]
fn a_resized_bucket_ends_the_lease() {
    let mut b = LeaseBook::default();
    b.settle(0, HOLD, &RATE, 1, granted(10, 0));
    let bigger = Rate { burst: 200, ..RATE };
    assert_eq!(b.take(1, &bigger, 1), Step::Call { refund: 9 });
}

/// A refusal holds nothing and carries Redis's Retry-After and remaining.
#[test]
fn a_refusal_holds_nothing() {
    let mut b = LeaseBook::default();
    let d = b.settle(
        0,
        HOLD,
        &RATE,
        3,
        LeaseReply {
            granted: 0,
            remaining: 2,
            retry_ms: 3_600_000,
            full_ms: 7_000,
        },
    );
    assert!(!d.admitted);
    assert_eq!((d.remaining, d.retry_after_ms), (2, 3_600_000));
    assert_eq!(b.held(), 0);
    assert_eq!(b.release(), None);
    assert_eq!(b.take(1, &RATE, 1), Step::Call { refund: 0 });
}

/// Shutdown releases an unexpired lease too.
#[test]
fn release_returns_an_unexpired_lease() {
    let mut b = LeaseBook::default();
    b.settle(0, HOLD, &RATE, 2, granted(10, 0));
    assert_eq!(b.release(), Some((RATE, 8)));
    assert_eq!(b.held(), 0);
}

/// The fast path's miss leaves the book as it was (the refill hands the rest back).
#[test]
fn a_local_miss_keeps_the_book() {
    let mut b = LeaseBook::default();
    b.settle(0, HOLD, &RATE, 1, granted(3, 0));
    assert_eq!(b.local(1, &RATE, 5), None);
    assert_eq!(b.held(), 2);
    assert!(b.local(1, &RATE, 2).is_some());
    assert_eq!(b.held(), 0);
}
