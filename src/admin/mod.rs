//! Admin listener: `/metrics` (Prometheus text), `/healthz` (liveness + limiter health detail),
//! `/readyz` (503 once graceful shutdown starts), and the admin API under `/v1` ([`v1`]: tenant
//! state and reset, explain, config, status, its OpenAPI document; Bearer `admin.token_env`),
//! with the operator console over it at `/ui` ([`console`]).
//!
//! Served by hyper on its own background service rather than a Pingora listening service,
//! because Pingora stops accepting on its listeners when shutdown starts, and `/readyz` must
//! keep answering 503 through the grace period.

pub mod audit;
pub mod blocks;
pub mod config_view;
pub mod console;
pub mod explain;
pub mod keys;
pub mod limit_source;
pub mod limits;
pub mod recent;
pub mod reply;
pub mod rule_limits;
pub mod rules_view;
pub mod status;
pub mod tenants;
pub mod v1;

use crate::observe::metrics::METRICS;
use crate::snapshot::App;
use crate::store::redis::breaker::BreakerState;
use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The admin HTTP service.
pub struct AdminService {
    pub app: Arc<App>,
    pub listen: SocketAddr,
}

fn reply(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("Content-Type", content_type)
        .body(Full::new(body.into()))
        .unwrap_or_default()
}

/// Answers one admin request.
pub fn handle(app: &App, path: &str) -> Response<Full<Bytes>> {
    match path {
        "/metrics" => {
            METRICS.edge_tracked.set(app.edge_buckets.len() as i64);
            let evicted = app.edge_buckets.evictions();
            let counted = METRICS.edge_evictions.get();
            if evicted > counted {
                METRICS.edge_evictions.inc_by(evicted - counted);
            }
            // Tenant ids become labels only when opted in (observability.tenant_metrics).
            let top = app.snapshot.load().config.observability.tenant_metrics;
            app.tier_fit
                .export_metrics(top, crate::observe::tier_fit::unix_ms());
            reply(200, "text/plain; version=0.0.4", METRICS.render())
        }
        "/healthz" => {
            let snap = app.snapshot.load();
            let (breaker, degraded) = snap
                .quota
                .as_ref()
                .map(|q| (q.breaker_state(), q.degraded()))
                .unwrap_or((BreakerState::Closed, false));
            // Degraded from the first decision that fell back, before the breaker opens.
            let limiter = if degraded { "degraded" } else { "ok" };
            let body = serde_json::json!({
                "status": "ok",
                "limiter": limiter,
                "redis_breaker": breaker.as_str(),
            });
            reply(200, "application/json", body.to_string())
        }
        "/readyz" => {
            let snap = app.snapshot.load();
            let now = std::time::Instant::now();
            let keyless: Vec<&str> = snap
                .auth
                .issuers()
                .iter()
                .filter(|i| i.current(now).is_none())
                .map(|i| i.settings.issuer.as_str())
                .collect();
            if app.shutting_down.load(Ordering::Relaxed) {
                reply(503, "text/plain", "shutting down\n")
            } else if !keyless.is_empty() {
                let body = format!("no JWKS keys for issuer(s): {}\n", keyless.join(", "));
                reply(503, "text/plain", body)
            } else {
                reply(200, "text/plain", "ready\n")
            }
        }
        _ => reply(404, "text/plain", "not found\n"),
    }
}

/// Answers one admin request: `/ui` through [`console::answer`], `/v1/*` through
/// [`v1::admit`] (token) and [`v1::handle`] (its body read up to [`v1::MAX_BODY_BYTES`]),
/// everything else through [`handle`].
pub async fn serve(app: &App, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    if console::is_console(&path) {
        let api_on = app.snapshot.load().admin_token.is_some();
        return console::answer(api_on, req.method(), &path);
    }
    if path != "/v1" && !path.starts_with("/v1/") {
        return handle(app, &path);
    }
    let (parts, body) = req.into_parts();
    // The token decides first: an unauthenticated call is 401 (404 while the API is off)
    // whatever its body. The body is still read (up to the limit) before any answer, as it
    // always was, so the client reads the answer rather than a connection reset.
    let admitted = v1::admit(app, &parts.headers);
    let body = Limited::new(body, v1::MAX_BODY_BYTES).collect().await;
    let (snap, caller) = match admitted {
        Ok(admitted) => admitted,
        Err(reply) => return reply,
    };
    let body = match body {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            let p = crate::response::Problem::status(
                413,
                format!(
                    "admin request bodies are limited to {} bytes",
                    v1::MAX_BODY_BYTES
                ),
            );
            return reply::problem_reply(&p, &[]);
        }
    };
    // Boxed: the handlers' Redis futures are deep (see `pipeline::tenant::run`).
    Box::pin(v1::handle(
        app,
        &snap,
        &caller,
        &parts.method,
        &path,
        query.as_deref(),
        body,
    ))
    .await
}

/// Binds with SO_REUSEPORT so a new binary started with `--upgrade` can serve admin requests
/// while the old one is still draining.
fn bind_shared(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

#[async_trait]
impl BackgroundService for AdminService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        // Answer only once the proxy listeners accept, so "admin up" means "gateway up".
        let proxies = self.app.snapshot.load().config.listen.clone();
        for listen in proxies.iter() {
            let addr = listen.addr;
            // A handshake for TLS listeners (unless they demand client certificates).
            let tls = listen
                .tls
                .as_ref()
                .is_some_and(|t| t.client_ca_file.is_none());
            let target = if addr.ip().is_unspecified() {
                SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
            } else {
                addr
            };
            for _ in 0..500 {
                if crate::tls::probe::accepts(target, tls).await {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
        // ... and once the Redis connection is made (at most 2 s), so the first requests do not
        // pay its set-up inside `redis.timeout_ms` (QuotaService::warm_up).
        let quota = self.app.snapshot.load().quota.clone();
        if let Some(quota) = quota {
            if !quota.warm_up(std::time::Duration::from_secs(2)).await {
                tracing::warn!("redis did not answer a PING within 2 s of start; serving anyway");
            }
        }
        let listener = match bind_shared(self.listen) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(addr = %self.listen, error = %e, "admin listener failed to bind");
                return;
            }
        };
        tracing::info!(addr = %self.listen, "admin listener ready");
        // The per-minute decisions of `GET /v1/status` sample the counters each second.
        let mut sampling = tokio::time::interval(std::time::Duration::from_secs(1));
        sampling.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = sampling.tick() => {
                    recent::sample_now(crate::observe::tier_fit::unix_ms(), status::tenant_totals)
                }
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let app = self.app.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                            let app = app.clone();
                            async move {
                                let _busy = crate::pending::busy(crate::pending::Work::Request);
                                Ok::<_, std::convert::Infallible>(serve(&app, req).await)
                            }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                changed = shutdown.changed(), if !self.app.shutting_down.load(Ordering::Relaxed) => {
                    if changed.is_err() || *shutdown.borrow() {
                        self.app.shutting_down.store(true, Ordering::Relaxed);
                        tracing::info!("graceful shutdown started: /readyz now answers 503");
                    }
                }
            }
        }
    }
}
