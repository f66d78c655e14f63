//! The Redis calls of one request's stages, counted for its trace span
//! (`crate::observe::tracing`): [`counted`] runs the stages with a task-local count that every
//! guarded call adds to ([`note_redis_call`]). Outside [`counted`] (tracing off) a call adds
//! nothing and allocates nothing.

use std::cell::Cell;
use std::future::Future;

/// What one request's stages did with Redis, counted while [`counted`] runs them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RedisUse {
    /// Redis calls this request made itself (a retry included).
    pub calls: u32,
    /// The request's answer came from a call another request made (request coalescing).
    pub coalesced: bool,
}

tokio::task_local! {
    static REDIS_USE: Cell<RedisUse>;
}

/// Runs `work`, counting the Redis calls made in it ([`note_redis_call`]).
pub async fn counted<F: Future>(work: F) -> (F::Output, RedisUse) {
    REDIS_USE
        .scope(Cell::new(RedisUse::default()), async move {
            let out = work.await;
            (out, REDIS_USE.with(Cell::get))
        })
        .await
}

/// A guarded Redis call ended: `own` when this request made it, else it shared another
/// request's call. Does nothing outside [`counted`] (tracing off).
pub fn note_redis_call(own: bool) {
    let _ = REDIS_USE.try_with(|u| {
        let mut v = u.get();
        match own {
            true => v.calls += 1,
            false => v.coalesced = true,
        }
        u.set(v);
    });
}
