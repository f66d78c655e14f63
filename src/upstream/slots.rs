//! Per-upstream concurrency limit: at most `max_concurrency` requests in flight to one upstream
//! across all worker threads, at most `max_concurrency_per_tenant` of them for one tenant, and an
//! optional bounded queue with a wait timeout, served in arrival order or, with `queue.fair`, by
//! weighted fair queuing across tenants (the order is decided in [`super::fair_queue`]).
//!
//! A slot is a [`SlotGuard`] held in the request context; Pingora drops the context after
//! `logging` on every path (success, upstream error, timeout, client abort), so the slot is always
//! given back, and giving it back hands it to the next eligible waiter. A waiter that stops
//! waiting (timeout, client gone: its future is dropped) leaves the queue at once; a slot granted
//! to it in that instant is dropped with its channel and so passed on, never lost.

use super::fair_queue::{FairQueue, Order, PushRefused, QueueBounds, Ticket};
use crate::config::{QueueSettings, UpstreamSettings};
use crate::metrics::METRICS;
use prometheus::IntGauge;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::oneshot;

/// Why no slot was granted (label `reason` of `tollgate_upstream_rejections_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotRejection {
    /// All slots busy and no queue configured.
    Full,
    /// All slots busy and the queue holds `queue.max` waiters (none could be pushed out).
    QueueFull,
    /// Waited `queue.timeout_ms` without getting a slot.
    QueueTimeout,
    /// The tenant already holds `max_concurrency_per_tenant` slots of this upstream.
    TenantFull,
    /// The tenant already holds `queue.max_per_tenant` places in the queue.
    TenantQueueFull,
}

impl SlotRejection {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotRejection::Full => "full",
            SlotRejection::QueueFull => "queue_full",
            SlotRejection::QueueTimeout => "queue_timeout",
            SlotRejection::TenantFull => "tenant_full",
            SlotRejection::TenantQueueFull => "tenant_queue_full",
        }
    }

    /// Whose capacity ran out: `"tenant"` (its own cap) or `"upstream"` (shared slots/queue).
    pub fn scope(self) -> &'static str {
        match self {
            SlotRejection::TenantFull | SlotRejection::TenantQueueFull => "tenant",
            _ => "upstream",
        }
    }
}

/// Who asks for a slot: the tenant (anonymous clients: one tenant per client IP) and its tier's
/// `weight` (≥ 1) for fair queuing.
#[derive(Debug, Clone, Copy)]
pub struct Claimant<'a> {
    pub tenant: &'a str,
    pub weight: u32,
}

/// Per-call limits, from the current snapshot's upstream settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlotLimits<'a> {
    /// `queue:`; `None` rejects at once when all slots are busy.
    pub queue: Option<&'a QueueSettings>,
    /// `max_concurrency_per_tenant`; `None` = no per-tenant cap.
    pub per_tenant: Option<u32>,
}

type Grant = Result<SlotGuard, SlotRejection>;

struct State {
    busy: u32,
    /// Slots held per tenant (entries with 0 are removed).
    held: HashMap<String, u32>,
    /// The per-tenant cap of the latest request (a reload may change it).
    per_tenant: Option<u32>,
    queue: FairQueue<oneshot::Sender<Grant>>,
}

struct Core {
    max: u32,
    state: Mutex<State>,
    in_flight: IntGauge,
    queue_depth: IntGauge,
}

/// A slot to hand over once the lock is released, or a push-out notice.
type Delivery = (oneshot::Sender<Grant>, Result<String, SlotRejection>);

impl Core {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent counts (no await inside); go on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Grants free slots to eligible waiters in queue order (under the lock).
    fn dispatch(&self, st: &mut State, out: &mut Vec<Delivery>) {
        let State {
            busy,
            held,
            per_tenant,
            queue,
        } = st;
        while *busy < self.max {
            let cap = *per_tenant;
            let Some((tenant, _, tx)) =
                queue.pop(|t| cap.is_none_or(|c| held.get(t).copied().unwrap_or(0) < c))
            else {
                break;
            };
            self.queue_depth.dec();
            *busy += 1;
            *held.entry(tenant.clone()).or_insert(0) += 1;
            out.push((tx, Ok(tenant)));
        }
    }

    /// Sends what [`Core::dispatch`] decided, with the lock released (a grant that cannot be
    /// delivered is dropped here, which releases it again).
    fn deliver(self: &Arc<Self>, out: Vec<Delivery>) {
        for (tx, grant) in out {
            let _ = tx.send(grant.map(|tenant| SlotGuard::new(self.clone(), tenant)));
        }
    }

    fn release(self: &Arc<Self>, tenant: &str) {
        let mut out = Vec::new();
        {
            let mut st = self.lock();
            st.busy -= 1;
            if let Some(n) = st.held.get_mut(tenant) {
                *n -= 1;
                if *n == 0 {
                    st.held.remove(tenant);
                }
            }
            self.dispatch(&mut st, &mut out);
        }
        self.deliver(out);
    }
}

/// The slots of one upstream. Carried over a reload while `max_concurrency` and `queue.fair` are
/// unchanged, so in-flight requests keep counting and waiters keep their places.
pub struct Slots {
    name: String,
    /// Slot count.
    pub max: u32,
    core: Arc<Core>,
}

/// A held slot; dropping it releases the slot (to the next eligible waiter) and updates the
/// in-flight gauge.
pub struct SlotGuard {
    core: Arc<Core>,
    tenant: String,
}

impl SlotGuard {
    fn new(core: Arc<Core>, tenant: String) -> Self {
        core.in_flight.inc();
        SlotGuard { core, tenant }
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.core.in_flight.dec();
        self.core.release(&self.tenant);
    }
}

/// A queued waiter's place; dropping it takes the waiter out of the queue if still there.
struct Place<'a> {
    core: &'a Core,
    ticket: Ticket,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if self.core.lock().queue.remove(self.ticket).is_some() {
            self.core.queue_depth.dec();
        }
    }
}

impl Slots {
    /// `max` slots for upstream `name`, queue served in `order`.
    pub fn new(name: &str, max: u32, order: Order) -> Self {
        Slots {
            name: name.to_string(),
            max,
            core: Arc::new(Core {
                max,
                state: Mutex::new(State {
                    busy: 0,
                    held: HashMap::new(),
                    per_tenant: None,
                    queue: FairQueue::new(order),
                }),
                in_flight: METRICS.upstream_in_flight.with_label_values(&[name]),
                queue_depth: METRICS.upstream_queue_depth.with_label_values(&[name]),
            }),
        }
    }

    /// The queue's service order.
    pub fn order(&self) -> Order {
        self.core.lock().queue.order()
    }

    /// Requests currently holding a slot.
    pub fn in_flight(&self) -> u32 {
        self.core.lock().busy
    }

    /// Slots `tenant` holds.
    pub fn held_by(&self, tenant: &str) -> u32 {
        self.core.lock().held.get(tenant).copied().unwrap_or(0)
    }

    /// Requests waiting in the queue.
    pub fn waiting(&self) -> usize {
        self.core.lock().queue.len()
    }

    /// Takes a slot now, or waits in the queue when one is configured.
    ///
    /// Errors: [`SlotRejection`] says why no slot was granted.
    pub async fn acquire(
        &self,
        who: Claimant<'_>,
        limits: SlotLimits<'_>,
    ) -> Result<SlotGuard, SlotRejection> {
        let mut out = Vec::new();
        let queued = {
            let mut st = self.core.lock();
            if st.per_tenant != limits.per_tenant {
                st.per_tenant = limits.per_tenant;
                self.core.dispatch(&mut st, &mut out);
            }
            let held = st.held.get(who.tenant).copied().unwrap_or(0);
            if limits.per_tenant.is_some_and(|cap| held >= cap) {
                Err(SlotRejection::TenantFull)
            } else if st.busy < self.max {
                // No eligible waiter exists while a slot is free (dispatch runs on every
                // release), so taking it jumps nobody.
                st.busy += 1;
                *st.held.entry(who.tenant.to_string()).or_insert(0) += 1;
                Ok(None)
            } else if let Some(queue) = limits.queue {
                let (tx, rx) = oneshot::channel();
                let bounds = QueueBounds {
                    max: queue.max,
                    max_per_tenant: queue.max_per_tenant,
                };
                match st.queue.push(who.tenant, who.weight, tx, bounds) {
                    Ok(pushed) => {
                        match pushed.evicted {
                            Some((_, evicted)) => {
                                out.push((evicted, Err(SlotRejection::QueueFull)))
                            }
                            None => self.core.queue_depth.inc(),
                        }
                        Ok(Some((pushed.ticket, rx, queue.timeout)))
                    }
                    Err(PushRefused::Full) => Err(SlotRejection::QueueFull),
                    Err(PushRefused::TenantFull) => Err(SlotRejection::TenantQueueFull),
                }
            } else {
                Err(SlotRejection::Full)
            }
        };
        self.core.deliver(out);
        let (ticket, rx, timeout) = match queued? {
            None => return Ok(SlotGuard::new(self.core.clone(), who.tenant.to_string())),
            Some(q) => q,
        };
        // Leaves the queue however the wait ends, including when the caller drops this future.
        let _place = Place {
            core: &self.core,
            ticket,
        };
        let started = Instant::now();
        let result = tokio::time::timeout(timeout, rx).await;
        METRICS
            .upstream_queue_wait
            .with_label_values(&[&self.name])
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(Ok(grant)) => grant,
            // The sender is only dropped after sending; treat anything else as a timeout.
            _ => Err(SlotRejection::QueueTimeout),
        }
    }
}

/// The 503 problem `detail` for `why` at `upstream` (`tenant` is the claimant; `suffix` is
/// appended as is).
pub fn rejection_detail(
    why: SlotRejection,
    upstream: &UpstreamSettings,
    tenant: &str,
    suffix: &str,
) -> String {
    let name = &upstream.name;
    match why {
        SlotRejection::TenantFull => format!(
            "tenant \"{tenant}\" has {} requests in flight to upstream \"{name}\", its per-tenant \
             limit (tenant_full).{suffix}",
            upstream.max_concurrency_per_tenant.unwrap_or(0)
        ),
        SlotRejection::TenantQueueFull => format!(
            "tenant \"{tenant}\" already has {} requests queued for upstream \"{name}\" \
             (tenant_queue_full).{suffix}",
            upstream.queue.as_ref().map_or(0, |q| q.max_per_tenant)
        ),
        _ => format!(
            "upstream \"{name}\" has {} requests in flight ({}).{suffix}",
            upstream.max_concurrency.unwrap_or(0),
            why.as_str()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn who(tenant: &str) -> Claimant<'_> {
        Claimant { tenant, weight: 1 }
    }

    fn queue(max: u32, timeout: Duration) -> QueueSettings {
        QueueSettings {
            max,
            timeout,
            fair: false,
            max_per_tenant: max,
        }
    }

    fn with(q: &QueueSettings) -> SlotLimits<'_> {
        SlotLimits {
            queue: Some(q),
            per_tenant: None,
        }
    }

    async fn until_waiting(s: &Slots, n: usize) {
        while s.waiting() != n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test]
    async fn full_without_queue_and_release_on_drop() {
        let s = Slots::new("t1", 2, Order::Fifo);
        let none = SlotLimits::default();
        let a = s.acquire(who("a"), none).await.unwrap();
        let _b = s.acquire(who("a"), none).await.unwrap();
        assert_eq!(
            s.acquire(who("a"), none).await.err(),
            Some(SlotRejection::Full)
        );
        drop(a);
        assert!(s.acquire(who("a"), none).await.is_ok());
    }

    #[tokio::test]
    async fn queue_bounds_and_timeout() {
        let s = Arc::new(Slots::new("t2", 1, Order::Fifo));
        let q = queue(1, Duration::from_millis(50));
        let held = s.acquire(who("a"), with(&q)).await.unwrap();
        assert_eq!(
            s.acquire(who("a"), with(&q)).await.err(),
            Some(SlotRejection::QueueTimeout)
        );
        let s2 = s.clone();
        let waiter = tokio::spawn(async move {
            let q2 = queue(1, Duration::from_secs(30));
            s2.acquire(who("a"), with(&q2)).await.is_ok()
        });
        until_waiting(&s, 1).await;
        assert_eq!(
            s.acquire(who("b"), with(&q)).await.err(),
            Some(SlotRejection::QueueFull)
        );
        drop(held);
        assert!(waiter.await.unwrap());
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.core.in_flight.get(), 0);
    }

    #[tokio::test]
    async fn dropped_waiter_gives_its_place_back() {
        let s = Arc::new(Slots::new("t3", 1, Order::Fifo));
        let q = queue(1, Duration::from_secs(30));
        let held = s.acquire(who("a"), with(&q)).await.unwrap();
        let (s2, q2) = (s.clone(), q.clone());
        let waiter = tokio::spawn(async move { s2.acquire(who("a"), with(&q2)).await.is_ok() });
        until_waiting(&s, 1).await;
        assert_eq!(s.core.queue_depth.get(), 1);
        assert_eq!(
            s.acquire(who("b"), with(&q)).await.err(),
            Some(SlotRejection::QueueFull)
        );
        assert_eq!(
            s.core.queue_depth.get(),
            1,
            "a rejected request never counts as queued"
        );
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(s.waiting(), 0);
        assert_eq!(s.core.queue_depth.get(), 0);
        // The freed place is usable, and the released slot goes to the live waiter.
        let s3 = s.clone();
        let live = tokio::spawn(async move { s3.acquire(who("a"), with(&q)).await.is_ok() });
        until_waiting(&s, 1).await;
        drop(held);
        assert!(live.await.unwrap());
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.core.in_flight.get(), 0);
    }

    /// Queues `n` waiters of `tenant` that each hold their slot until told, recording the grant
    /// order in `log`.
    fn spawn_waiters(
        s: &Arc<Slots>,
        q: &QueueSettings,
        tenant: &'static str,
        weight: u32,
        n: usize,
        log: &Arc<Mutex<Vec<&'static str>>>,
    ) -> Vec<tokio::task::JoinHandle<Result<(), SlotRejection>>> {
        (0..n)
            .map(|_| {
                let (s, q, log) = (s.clone(), q.clone(), log.clone());
                tokio::spawn(async move {
                    let g = s.acquire(Claimant { tenant, weight }, with(&q)).await?;
                    log.lock().unwrap().push(tenant);
                    drop(g);
                    Ok(())
                })
            })
            .collect()
    }

    #[tokio::test]
    async fn fair_queue_grants_by_weight_and_pushes_out_the_noisy_tenant() {
        let s = Arc::new(Slots::new("t4", 1, Order::Fair));
        let q = QueueSettings {
            fair: true,
            ..queue(8, Duration::from_secs(30))
        };
        let log = Arc::new(Mutex::new(Vec::new()));
        let held = s.acquire(who("noisy"), with(&q)).await.unwrap();
        let mut tasks = Vec::new();
        for _ in 0..8 {
            tasks.extend(spawn_waiters(&s, &q, "noisy", 1, 1, &log));
            until_waiting(&s, tasks.len()).await;
        }
        // The queue is full of noisy; the quiet tenants still get places, pushing noisy out.
        let quiet = spawn_waiters(&s, &q, "quiet", 1, 2, &log);
        let heavy = spawn_waiters(&s, &q, "heavy", 4, 2, &log);
        let newcomers = || {
            let st = s.core.lock();
            st.queue.len_of("heavy") + st.queue.len_of("quiet")
        };
        while newcomers() < 4 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        drop(held);
        for t in quiet.into_iter().chain(heavy) {
            assert_eq!(t.await.unwrap(), Ok(()));
        }
        let mut pushed_out = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(()) => {}
                Err(SlotRejection::QueueFull) => pushed_out += 1,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert_eq!(pushed_out, 4, "one noisy waiter pushed out per newcomer");
        let log = log.lock().unwrap();
        let first: Vec<_> = log.iter().take(5).copied().collect();
        assert_eq!(
            first.iter().filter(|t| **t == "heavy").count(),
            2,
            "heavy (weight 4) is served within the first grants: {log:?}"
        );
        assert!(first.contains(&"quiet"), "{log:?}");
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.waiting(), 0);
        assert_eq!(s.core.queue_depth.get(), 0);
    }

    /// Spawns an acquire of `tenant` that holds its slot until `release` fires and reports
    /// the slots its tenant held right after the grant.
    fn spawn_holder(
        s: &Arc<Slots>,
        q: &QueueSettings,
        tenant: &'static str,
    ) -> (
        tokio::task::JoinHandle<Result<u32, SlotRejection>>,
        oneshot::Sender<()>,
    ) {
        let (s, q) = (s.clone(), q.clone());
        let (release, wait) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let limits = SlotLimits {
                queue: Some(&q),
                per_tenant: Some(1),
            };
            let g = s.acquire(who(tenant), limits).await?;
            let held = s.held_by(tenant);
            let _ = wait.await;
            drop(g);
            Ok(held)
        });
        (task, release)
    }

    #[tokio::test]
    async fn per_tenant_cap_rejects_and_skips_capped_waiters() {
        let s = Arc::new(Slots::new("t5", 2, Order::Fifo));
        let q = queue(4, Duration::from_secs(30));
        let capped = SlotLimits {
            queue: Some(&q),
            per_tenant: Some(1),
        };
        let a = s.acquire(who("a"), capped).await.unwrap();
        assert_eq!(
            s.acquire(who("a"), capped).await.err(),
            Some(SlotRejection::TenantFull),
            "a tenant at its cap is refused at once, not queued"
        );
        let x = s.acquire(who("x"), capped).await.unwrap();
        // Both slots busy: "b" queues twice (it holds nothing yet), then "c".
        let (b1, b1_release) = spawn_holder(&s, &q, "b");
        until_waiting(&s, 1).await;
        let (b2, b2_release) = spawn_holder(&s, &q, "b");
        until_waiting(&s, 2).await;
        let (c, c_release) = spawn_holder(&s, &q, "c");
        until_waiting(&s, 3).await;
        drop(a);
        // b's first waiter gets the slot; its second is now ineligible (b at its cap).
        while s.held_by("b") != 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        drop(x);
        // ...so "c", behind it, gets the next slot.
        while s.held_by("c") != 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(s.waiting(), 1, "b's second waiter still waits");
        assert_eq!(s.held_by("b"), 1);
        let _ = b1_release.send(());
        assert_eq!(b1.await.unwrap(), Ok(1));
        let _ = c_release.send(());
        assert_eq!(c.await.unwrap(), Ok(1));
        let _ = b2_release.send(());
        assert_eq!(b2.await.unwrap(), Ok(1), "never above the cap");
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.core.in_flight.get(), 0);
        assert_eq!(SlotRejection::TenantFull.scope(), "tenant");
        assert_eq!(SlotRejection::QueueFull.scope(), "upstream");
    }
}
