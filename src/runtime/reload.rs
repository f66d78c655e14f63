//! Hot reload on SIGHUP (and, with `reload.watch`, on a change of the file): re-read the file, validate it exactly as `tollgate check` does, build a
//! complete new snapshot off the request threads, and swap it in atomically.
//!
//! A file that fails is rejected: the running config stays, the reason is logged with its field
//! path and `tollgate_config_reloads_total{result="error"}` increments. Settings that need a
//! restart (listen addresses, admin address, `server:`) are reported as "needs restart" and
//! otherwise ignored.

use crate::config::{self, Config, ConfigError};
use crate::observe::metrics::METRICS;
use crate::quota::QuotaService;
use crate::snapshot::{App, Snapshot};
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::signal::unix::{signal, SignalKind};

/// Records a successful load in metrics.
pub fn mark_loaded() {
    METRICS.reloads.with_label_values(&["ok"]).inc();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    METRICS.last_reload.set(now as i64);
    METRICS.last_reload_ok.set(1);
}

/// The SHA-256 of the config content whose warnings were logged last.
static WARNED_FOR: parking_lot::Mutex<Option<String>> = parking_lot::Mutex::new(None);

/// Logs every [`config::warnings`] of `config` (startup and each successful reload), once per
/// config content: a reload of an unchanged file (a SIGHUP, a touched file) repeats none.
pub fn log_warnings(config: &Config) {
    {
        let mut warned = WARNED_FOR.lock();
        if warned.as_deref() == Some(config.source.sha256.as_str()) {
            return;
        }
        *warned = Some(config.source.sha256.clone());
    }
    for w in config::warnings::warnings(config) {
        tracing::warn!(field = %w.path, reason = %w.reason, "config warning");
    }
}

/// A process-level setting a reload cannot change: its name (as reported), whether it
/// differs between two configs, and how to keep the running value in a new config.
struct RestartOnly {
    name: &'static str,
    differs: fn(&Config, &Config) -> bool,
    keep: fn(&mut Config, &Config),
}

/// Every restart-only setting, declared once. Listener certificate files are not among them:
/// they are re-read and swapped in by every reload.
const RESTART_ONLY: &[RestartOnly] = &[
    RestartOnly {
        name: "listen",
        differs: |a, b| {
            a.listen.len() != b.listen.len()
                || !a
                    .listen
                    .iter()
                    .zip(&b.listen)
                    .all(|(x, y)| x.same_socket(y))
        },
        keep: |new, running| new.listen = running.listen.clone(),
    },
    RestartOnly {
        name: "admin.listen",
        differs: |a, b| a.admin_listen != b.admin_listen,
        keep: |new, running| new.admin_listen = running.admin_listen,
    },
    RestartOnly {
        name: "decision.grpc.listen",
        differs: |a, b| {
            a.decision.grpc.as_ref().map(|g| g.listen) != b.decision.grpc.as_ref().map(|g| g.listen)
        },
        keep: |new, running| match (&mut new.decision.grpc, &running.decision.grpc) {
            (Some(n), Some(r)) => n.listen = r.listen,
            (n, r) => *n = r.clone(),
        },
    },
    RestartOnly {
        name: "server",
        differs: |a, b| a.server != b.server,
        keep: |new, running| new.server = running.server.clone(),
    },
    RestartOnly {
        name: "observability.log_format",
        differs: |a, b| a.observability.json_logs != b.observability.json_logs,
        keep: |new, running| new.observability.json_logs = running.observability.json_logs,
    },
    RestartOnly {
        name: "observability.log_buffer_bytes",
        differs: |a, b| a.observability.log_buffer_bytes != b.observability.log_buffer_bytes,
        keep: |new, running| {
            new.observability.log_buffer_bytes = running.observability.log_buffer_bytes
        },
    },
];

/// Names of the process-level settings that differ (they need a restart).
pub fn needs_restart(running: &Config, new: &Config) -> Vec<&'static str> {
    RESTART_ONLY
        .iter()
        .filter(|s| (s.differs)(running, new))
        .map(|s| s.name)
        .collect()
}

/// `new` with every restart-only setting that differs set back to its running value; returns
/// the names of those settings.
pub fn keep_restart_only(running: &Config, new: &mut Config) -> Vec<&'static str> {
    let mut kept = Vec::new();
    for s in RESTART_ONLY {
        if (s.differs)(running, new) {
            (s.keep)(new, running);
            kept.push(s.name);
        }
    }
    kept
}

/// Loads, validates and builds the file at `app.config_path`, then swaps it in.
/// Blocking work (file read, DNS, key files) runs on the blocking pool.
pub async fn reload(app: &Arc<App>) -> Result<(), Vec<ConfigError>> {
    let path = app.config_path.clone();
    let previous = app.snapshot.load_full();
    let old_quota = previous.quota.clone();
    let before = previous.clone();
    let built = tokio::task::spawn_blocking(move || {
        let mut new = config::load(&path)?;
        let restart = keep_restart_only(&previous.config, &mut new);
        if !restart.is_empty() {
            tracing::warn!(
                settings = ?restart,
                "reload: {} changed, needs restart; keeping the running values",
                restart.join(", ")
            );
        }
        Snapshot::build(new, Some(&previous))
    })
    .await
    .map_err(|e| vec![ConfigError::new("", format!("reload task failed: {e}"))])??;
    if let Some(edge) = &built.config.edge {
        app.edge_buckets.resize(edge.max_clients);
    }
    app.listener_certs.replace(&built.listener_tls);
    super::trace_export::apply(built.config.observability.tracing.as_ref());
    let carried_on =
        |old: &QuotaService| built.quota.as_ref().is_some_and(|q| q.keeps_leases_of(old));
    let retire = old_quota.filter(|old| !carried_on(old) && old.holds_leases());
    load_replaced_live_state(&before, &built).await;
    app.snapshot.store(Arc::new(built));
    // Its leases are given back (tokens) or kept renewed until their requests end (concurrency).
    if let Some(old) = retire {
        app.retire(old);
    }
    Ok(())
}

/// Reads the live state of `built` before it serves when the reload replaced it (a changed
/// `redis:`, `store:` or key prefix), so no request meets an empty block set or the file's
/// limits in between; bounded by [`super::live::LOAD_WITHIN`].
async fn load_replaced_live_state(previous: &Snapshot, built: &Snapshot) {
    let same = |a: Option<*const ()>, b: Option<*const ()>| a.is_none() || a == b;
    let live = |s: &Snapshot| s.live.as_ref().map(|l| Arc::as_ptr(l) as *const ());
    let blocks = |s: &Snapshot| s.blocks.as_ref().map(|b| Arc::as_ptr(b) as *const ());
    if same(live(built), live(previous)) && same(blocks(built), blocks(previous)) {
        return;
    }
    let Some(quota) = &built.quota else { return };
    if !super::live::load(built, &quota.redis).await {
        tracing::warn!(
            within_s = super::live::LOAD_WITHIN.as_secs(),
            "reload: the new live state was not read (Redis did not answer); its blocks and \
             limit overrides apply once the version check reads them"
        );
    }
}

/// Reloads as SIGHUP does and reports the outcome (metrics, log); `cause` names what asked.
async fn reload_and_report(app: &Arc<App>, cause: &'static str) {
    match reload(app).await {
        Ok(()) => {
            mark_loaded();
            log_warnings(&app.snapshot.load().config);
            tracing::info!(file = %app.config_path.display(), cause, "config reloaded");
        }
        Err(errors) => {
            METRICS.reloads.with_label_values(&["error"]).inc();
            METRICS.last_reload_ok.set(0);
            for e in &errors {
                let field = if e.path.is_empty() {
                    "(file)"
                } else {
                    e.path.as_str()
                };
                tracing::error!(field, reason = %e.reason, cause, "config reload rejected; keeping the running config");
            }
        }
    }
}

/// How often the watched file is read (`reload.watch`).
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Background service reloading on SIGHUP and, with `reload.watch`, when the config file's
/// content changes ([`FileWatch`]).
pub struct ReloadService {
    pub app: Arc<App>,
}

#[async_trait]
impl BackgroundService for ReloadService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut hangup = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot install the SIGHUP handler");
                return;
            }
        };
        let path = self.app.config_path.clone();
        let mut watch = FileWatch::default();
        watch.loaded(read_digest(&path).await);
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = hangup.recv() => {
                    watch.loaded(read_digest(&path).await);
                    reload_and_report(&self.app, "SIGHUP").await;
                }
                _ = tick.tick() => {
                    let settings = self.app.snapshot.load().config.reload.clone();
                    if !settings.watch {
                        continue;
                    }
                    let seen = read_digest(&path).await;
                    if watch.observe(seen, Instant::now(), settings.debounce) {
                        tracing::info!(file = %path.display(), "config file changed");
                        reload_and_report(&self.app, "file change").await;
                    }
                }
                _ = shutdown.changed() => {
                    if *shutdown.borrow() { return; }
                }
            }
        }
    }
}

/// SHA-256 of the file at `path` (following symlinks, as a ConfigMap mount's `..data` swap
/// needs), `None` while it cannot be read (e.g. between an editor's delete and rename).
async fn read_digest(path: &Path) -> Option<[u8; 32]> {
    let path = path.to_path_buf();
    let bytes = tokio::task::spawn_blocking(move || std::fs::read(path))
        .await
        .ok()?
        .ok()?;
    Some(Sha256::digest(&bytes).into())
}

/// The debounce of the file watch (pure, on an injected clock). A reload is due when the file's
/// content differs from the content last loaded and has stayed the same for the debounce. A
/// content that failed to load is not retried until the file changes again.
#[derive(Debug, Default)]
pub struct FileWatch {
    /// Digest of the content last loaded (or refused); `None` until the first read.
    loaded: Option<[u8; 32]>,
    /// A changed content and when it was first seen.
    pending: Option<([u8; 32], Instant)>,
}

impl FileWatch {
    /// Records that the content `digest` was (or is about to be) loaded by other means (SIGHUP).
    pub fn loaded(&mut self, digest: Option<[u8; 32]>) {
        if digest.is_some() {
            self.loaded = digest;
        }
        self.pending = None;
    }

    /// One read of the file (`None`: unreadable) at `now`; true when it should be reloaded now,
    /// after which its content counts as loaded.
    pub fn observe(&mut self, seen: Option<[u8; 32]>, now: Instant, debounce: Duration) -> bool {
        let Some(seen) = seen else {
            return false;
        };
        let Some(loaded) = self.loaded else {
            // The first read sets the baseline: the running config came from this file.
            self.loaded = Some(seen);
            return false;
        };
        if seen == loaded {
            self.pending = None;
            return false;
        }
        match self.pending {
            Some((digest, since)) if digest == seen => {
                if now.duration_since(since) >= debounce {
                    self.loaded = Some(seen);
                    self.pending = None;
                    return true;
                }
                false
            }
            _ => {
                self.pending = Some((seen, now));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests;
