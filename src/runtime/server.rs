//! Assembles the Pingora server: proxy service on the `listen` addresses, admin listener,
//! SIGHUP reload and the upstream health-check loop, with our own `server:` settings
//! (threads, grace period) instead of Pingora's defaults.

use super::idle_exit::IdleExit;
use super::loops;
use super::redis_home::RedisHome;
use super::reload::{mark_loaded, ReloadService};
use crate::admin::AdminService;
use crate::config::{self, ConfigError};
use crate::pending;
use crate::proxy::conn_limit::ConnectionLimits;
use crate::proxy::Proxy;
use crate::snapshot::{App, Snapshot};
use async_trait::async_trait;
use pingora::apps::{HttpServerOptions, ServerApp};
use pingora::listeners::{L4BufferSettings, ListenerConfig};
use pingora::protocols::Stream;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::{RunArgs, Server, ShutdownWatch};
use pingora::services::background::background_service;
use pingora::services::ServiceHandle;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Loads and builds a config file exactly as a reload does (used by `run` and `check`).
pub fn load_snapshot(path: &Path) -> Result<Snapshot, Vec<ConfigError>> {
    let config = config::load(path)?;
    Snapshot::build(config, None)
}

/// Runs the gateway until shutdown: the end of Pingora's run, or earlier, once a graceful
/// shutdown has nothing left to wait for ([`IdleExit`]). `upgrade` takes the listening sockets over from a running
/// instance (Pingora's zero-downtime upgrade, with SIGQUIT sent to the old process).
pub fn run(path: &Path, upgrade: bool) -> Result<(), Vec<ConfigError>> {
    let snapshot = load_snapshot(path)?;
    mark_loaded();
    crate::runtime::reload::log_warnings(&snapshot.config);
    let cfg = snapshot.config.clone();
    let mut conf = ServerConf {
        threads: cfg.server.threads,
        work_stealing: cfg.server.work_stealing,
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

    super::trace_export::apply(snapshot.config.observability.tracing.as_ref());
    // Before any listener accepts: a block or an override set before the start is in force
    // on the first request.
    super::live::load_before_serving(&snapshot);
    let app = Arc::new(App::new(snapshot, path.to_path_buf()));
    let drain = Duration::from_millis(500).min(Duration::from_secs(cfg.server.grace_period_s) / 2);
    let addrs: Vec<_> = cfg.listen.iter().map(|l| l.addr).collect();
    let limits = &cfg.server.http;
    let conns = ConnectionLimits::new(
        &addrs,
        limits.max_connections,
        limits.max_connections_per_client,
    );
    // Pingora's h2c switch is per service: plain listeners with `h2: true` get their own.
    let (h2c, other): (Vec<_>, Vec<_>) =
        (0..cfg.listen.len()).partition(|&i| cfg.listen[i].h2 && cfg.listen[i].tls.is_none());
    // The first proxy service is the Redis connections' home; the services that call Redis from
    // their own runtime start after it.
    let mut home = None;
    for (name, listeners, h2c) in [
        ("tollgate proxy", other, false),
        ("tollgate proxy h2c", h2c, true),
    ] {
        if listeners.is_empty() {
            continue;
        }
        let mut inner =
            pingora::proxy::http_proxy(&server.configuration, Proxy { app: app.clone() });
        inner.h2_options = Some(h2_options(&cfg.server.http));
        if h2c {
            let mut options = HttpServerOptions::default();
            options.h2c = true;
            inner.server_options = Some(options);
        }
        let mut proxy = pingora::services::listening::Service::new(
            name.to_string(),
            DrainingProxy {
                inner: Arc::new(inner),
                drain,
                limits: cfg.server.http.clone(),
                conns: conns.clone(),
                stop: tokio::sync::watch::channel(false).0,
                h2c,
            },
        );
        for i in listeners {
            add_listener(&mut proxy, &app, i).map_err(|e| vec![e])?;
        }
        if home.is_none() {
            home = Some(server.add_service(RedisHome(proxy)));
        } else {
            server.add_service(proxy);
        }
    }
    let after_home = |service: &ServiceHandle| {
        if let Some(home) = &home {
            service.add_dependency(home);
        }
    };
    if let Some(listen) = cfg.admin_listen {
        after_home(&server.add_service(background_service(
            "admin",
            AdminService {
                app: app.clone(),
                listen,
            },
        )));
    }
    if let Some(grpc) = &cfg.decision.grpc {
        after_home(&server.add_service(background_service(
            "decision grpc",
            crate::decision::grpc::GrpcService {
                app: app.clone(),
                listen: grpc.listen,
            },
        )));
    }
    if let Some(http) = &cfg.decision.http {
        after_home(&server.add_service(background_service(
            "decision http",
            crate::decision::http::HttpService {
                app: app.clone(),
                listen: http.listen,
            },
        )));
    }
    server.add_service(background_service(
        "reload",
        ReloadService { app: app.clone() },
    ));
    after_home(&server.add_service(background_service(
        "fleet heartbeat",
        loops::FleetHeartbeat {
            app: app.clone(),
            owed: pending::owed(),
        },
    )));
    after_home(&server.add_service(background_service(
        "lease return",
        loops::LeaseReturn {
            app: app.clone(),
            owed: pending::owed(),
        },
    )));
    after_home(&server.add_service(background_service(
        "concurrency lease renewal",
        loops::InflightRenew {
            app: app.clone(),
            owed: pending::owed(),
        },
    )));
    after_home(&server.add_service(background_service(
        "region sync",
        loops::RegionSync { app: app.clone() },
    )));
    server.add_service(background_service(
        "jwks refresh",
        super::jwks::JwksRefresh { app: app.clone() },
    ));
    after_home(&server.add_service(background_service(
        "live state sync",
        super::live::LiveSync { app: app.clone() },
    )));
    server.add_service(background_service(
        "health checks",
        loops::HealthChecks { app },
    ));
    let (done, ended) = std::sync::mpsc::channel();
    server.add_service(background_service(
        "idle exit",
        IdleExit {
            drain,
            done: std::sync::Mutex::new(done.clone()),
        },
    ));
    let listen: Vec<String> = cfg
        .listen
        .iter()
        .map(|l| {
            let proto = match (&l.tls, l.h2) {
                (Some(_), true) => "https+h2",
                (Some(_), false) => "https",
                (None, true) => "http+h2c",
                (None, false) => "http",
            };
            format!("{proto}://{}", l.addr)
        })
        .collect();
    tracing::info!(listen = ?listen, admin = ?cfg.admin_listen, threads = cfg.server.threads, "tollgate starting");
    // Pingora's run sleeps the whole grace period on its thread; returning here first ends the
    // process (the caller flushes the logs on return). No pid file to remove: Pingora writes
    // `server.pid_file` only when it daemonizes, which tollgate never asks for.
    let pingora = std::thread::Builder::new()
        .name("pingora-server".into())
        .spawn(move || {
            server.run(RunArgs::default());
            let _ = done.send(());
        })
        .map_err(|e| {
            vec![ConfigError::new(
                "server",
                format!("cannot start the server thread: {e}"),
            )]
        })?;
    let _ = ended.recv();
    if pingora.is_finished() {
        let _ = pingora.join();
    }
    super::trace_export::stop();
    Ok(())
}

/// Concurrent streams one HTTP/2 client connection may open (announced in SETTINGS; further
/// streams are refused by the protocol). nginx `http2_max_concurrent_streams` is 128, Envoy's
/// default is much higher; 100 keeps one connection's share of the upstream slots bounded.
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 100;

/// Least request header block limit per HTTP/2 stream, bytes (decoded).
pub const H2_MAX_HEADER_LIST_BYTES: u32 = 64 * 1024;

/// Server-side HTTP/2 settings of every proxy listener. The header block limit (HPACK counts
/// 32 bytes more per field than its `name: value`) stays above what `server.max_header_bytes`
/// and `server.max_headers` let through, so the head checks answer an over-long HTTP/2 head
/// the way they answer an HTTP/1 one (docs/http-hardening.md#request-head-errors).
fn h2_options(
    limits: &crate::config::HttpLimits,
) -> pingora::protocols::http::v2::server::H2Options {
    let ours = limits.max_header_bytes + 32 * (limits.max_headers + 4);
    let list = u32::try_from(ours)
        .unwrap_or(u32::MAX)
        .max(H2_MAX_HEADER_LIST_BYTES);
    let mut options = pingora::protocols::http::v2::server::H2Options::new();
    options
        .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS)
        .max_header_list_size(list);
    options
}

/// Read buffer of a TLS connection's socket, bytes: one TLS record (16 KiB of plaintext plus
/// its framing), so a record is one read. Pingora's default is 64 KiB per connection, allocated
/// at accept and held while the connection idles.
const TLS_READ_BUFFER: usize = 17 * 1024;

/// Write buffer of a client connection's socket, bytes (Pingora's default: one typical MSS).
const WRITE_BUFFER: usize = 1460;

/// Adds listener `index` of the running config to `service`: plain TCP, or TLS with the
/// listener's certificate resolver (SNI, reloadable), ALPN h2 and client CA.
///
/// A plain connection's socket has no read buffer: the HTTP/1 front end and Pingora read into
/// their own buffers, and a buffer of Pingora's default size (64 KiB) was most of what an
/// idle connection cost (bench/RESULTS.md).
fn add_listener<A>(
    service: &mut pingora::services::listening::Service<A>,
    app: &App,
    index: usize,
) -> Result<(), ConfigError> {
    let snap = app.snapshot.load();
    let listen = &snap.config.listen[index];
    let addr = listen.addr.to_string();
    let endpoint = ListenerConfig::tcp(addr);
    let endpoint = match (
        &snap.listener_tls[index],
        app.listener_certs.resolver(index),
    ) {
        (Some(loaded), Some(resolver)) => {
            let settings = crate::tls::listener::tls_settings(loaded, resolver, listen.h2)
                .map_err(|e| ConfigError::new(format!("listen[{index}].tls"), e))?;
            endpoint
                .tls(settings)
                .l4_buffer(L4BufferSettings::new(TLS_READ_BUFFER, WRITE_BUFFER))
        }
        _ => endpoint.l4_buffer(L4BufferSettings::new(0, WRITE_BUFFER)),
    };
    service.add_listener(endpoint);
    Ok(())
}

/// The proxy app with a short drain before Pingora's cleanup. Cleanup aborts every keep-alive
/// connection parked waiting for its next request; during a binary upgrade or graceful shutdown
/// a client may be writing a request on such a connection at that instant. The drain lets those
/// requests be read and answered (with `Connection: close`) first.
///
/// HTTP/1 connections are served by [`crate::proxy::front`], which reads each request head within
/// `server:`'s limits before Pingora parses it; `stop` tells its idle connections to close at
/// cleanup, as Pingora does for its own parked reads.
struct DrainingProxy {
    inner: Arc<pingora::proxy::HttpProxy<Proxy>>,
    drain: Duration,
    limits: crate::config::HttpLimits,
    /// Open connections per listener and client address (`server.max_connections*`).
    conns: Arc<ConnectionLimits>,
    stop: tokio::sync::watch::Sender<bool>,
    /// Cleartext HTTP/2 (prior knowledge) is accepted on this service's listeners.
    h2c: bool,
}

#[async_trait]
impl ServerApp for DrainingProxy {
    async fn process_new(
        self: &Arc<Self>,
        session: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        let stop = self.stop.subscribe();
        let (limits, conns) = (&self.limits, &self.conns);
        crate::proxy::front::serve(
            &self.inner,
            limits,
            conns,
            self.h2c,
            session,
            shutdown,
            stop,
        )
        .await
    }

    async fn cleanup(&self) {
        tokio::time::sleep(self.drain).await;
        self.stop.send_replace(true);
        self.inner.cleanup().await;
    }
}
