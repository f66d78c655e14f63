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
use crate::observe::metrics::METRICS;
use hashbrown::hash_map::EntryRef;
use prometheus::IntGauge;
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

/// Slots held per tenant name.
type Held = hashbrown::HashMap<Arc<str>, u32, crate::hashing::RandomState>;

struct State {
    busy: u32,
    /// Slots held per tenant (entries with 0 are removed). The name is shared with the tenant's
    /// guards ([`hold`]); each change finds its entry with one hash.
    held: Held,
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
type Delivery = (oneshot::Sender<Grant>, Result<Arc<str>, SlotRejection>);

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
            out.push((tx, Ok(hold(held, &tenant))));
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
            if let EntryRef::Occupied(mut held) = st.held.entry_ref(tenant) {
                *held.get_mut() -= 1;
                if *held.get() == 0 {
                    held.remove();
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

/// Counts one more slot held by `tenant` in `held` and returns the name its guard keeps: the
/// map's own key (one copy of the name per tenant in flight, not one per request).
fn hold(held: &mut Held, tenant: &str) -> Arc<str> {
    match held.entry_ref(tenant) {
        EntryRef::Occupied(mut e) => {
            *e.get_mut() += 1;
            e.key().clone()
        }
        EntryRef::Vacant(e) => e.insert_entry(1).key().clone(),
    }
}

/// A held slot; dropping it releases the slot (to the next eligible waiter) and updates the
/// in-flight gauge.
pub struct SlotGuard {
    core: Arc<Core>,
    tenant: Arc<str>,
}

impl SlotGuard {
    fn new(core: Arc<Core>, tenant: Arc<str>) -> Self {
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
                    held: Held::default(),
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
        // The name the guard keeps, when a free slot was taken.
        let mut taken = None;
        let queued = {
            let mut st = self.core.lock();
            if st.per_tenant != limits.per_tenant {
                st.per_tenant = limits.per_tenant;
                self.core.dispatch(&mut st, &mut out);
            }
            // The tenant's count is looked up only under a per-tenant cap.
            let held = |st: &State| st.held.get(who.tenant).copied().unwrap_or(0);
            if limits.per_tenant.is_some_and(|cap| held(&st) >= cap) {
                Err(SlotRejection::TenantFull)
            } else if st.busy < self.max {
                // No eligible waiter exists while a slot is free (dispatch runs on every
                // release), so taking it jumps nobody.
                st.busy += 1;
                taken = Some(hold(&mut st.held, who.tenant));
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
        let (ticket, rx, timeout) = match (queued?, taken) {
            (Some(q), _) => q,
            (None, Some(tenant)) => return Ok(SlotGuard::new(self.core.clone(), tenant)),
            (None, None) => unreachable!("a request neither queued nor holding a slot"),
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
mod tests;
