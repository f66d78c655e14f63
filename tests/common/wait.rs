//! Polling helpers: wait for a condition or a value to settle without asserting wall-clock time.

use std::time::{Duration, Instant};

/// Polls `cond` every 20 ms until it holds (true) or `timeout` passes (false). Blocking.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Async [`wait_until`]: polls `cond` every 20 ms without blocking a runtime worker.
pub async fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Calls `probe` every 50 ms until its answer satisfies `done` or `timeout` passes: `Ok` with
/// the answer that did, `Err` with the last one when none did.
pub async fn poll<T, F: std::future::Future<Output = T>>(
    timeout: Duration,
    mut probe: impl FnMut() -> F,
    done: impl Fn(&T) -> bool,
) -> Result<T, T> {
    let deadline = Instant::now() + timeout;
    loop {
        let answer = probe().await;
        if done(&answer) {
            return Ok(answer);
        }
        if Instant::now() > deadline {
            return Err(answer);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads `value` every `period` until it returns the same thing 3 times in a row, and returns
/// that (for counters still moving after an event, e.g. queued calls draining).
pub async fn settled<T: PartialEq>(period: Duration, mut value: impl FnMut() -> T) -> T {
    let mut last = value();
    let mut stable = 0;
    while stable < 3 {
        tokio::time::sleep(period).await;
        let now = value();
        if now == last {
            stable += 1;
        } else {
            stable = 0;
            last = now;
        }
    }
    last
}
