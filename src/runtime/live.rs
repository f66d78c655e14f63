//! The live state's subscriber (docs/live-state.md#propagation): the pub/sub subscription that
//! makes a change (a key created, revoked, rotated; a block set or removed) known at once, and the version check every
//! `store.propagation` that bounds staleness when a message is lost or the subscription is down.
//! Both act through the *current* snapshot's live state (a reload may replace it); a change of
//! the limit overrides (message `<version> overrides`) has them read again.

use crate::config::RedisTopology;
use crate::live::overrides::{announces_overrides, Overrides};
use crate::snapshot::{App, Snapshot};
use crate::store::redis::client::RedisStore;
use crate::store::redis::keys::live_channel;
use async_trait::async_trait;
use futures_util::StreamExt;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::sync::Arc;
use std::time::Duration;

/// How long the subscription waits before connecting again after it failed or ended.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);

/// Background loops: the version check and the subscription.
pub struct LiveSync {
    pub app: Arc<App>,
}

#[async_trait]
impl BackgroundService for LiveSync {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let app = self.app.clone();
        let subscriber = tokio::spawn(async move { subscribe_forever(app).await });
        loop {
            let snap = self.app.snapshot.load_full();
            check_version(&snap).await;
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
async fn check_version(snap: &Snapshot) {
    let Some(quota) = &snap.quota else { return };
    if let Some(o) = snap.live.as_ref().and_then(|l| l.overrides.as_ref()) {
        refresh_overrides(o, &quota.redis).await;
    }
    let read = match (&snap.live, &snap.blocks) {
        (Some(live), _) => live.version(&quota.redis).await,
        (None, Some(blocks)) => blocks.version(&quota.redis).await,
        (None, None) => return,
    };
    let v = match read {
        Ok(v) => v,
        Err(fault) => {
            tracing::debug!(kind = fault.as_str(), "live state version check failed");
            return;
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

/// One subscription, until its connection ends or the channel changes.
async fn subscribe(app: &App, url: &str, channel: &str) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    // Whatever changed while unsubscribed is found by the next version check.
    let mut messages = pubsub.on_message();
    while let Some(msg) = messages.next().await {
        let Ok(text) = msg.get_payload::<String>() else {
            continue;
        };
        let snap = app.snapshot.load_full();
        if live_prefix(&snap).map(live_channel).as_deref() != Some(channel) {
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
    Ok(())
}
