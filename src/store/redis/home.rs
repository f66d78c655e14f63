//! The runtime the Redis connections live on ("home"): the proxy's serving runtime.
//!
//! redis-rs drives each multiplexed connection with a task spawned on whatever runtime first
//! polls its connection (and, for a reconnect, the runtime it was made on). The gateway runs
//! one Tokio runtime per Pingora service: the proxy's worker threads, and one thread each for
//! the admin listener and every background loop. A connection made by one of those (the
//! admin's warm-up `PING`, a heartbeat) would stay there, so every request's call would wake
//! that other thread to be written and wake the worker back with its reply.
//!
//! So every call is made at home: on the home runtime it runs where it is (the request's own
//! task and the connection's task then wake each other on one worker); anywhere else it is
//! spawned at home and its reply awaited. Until a home is set (unit tests, the `check`
//! command, before the proxy starts) a call runs where it is.

use super::node::Pending;
use redis::{ErrorKind, RedisError};
use std::sync::OnceLock;
use tokio::runtime::Handle;

static HOME: OnceLock<Handle> = OnceLock::new();

/// Makes the runtime of `handle` the home of every Redis connection; the first setting stays
/// (the proxy service sets it as it starts, before it accepts a connection).
pub fn set(handle: Handle) {
    let _ = HOME.set(handle);
}

/// `call`, made at home: itself when the caller is on the home runtime (or none is set), else
/// a future that spawns it there and waits for its reply. A call whose waiter is dropped still
/// runs to its end at home, as a dropped call on the connection would. Errors: the connection's;
/// an I/O error when the home runtime is shutting down and drops the call.
pub fn at_home(call: Pending) -> Pending {
    at(HOME.get(), call)
}

/// [`at_home`] with `home` given.
fn at(home: Option<&'static Handle>, call: Pending) -> Pending {
    let Some(home) = home else {
        return call;
    };
    match Handle::try_current() {
        Ok(here) if here.id() == home.id() => call,
        _ => Box::pin(async move {
            home.spawn(call).await.unwrap_or_else(|_| {
                Err(RedisError::from((
                    ErrorKind::Io,
                    "the serving runtime dropped the call (shutting down)",
                )))
            })
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    /// A call that replies with the id of the runtime that polled it.
    fn runtime_of_poller() -> Pending {
        Box::pin(async { Ok(Value::SimpleString(Handle::current().id().to_string())) })
    }

    fn id(h: &Handle) -> Value {
        Value::SimpleString(h.id().to_string())
    }

    fn runtime(threads: usize) -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .expect("a runtime")
    }

    #[test]
    fn a_call_from_another_runtime_runs_at_home_and_one_at_home_runs_in_place() {
        let home: &'static tokio::runtime::Runtime = Box::leak(Box::new(runtime(1)));
        let other = runtime(1);
        let unset = other.block_on(at(None, runtime_of_poller()));
        assert_eq!(unset.expect("reply"), id(other.handle()));
        let from_other = other.block_on(at(Some(home.handle()), runtime_of_poller()));
        assert_eq!(from_other.expect("reply"), id(home.handle()));
        let in_place = home
            .block_on(async { tokio::spawn(at(Some(home.handle()), runtime_of_poller())).await })
            .expect("joined");
        assert_eq!(in_place.expect("reply"), id(home.handle()));
    }

    #[test]
    fn a_call_to_a_home_shut_down_is_an_error_not_a_hang() {
        let home = runtime(1);
        let handle: &'static Handle = Box::leak(Box::new(home.handle().clone()));
        home.shutdown_background();
        let other = runtime(1);
        let r = other.block_on(at(Some(handle), runtime_of_poller()));
        assert!(r.is_err(), "{r:?}");
    }
}
