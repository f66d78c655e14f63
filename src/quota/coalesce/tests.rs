use super::*;
use crate::limit::Decision;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Semaphore;

const RATE: Rate = Rate::new(1, 60_000, 10);

/// The coalescer of exact token-bucket calls, as the quota service uses it.
type Coalescer = super::Coalescer<BucketKey, Decision>;
type Reply = super::Reply<Decision>;

fn key(tenant: &str, rate: Rate, cost: u64) -> BucketKey {
    BucketKey {
        tenant: tenant.to_string(),
        rate,
        cost,
    }
}

fn admitted(n: usize) -> Vec<Decision> {
    crate::limit::token_bucket::decide_batch(RATE.burst * RATE.per_ms, &RATE, 1, n).0
}

/// A Redis stand-in that records each call's `n` and answers only when `gate` lets it.
struct Calls {
    sizes: Mutex<Vec<usize>>,
    gate: Semaphore,
    started: AtomicUsize,
}

impl Calls {
    fn new() -> Arc<Self> {
        Arc::new(Calls {
            sizes: Mutex::new(Vec::new()),
            gate: Semaphore::new(0),
            started: AtomicUsize::new(0),
        })
    }

    async fn call(
        &self,
        n: usize,
        reply: Result<Vec<Decision>, RedisFault>,
    ) -> Result<Vec<Decision>, RedisFault> {
        self.sizes.lock().push(n);
        self.started.fetch_add(1, Ordering::SeqCst);
        self.gate.acquire().await.unwrap().forget();
        reply
    }
}

/// Spawns one request of cost 1 for tenant `t` whose calls admit from a full bucket.
fn spawn_decide(c: &Arc<Coalescer>, calls: &Arc<Calls>) -> tokio::task::JoinHandle<Reply> {
    let (c, calls) = (c.clone(), calls.clone());
    tokio::spawn(async move {
        c.decide(key("t", RATE, 1), |n| calls.call(n, Ok(admitted(n))))
            .await
            .reply
    })
}

async fn until(cond: impl Fn() -> bool) {
    while !cond() {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn requests_behind_a_call_in_flight_share_the_next_call() {
    let c = Arc::new(Coalescer::new(Duration::from_secs(60)));
    let calls = Calls::new();
    let first = spawn_decide(&c, &calls);
    until(|| calls.started.load(Ordering::SeqCst) == 1).await;
    let rest: Vec<_> = (0..5).map(|_| spawn_decide(&c, &calls)).collect();
    // Let the five queue behind the first call.
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert_eq!(calls.started.load(Ordering::SeqCst), 1);
    calls.gate.add_permits(2);
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.remaining, 9);
    let mut remaining: Vec<u64> = Vec::new();
    for r in rest {
        remaining.push(r.await.unwrap().unwrap().remaining);
    }
    // One call of 1, then one call of 5 in arrival order, each request its own decision.
    assert_eq!(*calls.sizes.lock(), vec![1, 5]);
    assert_eq!(remaining, vec![9, 8, 7, 6, 5]);
    assert!(c.shared.shards.iter().all(|s| s.lock().is_empty()));
}

#[tokio::test(flavor = "current_thread")]
async fn other_tenants_and_costs_are_not_batched_together() {
    let c = Arc::new(Coalescer::new(Duration::from_secs(60)));
    let calls = Calls::new();
    let mut tasks = Vec::new();
    for (tenant, cost) in [("a", 1), ("b", 1), ("a", 2)] {
        let (c, calls) = (c.clone(), calls.clone());
        tasks.push(tokio::spawn(async move {
            let answer = |n| {
                crate::limit::token_bucket::decide_batch(RATE.burst * RATE.per_ms, &RATE, cost, n).0
            };
            c.decide(key(tenant, RATE, cost), |n| calls.call(n, Ok(answer(n))))
                .await
        }));
    }
    until(|| calls.started.load(Ordering::SeqCst) == 3).await;
    calls.gate.add_permits(3);
    for t in tasks {
        let answer = t.await.unwrap();
        assert!(answer.own_call, "each key made its own call");
        assert!(answer.reply.unwrap().admitted);
    }
    assert_eq!(*calls.sizes.lock(), vec![1, 1, 1]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_call_fails_its_whole_batch_and_the_key_is_freed() {
    let c = Arc::new(Coalescer::new(Duration::from_secs(60)));
    let calls = Calls::new();
    let spawn = |c: Arc<Coalescer>, calls: Arc<Calls>, reply: Result<Vec<Decision>, RedisFault>| {
        tokio::spawn(async move {
            c.decide(key("t", RATE, 1), |_| calls.call(0, reply.clone()))
                .await
        })
    };
    let first = spawn(c.clone(), calls.clone(), Ok(admitted(1)));
    until(|| calls.started.load(Ordering::SeqCst) == 1).await;
    let queued: Vec<_> = (0..3)
        .map(|_| spawn(c.clone(), calls.clone(), Err(RedisFault::Connection)))
        .collect();
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    calls.gate.add_permits(2);
    let first = first.await.unwrap();
    assert!(first.own_call && first.reply.is_ok());
    // The first queued request leads the second call; the other two share its fault.
    let mut own_calls = 0;
    for q in queued {
        let answer = q.await.unwrap();
        assert_eq!(answer.reply, Err(RedisFault::Connection));
        own_calls += answer.own_call as usize;
    }
    assert_eq!(own_calls, 1);
    assert!(c.shared.shards.iter().all(|s| s.lock().is_empty()));
}

#[tokio::test(flavor = "current_thread")]
async fn a_leader_dropped_mid_call_hands_the_lead_on() {
    let c = Arc::new(Coalescer::new(Duration::from_secs(60)));
    let calls = Calls::new();
    let (c1, calls1) = (c.clone(), calls.clone());
    // The first request gives up (its future is dropped) while its call is in flight.
    let first = tokio::spawn(async move {
        let decide = c1.decide(key("t", RATE, 1), |n| calls1.call(n, Ok(admitted(n))));
        tokio::time::timeout(Duration::from_millis(1), decide).await
    });
    until(|| calls.started.load(Ordering::SeqCst) == 1).await;
    let second = spawn_decide(&c, &calls);
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert!(first.await.unwrap().is_err(), "the first request timed out");
    // The second request was handed the lead and makes its own call.
    until(|| calls.started.load(Ordering::SeqCst) == 2).await;
    calls.gate.add_permits(1);
    assert!(second.await.unwrap().unwrap().admitted);
    assert_eq!(*calls.sizes.lock(), vec![1, 1]);
    assert!(c.shared.shards.iter().all(|s| s.lock().is_empty()));
}

#[tokio::test(flavor = "current_thread")]
async fn a_waiting_request_gives_up_after_the_wait() {
    let c = Arc::new(Coalescer::new(Duration::from_millis(20)));
    let calls = Calls::new();
    let first = spawn_decide(&c, &calls);
    until(|| calls.started.load(Ordering::SeqCst) == 1).await;
    let waited = c
        .decide(key("t", RATE, 1), |n| calls.call(n, Ok(admitted(n))))
        .await;
    assert_eq!(waited.reply, Err(RedisFault::Timeout));
    assert!(!waited.own_call);
    calls.gate.add_permits(1);
    assert!(first.await.unwrap().unwrap().admitted);
    // Nobody waits any more: the key is forgotten, and the next request calls at once.
    assert!(c.shared.shards.iter().all(|s| s.lock().is_empty()));
}

/// A request handed the lead after waiting makes its call only within what is left of its
/// wait: its turn and its call together take at most the wait (clock paused, so exact).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_request_handed_the_lead_calls_within_what_is_left_of_its_wait() {
    let c = Arc::new(Coalescer::new(Duration::from_millis(100)));
    let calls = Calls::new();
    let (c1, calls1) = (c.clone(), calls.clone());
    // The first request's call never answers; it gives up after 60 ms.
    let first = tokio::spawn(async move {
        let decide = c1.decide(key("t", RATE, 1), |n| calls1.call(n, Ok(admitted(n))));
        tokio::time::timeout(Duration::from_millis(60), decide).await
    });
    until(|| calls.started.load(Ordering::SeqCst) == 1).await;
    let started = tokio::time::Instant::now();
    let second = spawn_decide(&c, &calls);
    assert!(first.await.unwrap().is_err(), "the first request gave up");
    // The second leads from 60 ms on; its call (never answered either) is cut at 100 ms.
    let waited = tokio::time::timeout(Duration::from_secs(10), second).await;
    assert_eq!(
        waited.expect("cut at the wait").unwrap(),
        Err(RedisFault::Timeout)
    );
    assert_eq!(calls.started.load(Ordering::SeqCst), 2);
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    assert!(c.shared.shards.iter().all(|s| s.lock().is_empty()));
}
