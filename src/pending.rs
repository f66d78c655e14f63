//! Work the process still owes once graceful shutdown starts: requests being served (admin
//! included), the background loops' final acts (lease return at shutdown) and the tasks spawned
//! off a response (usage settlements, lease releases). Process-wide counts, read by the idle
//! exit (`runtime::idle_exit`): a gateway with nothing pending exits before its grace period ends.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What a [`Busy`] stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// A request from its first byte (HTTP/1) or its stream (HTTP/2) to the end of its logging.
    Request = 0,
    /// A background loop that still has its shutdown-time act to do.
    FinalAct = 1,
    /// A task spawned off the request path that talks to the store.
    Task = 2,
}

static COUNTS: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// One unit of pending work, counted from [`busy`] until dropped.
#[derive(Debug)]
pub struct Busy(Work);

/// Counts one unit of `work` until the returned value is dropped.
pub fn busy(work: Work) -> Busy {
    COUNTS[work as usize].fetch_add(1, Ordering::SeqCst);
    Busy(work)
}

impl Drop for Busy {
    fn drop(&mut self) {
        COUNTS[self.0 as usize].fetch_sub(1, Ordering::SeqCst);
    }
}

/// A [`Work::FinalAct`] counted from [`owed`] (before its loop first runs) until the loop takes
/// it ([`Owed::take`]) and drops it after its final act.
#[derive(Debug)]
pub struct Owed(std::sync::Mutex<Option<Busy>>);

/// A final act owed by a background loop not started yet.
pub fn owed() -> Owed {
    Owed(std::sync::Mutex::new(Some(busy(Work::FinalAct))))
}

impl Owed {
    /// The count, to drop once the final act is done (`None` the second time).
    pub fn take(&self) -> Option<Busy> {
        self.0.lock().ok().and_then(|mut b| b.take())
    }
}

/// Pending units per kind: `[requests, final acts, tasks]`.
pub fn counts() -> [usize; 3] {
    COUNTS.each_ref().map(|c| c.load(Ordering::SeqCst))
}

/// Spawns `task` on `runtime`, counted as [`Work::Task`] from now until it ends (the count is
/// taken before this returns, so a caller's own [`Busy`] dropped afterwards never leaves a gap).
pub fn spawn<F>(runtime: &tokio::runtime::Handle, task: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let held = busy(Work::Task);
    runtime.spawn(async move {
        task.await;
        drop(held);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_counts_until_dropped() {
        let before = counts()[Work::FinalAct as usize];
        let b = busy(Work::FinalAct);
        assert_eq!(counts()[Work::FinalAct as usize], before + 1);
        drop(b);
        assert_eq!(counts()[Work::FinalAct as usize], before);
    }
}
