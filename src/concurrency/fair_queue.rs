//! Which waiter gets the next free upstream slot: pure scheduling, no I/O, no clock.
//!
//! Two orders over one structure:
//! - [`Order::Fifo`]: arrival order across everyone (the behaviour without `queue.fair`).
//! - [`Order::Fair`]: weighted fair queuing across tenants, FIFO within a tenant. Each waiter gets
//!   a virtual finish tag at arrival, `max(V, last tag of its tenant) + SCALE / weight`, and the
//!   waiter with the smallest tag is served next; `V` is the tag of the waiter served last. This
//!   is self-clocked fair queuing (S. J. Golestani, "A self-clocked fair queueing scheme for
//!   broadband applications", INFOCOM 1994) with every request costing one slot grant, so a
//!   backlogged tenant of weight `w` receives `w / Σ w` of the grants among backlogged tenants.
//!
//! A tenant's state lives only while it has waiters (memory is bounded by the queue length); a
//! tenant that comes back after its queue emptied starts from `V`, never from a stale credit.
//! When the queue is full, fair order pushes out the newest waiter of the tenant holding the
//! most places per weight, if that tenant holds more than the newcomer's tenant would (the
//! longest-queue drop of fq_codel, RFC 8290 section 4.1.2): a noisy tenant cannot fill the queue
//! and lock quieter tenants out.

use std::collections::{BTreeMap, HashMap, VecDeque};

/// Virtual time of one grant at weight 1.
const SCALE: u64 = 1 << 20;

/// Service order of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Arrival order across all tenants.
    Fifo,
    /// Weighted fair queuing across tenants, FIFO within a tenant.
    Fair,
}

/// Identity of a queued waiter, for [`FairQueue::remove`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// Bounds checked by [`FairQueue::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueBounds {
    /// Waiters in total (`queue.max`).
    pub max: u32,
    /// Waiters of one tenant (`queue.max_per_tenant`).
    pub max_per_tenant: u32,
}

/// Why [`FairQueue::push`] refused a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushRefused {
    /// The queue holds `max` waiters and none can be pushed out for this tenant.
    Full,
    /// The tenant already holds `max_per_tenant` places.
    TenantFull,
}

/// What a successful [`FairQueue::push`] did.
#[derive(Debug)]
pub struct Pushed<T> {
    /// The newcomer's ticket.
    pub ticket: Ticket,
    /// A waiter pushed out to make room (fair order only), with its tenant.
    pub evicted: Option<(String, T)>,
}

struct Entry<T> {
    ticket: Ticket,
    tag: u64,
    item: T,
}

struct TenantQueue<T> {
    weight: u32,
    last_tag: u64,
    waiters: VecDeque<Entry<T>>,
}

/// Waiters grouped by tenant; see the module docs for the order.
pub struct FairQueue<T> {
    order: Order,
    tenants: HashMap<String, TenantQueue<T>>,
    /// Ticket → tenant, to find a waiter that leaves.
    index: BTreeMap<Ticket, String>,
    /// Virtual time: tag of the last waiter served (fair), or last ticket (FIFO).
    virtual_time: u64,
    next_ticket: u64,
}

impl<T> FairQueue<T> {
    /// An empty queue serving in `order`.
    pub fn new(order: Order) -> Self {
        FairQueue {
            order,
            tenants: HashMap::new(),
            index: BTreeMap::new(),
            virtual_time: 0,
            next_ticket: 0,
        }
    }

    /// Its service order.
    pub fn order(&self) -> Order {
        self.order
    }

    /// Waiters in total.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when nobody waits.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Waiters of `tenant`.
    pub fn len_of(&self, tenant: &str) -> usize {
        self.tenants.get(tenant).map_or(0, |t| t.waiters.len())
    }

    /// Queues `item` for `tenant` with `weight` (≥ 1; 0 is taken as 1), within `bounds`.
    ///
    /// Errors: [`PushRefused::TenantFull`] when the tenant holds `max_per_tenant` places (and that
    /// bound is below `max`);
    /// [`PushRefused::Full`] when the queue is full and (FIFO) nobody is pushed out or (fair) no
    /// tenant holds more places per weight than this one would.
    pub fn push(
        &mut self,
        tenant: &str,
        weight: u32,
        item: T,
        bounds: QueueBounds,
    ) -> Result<Pushed<T>, PushRefused> {
        let weight = weight.max(1);
        let own = self.len_of(tenant) as u64;
        if own >= u64::from(bounds.max_per_tenant) {
            // Without a bound of its own (max_per_tenant = max) the tenant simply fills the queue.
            return Err(if bounds.max_per_tenant >= bounds.max {
                PushRefused::Full
            } else {
                PushRefused::TenantFull
            });
        }
        let mut evicted = None;
        if self.len() >= bounds.max as usize {
            if self.order == Order::Fifo {
                return Err(PushRefused::Full);
            }
            let fattest = self
                .tenants
                .iter()
                .filter(|(name, _)| name.as_str() != tenant)
                .max_by(|(an, a), (bn, b)| {
                    // a.len / a.weight vs b.len / b.weight, then name for determinism.
                    (a.waiters.len() as u64 * u64::from(b.weight))
                        .cmp(&(b.waiters.len() as u64 * u64::from(a.weight)))
                        .then_with(|| bn.cmp(an))
                })
                .map(|(name, q)| (name.clone(), q.waiters.len() as u64, q.weight));
            match fattest {
                // Their places per weight exceed ours after joining: len_f / w_f > (own+1) / w.
                Some((name, len, w_f)) if len * u64::from(weight) > (own + 1) * u64::from(w_f) => {
                    let newest = self.tenants[&name]
                        .waiters
                        .back()
                        .expect("non-empty")
                        .ticket;
                    let out = self.remove(newest).expect("queued");
                    evicted = Some((name, out));
                }
                _ => return Err(PushRefused::Full),
            }
        }
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        let q = self
            .tenants
            .entry(tenant.to_string())
            .or_insert_with(|| TenantQueue {
                weight,
                last_tag: 0,
                waiters: VecDeque::new(),
            });
        // A tenant's weight is the one its latest request was sent with (a reload may change it).
        q.weight = weight;
        let tag = match self.order {
            Order::Fifo => ticket.0,
            Order::Fair => self.virtual_time.max(q.last_tag) + SCALE / u64::from(weight),
        };
        q.last_tag = tag;
        q.waiters.push_back(Entry { ticket, tag, item });
        self.index.insert(ticket, tenant.to_string());
        Ok(Pushed { ticket, evicted })
    }

    /// Takes the waiter `ticket` out (it left: timeout, client gone). `None` when it is no
    /// longer queued.
    pub fn remove(&mut self, ticket: Ticket) -> Option<T> {
        let tenant = self.index.remove(&ticket)?;
        let q = self.tenants.get_mut(&tenant)?;
        let at = q.waiters.iter().position(|e| e.ticket == ticket)?;
        let entry = q.waiters.remove(at)?;
        if q.waiters.is_empty() {
            self.tenants.remove(&tenant);
        } else if self.order == Order::Fair {
            // The waiter was never served: it must not cost its tenant virtual time. Those
            // behind it move up one step, as if it had never arrived.
            let step = SCALE / u64::from(q.weight);
            for later in q.waiters.range_mut(at..) {
                later.tag = later.tag.saturating_sub(step).max(self.virtual_time);
            }
            q.last_tag = q.waiters.back().map_or(0, |e| e.tag);
        }
        Some(entry.item)
    }

    /// Takes the next waiter to serve among tenants for which `eligible(tenant)` holds (a tenant
    /// at its `max_concurrency_per_tenant` cap is skipped), with its tenant and ticket.
    pub fn pop(&mut self, mut eligible: impl FnMut(&str) -> bool) -> Option<(String, Ticket, T)> {
        let name = self
            .tenants
            .iter()
            .filter(|(name, _)| eligible(name))
            .filter_map(|(name, q)| q.waiters.front().map(|e| (e.tag, e.ticket, name)))
            .min()
            .map(|(_, _, name)| name.clone())?;
        let q = self.tenants.get_mut(&name).expect("chosen tenant exists");
        let entry = q.waiters.pop_front().expect("non-empty");
        if q.waiters.is_empty() {
            self.tenants.remove(&name);
        }
        self.index.remove(&entry.ticket);
        self.virtual_time = self.virtual_time.max(entry.tag);
        Some((name, entry.ticket, entry.item))
    }
}

#[cfg(test)]
mod tests;
