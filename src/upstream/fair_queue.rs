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
mod tests {
    use super::*;

    const ROOMY: QueueBounds = QueueBounds {
        max: 10_000,
        max_per_tenant: 10_000,
    };

    fn drain(q: &mut FairQueue<u32>, n: usize) -> Vec<String> {
        (0..n)
            .filter_map(|_| q.pop(|_| true).map(|(t, _, _)| t))
            .collect()
    }

    #[test]
    fn fifo_serves_in_arrival_order_across_tenants() {
        let mut q = FairQueue::new(Order::Fifo);
        for (i, t) in ["a", "a", "b", "a", "c"].iter().enumerate() {
            q.push(t, 1, i as u32, ROOMY).unwrap();
        }
        let items: Vec<u32> = (0..5).map(|_| q.pop(|_| true).unwrap().2).collect();
        assert_eq!(items, vec![0, 1, 2, 3, 4]);
        assert!(q.is_empty());
    }

    #[test]
    fn fair_alternates_between_equal_weights_and_keeps_fifo_within_a_tenant() {
        let mut q = FairQueue::new(Order::Fair);
        for i in 0..10 {
            q.push("noisy", 1, i, ROOMY).unwrap();
        }
        q.push("quiet", 1, 100, ROOMY).unwrap();
        q.push("quiet", 1, 101, ROOMY).unwrap();
        let served: Vec<(String, u32)> = (0..6)
            .map(|_| {
                let (t, _, i) = q.pop(|_| true).unwrap();
                (t, i)
            })
            .collect();
        let quiet: Vec<u32> = served
            .iter()
            .filter(|(t, _)| t == "quiet")
            .map(|(_, i)| *i)
            .collect();
        assert_eq!(quiet, vec![100, 101], "both quiet waiters within 6 grants");
        let noisy: Vec<u32> = served
            .iter()
            .filter(|(t, _)| t == "noisy")
            .map(|(_, i)| *i)
            .collect();
        assert_eq!(noisy, vec![0, 1, 2, 3], "FIFO within the noisy tenant");
    }

    #[test]
    fn backlogged_tenants_get_grants_in_proportion_to_weight() {
        let mut q = FairQueue::new(Order::Fair);
        for (t, w) in [("n", 1), ("a", 1), ("b", 1), ("c", 4)] {
            for i in 0..400 {
                q.push(t, w, i, ROOMY).unwrap();
            }
        }
        let served = drain(&mut q, 700);
        let count = |t: &str| served.iter().filter(|s| s.as_str() == t).count();
        assert_eq!(count("n"), 100);
        assert_eq!(count("a"), 100);
        assert_eq!(count("b"), 100);
        assert_eq!(count("c"), 400);
    }

    #[test]
    fn a_returning_tenant_gets_no_stale_credit_or_debt() {
        let mut q = FairQueue::new(Order::Fair);
        for i in 0..50 {
            q.push("n", 1, i, ROOMY).unwrap();
        }
        drain(&mut q, 20);
        // "q" arrives late: it alternates with "n" from now on (ties go to the older waiter),
        // it is not served 20 times in a row to catch up.
        for i in 0..5 {
            q.push("q", 1, i, ROOMY).unwrap();
        }
        let next = drain(&mut q, 6);
        assert_eq!(next, vec!["n", "q", "n", "q", "n", "q"]);
    }

    #[test]
    fn ineligible_tenants_are_skipped_without_losing_their_place() {
        let mut q = FairQueue::new(Order::Fair);
        q.push("a", 1, 1, ROOMY).unwrap();
        q.push("b", 1, 2, ROOMY).unwrap();
        assert_eq!(q.pop(|t| t != "a").unwrap().2, 2);
        assert!(q.pop(|t| t != "a").is_none());
        assert_eq!(q.pop(|_| true).unwrap().2, 1);
        let mut f = FairQueue::new(Order::Fifo);
        f.push("a", 1, 1, ROOMY).unwrap();
        f.push("b", 1, 2, ROOMY).unwrap();
        assert_eq!(f.pop(|t| t == "b").unwrap().2, 2);
    }

    #[test]
    fn a_waiter_that_leaves_costs_its_tenant_no_virtual_time() {
        let mut q = FairQueue::new(Order::Fair);
        let mut noisy = Vec::new();
        for i in 0..4 {
            noisy.push(q.push("n", 1, i, ROOMY).unwrap().ticket);
        }
        // Three of noisy's four waiters leave (timeouts, push-outs, clients gone).
        for t in &noisy[1..] {
            q.remove(*t);
        }
        q.push("n", 1, 10, ROOMY).unwrap();
        q.push("q", 1, 20, ROOMY).unwrap();
        q.push("q", 1, 21, ROOMY).unwrap();
        // noisy's second waiter is its second in virtual time, not its fifth.
        assert_eq!(drain(&mut q, 4), vec!["n", "q", "n", "q"]);
    }

    #[test]
    fn remove_takes_out_exactly_that_waiter() {
        let mut q = FairQueue::new(Order::Fair);
        let a = q.push("a", 1, 1, ROOMY).unwrap().ticket;
        let b = q.push("a", 1, 2, ROOMY).unwrap().ticket;
        assert_eq!(q.remove(a), Some(1));
        assert_eq!(q.remove(a), None);
        assert_eq!(q.len_of("a"), 1);
        assert_eq!(q.pop(|_| true).map(|(_, t, i)| (t, i)), Some((b, 2)));
        assert_eq!(q.remove(b), None, "a served waiter is not removable");
        assert!(q.is_empty());
    }

    #[test]
    fn per_tenant_bound_and_fifo_full() {
        let bounds = QueueBounds {
            max: 3,
            max_per_tenant: 2,
        };
        let mut q = FairQueue::new(Order::Fifo);
        q.push("a", 1, 1, bounds).unwrap();
        q.push("a", 1, 2, bounds).unwrap();
        assert_eq!(
            q.push("a", 1, 3, bounds).err(),
            Some(PushRefused::TenantFull)
        );
        q.push("b", 1, 3, bounds).unwrap();
        assert_eq!(q.push("c", 1, 4, bounds).err(), Some(PushRefused::Full));
        // Without a separate per-tenant bound, one tenant filling the queue makes it full.
        let same = QueueBounds {
            max: 2,
            max_per_tenant: 2,
        };
        let mut f = FairQueue::new(Order::Fifo);
        f.push("a", 1, 1, same).unwrap();
        f.push("a", 1, 2, same).unwrap();
        assert_eq!(f.push("a", 1, 3, same).err(), Some(PushRefused::Full));
    }

    #[test]
    fn full_fair_queue_pushes_out_the_fattest_tenants_newest_waiter() {
        let bounds = QueueBounds {
            max: 4,
            max_per_tenant: 4,
        };
        let mut q = FairQueue::new(Order::Fair);
        for i in 0..4 {
            q.push("noisy", 1, i, bounds).unwrap();
        }
        let p = q.push("quiet", 1, 10, bounds).unwrap();
        assert_eq!(p.evicted, Some(("noisy".into(), 3)));
        assert_eq!(q.len(), 4);
        // noisy 3, quiet 1 → quiet 2 is still below noisy's 3.
        assert!(q.push("quiet", 1, 11, bounds).unwrap().evicted.is_some());
        // noisy 2, quiet 2: a third quiet waiter would hold more than noisy: refused.
        assert_eq!(
            q.push("quiet", 1, 12, bounds).err(),
            Some(PushRefused::Full)
        );
        // Noisy itself is refused when full, never pushes out others.
        assert_eq!(q.push("noisy", 1, 5, bounds).err(), Some(PushRefused::Full));
        // A weight-4 tenant may hold up to 4x the places of a weight-1 tenant.
        let mut w = FairQueue::new(Order::Fair);
        for i in 0..4 {
            w.push("n", 1, i, bounds).unwrap();
        }
        assert!(w.push("big", 4, 10, bounds).unwrap().evicted.is_some());
        assert!(w.push("big", 4, 11, bounds).unwrap().evicted.is_some());
        assert!(w.push("big", 4, 12, bounds).unwrap().evicted.is_some());
        assert_eq!(w.len_of("n"), 1);
        assert_eq!(w.push("big", 4, 13, bounds).err(), Some(PushRefused::Full));
    }
}
