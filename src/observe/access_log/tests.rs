use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// An in-memory sink that counts its `write` calls.
#[derive(Clone, Default)]
struct Sink {
    bytes: Arc<Mutex<Vec<u8>>>,
    writes: Arc<AtomicUsize>,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.bytes.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn lines(sink: &Sink) -> Vec<String> {
    String::from_utf8(sink.bytes.lock().clone())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Four threads of 500 lines each: every line appears once, each thread's lines in order.
#[test]
fn every_line_appears_in_order_per_writer() {
    let sink = Sink::default();
    let (writer, guard) = batched(sink.clone(), BatchConfig::default());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let mut w = writer.clone();
            std::thread::spawn(move || {
                for i in 0..500 {
                    w.write_all(format!("t{t} {i}\n").as_bytes()).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(guard);
    let got = lines(&sink);
    assert_eq!(got.len(), 2000);
    for t in 0..4 {
        let mine: Vec<usize> = got
            .iter()
            .filter_map(|l| l.strip_prefix(&format!("t{t} ")))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(mine, (0..500).collect::<Vec<_>>(), "thread {t}");
    }
}

/// With a linger longer than the test, 1000 short lines reach the sink in a handful of writes
/// (full batches and the final flush), not one write per line.
#[test]
fn the_sink_is_written_per_batch_not_per_line() {
    let sink = Sink::default();
    let config = BatchConfig {
        batch_bytes: 4096,
        linger: Duration::from_secs(3600),
        max_bytes: 1 << 20,
    };
    let (mut writer, guard) = batched(sink.clone(), config);
    for i in 0..1000 {
        writer
            .write_all(format!("line {i:04}\n").as_bytes())
            .unwrap();
    }
    drop(guard);
    assert_eq!(lines(&sink).len(), 1000);
    // 10 000 bytes in 4 KiB batches: at most a few writes (a batch may exceed 4 KiB).
    let writes = sink.writes.load(Ordering::Relaxed);
    assert!((1..=4).contains(&writes), "{writes} writes for 1000 lines");
}

/// A sink that blocks every write until it is opened.
#[derive(Clone, Default)]
struct BlockedSink {
    inner: Sink,
    open: Arc<(Mutex<bool>, Condvar)>,
}

impl BlockedSink {
    fn open(&self) {
        *self.open.0.lock() = true;
        self.open.1.notify_all();
    }
}

impl Write for BlockedSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut open = self.open.0.lock();
        while !*open {
            self.open.1.wait(&mut open);
        }
        drop(open);
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A sink that does not take anything: every append returns (none waits for the sink), the
/// lines past the bound are dropped and counted, and the ones kept are whole and in order.
#[test]
fn a_blocked_sink_drops_lines_past_the_bound_and_never_waits() {
    let sink = BlockedSink::default();
    let config = BatchConfig {
        batch_bytes: 64,
        linger: Duration::from_millis(1),
        max_bytes: 128,
    };
    let (mut writer, guard) = batched(sink.clone(), config);
    for i in 0..3000 {
        writer.write_all(format!("{i:04}\n").as_bytes()).unwrap();
    }
    let dropped = writer.dropped();
    assert!(dropped > 2000, "{dropped} lines dropped");
    assert!(drop_report().is_some(), "the first drop is reported");
    sink.open();
    drop(guard);
    let got: Vec<usize> = lines(&sink.inner)
        .iter()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(got.len() as u64 + dropped, 3000);
    assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
}

/// Lines written just before shutdown are flushed by the guard even with a long linger.
#[test]
fn shutdown_flushes_the_last_batch() {
    let sink = Sink::default();
    let config = BatchConfig {
        linger: Duration::from_secs(3600),
        ..BatchConfig::default()
    };
    let (mut writer, guard) = batched(sink.clone(), config);
    writer.write_all(b"last\n").unwrap();
    drop(guard);
    assert_eq!(lines(&sink), vec!["last".to_string()]);
}
