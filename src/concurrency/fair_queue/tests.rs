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
