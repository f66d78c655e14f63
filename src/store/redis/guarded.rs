//! One Redis call behind the circuit breaker: the breaker's permit, the call (retried once on a
//! connection-level fault, within a time budget), the outcome recorded in the breaker (a call
//! held back by a sentinel failover is not one), and on a refusal or a failure the fault and
//! the wait the failure policy reports. Every tenant-stage
//! decision that asks Redis (exact token bucket, other algorithms and quotas, leases) goes
//! through [`Guarded::call`].
//!
//! What is the caller's stays with it, passed in as closures: its clock (ms), what a breaker
//! transition does (metrics, logs, clearing local state), and what a finished call records.
//!
//! Why one retry: after a Redis restart or an outage the first call fails at once without
//! reaching Redis (the connection is dead, or still holds the failure of the last reconnect
//! attempt), and only that failed call makes the connection start anew. Without the retry every
//! Redis restart costs one failed request, and the first half-open probe after an outage always
//! fails and re-opens the breaker. (A connection that drops after Redis ran the script but before
//! the reply arrived makes the retry charge twice: an over-count, never an under-count.)

use super::breaker::{Breaker, BreakerState, Permit};
use super::client::RedisFault;
use std::future::Future;
use std::time::{Duration, Instant};

/// The wait (ms) a failed call hands the failure policy (a closed policy's `Retry-After`).
pub const FAILED_CALL_RETRY_MS: u64 = 1000;

/// Which faults of a first attempt get a second one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOn {
    /// [`RedisFault::Connection`] only.
    Connection,
    /// [`RedisFault::Connection`] and [`RedisFault::NotMaster`] (READONLY / MASTERDOWN /
    /// LOADING: the store dropped that connection, so the retry reaches whatever now serves the
    /// address).
    ConnectionOrNotMaster,
}

impl RetryOn {
    fn matches(self, fault: RedisFault) -> bool {
        match self {
            RetryOn::Connection => fault == RedisFault::Connection,
            RetryOn::ConnectionOrNotMaster => {
                matches!(fault, RedisFault::Connection | RedisFault::NotMaster)
            }
        }
    }
}

/// Where the time of a guarded call starts, and what bounds its first attempt.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// At the call, right after the permit. The first attempt is bounded by the store's own
    /// timeout alone (no timer of ours on the hot path).
    FromCall,
    /// At `since`, before the call (a request that waited for its turn). Both attempts together
    /// are bounded by `left`: what remained of the time when the caller decided to call.
    Since { since: Instant, left: Duration },
}

/// How a guarded call retries: which faults, and within what time.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// The faults of the first attempt that get a second one.
    pub on: RetryOn,
    /// Time both attempts share (`redis.timeout_ms`), counted from [`budget`](Self::budget)'s
    /// start: a retry runs only within what is left of it, and is cut there
    /// ([`RedisFault::Timeout`]).
    pub timeout: Duration,
    /// Where that time starts.
    pub budget: Budget,
}

/// Which attempt the call function is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The first.
    First,
    /// The one retry after a fault of [`Retry::on`].
    Retry,
}

/// What one attempt returns: its reply, and whether it made a Redis call of its own. The
/// breaker counts Redis calls: an attempt that only shared a call made for other requests
/// (request coalescing) is not one more outcome.
pub trait Reply {
    /// The answer of a successful attempt.
    type Value;
    /// The reply, and whether this attempt made (one of) the Redis calls behind it.
    fn into_parts(self) -> (Result<Self::Value, RedisFault>, bool);
}

/// A plain call result: always its own call.
impl<T> Reply for Result<T, RedisFault> {
    type Value = T;
    fn into_parts(self) -> (Result<T, RedisFault>, bool) {
        (self, true)
    }
}

/// A call that answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered<T> {
    /// Its answer.
    pub value: T,
    /// The caller's clock (ms) when it finished, as the breaker recorded it.
    pub done_ms: u64,
}

/// Why a guarded call has no answer, for the failure policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The call's fault; `None` when the breaker refused the call (no call was made).
    pub fault: Option<RedisFault>,
    /// When Redis may be asked again, in ms: the breaker's wait, or [`FAILED_CALL_RETRY_MS`]
    /// after a failed call.
    pub retry_in_ms: u64,
}

/// The breaker of one Redis deployment, with the caller's clock (`clock`: ms) and transition
/// handler (`transition`: called with every [`Breaker::permit`] / [`Breaker::record`]
/// transition, `None` included).
pub struct Guarded<'a, C, Tr> {
    breaker: &'a Breaker,
    clock: C,
    transition: Tr,
}

impl<'a, C, Tr> Guarded<'a, C, Tr>
where
    C: Fn() -> u64,
    Tr: Fn(Option<BreakerState>),
{
    /// Guards calls with `breaker`.
    pub fn new(breaker: &'a Breaker, clock: C, transition: Tr) -> Self {
        Guarded {
            breaker,
            clock,
            transition,
        }
    }

    /// One guarded call at `now_ms` (the caller's clock): asks the breaker; when permitted,
    /// runs `attempt(Attempt::First)` and, on a fault of `retry.on` with time left,
    /// `attempt(Attempt::Retry)`; then calls `finished` (the fault or `None`, and the time since
    /// the permit) and records the outcome in the breaker at the clock's next reading. An
    /// outcome that made no call of its own ([`Reply`]) is not recorded, except by a half-open
    /// probe, which always reports (to free its permit).
    pub async fn call<R, F, Fut>(
        &self,
        now_ms: u64,
        retry: Retry,
        mut attempt: F,
        finished: impl FnOnce(Option<RedisFault>, Duration),
    ) -> Result<Answered<R::Value>, Refused>
    where
        R: Reply,
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = R>,
    {
        let (permit, t) = self.breaker.permit(now_ms);
        (self.transition)(t);
        let probe = match permit {
            Permit::Rejected { retry_in_ms } => {
                return Err(Refused {
                    fault: None,
                    retry_in_ms,
                })
            }
            Permit::Call { probe } => probe,
        };
        let started = Instant::now();
        let (since, bound) = match retry.budget {
            Budget::FromCall => (started, None),
            Budget::Since { since, left } => (since, Some(tokio::time::Instant::now() + left)),
        };
        let first = attempt(Attempt::First);
        let (mut reply, mut own_call) = match bound {
            None => first.await.into_parts(),
            Some(at) => match tokio::time::timeout_at(at, first).await {
                Ok(r) => r.into_parts(),
                Err(_) => (Err(RedisFault::Timeout), true),
            },
        };
        if matches!(reply, Err(fault) if retry.on.matches(fault)) {
            let left = retry.timeout.saturating_sub(since.elapsed());
            if !left.is_zero() {
                // One timer: the end of `left`, or of the bound on both attempts if sooner.
                let until = tokio::time::Instant::now() + left;
                let until = bound.map_or(until, |at| at.min(until));
                (reply, own_call) =
                    match tokio::time::timeout_at(until, attempt(Attempt::Retry)).await {
                        Ok(r) => {
                            let (r, own) = r.into_parts();
                            (r, own_call || own)
                        }
                        // Cut while in its own call or waiting for one: a call that timed out.
                        Err(_) => (Err(RedisFault::Timeout), true),
                    };
            }
        }
        finished(reply.as_ref().err().copied(), started.elapsed());
        let done_ms = (self.clock)();
        // A call held back during a sentinel failover reached no Redis: like a breaker
        // refusal, it says nothing about Redis's health.
        let sent = !matches!(reply, Err(RedisFault::Failover));
        if sent {
            super::call_count::note_redis_call(own_call);
        }
        if (own_call && sent) || probe {
            let t = self.breaker.record(done_ms, reply.is_ok(), probe);
            (self.transition)(t);
        }
        match reply {
            Ok(value) => Ok(Answered { value, done_ms }),
            Err(fault) => Err(Refused {
                fault: Some(fault),
                retry_in_ms: FAILED_CALL_RETRY_MS,
            }),
        }
    }
}

#[cfg(test)]
mod tests;
