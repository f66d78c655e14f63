//! Batched access log: the request path appends its formatted `tollgate::access` line to a
//! shared buffer and returns; one background thread hands the buffer on in batches, so the log
//! writer is woken once per batch instead of once per request.
//!
//! Lines keep their format (they are formatted by the same `tracing` fmt layer as every other
//! line; only the writer differs) and their order (one buffer, appended under a lock, so lines
//! of one connection stay in request order). A batch is handed on when it reaches
//! [`BatchConfig::batch_bytes`] or [`BatchConfig::linger`] after its first line, and on shutdown
//! ([`AccessLogGuard`] drop). A request never waits for the sink: past
//! [`BatchConfig::max_bytes`] of unwritten lines (the sink is stalled or far too slow) a line is
//! dropped and counted (`tollgate_log_lines_dropped_total{log="access"}`, and a warning at most
//! every [`WARN_EVERY`] through [`drop_report`]), like nginx's buffered access log or Envoy's.

use parking_lot::{Condvar, Mutex};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tracing_subscriber::fmt::writer::{EitherWriter, MakeWriter};

/// `tracing` target of the access log events (`crate::proxy` logging).
pub const TARGET: &str = "tollgate::access";

/// When a batch is handed to the sink.
#[derive(Debug, Clone, Copy)]
pub struct BatchConfig {
    /// A batch this large (bytes) is handed on at once.
    pub batch_bytes: usize,
    /// Otherwise a batch is handed on this long after its first line.
    pub linger: Duration,
    /// Unwritten bytes beyond which a line is dropped (and counted) instead of appended.
    pub max_bytes: usize,
}

impl Default for BatchConfig {
    /// 64 KiB batches (about 250 lines), 50 ms linger, 8 MiB bound.
    fn default() -> Self {
        BatchConfig {
            batch_bytes: 64 * 1024,
            linger: Duration::from_millis(50),
            max_bytes: 8 * 1024 * 1024,
        }
    }
}

struct State {
    buf: Vec<u8>,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer thread: first line of a batch, a full batch, shutdown.
    wake: Condvar,
    config: BatchConfig,
    /// Lines dropped by this log because the buffer was full.
    dropped: AtomicU64,
}

/// Lines dropped by every access log of the process (for [`drop_report`]).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// [`DROPPED`] when the last warning was reported, and when.
static REPORTED: parking_lot::Mutex<Option<(u64, std::time::Instant)>> =
    parking_lot::Mutex::new(None);

/// Shortest interval between two warnings about dropped lines.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// Lines dropped since the last report, at most once per [`WARN_EVERY`] (and `None` when none
/// were dropped): the caller logs the warning (outside the access log's own writer, so the
/// warning is never itself one of the dropped lines).
pub fn drop_report() -> Option<u64> {
    let dropped = DROPPED.load(Ordering::Relaxed);
    if dropped == 0 {
        return None;
    }
    let mut last = REPORTED.try_lock()?;
    let now = std::time::Instant::now();
    let since = match *last {
        Some((count, _)) if count == dropped => return None,
        Some((_, at)) if now.duration_since(at) < WARN_EVERY => return None,
        Some((count, _)) => dropped - count,
        None => dropped,
    };
    *last = Some((dropped, now));
    Some(since)
}

/// The request path's side: appends whole lines (one `write` per formatted event).
#[derive(Clone)]
pub struct AccessLogWriter {
    shared: Arc<Shared>,
}

/// Stops the writer thread after handing on every buffered line (drop it before the sink's
/// own guard).
pub struct AccessLogGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Starts the batching thread writing into `sink` (one `write_all` and one `flush` per batch).
pub fn batched<W: Write + Send + 'static>(
    sink: W,
    config: BatchConfig,
) -> (AccessLogWriter, AccessLogGuard) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            buf: Vec::with_capacity(config.batch_bytes),
            closed: false,
        }),
        wake: Condvar::new(),
        config,
        dropped: AtomicU64::new(0),
    });
    let worker = shared.clone();
    let thread = std::thread::Builder::new()
        .name("tollgate-access-log".into())
        .spawn(move || run_writer(&worker, sink))
        .expect("spawn the access log thread");
    (
        AccessLogWriter {
            shared: shared.clone(),
        },
        AccessLogGuard {
            shared,
            thread: Some(thread),
        },
    )
}

fn run_writer<W: Write>(shared: &Shared, mut sink: W) {
    let config = shared.config;
    let mut spare = Vec::with_capacity(config.batch_bytes);
    loop {
        let mut st = shared.state.lock();
        while st.buf.is_empty() && !st.closed {
            shared.wake.wait(&mut st);
        }
        if !st.closed && st.buf.len() < config.batch_bytes {
            // Gather the batch: woken early by a full batch or shutdown.
            let _ = shared.wake.wait_for(&mut st, config.linger);
        }
        let closed = st.closed;
        std::mem::swap(&mut st.buf, &mut spare);
        drop(st);
        if !spare.is_empty() {
            // A failing sink (closed stderr) cannot be reported anywhere better: drop the batch.
            let _ = sink.write_all(&spare).and_then(|_| sink.flush());
            spare.clear();
            if spare.capacity() > 4 * config.batch_bytes {
                spare.shrink_to(config.batch_bytes);
            }
        }
        if closed && shared.state.lock().buf.is_empty() {
            return;
        }
    }
}

impl AccessLogWriter {
    /// Lines this log dropped because its buffer was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

impl Write for AccessLogWriter {
    /// Appends `line`, or drops it (counted) when [`BatchConfig::max_bytes`] are unwritten;
    /// never waits for the sink.
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        let shared = &*self.shared;
        let mut st = shared.state.lock();
        let before = st.buf.len();
        if before >= shared.config.max_bytes && !st.closed {
            drop(st);
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            super::metrics::METRICS.access_log_dropped.inc();
            return Ok(line.len());
        }
        st.buf.extend_from_slice(line);
        let after = st.buf.len();
        drop(st);
        if before == 0 || (before < shared.config.batch_bytes && after >= shared.config.batch_bytes)
        {
            shared.wake.notify_one();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for AccessLogGuard {
    fn drop(&mut self) {
        self.shared.state.lock().closed = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A `MakeWriter` sending [`TARGET`] events to the batched access log and every other event to
/// `other` (unchanged path, so warnings and errors are not delayed by the batching).
#[derive(Clone)]
pub struct RoutedWriter<M> {
    access: AccessLogWriter,
    other: M,
}

impl<M> RoutedWriter<M> {
    /// Access lines to `access`, the rest to `other`.
    pub fn new(access: AccessLogWriter, other: M) -> Self {
        RoutedWriter { access, other }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for RoutedWriter<M> {
    type Writer = EitherWriter<AccessLogWriter, M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        EitherWriter::B(self.other.make_writer())
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        if meta.target() == TARGET {
            EitherWriter::A(self.access.clone())
        } else {
            EitherWriter::B(self.other.make_writer_for(meta))
        }
    }
}

#[cfg(test)]
mod tests;
