//! Replies that come after `redis.timeout_ms`: a script call the request stopped waiting for
//! (a timeout, or its future dropped by a shorter bound) is still queued on the connection, and
//! Redis runs it once it answers again. Its reply is not dropped: the pending call is handed
//! to a background task ([`hand_off`]) that waits for it up to [`LATE_WAIT`], and when the reply
//! shows the script debited something, runs the caller's [`Undo`] (a give-back script) once.
//!
//! Nothing of this runs while calls answer in time: a call that answers within its bound is
//! never handed off, and no command or byte is added to it. The tasks are capped
//! ([`LATE_MAX`] at once); beyond, a call's reply is dropped and the drop reported. A reply lost
//! with its connection (Redis restarted, the link cut) cannot be read: that call's debit stays.

use super::conn::RedisConn;
use redis::{Cmd, RedisError, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

pub use super::conn::LATE_WAIT;
pub use super::node::Pending;

/// Calls waited for at once at most; a call handed off beyond is dropped ([`LateOutcome::Dropped`]).
pub const LATE_MAX: usize = 4096;

/// Calls waited for now.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// What gives back a late call's debit: a script with its keys and arguments.
pub struct Undo {
    /// The give-back script's source (it is run by EVALSHA, loaded on NOSCRIPT).
    pub script: &'static str,
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

/// What a caller does with its call's reply should it come late: from the reply, what undoes
/// the call's debit (`None` when it debited nothing).
pub type Late = Box<dyn FnOnce(Value) -> Option<Undo> + Send>;

/// Told how every handed-off call ended (the metric, set by the layer that keeps metrics).
static REPORT: OnceLock<fn(LateOutcome)> = OnceLock::new();

/// Sets what is told how each handed-off call ended (the first setting stays).
pub fn set_report(report: fn(LateOutcome)) {
    let _ = REPORT.set(report);
}

fn report(outcome: LateOutcome) {
    if let Some(r) = REPORT.get() {
        r(outcome);
    }
}

/// How a handed-off call ended: the label of `tollgate_redis_late_replies_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LateOutcome {
    /// Its reply came and its debit was given back.
    Compensated,
    /// Its reply came and it had debited nothing.
    NothingDebited,
    /// Its reply came, but the give-back failed: the debit stays.
    UndoFailed,
    /// No reply within [`LATE_WAIT`], or the connection broke: a debit, if any, stays.
    Lost,
    /// Not waited for: [`LATE_MAX`] calls were waited for already.
    Dropped,
}

impl LateOutcome {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LateOutcome::Compensated => "compensated",
            LateOutcome::NothingDebited => "nothing_debited",
            LateOutcome::UndoFailed => "undo_failed",
            LateOutcome::Lost => "lost",
            LateOutcome::Dropped => "dropped",
        }
    }
}

/// Calls waited for now (for tests and the admin view).
pub fn waiting() -> usize {
    WAITING.load(Ordering::Relaxed)
}

/// Waits in the background for the reply of `call` (sent on `conn`), and undoes what it
/// debited as `late` says. Needs a Tokio runtime (none: the call is dropped, reported as such).
pub fn hand_off(conn: Arc<RedisConn>, call: Pending, late: Late) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        report(LateOutcome::Dropped);
        return;
    };
    if !admit(&WAITING, LATE_MAX) {
        report(LateOutcome::Dropped);
        return;
    }
    crate::pending::spawn(&runtime, async move {
        let outcome = finish(&conn, call, late).await;
        WAITING.fetch_sub(1, Ordering::Relaxed);
        report(outcome);
    });
}

/// Counts one more call in `waiting` when fewer than `max` are; whether it was counted.
fn admit(waiting: &AtomicUsize, max: usize) -> bool {
    waiting
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < max).then_some(n + 1)
        })
        .is_ok()
}

async fn finish(
    conn: &Arc<RedisConn>,
    call: Pending,
    undo: Box<dyn FnOnce(Value) -> Option<Undo> + Send>,
) -> LateOutcome {
    let reply = match tokio::time::timeout(LATE_WAIT, call).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(_)) => return LateOutcome::Lost,
        Err(_) => {
            conn.unanswered();
            return LateOutcome::Lost;
        }
    };
    let Some(undo) = undo(reply) else {
        return LateOutcome::NothingDebited;
    };
    let mut cmd = redis::cmd("EVALSHA");
    let sha = redis::Script::new(undo.script).get_hash().to_string();
    cmd.arg(sha)
        .arg(undo.keys.len())
        .arg(&undo.keys)
        .arg(&undo.args);
    match tokio::time::timeout(LATE_WAIT, run(conn.clone(), cmd, undo.script)).await {
        Ok(Ok(_)) => LateOutcome::Compensated,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "a late call's debit was not given back");
            LateOutcome::UndoFailed
        }
        Err(_) => LateOutcome::UndoFailed,
    }
}

/// Whether `e` is the server refusing a command as such (no permission, an unknown or disabled
/// command), not a connection, timeout, role or failover fault that the call's retry handles.
fn refuses_the_command(e: &RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        e.kind(),
        ErrorKind::Server(ServerErrorKind::NoPerm | ServerErrorKind::ResponseError)
            | ErrorKind::Extension
    ) && !super::sentinel::is_failover_hold(e)
}

/// Runs the EVALSHA `call` of the script `source` on `conn`: on NOSCRIPT the script is loaded
/// on the node serving the call's first key and the call sent again, and should that still
/// meet NOSCRIPT (an ASK redirect mid-migration) or should the server refuse `SCRIPT LOAD`
/// (an ACL without `script|load`, a managed service), sent as EVAL with the source. A NOSCRIPT
/// reply ran nothing, so the script runs once. Made at [`home`](super::home). Unbounded: the
/// caller bounds it.
pub fn run(conn: Arc<RedisConn>, call: Cmd, source: &'static str) -> Pending {
    super::home::at_home(Box::pin(async move {
        let first_try = conn.query(&call).await;
        if !no_script(&first_try) {
            return first_try;
        }
        // Boxed apart: the usual call's future stays the size of one query.
        Box::pin(load_and_retry(conn, call, source)).await
    }))
}

fn no_script(r: &Result<Value, RedisError>) -> bool {
    matches!(r, Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
}

/// After a NOSCRIPT reply to `call`: SCRIPT LOAD and the call again, or EVAL (see [`run`]).
async fn load_and_retry(
    conn: Arc<RedisConn>,
    call: Cmd,
    source: &'static str,
) -> Result<Value, RedisError> {
    // EVALSHA <sha> <numkeys> <key>...: the first key routes the load.
    let first_key = call.args_iter().nth(3).and_then(|a| match a {
        redis::Arg::Simple(k) => Some(String::from_utf8_lossy(k).into_owned()),
        _ => None,
    });
    let mut load = redis::cmd("SCRIPT");
    load.arg("LOAD").arg(source);
    match conn
        .query_at(&load, first_key.as_deref().unwrap_or(""))
        .await
    {
        Ok(_) => {
            let second_try = conn.query(&call).await;
            if !no_script(&second_try) {
                return second_try;
            }
        }
        // A server that refuses SCRIPT LOAD itself (an ACL without `script|load`, a
        // managed service that renames or forbids it) still runs EVAL, which caches the
        // script for the next EVALSHA where the server does.
        Err(e) if refuses_the_command(&e) => {}
        Err(e) => return Err(e),
    }
    // NOSCRIPT ran nothing, so this runs the script once.
    let mut eval = redis::cmd("EVAL");
    eval.arg(source);
    for a in call.args_iter().skip(2) {
        if let redis::Arg::Simple(bytes) = a {
            eval.arg(bytes);
        }
    }
    conn.query(&eval).await
}

#[cfg(test)]
mod tests;
