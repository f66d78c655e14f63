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
