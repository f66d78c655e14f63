//! Assembles the Pingora server: proxy service on the `listen` addresses, admin listener,
//! SIGHUP reload and the upstream health-check loop, with our own `server:` settings
//! (threads, grace period) instead of Pingora's defaults.

use crate::admin::AdminService;
use crate::config::{self, ConfigError};
use crate::proxy::Proxy;
use crate::reload::{mark_loaded, ReloadService};
use crate::snapshot::{App, Snapshot};
use async_trait::async_trait;
use pingora::apps::ServerApp;
use pingora::protocols::Stream;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::{RunArgs, Server, ShutdownWatch};
use pingora::services::background::{background_service, BackgroundService};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Loads and builds a config file exactly as a reload does (used by `run` and `check`).
pub fn load_snapshot(path: &Path) -> Result<Snapshot, Vec<ConfigError>> {
    let config = config::load(path)?;
    Snapshot::build(config, None)
}

/// Runs the gateway until shutdown. `upgrade` takes the listening sockets over from a running
/// instance (Pingora's zero-downtime upgrade, with SIGQUIT sent to the old process).
pub fn run(path: &Path, upgrade: bool) -> Result<(), Vec<ConfigError>> {
    let snapshot = load_snapshot(path)?;
    mark_loaded();
    let cfg = snapshot.config.clone();
    let mut conf = ServerConf {
        threads: cfg.server.threads,
        grace_period_seconds: Some(cfg.server.grace_period_s),
        graceful_shutdown_timeout_seconds: Some(cfg.server.graceful_shutdown_timeout_s),
        upgrade_sock: cfg.server.upgrade_sock.clone(),
        pid_file: cfg.server.pid_file.clone(),
        ..ServerConf::default()
    };
    conf.daemon = false;
    let opt = Opt {
        upgrade,
        ..Opt::default()
    };
    let mut server = Server::new_with_opt_and_conf(opt, conf);
    server.bootstrap();

    let app = Arc::new(App::new(snapshot, path.to_path_buf()));
    let drain = Duration::from_millis(500).min(Duration::from_secs(cfg.server.grace_period_s) / 2);
    let mut proxy = pingora::services::listening::Service::new(
        "tollgate proxy".to_string(),
        DrainingProxy {
            inner: Arc::new(pingora::proxy::http_proxy(
                &server.configuration,
                Proxy { app: app.clone() },
            )),
            drain,
        },
    );
    for addr in &cfg.listen {
        proxy.add_tcp(&addr.to_string());
    }
    server.add_service(proxy);
    if let Some(listen) = cfg.admin_listen {
        server.add_service(background_service(
            "admin",
            AdminService {
                app: app.clone(),
                listen,
            },
        ));
    }
    server.add_service(background_service(
        "reload",
        ReloadService { app: app.clone() },
    ));
    server.add_service(background_service(
        "fleet heartbeat",
        crate::quota::fleet::FleetHeartbeat { app: app.clone() },
    ));
    server.add_service(background_service(
        "region sync",
        crate::region::RegionSync { app: app.clone() },
    ));
    server.add_service(background_service("health checks", HealthChecks { app }));
    tracing::info!(listen = ?cfg.listen, admin = ?cfg.admin_listen, threads = cfg.server.threads, "tollgate starting");
    server.run(RunArgs::default());
    Ok(())
}

/// The proxy app with a short drain before Pingora's cleanup. Cleanup aborts every keep-alive
/// connection parked waiting for its next request; during a binary upgrade or graceful shutdown
/// a client may be writing a request on such a connection at that instant. The drain lets those
/// requests be read and answered (with `Connection: close`) first.
struct DrainingProxy {
    inner: Arc<pingora::proxy::HttpProxy<Proxy>>,
    drain: Duration,
}

#[async_trait]
impl ServerApp for DrainingProxy {
    async fn process_new(
        self: &Arc<Self>,
        session: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        self.inner.process_new(session, shutdown).await
    }

    async fn cleanup(&self) {
        tokio::time::sleep(self.drain).await;
        self.inner.cleanup().await;
    }
}

/// One loop over the current snapshot's upstreams, running each health check when due.
struct HealthChecks {
    app: Arc<App>,
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
