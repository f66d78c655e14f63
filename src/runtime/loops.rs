//! Every background loop of the process. Each acts through the *current* snapshot (a reload may
//! have replaced what it acts on) and ends when graceful shutdown starts; none runs on the
//! request path.

use super::ticker::run_every;
use crate::config::RegionMode;
use crate::pending::Owed;
use crate::quota::inflight::RENEW_TICK;
use crate::quota::lease::SWEEP_EVERY;
use crate::quota::QuotaService;
use crate::snapshot::App;
use crate::store::redis::membership::HEARTBEAT_EVERY;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Background loop: a heartbeat every [`HEARTBEAT_EVERY`] through the current snapshot's
/// tenant stage, when its `redis.fleet_size` is `auto`.
pub struct FleetHeartbeat {
    pub app: Arc<App>,
    /// Its shutdown-time act, counted until done (see [`run_every`]).
    pub owed: Owed,
}

#[async_trait]
impl BackgroundService for FleetHeartbeat {
    async fn start(&self, shutdown: ShutdownWatch) {
        let heartbeat = |q: Arc<QuotaService>, stopping: bool| async move {
            if !stopping {
                q.heartbeat().await;
            }
        };
        let retired = |_: Arc<QuotaService>| async {};
        run_every(
            &self.app,
            HEARTBEAT_EVERY,
            shutdown,
            &self.owed,
            heartbeat,
            retired,
        )
        .await;
    }
}

/// Background loop: every [`SWEEP_EVERY`], the current snapshot's tenant stage gives back the
/// tokens of expired leases; at shutdown, of every lease.
pub struct LeaseReturn {
    pub app: Arc<App>,
    /// Its shutdown-time act, counted until done (see [`run_every`]).
    pub owed: Owed,
}

#[async_trait]
impl BackgroundService for LeaseReturn {
    async fn start(&self, shutdown: ShutdownWatch) {
        let sweep = |q: Arc<QuotaService>, all: bool| async move { q.return_leases(all).await };
        // A stage retired by a reload to another store gives every lease back at once.
        let retired = |q: Arc<QuotaService>| async move { q.return_leases(true).await };
        run_every(&self.app, SWEEP_EVERY, shutdown, &self.owed, sweep, retired).await;
    }
}

/// Background loop: every `redis.lease_ttl` / 3 (asked every [`RENEW_TICK`]), the current
/// snapshot's tenant stage renews the fleet-wide concurrency leases of this instance's requests.
pub struct InflightRenew {
    pub app: Arc<App>,
    /// Its shutdown-time act, counted until done (see [`run_every`]).
    pub owed: Owed,
}

#[async_trait]
impl BackgroundService for InflightRenew {
    async fn start(&self, shutdown: ShutdownWatch) {
        let renew = |q: Arc<QuotaService>, stopping: bool| async move {
            if !stopping {
                q.renew_inflight_when_due().await;
            }
        };
        // A stage retired by a reload keeps its requests' leases until they end.
        let retired = |q: Arc<QuotaService>| async move { q.renew_inflight_when_due().await };
        run_every(&self.app, RENEW_TICK, shutdown, &self.owed, renew, retired).await;
    }
}

/// Background loop: one [`RegionBudget::sync_once`] every `sync_interval` of the current
/// snapshot's budget (sync mode only). Never on the request path.
pub struct RegionSync {
    pub app: Arc<App>,
}

#[async_trait]
impl BackgroundService for RegionSync {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            let region = self.app.snapshot.load().region.clone();
            let started = Instant::now();
            let every = match &region {
                Some(r) if r.settings.mode == RegionMode::Sync => {
                    r.sync_once().await;
                    r.settings.sync_interval
                }
                _ => Duration::from_secs(1),
            };
            // The period is `sync_interval` from start to start while an exchange is faster.
            let wait = every.saturating_sub(started.elapsed());
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => if *shutdown.borrow() { return; },
            }
        }
    }
}

/// One loop over the current snapshot's upstreams, running each health check when due.
pub struct HealthChecks {
    pub app: Arc<App>,
}

#[async_trait]
impl BackgroundService for HealthChecks {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut due: HashMap<usize, Instant> = HashMap::new();
        loop {
            let snap = self.app.snapshot.load_full();
            let now = Instant::now();
            let mut live = Vec::new();
            for upstream in snap.upstreams.values() {
                let Some(interval) = upstream.pool.check_interval else {
                    continue;
                };
                let id = Arc::as_ptr(&upstream.pool) as usize;
                live.push(id);
                if due.get(&id).is_none_or(|t| *t <= now) {
                    due.insert(id, now + interval);
                    upstream.pool.run_health_check().await;
                }
            }
            due.retain(|id, _| live.contains(id));
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = shutdown.changed() => if *shutdown.borrow() { return; },
            }
        }
    }
}
