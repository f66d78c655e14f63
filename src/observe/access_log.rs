//! Batched access log: the request path appends its formatted `tollgate::access` line to a
//! shared buffer and returns; one background thread hands the buffer on in batches, so the log
//! writer is woken once per batch instead of once per request.
//!
//! Lines keep their format (they are formatted by the same `tracing` fmt layer as every other
//! line; only the writer differs) and their order (one buffer, appended under a lock, so lines
//! of one connection stay in request order). A batch is handed on when it reaches
//! [`BatchConfig::batch_bytes`] or [`BatchConfig::linger`] after its first line, and on shutdown
//! ([`AccessLogGuard`] drop). Nothing is dropped: past [`BatchConfig::max_bytes`] of unwritten
//! lines a request thread waits for the writer (like the lossless non-blocking writer it
//! replaces), which only happens when the sink cannot keep up at all.

use parking_lot::{Condvar, Mutex};
use std::io::{self, Write};
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
    /// Unwritten bytes beyond which appending waits for the writer (back-pressure, no loss).
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
    /// Wakes appenders waiting for room (back-pressure).
    drained: Condvar,
    config: BatchConfig,
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
        drained: Condvar::new(),
        config,
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
        shared.drained.notify_all();
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

impl Write for AccessLogWriter {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        let shared = &*self.shared;
        let mut st = shared.state.lock();
        while st.buf.len() >= shared.config.max_bytes && !st.closed {
            shared.drained.wait(&mut st);
        }
        let before = st.buf.len();
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
        self.shared.drained.notify_all();
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
