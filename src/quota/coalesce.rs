//! Request coalescing: while a script call for one key is in flight, this instance's next
//! requests with the same key wait for it, and one call then decides all of them together, in
//! arrival order. Keys are whole calls: the exact token bucket's (tenant, bucket size, cost;
//! `lua/token_bucket.lua` with `n`) and the policy script's (its KEYS and ARGV;
//! `lua/policy.lua` with a request count).
//!
//! Exactness is unchanged: every decision is still made by Redis, atomically, before its request
//! goes on, and a batch decides as consecutive calls at one instant would
//! ([`decide_batch`](crate::limit::token_bucket::decide_batch)). What changes is the Redis load
//! of a busy key: one script call per batch instead of one per request. A request that finds
//! no call in flight is sent at once, so a quiet tenant waits for nothing.
//!
//! Turn-taking: the first request of a key leads: it makes the call for itself and for the
//! requests queued when it started ("its batch"). Whatever way the leader leaves (done, failed,
//! or its future dropped by a timeout), its [`Handoff`] passes the lead to the first request
//! still waiting, with everything queued since as that one's batch; the key is forgotten only
//! when nobody waits. A follower waits at most `redis.timeout_ms` in all: for its turn and, when
//! it is handed the lead, for its own call.

use crate::limit::Rate;
use crate::store::redis::client::RedisFault;
use crate::store::redis::guarded;
use parking_lot::Mutex;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

const SHARDS: usize = 16;

/// One request's answer from Redis.
pub type Reply<V> = Result<V, RedisFault>;

/// What [`Coalescer::decide`] returns: the request's reply, and whether this request made the
/// Redis call behind it (the circuit breaker counts calls, not the requests that shared one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer<V> {
    pub reply: Reply<V>,
    pub own_call: bool,
}

impl<V> Answer<V> {
    fn shared(reply: Reply<V>) -> Self {
        Answer {
            reply,
            own_call: false,
        }
    }
}

/// An answer as one attempt of a guarded call: a request that only shared a call made by
/// another request of its tenant is not one more breaker outcome.
impl<V> guarded::Reply for Answer<V> {
    type Value = V;
    fn into_parts(self) -> (Reply<V>, bool) {
        (self.reply, self.own_call)
    }
}

/// Exact token-bucket requests decided together: same tenant, bucket size and cost.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BucketKey {
    pub tenant: String,
    pub rate: Rate,
    pub cost: u64,
}

/// A call's identity: requests with equal keys are decided by one call.
pub trait CallIdentity: Hash + Eq + Clone + 'static {}
impl<K: Hash + Eq + Clone + 'static> CallIdentity for K {}

/// What a waiting request is told.
enum Turn<K: CallIdentity, V: 'static> {
    /// Its decision.
    Done(Reply<V>),
    /// It leads now: call for itself and the batch the handoff carries.
    Lead(Handoff<'static, K, V>),
}

type Waiters<K, V> = Vec<oneshot::Sender<Turn<K, V>>>;
type Shard<K, V> = Mutex<Table<K, V>>;

/// A key with a call in flight: the requests queued behind that call, and the number that
/// tells this entry from a later one of the same key (the lead holds it, not the key).
struct Entry<K: CallIdentity, V: 'static> {
    key: K,
    id: u64,
    queued: Waiters<K, V>,
}

/// One shard's keys in flight, found by the hash computed once per request.
struct Table<K: CallIdentity, V: 'static> {
    entries: hashbrown::HashTable<Entry<K, V>>,
    next_id: u64,
}

impl<K: CallIdentity, V: 'static> Table<K, V> {
    /// True when no call is in flight in this shard.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

struct Shared<K: CallIdentity, V: 'static> {
    /// Keys with a call in flight, and the requests queued behind it.
    shards: Vec<Shard<K, V>>,
    hasher: crate::hashing::RandomState,
}

impl<K: CallIdentity, V: 'static> Shared<K, V> {
    /// The shard of a key hashed `hash`: chosen by bits the shard's table does not index by
    /// (its buckets take the low bits, its tags the top seven).
    fn shard(&self, hash: u64) -> &Shard<K, V> {
        &self.shards[((hash >> 32) as usize) % SHARDS]
    }
}

/// The coalescer's state as a lead holds it: borrowed by a request that leads at once (no
/// shared count touched on the quiet path), owned by a lead handed to another request's task.
enum Held<'a, K: CallIdentity, V: 'static> {
    Borrowed(&'a Arc<Shared<K, V>>),
    Owned(Arc<Shared<K, V>>),
}

impl<K: CallIdentity, V: 'static> Held<'_, K, V> {
    fn get(&self) -> &Arc<Shared<K, V>> {
        match self {
            Held::Borrowed(s) => s,
            Held::Owned(s) => s,
        }
    }
}

/// The lead of one key: the requests it must answer (`batch`) and, on drop, the passing of the
/// lead to the next waiting request (or forgetting the key when none waits). `entry` is the
/// key's hash and entry id while this handoff is armed.
struct Handoff<'a, K: CallIdentity, V: 'static> {
    shared: Held<'a, K, V>,
    entry: Option<(u64, u64)>,
    batch: Waiters<K, V>,
}

impl<K: CallIdentity, V: 'static> Drop for Handoff<'_, K, V> {
    fn drop(&mut self) {
        let Some((hash, id)) = self.entry.take() else {
            return;
        };
        let shared = self.shared.get();
        let mut table = shared.shard(hash).lock();
        let mut entry = table.entries.find_entry(hash, |e| e.id == id).ok();
        // Requests of an unanswered batch (the leader left early) come first.
        let mut queue = std::mem::take(&mut self.batch);
        if let Some(e) = entry.as_mut() {
            queue.append(&mut e.get_mut().queued);
        }
        while !queue.is_empty() {
            let next = queue.remove(0);
            let lead = Handoff {
                shared: Held::Owned(shared.clone()),
                entry: Some((hash, id)),
                batch: std::mem::take(&mut queue),
            };
            match next.send(Turn::Lead(lead)) {
                // The key stays in flight under its new leader.
                Ok(()) => return,
                // That request gave up waiting: take the batch back, disarmed, and try the next.
                Err(Turn::Lead(mut back)) => {
                    back.entry = None;
                    queue = std::mem::take(&mut back.batch);
                }
                Err(Turn::Done(_)) => unreachable!("a lead was sent"),
            }
        }
        if let Some(e) = entry {
            e.remove();
        }
    }
}

/// Per-instance coalescing of script calls with the same key `K` (a whole call's identity),
/// each request answered with a `V`.
pub struct Coalescer<K: CallIdentity, V: 'static> {
    shared: Arc<Shared<K, V>>,
    /// Longest a request waits for its turn (`redis.timeout_ms`).
    wait: Duration,
}

impl<K: CallIdentity, V: Clone + 'static> Coalescer<K, V> {
    /// A coalescer whose waiting requests give up after `wait` (`RedisFault::Timeout`).
    pub fn new(wait: Duration) -> Self {
        Coalescer {
            shared: Arc::new(Shared {
                shards: (0..SHARDS)
                    .map(|_| {
                        Mutex::new(Table {
                            entries: hashbrown::HashTable::new(),
                            next_id: 0,
                        })
                    })
                    .collect(),
                hasher: Default::default(),
            }),
            wait,
        }
    }

    /// Decides one request with call identity `key`: `call(n)` decides `n` such requests in
    /// one Redis call and returns their answers in order. It runs at once when no call for the
    /// key is in flight; otherwise this request joins the next batch.
    pub async fn decide<F, Fut>(&self, key: K, call: F) -> Answer<V>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<Vec<V>, RedisFault>>,
    {
        // Queue behind the call in flight, or mark the key in flight and lead. The key is
        // hashed once: the shard, the lookup and the handoff's removal all use that hash.
        let shared = &self.shared;
        let hash = shared.hasher.hash_one(&key);
        let queued = {
            let mut table = shared.shard(hash).lock();
            match table.entries.find_mut(hash, |e| e.key == key) {
                Some(entry) => {
                    let (tx, rx) = oneshot::channel();
                    entry.queued.push(tx);
                    Err(rx)
                }
                None => {
                    let id = table.next_id;
                    table.next_id = id.wrapping_add(1);
                    let entry = Entry {
                        key,
                        id,
                        queued: Vec::new(),
                    };
                    let rehash = |e: &Entry<K, V>| shared.hasher.hash_one(&e.key);
                    table.entries.insert_unique(hash, entry, rehash);
                    Ok(id)
                }
            }
        };
        // A request that waited and then leads calls within what is left of its wait; the one
        // that leads at once is bounded by its call alone (no second timer on the hot path).
        let (mut lead, deadline) = match queued {
            Err(rx) => {
                let deadline = tokio::time::Instant::now() + self.wait;
                match tokio::time::timeout_at(deadline, rx).await {
                    Ok(Ok(Turn::Done(reply))) => return Answer::shared(reply),
                    Ok(Ok(Turn::Lead(lead))) => (lead, Some(deadline)),
                    // The leader left with this request in its batch, unanswered.
                    Ok(Err(_)) => return Answer::shared(Err(RedisFault::Other)),
                    Err(_) => return Answer::shared(Err(RedisFault::Timeout)),
                }
            }
            Ok(id) => {
                let lead = Handoff {
                    shared: Held::Borrowed(shared),
                    entry: Some((hash, id)),
                    batch: Vec::new(),
                };
                (lead, None)
            }
        };
        let batch = std::mem::take(&mut lead.batch);
        let n = 1 + batch.len();
        let reply = match deadline {
            None => call(n).await,
            Some(deadline) => tokio::time::timeout_at(deadline, call(n))
                .await
                .unwrap_or(Err(RedisFault::Timeout)),
        };
        let mine = match reply {
            Ok(decisions) if decisions.len() == 1 + batch.len() => {
                let mut decisions = decisions.into_iter();
                let mine = decisions.next().ok_or(RedisFault::Other);
                for (tx, d) in batch.into_iter().zip(decisions) {
                    let _ = tx.send(Turn::Done(Ok(d)));
                }
                mine
            }
            other => {
                let fault = other.err().unwrap_or(RedisFault::Other);
                for tx in batch {
                    let _ = tx.send(Turn::Done(Err(fault)));
                }
                Err(fault)
            }
        };
        drop(lead);
        Answer {
            reply: mine,
            own_call: true,
        }
    }
}

#[cfg(test)]
mod tests;
