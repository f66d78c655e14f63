//! Backends of one upstream: round robin over healthy backends, with an active HTTP health check
//! run by one long-lived background loop over the current snapshot (see `server`).

use crate::config::{H2Settings, UpstreamSettings, UpstreamTls};
use crate::tls::upstream::PeerTls;
use pingora::http::RequestHeader;
use pingora::lb::health_check::HttpHealthCheck;
use pingora::lb::selection::RoundRobin;
use pingora::lb::{Backend, LoadBalancer};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A load-balanced pool of backends. Carried over a reload while its backends and health check
/// are unchanged, so health state is not lost.
pub struct Pool {
    lb: LoadBalancer<RoundRobin>,
    /// The backends in config order, for round robin without a health check (every backend is
    /// always eligible then, so the balancer's health bookkeeping is skipped).
    list: Vec<Backend>,
    next: AtomicUsize,
    /// What the pool was built from (compared on reload).
    pub backends: Vec<SocketAddr>,
    /// Health check interval, when configured.
    pub check_interval: Option<Duration>,
    health_path: Option<String>,
    tls: Option<UpstreamTls>,
    h2: Option<H2Settings>,
}

impl Pool {
    /// Builds the pool; addresses are already resolved. With `tls`, health checks speak HTTPS
    /// with the same SNI, CA and verification as requests.
    pub fn new(settings: &UpstreamSettings, tls: Option<&PeerTls>) -> Self {
        let mut lb = LoadBalancer::<RoundRobin>::try_from_iter(settings.backends.iter().copied())
            .expect("static backends from resolved addresses");
        if let Some(hc) = &settings.health_check {
            let host = tls.map(|t| t.sni.as_str()).unwrap_or("localhost");
            let mut check = HttpHealthCheck::new(host, tls.is_some());
            if let Some(t) = tls {
                t.apply(&mut check.peer_template);
            }
            // Health checks speak the protocol requests do (a gRPC backend may know no HTTP/1).
            super::h2::apply(&mut check.peer_template, settings.h2);
            if let Ok(mut req) = RequestHeader::build("GET", hc.path.as_bytes(), None) {
                let _ = req.insert_header("Host", host);
                let _ = req.insert_header("User-Agent", "tollgate-health-check");
                check.req = req;
            }
            check.peer_template.options.connection_timeout = Some(settings.connect_timeout);
            check.peer_template.options.read_timeout = Some(Duration::from_secs(2));
            lb.set_health_check(Box::new(check));
        }
        let list = settings
            .backends
            .iter()
            .map(|a| Backend::new_with_weight(&a.to_string(), 1));
        Pool {
            lb,
            list: list
                .collect::<pingora::Result<_>>()
                .expect("resolved backend addresses"),
            next: AtomicUsize::new(0),
            backends: settings.backends.clone(),
            check_interval: settings.health_check.as_ref().map(|h| h.interval),
            health_path: settings.health_check.as_ref().map(|h| h.path.clone()),
            tls: settings.tls.clone(),
            h2: settings.h2,
        }
    }

    /// True when a pool built from `settings` would be identical to this one.
    pub fn same_as(&self, settings: &UpstreamSettings) -> bool {
        self.backends == settings.backends
            && self.check_interval == settings.health_check.as_ref().map(|h| h.interval)
            && self.health_path == settings.health_check.as_ref().map(|h| h.path.clone())
            && self.tls == settings.tls
            && self.h2 == settings.h2
    }

    /// Next healthy backend (round robin), or `None` when every backend is unhealthy.
    pub fn select(&self) -> Option<Backend> {
        if self.check_interval.is_none() && !self.list.is_empty() {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % self.list.len();
            return Some(self.list[i].clone());
        }
        self.lb.select(b"", self.backends.len().max(1) * 2)
    }

    /// Runs one health check round over all backends (no-op without a health check).
    pub async fn run_health_check(&self) {
        if self.check_interval.is_some() {
            self.lb.backends().run_health_check(true).await;
        }
    }
}
