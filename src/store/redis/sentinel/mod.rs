//! `redis.mode: sentinel`: decisions go to the node the sentinels name, and to no other.
//!
//! The sentinels are followed two ways, both in the background ([`watch`]):
//! - **announcements**: a pub/sub subscription on every sentinel. From the first announcement
//!   of a failover of the master (`+try-failover`, ... up to the promotion of its replica) no
//!   call goes to it: the promoted replica stops replicating it, so every write it took from
//!   then on would be lost when it is demoted and resyncs, and its tenants' tokens spent twice.
//!   Such calls fail at once ([`is_failover_hold`]) and the tier's failure policy answers.
//!   `+switch-master` moves the connection to the new master at once.
//! - **asking**: `SENTINEL MASTER` and `SENTINEL GET-MASTER-ADDR-BY-NAME` of every sentinel,
//!   every [`RECHECK_EVERY`] (every [`RECHECK_HELD`] while a failover holds the calls or no
//!   master is known yet), and at once on any doubt: a `READONLY`-like reply (awaited, so the
//!   caller's retry reaches the new master), a dead link or a timeout, a (re)subscription, the
//!   end or abandonment of a failover. The answer of the highest config epoch names the master
//!   ([`state::choose`]); a sentinel whose flags say `failover_in_progress` for the master
//!   keeps the calls held; an answer collected while an announcement came in is discarded.
//!
//! The connection to the master is a redis-rs `ConnectionManager` (one multiplexed connection,
//! reconnecting by itself), replaced when the sentinels name another node. Every call is bounded
//! by the caller (`redis.timeout_ms`); nothing here waits longer.

mod state;
mod watch;

pub use state::{Event, Node, Route, View, Watch};

use super::node::{is_dead_link, is_wrong_role, Credentials, Stall};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{Cmd, ConnectionAddr, IntoConnectionInfo, RedisError, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the sentinels are asked while all is calm (the announcements do the fast work).
pub const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// How often they are asked while a failover holds the calls, or before any master is known.
pub const RECHECK_HELD: Duration = Duration::from_millis(100);

/// Bound on one sentinel's answer, and on (re)subscribing to its announcements.
pub const ASK_BOUND: Duration = Duration::from_millis(500);

/// The code of the error a held call fails with ([`is_failover_hold`]); no server sends it.
const HOLD_CODE: &str = "TOLLGATE_FAILOVER_HOLD";

/// Whether `e` is a call held back because the sentinels are failing its master over.
pub fn is_failover_hold(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Extension && e.code() == Some(HOLD_CODE)
}

fn failover_hold(master: &Node) -> RedisError {
    redis::make_extension_error(
        HOLD_CODE.to_string(),
        Some(format!(
            "the sentinels are failing over master {master}: no call goes to it"
        )),
    )
}

fn no_master() -> RedisError {
    RedisError::from((
        redis::ErrorKind::Io,
        "no master discovered from the sentinels",
    ))
}

/// One sentinel: its client (with the sentinels' credentials and TLS) and the connection
/// kept for asking it.
struct Link {
    label: String,
    client: redis::Client,
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// Its last ask failed (logged once per change).
    failing: AtomicBool,
}

/// How to reach a data node the sentinels name.
struct Nodes {
    creds: Credentials,
    tls: bool,
    config: ConnectionManagerConfig,
}

impl Nodes {
    fn manager(&self, node: &Node) -> Result<ConnectionManager, RedisError> {
        let addr = if self.tls {
            ConnectionAddr::TcpTls {
                host: node.host.clone(),
                port: node.port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(node.host.clone(), node.port)
        };
        let client = self.creds.client_at(addr.into_connection_info()?)?;
        ConnectionManager::new_lazy_with_config(client, self.config.clone())
    }
}

/// The connection to the master the sentinels name.
struct Target {
    route: Route,
    manager: ConnectionManager,
}

/// The sentinel-mode connection of one `redis:` section.
pub struct Sentinel {
    /// The monitored master's name (`redis.sentinel.master`).
    name: String,
    links: Vec<Link>,
    nodes: Nodes,
    watch: Mutex<Watch>,
    target: ArcSwap<Option<Target>>,
    /// The background tasks run (started by the first call, inside the serving runtime).
    started: AtomicBool,
    /// Wakes the asking loop at once.
    poke: tokio::sync::Notify,
    /// Number of asks started; the last one finished, published.
    asks: AtomicU64,
    asked: tokio::sync::watch::Sender<u64>,
    /// Since when the master's connection has answered nothing.
    stall: Stall,
}

impl Sentinel {
    /// Prepares the connection; nothing is connected. `urls`: the sentinels (a `rediss://`
    /// one makes the data nodes TLS too); `sentinel_creds`: the sentinels' credentials (with
    /// `creds`' CA); `creds`: the data nodes'. Errors: a sentinel URL redis-rs cannot use
    /// (its index and the error).
    pub fn new(
        name: &str,
        urls: &[String],
        creds: Credentials,
        sentinel_creds: Credentials,
        config: ConnectionManagerConfig,
    ) -> Result<Self, (usize, RedisError)> {
        let mut links = Vec::new();
        let mut tls = false;
        let sentinel_creds = Credentials {
            ca_pem: creds.ca_pem.clone(),
            ..sentinel_creds
        };
        for (i, url) in urls.iter().enumerate() {
            let info = url.as_str().into_connection_info().map_err(|e| (i, e))?;
            tls |= matches!(info.addr(), ConnectionAddr::TcpTls { .. });
            let label = info.addr().to_string();
            // The sentinels take no database number and no data-node credentials.
            let info = info.set_redis_settings(Default::default());
            links.push(Link {
                label,
                client: sentinel_creds.client_at(info).map_err(|e| (i, e))?,
                conn: tokio::sync::Mutex::new(None),
                failing: AtomicBool::new(false),
            });
        }
        Ok(Sentinel {
            name: name.to_string(),
            links,
            nodes: Nodes { creds, tls, config },
            watch: Mutex::new(Watch::default()),
            target: ArcSwap::from_pointee(None),
            started: AtomicBool::new(false),
            poke: tokio::sync::Notify::new(),
            asks: AtomicU64::new(0),
            asked: tokio::sync::watch::Sender::new(0),
            stall: Stall::default(),
        })
    }

    /// Sends `cmd` to the master, unless a failover of it is under way ([`is_failover_hold`]).
    pub async fn query(self: &Arc<Self>, cmd: &Cmd) -> Result<Value, RedisError> {
        self.start();
        let mut held = self.target.load_full();
        if held.is_none() {
            // Nothing named yet: wait for the first answers (bounded by the caller's timeout),
            // so the first request of a fresh gateway is decided by Redis.
            self.fresh_ask().await;
            held = self.target.load_full();
        }
        let Some(target) = held.as_ref() else {
            return Err(no_master());
        };
        if target.route.held {
            return Err(failover_hold(&target.route.master));
        }
        let result = super::node::send(&mut target.manager.clone(), cmd).await;
        if result.is_ok() {
            self.stall.answered();
        }
        if let Err(e) = &result {
            if is_wrong_role(e) {
                // A demoted master: the sentinels already name another. Ask them now, within
                // the caller's budget, so the caller's retry reaches it.
                self.fresh_ask().await;
            } else if is_dead_link(e) || e.is_timeout() {
                // Dead or stuck: the sentinels may need their detection time; ask in the
                // background and do not hold the request.
                self.poke.notify_one();
            }
        }
        result
    }

    /// Starts the background tasks once: the asking loop and one subscriber per sentinel.
    /// They hold only a weak reference and end when this connection is dropped.
    fn start(self: &Arc<Self>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(watch::keep_asking(weak.clone()));
        for i in 0..self.links.len() {
            tokio::spawn(watch::follow(weak.clone(), i));
        }
    }

    /// Waits until an ask that starts after this call has been applied.
    async fn fresh_ask(&self) {
        let want = self.asks.load(Ordering::Acquire) + 1;
        let mut done = self.asked.subscribe();
        self.poke.notify_one();
        let _ = done.wait_for(|n| *n >= want).await;
    }

    /// Applies an announcement from sentinel `from`.
    fn announce(&self, channel: &str, payload: &str, from: &str) {
        let Some(event) = state::parse_event(channel, payload, &self.name) else {
            return;
        };
        tracing::info!(
            sentinel = from,
            channel,
            payload,
            "redis sentinel announcement"
        );
        let ask = {
            let mut watch = self.watch.lock();
            let ask = watch.on_event(&event);
            self.publish(&watch);
            ask
        };
        if ask {
            self.poke.notify_one();
        }
    }

    /// Asks every sentinel at once and applies their answers.
    async fn ask_and_apply(&self) {
        let n = self.asks.fetch_add(1, Ordering::AcqRel) + 1;
        let seq = self.watch.lock().seq();
        let asks = self.links.iter().map(|l| l.ask(&self.name));
        let views: Vec<View> = futures_util::future::join_all(asks)
            .await
            .into_iter()
            .flatten()
            .collect();
        {
            let mut watch = self.watch.lock();
            watch.on_views(seq, &views);
            self.publish(&watch);
        }
        self.asked.send_replace(n);
    }

    /// Whether the asking loop should use its short period.
    fn needs_care(&self) -> bool {
        self.target
            .load()
            .as_ref()
            .as_ref()
            .is_none_or(|t| t.route.held)
    }

    /// Makes the calls follow `watch`'s route: a new connection when the master changed, the
    /// same one with the new hold otherwise.
    fn publish(&self, watch: &Watch) {
        let Some(route) = watch.route() else {
            return;
        };
        let current = self.target.load();
        let manager = match current.as_ref() {
            Some(t) if t.route == route => return,
            Some(t) if t.route.master == route.master => {
                if route.held {
                    tracing::warn!(
                        master = %route.master,
                        "redis sentinel: failover of master {} under way: no call goes to it \
                         until the sentinels name its successor",
                        route.master
                    );
                } else {
                    tracing::warn!(
                        master = %route.master,
                        "redis sentinel: no failover under way: master {} stays",
                        route.master
                    );
                }
                t.manager.clone()
            }
            _ => match self.nodes.manager(&route.master) {
                Ok(m) => {
                    tracing::warn!(master = %route.master, held = route.held,
                        "redis sentinel: using master {}", route.master);
                    m
                }
                Err(e) => {
                    tracing::error!(master = %route.master, error = %e,
                        "redis sentinel: cannot use the named master");
                    return;
                }
            },
        };
        self.target.store(Arc::new(Some(Target { route, manager })));
    }
}

impl Sentinel {
    /// A call to the master was left unanswered at `now`: once the connection has answered
    /// nothing for [`STALL_LIMIT`](super::node::STALL_LIMIT) (a link dropped without a reset),
    /// the same master gets a new connection, and the sentinels are asked again.
    pub fn unanswered(&self, now: std::time::Instant) {
        if !self.stall.unanswered(now) {
            return;
        }
        let held = self.target.load_full();
        let Some(target) = held.as_ref() else {
            return;
        };
        match self.nodes.manager(&target.route.master) {
            Ok(manager) => {
                tracing::warn!(master = %target.route.master,
                    "redis sentinel: master {} answered nothing for {} s: reconnecting",
                    target.route.master, super::node::STALL_LIMIT.as_secs());
                let fresh = Target {
                    route: target.route.clone(),
                    manager,
                };
                // Unless the sentinels named another master meanwhile.
                self.target.compare_and_swap(&held, Arc::new(Some(fresh)));
            }
            Err(e) => tracing::error!(master = %target.route.master, error = %e,
                "redis sentinel: cannot reconnect to the named master"),
        }
        self.poke.notify_one();
    }
}

impl Link {
    /// This sentinel's view of master `name`; `None` when it does not answer in time or does
    /// not know the name.
    async fn ask(&self, name: &str) -> Option<View> {
        let mut slot = self.conn.lock().await;
        let asked = tokio::time::timeout(ASK_BOUND, async {
            let mut conn = match slot.as_ref() {
                Some(c) => c.clone(),
                None => {
                    let c = self.client.get_multiplexed_async_connection().await?;
                    *slot = Some(c.clone());
                    c
                }
            };
            type Replies = (
                std::collections::HashMap<String, String>,
                Option<(String, u16)>,
            );
            redis::pipe()
                .cmd("SENTINEL")
                .arg("MASTER")
                .arg(name)
                .cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(name)
                .query_async::<Replies>(&mut conn)
                .await
        })
        .await;
        let view = match asked {
            Ok(Ok((master, Some(named)))) => View::from_replies(&master, named),
            Ok(Ok(_)) => None,
            Ok(Err(e)) => {
                *slot = None;
                self.report(Err(&e.to_string()));
                return None;
            }
            Err(_) => {
                *slot = None;
                self.report(Err("no answer in time"));
                return None;
            }
        };
        match &view {
            Some(_) => self.report(Ok(())),
            None => self.report(Err(&format!("it does not name master {name}"))),
        }
        view
    }

    /// Logs a change between answering and not (once per change, not once per ask).
    fn report(&self, outcome: Result<(), &str>) {
        match outcome {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(sentinel = %self.label, "redis sentinel: the sentinel answers again");
                }
            }
            Err(error) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(sentinel = %self.label, error,
                        "redis sentinel: no usable answer from the sentinel");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
