//! The live state's subscriber (docs/live-state.md#propagation): the pub/sub subscription that
//! makes a change (a key created, revoked, rotated; a block set or removed) known at once, and the version check every
//! `store.propagation` that bounds staleness when a message is lost or the subscription is down.
//! Both act through the *current* snapshot's live state (a reload may replace it); a change of
//! the limit overrides (message `<version> overrides`) has them read again.

use crate::config::RedisTopology;
use crate::live::overrides::{announces_overrides, Overrides};
use crate::observe::metrics::METRICS;
use crate::snapshot::{App, Snapshot};
use crate::store::redis::client::RedisStore;
use crate::store::redis::keys::live_channel;
use async_trait::async_trait;
use futures_util::StreamExt;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// How long the subscription waits before connecting again after it failed or ended.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);

/// How long a gateway waits for its live state (limit overrides, blocks, the keys' version)
/// before it serves: at start, before its listeners accept, and on a reload that replaced the
/// live state, before the new config serves (docs/live-state.md#at-start-and-on-a-reload).
pub const LOAD_WITHIN: Duration = Duration::from_secs(3);

/// Reads the live state of `snap` from `redis` (its overrides, blocks and version, in parallel),
/// bounded by [`LOAD_WITHIN`]. Returns whether all of it was read; what was not is read by the
/// version check, every `store.propagation`.
pub async fn load(snap: &Snapshot, redis: &RedisStore) -> bool {
    let overrides = async {
        match snap.live.as_ref().and_then(|l| l.overrides.as_ref()) {
            Some(o) => o.refresh(redis).await.is_ok(),
            None => true,
        }
    };
    let blocks = async {
        match &snap.blocks {
            Some(b) => b.reload(redis).await.is_ok(),
            None => true,
        }
    };
    let version = async {
        match &snap.live {
            Some(l) => l.version(redis).await.map(|v| l.checked(v)).is_ok(),
            None => true,
        }
    };
    let all = async {
        let (o, b, v) = tokio::join!(overrides, blocks, version);
        o && b && v
    };
    tokio::time::timeout(LOAD_WITHIN, all)
        .await
        .unwrap_or(false)
}

/// Loads the live state of `snap` before the gateway serves, with its own Redis client on a
/// runtime of its own (the server's runtimes do not run yet). When Redis does not answer within
/// [`LOAD_WITHIN`], the gateway starts anyway and says so: blocks and overrides apply once
/// the version check reads them, and a live key it cannot look up is a 503.
pub fn load_before_serving(snap: &Snapshot) {
    if snap.live.is_none() && snap.blocks.is_none() {
        return;
    }
    let Some(settings) = &snap.config.redis else {
        return;
    };
    let loaded = std::thread::scope(|s| {
        s.spawn(|| {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return false;
            };
            let Ok(redis) = RedisStore::new(settings) else {
                return false;
            };
            rt.block_on(load(snap, &redis))
        })
        .join()
        .unwrap_or(false)
    });
    if loaded {
        tracing::info!(
            blocks = snap.blocks.as_ref().map_or(0, |b| b.current().len()),
            overrides = snap
                .live
                .as_ref()
                .and_then(|l| l.overrides.as_ref())
                .map_or(0, |o| o.held()),
            "live state loaded before serving"
        );
    } else {
        tracing::warn!(
            within_s = LOAD_WITHIN.as_secs(),
            "live state not loaded: Redis did not answer; serving without blocks and limit \
             overrides until the version check reads them (every store.propagation)"
        );
    }
}

/// Background loops: the version check and the subscription.
pub struct LiveSync {
    pub app: Arc<App>,
}

#[async_trait]
impl BackgroundService for LiveSync {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let app = self.app.clone();
        let subscriber = tokio::spawn(async move { subscribe_forever(app).await });
        let mut shared = SharedDigests::default();
        loop {
            let snap = self.app.snapshot.load_full();
            if let Some(version) = check_version(&snap).await {
                shared.check(&snap, version).await;
            }
            let every = snap
                .config
                .store
                .as_ref()
                .map_or(Duration::from_secs(1), |s| s.propagation);
            drop(snap);
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = shutdown.changed() => {
                    if *shutdown.borrow() {
                        subscriber.abort();
                        return;
                    }
                }
            }
        }
    }
}

/// One version check: the limit overrides are read again when they changed; the live keys
/// drop their cache and the blocks load again when the store's version is not the one they saw.
/// Returns the version read (`None`: nothing to check, or Redis did not answer).
async fn check_version(snap: &Snapshot) -> Option<u64> {
    let quota = snap.quota.as_ref()?;
    if let Some(o) = snap.live.as_ref().and_then(|l| l.overrides.as_ref()) {
        refresh_overrides(o, &quota.redis).await;
    }
    let read = match (&snap.live, &snap.blocks) {
        (Some(live), _) => live.version(&quota.redis).await,
        (None, Some(blocks)) => blocks.version(&quota.redis).await,
        (None, None) => return None,
    };
    let v = match read {
        Ok(v) => v,
        Err(fault) => {
            tracing::debug!(kind = fault.as_str(), "live state version check failed");
            return None;
        }
    };
    if let Some(live) = &snap.live {
        if live.checked(v) {
            tracing::info!(
                version = v,
                "live state: a change came without its message; cache dropped"
            );
        }
    }
    if let Some(blocks) = &snap.blocks {
        if let Err(fault) = blocks.checked(&quota.redis, v).await {
            tracing::debug!(
                kind = fault.as_str(),
                "blocks could not be read; the last set stays"
            );
        }
    }
    Some(v)
}

/// The report of digests both in the file (`identity.api_keys`) and in the store: the file's
/// entry wins on the request path (the store is never asked for a key the file knows), so the
/// live key is unusable with that secret. Checked for each config and each store version: a
/// warning for each newly found key and the gauge `tollgate_live_keys_shadowed`.
#[derive(Default)]
struct SharedDigests {
    /// The config and version last checked.
    checked: Option<(Arc<Snapshot>, u64)>,
    /// The live key ids reported (warned about once while they stay shared).
    reported: HashSet<String>,
}

impl SharedDigests {
    async fn check(&mut self, snap: &Arc<Snapshot>, version: u64) {
        if let Some((s, v)) = &self.checked {
            if Arc::ptr_eq(s, snap) && *v == version {
                return;
            }
        }
        let (Some(live), Some(quota)) = (&snap.live, &snap.quota) else {
            return;
        };
        let file: Vec<(String, &str)> = snap
            .config
            .identity
            .api_keys
            .iter()
            .flat_map(|k| &k.keys)
            .map(|e| (hex::encode(e.sha256), e.tenant.as_str()))
            .collect();
        let shared = if live.settings.keys && !file.is_empty() {
            let digests: Vec<String> = file.iter().map(|(d, _)| d.clone()).collect();
            match live.shared_digests(&quota.redis, &digests).await {
                Ok(shared) => shared,
                Err(_) => return,
            }
        } else {
            Vec::new()
        };
        let now: HashSet<String> = shared.iter().map(|(_, id)| id.clone()).collect();
        for (digest, id) in &shared {
            if self.reported.contains(id) {
                continue;
            }
            let file_tenant = file.iter().find(|(d, _)| d == digest).map(|(_, t)| *t);
            tracing::warn!(
                key_id = %id,
                file_tenant,
                "a key issued through the admin API has the digest of a key in \
                 identity.api_keys: the file's entry wins; remove one of them"
            );
        }
        METRICS.live_keys_shadowed.set(now.len() as i64);
        self.reported = now;
        self.checked = Some((snap.clone(), version));
    }
}

/// The key prefix of the current live state (keys or blocks), if any.
fn live_prefix(snap: &Snapshot) -> Option<&str> {
    match (&snap.live, &snap.blocks) {
        (Some(l), _) => Some(l.prefix()),
        (None, Some(b)) => Some(b.prefix()),
        (None, None) => None,
    }
}

/// Reads the limit overrides again when they changed; on a fault the copy held stays in force.
async fn refresh_overrides(o: &Overrides, redis: &RedisStore) {
    match o.refresh(redis).await {
        Ok(true) => tracing::debug!(held = o.held(), "live limit overrides read again"),
        Ok(false) => {}
        Err(fault) => tracing::debug!(
            kind = fault.as_str(),
            "live limit overrides not read; the copy held stays in force"
        ),
    }
}

/// Subscribes to the current snapshot's channel (standalone and cluster modes; under sentinel
/// the version check alone propagates) and hands every message to its live keys; connects
/// again after [`RESUBSCRIBE_AFTER`] when the connection fails or is killed.
async fn subscribe_forever(app: Arc<App>) {
    loop {
        let snap = app.snapshot.load_full();
        let target = match (live_prefix(&snap), &snap.config.redis) {
            (Some(prefix), Some(redis))
                if !matches!(redis.mode, RedisTopology::Sentinel { .. }) =>
            {
                Some((redis.url.clone(), live_channel(prefix)))
            }
            _ => None,
        };
        drop(snap);
        if let Some((url, channel)) = target {
            if let Err(e) = subscribe(&app, &url, &channel).await {
                tracing::debug!(error = %e, "live state subscription ended");
            }
        }
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}

/// Whether the current snapshot still subscribes to `channel` on the Redis at `url`.
fn still_subscribed(snap: &Snapshot, url: &str, channel: &str) -> bool {
    live_prefix(snap).map(live_channel).as_deref() == Some(channel)
        && snap.config.redis.as_ref().is_some_and(|r| r.url == url)
}

/// One subscription, until its connection ends or a reload changes the channel or the Redis
/// (checked at each message and every [`RESUBSCRIBE_AFTER`]).
async fn subscribe(app: &App, url: &str, channel: &str) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    // Whatever changed while unsubscribed is found by the next version check.
    let mut messages = pubsub.on_message();
    loop {
        let msg = tokio::select! {
            m = messages.next() => match m {
                Some(m) => m,
                None => return Ok(()),
            },
            _ = tokio::time::sleep(RESUBSCRIBE_AFTER) => {
                if !still_subscribed(&app.snapshot.load(), url, channel) {
                    return Ok(());
                }
                continue;
            }
        };
        let Ok(text) = msg.get_payload::<String>() else {
            continue;
        };
        let snap = app.snapshot.load_full();
        if !still_subscribed(&snap, url, channel) {
            return Ok(());
        }
        if let Some(live) = &snap.live {
            live.announced(&text);
            if let (true, Some(quota)) = (announces_overrides(&text), &snap.quota) {
                let (live, quota) = (live.clone(), quota.clone());
                tokio::spawn(async move {
                    if let Some(o) = &live.overrides {
                        refresh_overrides(o, &quota.redis).await;
                    }
                });
            }
        }
        if let (Some(blocks), Some(quota)) = (&snap.blocks, &snap.quota) {
            if text.ends_with(crate::live::blocks::ANNOUNCED) {
                // Failing, the next version check loads them.
                let _ = blocks.reload(&quota.redis).await;
            }
        }
    }
}
