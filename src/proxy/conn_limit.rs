//! Connection limits (`server.max_connections` per `listen[]` entry,
//! `server.max_connections_per_client` per client address; docs/http-hardening.md#connection-limits):
//! a connection is counted from accept to close, and one beyond a limit is refused before any of
//! it is read. The counts are exact (atomic per listener, one short lock per client address).

use crate::hashing::HashMap;
use crate::observe::metrics::METRICS;
use parking_lot::Mutex;
use prometheus::{IntCounter, IntGauge};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Which limit refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `server.max_connections` of the listener the connection came to.
    Listener,
    /// `server.max_connections_per_client` of its client address.
    Client,
}

impl Refused {
    /// The `scope` label and problem member.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Listener => "listener",
            Refused::Client => "client",
        }
    }
}

/// One listener's count and its metric series.
struct Listener {
    addr: SocketAddr,
    open: AtomicUsize,
    gauge: IntGauge,
    refused: [IntCounter; 2],
}

/// The open connections of every listener and client address.
pub struct ConnectionLimits {
    listeners: Vec<Listener>,
    per_listener: usize,
    /// 0: no per-client limit (and no per-client bookkeeping).
    per_client: usize,
    clients: Mutex<HashMap<IpAddr, usize>>,
}

/// A counted connection: dropping it (when the connection closes) gives its place back.
pub struct ConnectionPermit {
    limits: Arc<ConnectionLimits>,
    listener: Option<usize>,
    client: Option<IpAddr>,
}

impl ConnectionLimits {
    /// Limits for the listeners at `addrs` (as configured: an unspecified IP matches every local
    /// address on its port): at most `per_listener` connections each, and `per_client` per
    /// client address (0 = unlimited).
    pub fn new(addrs: &[SocketAddr], per_listener: usize, per_client: usize) -> Arc<Self> {
        let listeners = addrs
            .iter()
            .map(|addr| {
                let label = addr.to_string();
                Listener {
                    addr: *addr,
                    open: AtomicUsize::new(0),
                    gauge: METRICS.connections_open.with_label_values(&[&label]),
                    refused: [Refused::Listener, Refused::Client].map(|r| {
                        METRICS
                            .connections_refused
                            .with_label_values(&[&label, r.as_str()])
                    }),
                }
            })
            .collect();
        Arc::new(ConnectionLimits {
            listeners,
            per_listener,
            per_client,
            clients: Mutex::new(HashMap::default()),
        })
    }

    /// Counts a connection accepted on `local` from `peer`, or says which limit refuses it
    /// (counted in `tollgate_connections_refused_total`).
    pub fn admit(
        self: &Arc<Self>,
        local: Option<SocketAddr>,
        peer: Option<IpAddr>,
    ) -> Result<ConnectionPermit, Refused> {
        let listener = local.and_then(|l| self.listener_of(l));
        let mut permit = ConnectionPermit {
            limits: self.clone(),
            listener: None,
            client: None,
        };
        if let Some(i) = listener {
            let l = &self.listeners[i];
            if l.open.fetch_add(1, Ordering::Relaxed) >= self.per_listener {
                l.open.fetch_sub(1, Ordering::Relaxed);
                l.refused[0].inc();
                return Err(Refused::Listener);
            }
            l.gauge.inc();
            permit.listener = Some(i);
        }
        if let (Some(ip), true) = (peer, self.per_client > 0) {
            let mut clients = self.clients.lock();
            let open = clients.entry(ip).or_insert(0);
            if *open >= self.per_client {
                drop(clients);
                if let Some(i) = listener {
                    self.listeners[i].refused[1].inc();
                }
                // `permit` gives the listener place back.
                return Err(Refused::Client);
            }
            *open += 1;
            permit.client = Some(ip);
        }
        Ok(permit)
    }

    /// The index of the listener a connection to `local` came in on.
    fn listener_of(&self, local: SocketAddr) -> Option<usize> {
        let matches = |l: &Listener, exact: bool| {
            l.addr.port() == local.port()
                && if exact {
                    l.addr.ip() == local.ip()
                } else {
                    l.addr.ip().is_unspecified()
                }
        };
        self.listeners
            .iter()
            .position(|l| matches(l, true))
            .or_else(|| self.listeners.iter().position(|l| matches(l, false)))
    }

    /// Open connections counted for listener `index` (tests and metrics).
    pub fn open(&self, index: usize) -> usize {
        self.listeners[index].open.load(Ordering::Relaxed)
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        if let Some(i) = self.listener {
            let l = &self.limits.listeners[i];
            l.open.fetch_sub(1, Ordering::Relaxed);
            l.gauge.dec();
        }
        if let Some(ip) = self.client {
            let mut clients = self.limits.clients.lock();
            if let Some(open) = clients.get_mut(&ip) {
                *open -= 1;
                if *open == 0 {
                    clients.remove(&ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
