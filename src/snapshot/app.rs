//! The process-lived state around the current snapshot: what outlives a reload (edge buckets,
//! listener certificates, tier fit, the shutdown flag).

use super::Snapshot;
use crate::edge::BucketStore;
use crate::quota::QuotaService;
use crate::store::memory::algo_store::AlgoStore;
use arc_swap::ArcSwap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// State shared by all requests and all snapshots of one process.
pub struct App {
    /// The current snapshot.
    pub snapshot: ArcSwap<Snapshot>,
    /// Edge buckets, kept across reloads.
    pub edge_buckets: BucketStore,
    /// Edge state when `edge.algorithm: gcra`: created on first use, sized by the
    /// `edge.max_clients` then in force (not resized by later reloads).
    edge_cells: std::sync::OnceLock<AlgoStore<std::net::IpAddr>>,
    /// The config file (re-read on SIGHUP).
    pub config_path: PathBuf,
    /// Set once graceful shutdown starts (`/readyz` answers 503).
    pub shutting_down: AtomicBool,
    /// Origin of the monotonic millisecond clock used by in-memory buckets.
    pub epoch: Instant,
    /// Certificate resolvers of the TLS listeners (updated by every successful reload).
    pub listener_certs: crate::tls::ListenerCerts,
    /// Per-tenant tier fit of this instance (admin API, metrics).
    pub tier_fit: crate::observe::tier_fit::TierFit,
    /// Tenant stages a reload replaced by one on another store while they still held leases
    /// there: the background loops give their token leases back and renew their requests'
    /// concurrency leases until none is left ([`retire`](Self::retire)).
    retired: parking_lot::Mutex<Vec<Arc<QuotaService>>>,
}

impl App {
    /// Shared state around a first snapshot.
    pub fn new(snapshot: Snapshot, config_path: PathBuf) -> Self {
        let max_clients = snapshot
            .config
            .edge
            .as_ref()
            .map(|e| e.max_clients)
            .unwrap_or(1);
        App {
            listener_certs: crate::tls::ListenerCerts::new(&snapshot.listener_tls),
            snapshot: ArcSwap::from_pointee(snapshot),
            edge_buckets: BucketStore::new(max_clients),
            edge_cells: std::sync::OnceLock::new(),
            config_path,
            shutting_down: AtomicBool::new(false),
            epoch: Instant::now(),
            tier_fit: Default::default(),
            retired: Default::default(),
        }
    }

    /// Keeps `old`, a tenant stage the current snapshot no longer uses and whose leases its
    /// successor does not carry on (another store or key prefix), until it holds no lease.
    pub fn retire(&self, old: Arc<QuotaService>) {
        let mut retired = self.retired.lock();
        if !retired.iter().any(|q| Arc::ptr_eq(q, &old)) {
            retired.push(old);
        }
    }

    /// The retired tenant stages that still hold leases (the others are let go).
    pub fn retired(&self) -> Vec<Arc<QuotaService>> {
        let mut retired = self.retired.lock();
        retired.retain(|q| q.holds_leases());
        retired.clone()
    }

    /// The edge's GCRA state (see `edge_cells`), created with `max_clients` on first use.
    pub fn edge_cells(&self, max_clients: usize) -> &AlgoStore<std::net::IpAddr> {
        self.edge_cells.get_or_init(|| AlgoStore::new(max_clients))
    }

    /// Milliseconds since process start (monotonic).
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}
