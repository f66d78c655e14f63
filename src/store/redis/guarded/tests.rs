use super::*;
use crate::config::BreakerSettings;
use std::cell::{Cell, RefCell};

/// Opens when every call of at least two failed; one probe closes it.
fn breaker() -> Breaker {
    Breaker::new(BreakerSettings {
        failure_ratio: 1.0,
        min_calls: 2,
        window: Duration::from_secs(10),
        break_duration: Duration::from_secs(5),
        probes: 1,
    })
}

fn retry(on: RetryOn, timeout_ms: u64) -> Retry {
    Retry {
        on,
        timeout: Duration::from_millis(timeout_ms),
        budget: Budget::FromCall,
    }
}

/// A reply that may have shared another request's call.
struct Shared(Result<u32, RedisFault>, bool);

impl Reply for Shared {
    type Value = u32;
    fn into_parts(self) -> (Result<u32, RedisFault>, bool) {
        (self.0, self.1)
    }
}

/// Runs one guarded call whose attempts answer `replies` in turn; returns its result, the
/// attempts asked for, what `finished` saw and the transitions seen.
async fn run(
    b: &Breaker,
    now_ms: u64,
    retry: Retry,
    replies: Vec<Result<u32, RedisFault>>,
) -> (
    Result<Answered<u32>, Refused>,
    Vec<Attempt>,
    Option<Option<RedisFault>>,
    Vec<BreakerState>,
) {
    let asked = RefCell::new(Vec::new());
    let transitions = RefCell::new(Vec::new());
    let finished = Cell::new(None);
    let replies = RefCell::new(replies.into_iter());
    let g = Guarded::new(b, || now_ms + 7, |t| transitions.borrow_mut().extend(t));
    let result = g
        .call(
            now_ms,
            retry,
            |a| {
                asked.borrow_mut().push(a);
                let r = replies.borrow_mut().next().expect("one reply per attempt");
                async move { r }
            },
            |fault, _| finished.set(Some(fault)),
        )
        .await;
    (
        result,
        asked.into_inner(),
        finished.get(),
        transitions.into_inner(),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn an_answer_is_returned_with_the_clock_it_was_recorded_at() {
    let b = breaker();
    let (r, asked, finished, _) =
        run(&b, 100, retry(RetryOn::Connection, 1_000), vec![Ok(5)]).await;
    assert_eq!(
        r,
        Ok(Answered {
            value: 5,
            done_ms: 107
        })
    );
    assert_eq!(asked, [Attempt::First]);
    assert_eq!(finished, Some(None));
}

#[tokio::test(flavor = "current_thread")]
async fn connection_faults_are_retried_once() {
    let b = breaker();
    let conn = Err(RedisFault::Connection);
    let (r, asked, _, _) = run(&b, 0, retry(RetryOn::Connection, 1_000), vec![conn, Ok(1)]).await;
    assert_eq!(r.map(|a| a.value), Ok(1));
    assert_eq!(asked, [Attempt::First, Attempt::Retry]);
    // Twice failed: the fault of the retry, counted once in the breaker.
    let (r, asked, finished, _) =
        run(&b, 0, retry(RetryOn::Connection, 1_000), vec![conn, conn]).await;
    assert_eq!(
        r,
        Err(Refused {
            fault: Some(RedisFault::Connection),
            retry_in_ms: FAILED_CALL_RETRY_MS
        })
    );
    assert_eq!(asked.len(), 2);
    assert_eq!(finished, Some(Some(RedisFault::Connection)));
    assert_eq!(b.state(), BreakerState::Closed, "one failed call of two");
}

#[tokio::test(flavor = "current_thread")]
async fn only_the_chosen_faults_are_retried() {
    let b = breaker();
    let not_master = Err(RedisFault::NotMaster);
    let (r, asked, _, _) = run(&b, 0, retry(RetryOn::Connection, 1_000), vec![not_master]).await;
    assert_eq!(r.unwrap_err().fault, Some(RedisFault::NotMaster));
    assert_eq!(asked, [Attempt::First]);
    let on = RetryOn::ConnectionOrNotMaster;
    let (r, asked, _, _) = run(&b, 0, retry(on, 1_000), vec![not_master, Ok(2)]).await;
    assert_eq!(r.map(|a| a.value), Ok(2));
    assert_eq!(asked.len(), 2);
    for fault in [RedisFault::Script, RedisFault::Timeout, RedisFault::Other] {
        let (_, asked, _, _) = run(&b, 0, retry(on, 1_000), vec![Err(fault)]).await;
        assert_eq!(asked, [Attempt::First], "{fault:?}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn no_retry_once_the_time_is_spent() {
    let b = breaker();
    let r = Retry {
        on: RetryOn::Connection,
        timeout: Duration::from_millis(10),
        budget: Budget::Since {
            since: Instant::now() - Duration::from_millis(20),
            left: Duration::from_secs(1),
        },
    };
    let (r, asked, _, _) = run(&b, 0, r, vec![Err(RedisFault::Connection)]).await;
    assert_eq!(r.unwrap_err().fault, Some(RedisFault::Connection));
    assert_eq!(asked, [Attempt::First]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_retry_is_cut_at_the_end_of_the_time() {
    let b = breaker();
    let g = Guarded::new(&b, || 0, |_| {});
    let started = Instant::now();
    let r = g
        .call(
            0,
            retry(RetryOn::Connection, 50),
            |a| async move {
                match a {
                    Attempt::First => Err(RedisFault::Connection),
                    Attempt::Retry => std::future::pending().await,
                }
            },
            |_, _| {},
        )
        .await;
    assert_eq!(
        r.map(|a: Answered<u32>| a.value).unwrap_err().fault,
        Some(RedisFault::Timeout)
    );
    assert!(started.elapsed() >= Duration::from_millis(50));
}

#[tokio::test(flavor = "current_thread")]
async fn an_earlier_budget_bounds_the_first_attempt_too() {
    let b = breaker();
    let g = Guarded::new(&b, || 0, |_| {});
    let budget = Budget::Since {
        since: Instant::now(),
        left: Duration::from_millis(30),
    };
    let retry = Retry {
        on: RetryOn::ConnectionOrNotMaster,
        timeout: Duration::from_secs(5),
        budget,
    };
    let asked = Cell::new(0);
    let r = g
        .call(
            0,
            retry,
            |_| {
                asked.set(asked.get() + 1);
                std::future::pending::<Result<u32, RedisFault>>()
            },
            |_, _| {},
        )
        .await;
    assert_eq!(r.unwrap_err().fault, Some(RedisFault::Timeout));
    assert_eq!(asked.get(), 1, "a timeout is not retried");
}

#[tokio::test(flavor = "current_thread")]
async fn an_open_breaker_refuses_without_calling() {
    let b = breaker();
    let fail = || vec![Err(RedisFault::Script)];
    let _ = run(&b, 0, retry(RetryOn::Connection, 1_000), fail()).await;
    let (_, _, _, seen) = run(&b, 0, retry(RetryOn::Connection, 1_000), fail()).await;
    assert_eq!(seen, [BreakerState::Open]);
    let (r, asked, finished, _) = run(&b, 1_000, retry(RetryOn::Connection, 1_000), vec![]).await;
    assert_eq!(
        r,
        Err(Refused {
            fault: None,
            retry_in_ms: 4_007
        })
    );
    assert!(asked.is_empty());
    assert_eq!(finished, None);
    // After the break, one probe goes through and closes the breaker.
    let (r, _, _, seen) = run(&b, 6_000, retry(RetryOn::Connection, 1_000), vec![Ok(3)]).await;
    assert!(r.is_ok());
    assert_eq!(seen, [BreakerState::HalfOpen, BreakerState::Closed]);
}

/// The breaker counts calls: a shared outcome is not recorded, except by a probe.
#[tokio::test(flavor = "current_thread")]
async fn shared_outcomes_are_recorded_only_by_probes() {
    let b = breaker();
    let g = Guarded::new(&b, || 0, |_| {});
    let shared = |r| {
        g.call(
            0,
            retry(RetryOn::Connection, 1_000),
            move |_| async move { Shared(r, false) },
            |_, _| {},
        )
    };
    for _ in 0..5 {
        assert!(shared(Err(RedisFault::Script)).await.is_err());
    }
    assert_eq!(b.state(), BreakerState::Closed);
    b.record(0, false, false);
    assert_eq!(b.record(0, false, false), Some(BreakerState::Open));
    // A probe that shared a call still reports it.
    let g = Guarded::new(&b, || 5_000, |_| {});
    let r = g
        .call(
            5_000,
            retry(RetryOn::Connection, 1_000),
            |_| async { Shared(Ok(1), false) },
            |_, _| {},
        )
        .await;
    assert!(r.is_ok());
    assert_eq!(b.state(), BreakerState::Closed);
}

/// The bound on both attempts cuts a retry that the shared time alone would still allow.
#[tokio::test(flavor = "current_thread")]
async fn an_earlier_budget_bounds_the_retry_too() {
    let b = breaker();
    let g = Guarded::new(&b, || 0, |_| {});
    let retry = Retry {
        on: RetryOn::Connection,
        timeout: Duration::from_secs(5),
        budget: Budget::Since {
            since: Instant::now(),
            left: Duration::from_millis(30),
        },
    };
    let started = Instant::now();
    let r = g
        .call(
            0,
            retry,
            |a| async move {
                match a {
                    Attempt::First => Err(RedisFault::Connection),
                    Attempt::Retry => std::future::pending::<Result<u32, RedisFault>>().await,
                }
            },
            |_, _| {},
        )
        .await;
    assert_eq!(r.unwrap_err().fault, Some(RedisFault::Timeout));
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test(flavor = "current_thread")]
async fn calls_held_by_a_sentinel_failover_do_not_open_the_breaker() {
    let b = breaker();
    let held = || vec![Err(RedisFault::Failover)];
    for now in [0, 10, 20] {
        let (r, _, finished, transitions) = run(
            &b,
            now,
            retry(RetryOn::ConnectionOrNotMaster, 1_000),
            held(),
        )
        .await;
        assert_eq!(r.unwrap_err().fault, Some(RedisFault::Failover));
        assert_eq!(finished, Some(Some(RedisFault::Failover)));
        assert!(transitions.is_empty(), "{transitions:?}");
    }
    assert_eq!(b.state(), BreakerState::Closed);
    // Two real failures do open it.
    for now in [30, 40] {
        let _ = run(
            &b,
            now,
            retry(RetryOn::Connection, 1_000),
            vec![Err(RedisFault::Timeout)],
        )
        .await;
    }
    assert_eq!(b.state(), BreakerState::Open);
}
