//! Per-upstream concurrency limit: at most `max_concurrency` requests in flight to one upstream
//! across all worker threads, with an optional bounded FIFO queue and wait timeout.
//!
//! A slot is an `OwnedSemaphorePermit` inside a [`SlotGuard`] held in the request context;
//! Pingora drops the context after `logging` on every path (success, upstream error, timeout,
//! client abort), so the slot is always given back. tokio's semaphore is fair (FIFO).

use crate::config::QueueSettings;
use crate::metrics::METRICS;
use prometheus::IntGauge;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why no slot was granted (label of `tollgate_upstream_rejections_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotRejection {
    /// All slots busy and no queue configured.
    Full,
    /// All slots busy and the queue holds `queue.max` waiters.
    QueueFull,
    /// Waited `queue.timeout_ms` without getting a slot.
    QueueTimeout,
}

impl SlotRejection {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotRejection::Full => "full",
            SlotRejection::QueueFull => "queue_full",
            SlotRejection::QueueTimeout => "queue_timeout",
        }
    }
}

/// The slots of one upstream. Carried over a reload while `max_concurrency` is unchanged, so
/// in-flight requests keep counting against the limit.
pub struct Slots {
    name: String,
    /// Slot count.
    pub max: u32,
    semaphore: Arc<Semaphore>,
    waiting: AtomicU32,
    in_flight: IntGauge,
    queue_depth: IntGauge,
}

/// A held slot; dropping it releases the slot and updates the in-flight gauge.
pub struct SlotGuard {
    _permit: OwnedSemaphorePermit,
    in_flight: IntGauge,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.in_flight.dec();
    }
}

struct WaitGuard<'a>(&'a Slots);

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
        self.0.queue_depth.dec();
    }
}

impl Slots {
    /// `max` slots for upstream `name`.
    pub fn new(name: &str, max: u32) -> Self {
        Slots {
            name: name.to_string(),
            max,
            semaphore: Arc::new(Semaphore::new(max as usize)),
            waiting: AtomicU32::new(0),
            in_flight: METRICS.upstream_in_flight.with_label_values(&[name]),
            queue_depth: METRICS.upstream_queue_depth.with_label_values(&[name]),
        }
    }

    /// Requests currently holding a slot.
    pub fn in_flight(&self) -> u32 {
        self.max - self.semaphore.available_permits() as u32
    }

    fn granted(&self, permit: OwnedSemaphorePermit) -> SlotGuard {
        self.in_flight.inc();
        SlotGuard {
            _permit: permit,
            in_flight: self.in_flight.clone(),
        }
    }

    /// Takes a slot now, or waits in the queue when one is configured.
    pub async fn acquire(&self, queue: Option<&QueueSettings>) -> Result<SlotGuard, SlotRejection> {
        if let Ok(p) = self.semaphore.clone().try_acquire_owned() {
            return Ok(self.granted(p));
        }
        let Some(queue) = queue else {
            return Err(SlotRejection::Full);
        };
        // Take a place in the queue only when one is free, so the queue-depth gauge never
        // counts a request that is turned away.
        if self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w < queue.max).then_some(w + 1)
            })
            .is_err()
        {
            return Err(SlotRejection::QueueFull);
        }
        self.queue_depth.inc();
        // Gives the place back however the wait ends, including when the caller drops this
        // future (the client went away): the semaphore forgets a dropped waiter too.
        let _wait = WaitGuard(self);
        let started = Instant::now();
        let result =
            tokio::time::timeout(queue.timeout, self.semaphore.clone().acquire_owned()).await;
        METRICS
            .upstream_queue_wait
            .with_label_values(&[&self.name])
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(Ok(p)) => Ok(self.granted(p)),
            _ => Err(SlotRejection::QueueTimeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn full_without_queue_and_release_on_drop() {
        let s = Slots::new("t1", 2);
        let a = s.acquire(None).await.unwrap();
        let _b = s.acquire(None).await.unwrap();
        assert_eq!(s.acquire(None).await.err(), Some(SlotRejection::Full));
        drop(a);
        assert!(s.acquire(None).await.is_ok());
    }

    #[tokio::test]
    async fn queue_bounds_and_timeout() {
        let s = Arc::new(Slots::new("t2", 1));
        let q = QueueSettings {
            max: 1,
            timeout: Duration::from_millis(50),
        };
        let held = s.acquire(Some(&q)).await.unwrap();
        assert_eq!(
            s.acquire(Some(&q)).await.err(),
            Some(SlotRejection::QueueTimeout)
        );
        let s2 = s.clone();
        let q2 = QueueSettings {
            max: 1,
            timeout: Duration::from_secs(30),
        };
        let waiter = tokio::spawn(async move { s2.acquire(Some(&q2)).await.is_ok() });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            s.acquire(Some(&q)).await.err(),
            Some(SlotRejection::QueueFull)
        );
        drop(held);
        assert!(waiter.await.unwrap());
        assert_eq!(s.in_flight(), 0);
    }

    #[tokio::test]
    async fn dropped_waiter_gives_its_place_back() {
        let s = Arc::new(Slots::new("t3", 1));
        let q = QueueSettings {
            max: 1,
            timeout: Duration::from_secs(30),
        };
        let held = s.acquire(Some(&q)).await.unwrap();
        let s2 = s.clone();
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { s2.acquire(Some(&q2)).await.is_ok() });
        while s.waiting.load(Ordering::Acquire) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(s.queue_depth.get(), 1);
        assert_eq!(
            s.acquire(Some(&q)).await.err(),
            Some(SlotRejection::QueueFull)
        );
        assert_eq!(
            s.queue_depth.get(),
            1,
            "a rejected request never counts as queued"
        );
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(s.waiting.load(Ordering::Acquire), 0);
        assert_eq!(s.queue_depth.get(), 0);
        // The freed place is usable, and the released slot goes to the live waiter.
        let s3 = s.clone();
        let live = tokio::spawn(async move { s3.acquire(Some(&q)).await.is_ok() });
        while s.waiting.load(Ordering::Acquire) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        drop(held);
        assert!(live.await.unwrap());
        assert_eq!(s.in_flight(), 0);
    }
}
