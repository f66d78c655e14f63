//! The connection to the Redis deployment holding the buckets, for each `redis.mode`, and when
//! to throw a connection away.
//!
//! - **standalone**: one multiplexed connection (redis-rs `ConnectionManager`, which reconnects
//!   by itself after an I/O error). A reply that says the server at the other end is not a
//!   writable master (`READONLY`, `MASTERDOWN`, `LOADING`) or a dropped connection replaces the
//!   manager with a fresh one: the next call connects anew and re-resolves the host name, so a
//!   gateway follows an address (DNS name, virtual IP, TCP proxy) re-pointed to a new master.
//! - **cluster**: redis-rs's async cluster client: slot routing, `MOVED` / `ASK` / `TRYAGAIN`
//!   and topology refresh are its job. Connected on first use.
//! - **sentinel**: the node the sentinels name, followed through their announcements and
//!   re-asked on any doubt; no call goes to a master they are failing over (see
//!   [`sentinel`](super::sentinel)).
//!
//! Every attempt is bounded by the caller (`redis.timeout_ms`). A standalone or sentinel-mode
//! connection keeps a reply the caller stopped waiting for, for [`late`](super::late) to read.

pub use super::node::{is_wrong_role, send, Credentials, Stall, LATE_WAIT, STALL_LIMIT};
use super::sentinel::Sentinel;
use crate::config::{RedisSettings, RedisTopology};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, IntoConnectionInfo, RedisError, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Number of Redis Cluster hash slots.
const CLUSTER_SLOTS: u16 = 16384;

/// Redis Cluster hash slot of `key` (CRC16/XMODEM of the hash tag, or of the key).
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &bytes[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(bytes);
    crc16::State::<crc16::XMODEM>::calculate(tagged) % CLUSTER_SLOTS
}

/// The connection of one `redis:` section.
pub enum RedisConn {
    Standalone(Standalone),
    Cluster(Cluster),
    Sentinel(Arc<Sentinel>),
}

impl RedisConn {
    /// Prepares the connection for `settings`; nothing is connected yet. Errors: an unparsable
    /// URL (field, reason).
    pub fn new(settings: &RedisSettings, creds: Credentials) -> Result<Self, (String, String)> {
        let bad_url = |i: usize, e: RedisError| {
            let field = match settings.mode {
                RedisTopology::Standalone => "redis.url".to_string(),
                _ => format!("redis.urls[{i}]"),
            };
            (field, format!("not a usable Redis URL: {e}"))
        };
        // The caller bounds each call (`redis.timeout_ms`), and the connection keeps a reply it
        // stopped waiting for (super::late): no timer per call in the connection. One that
        // answers nothing for STALL_LIMIT is replaced ([`Stall`]).
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.timeout))
            .set_response_timeout(None)
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100));
        Ok(match &settings.mode {
            RedisTopology::Standalone => {
                let client = creds.client(&settings.url).map_err(|e| bad_url(0, e))?;
                RedisConn::Standalone(Standalone::new(client, manager_config))
            }
            RedisTopology::Cluster => {
                for (i, url) in settings.urls.iter().enumerate() {
                    url.as_str()
                        .into_connection_info()
                        .map_err(|e| bad_url(i, e))?;
                }
                let mut b = redis::cluster::ClusterClientBuilder::new(settings.urls.clone())
                    .connection_timeout(settings.timeout)
                    .response_timeout(settings.timeout)
                    .retries(3)
                    .min_retry_wait(10)
                    .max_retry_wait(100);
                if let Some(u) = &creds.username {
                    b = b.username(u);
                }
                if let Some(p) = &creds.password {
                    b = b.password(p);
                }
                if let Some(certs) = creds.certs() {
                    b = b.certs(certs);
                }
                let client = b.build().map_err(|e| bad_url(0, e))?;
                RedisConn::Cluster(Cluster {
                    client,
                    conn: tokio::sync::OnceCell::new(),
                })
            }
            RedisTopology::Sentinel {
                master,
                username_env,
                password_env,
            } => {
                let sentinel_creds =
                    Credentials::load(username_env, password_env, &None, "redis.sentinel")?;
                let sentinel = Sentinel::new(
                    master,
                    &settings.urls,
                    creds,
                    sentinel_creds,
                    manager_config,
                )
                .map_err(|(i, e)| bad_url(i, e))?;
                RedisConn::Sentinel(Arc::new(sentinel))
            }
        })
    }

    /// Sends `cmd` to the master serving its keys (cluster: routed by the first key's slot).
    pub async fn query(&self, cmd: &Cmd) -> Result<Value, RedisError> {
        match self {
            RedisConn::Standalone(s) => s.query(cmd).await,
            RedisConn::Cluster(c) => {
                let mut conn = c.connection().await?;
                cmd.query_async(&mut conn).await
            }
            RedisConn::Sentinel(s) => s.query(cmd).await,
        }
    }

    /// A call sent on this connection was left without its reply by its caller's bound (it
    /// may still come: [`late`](super::late) waits for it) or was given up on after
    /// [`LATE_WAIT`]. A standalone or sentinel-mode connection that answers no call for
    /// [`STALL_LIMIT`] is replaced; the cluster client bounds each reply itself.
    pub fn unanswered(&self) {
        match self {
            RedisConn::Standalone(s) => s.unanswered(Instant::now()),
            RedisConn::Sentinel(s) => s.unanswered(Instant::now()),
            RedisConn::Cluster(_) => {}
        }
    }

    /// Sends a command without keys (`SCRIPT LOAD`) to the master serving `slot_key`'s slot.
    pub async fn query_at(&self, cmd: &Cmd, slot_key: &str) -> Result<Value, RedisError> {
        match self {
            RedisConn::Cluster(c) => {
                let mut conn = c.connection().await?;
                let route = Route::new(key_slot(slot_key), SlotAddr::Master);
                conn.route_command(
                    cmd.clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await
            }
            _ => self.query(cmd).await,
        }
    }
}

/// Repeats of one connection fault are logged at most this often.
pub const FAULT_LOG_EVERY: Duration = Duration::from_secs(30);

/// What a connection fault says in the log: its cause in words.
pub fn fault_cause(e: &RedisError) -> &'static str {
    if is_wrong_role(e) {
        "redis answered as a non-master"
    } else if e.is_connection_refusal() {
        "connection refused"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_connection_dropped() {
        "connection dropped"
    } else {
        "I/O error"
    }
}

/// The log of a connection's faults: a cause is logged once when it starts (or changes), its
/// repeats at most once per [`FAULT_LOG_EVERY`] with how many were left out, so a Redis that is
/// down from the start is one line with its cause rather than one per attempt.
#[derive(Default)]
pub struct FaultLog {
    /// The last cause, when it was last logged, and its repeats since.
    last: Mutex<Option<(&'static str, Instant, u64)>>,
    /// A fault episode is open (so an answered call, the usual case, takes no lock).
    open: std::sync::atomic::AtomicBool,
}

impl FaultLog {
    /// Whether a fault of `cause` at `now` is logged; `Some(repeats left out since the last
    /// line)` when it is.
    pub fn admit(&self, cause: &'static str, now: Instant) -> Option<u64> {
        let mut last = self.last.lock();
        self.open.store(true, std::sync::atomic::Ordering::Relaxed);
        match last.as_mut() {
            Some((c, at, repeats))
                if *c == cause && now.saturating_duration_since(*at) < FAULT_LOG_EVERY =>
            {
                *repeats += 1;
                None
            }
            Some((c, at, repeats)) if *c == cause => {
                let left_out = *repeats;
                (*at, *repeats) = (now, 0);
                Some(left_out)
            }
            _ => {
                *last = Some((cause, now, 0));
                Some(0)
            }
        }
    }

    /// A call answered: the next fault is a new episode, logged at once.
    pub fn clear(&self) {
        if self.open.swap(false, std::sync::atomic::Ordering::Relaxed) {
            *self.last.lock() = None;
        }
    }
}

/// Standalone: a connection manager replaced when the server stops being a master, or stops
/// answering.
pub struct Standalone {
    client: redis::Client,
    config: ConnectionManagerConfig,
    current: ArcSwap<Option<ConnectionManager>>,
    faults: FaultLog,
    stall: Stall,
}

impl Standalone {
    fn new(client: redis::Client, config: ConnectionManagerConfig) -> Self {
        Standalone {
            client,
            config,
            current: ArcSwap::from_pointee(None),
            faults: FaultLog::default(),
            stall: Stall::default(),
        }
    }

    /// The current manager, created lazily (inside the serving runtime) on first use.
    fn manager(&self) -> Result<Arc<Option<ConnectionManager>>, RedisError> {
        let current = self.current.load_full();
        if current.is_some() {
            return Ok(current);
        }
        let fresh = Arc::new(Some(ConnectionManager::new_lazy_with_config(
            self.client.clone(),
            self.config.clone(),
        )?));
        let previous = self.current.compare_and_swap(&current, fresh.clone());
        Ok(if Arc::ptr_eq(&previous, &current) {
            fresh
        } else {
            arc_swap::Guard::into_inner(previous)
        })
    }

    async fn query(&self, cmd: &Cmd) -> Result<Value, RedisError> {
        let held = self.manager()?;
        let mut conn = (*held).clone().expect("manager() returns a manager");
        let result = send(&mut conn, cmd).await;
        match &result {
            Ok(_) => {
                self.faults.clear();
                self.stall.answered();
            }
            Err(e) if is_wrong_role(e) || e.is_connection_dropped() => {
                // Only the first caller to see this manager fail replaces it.
                let prev = self.current.compare_and_swap(&held, Arc::new(None));
                let cause = fault_cause(e);
                if Arc::ptr_eq(&prev, &held) {
                    if let Some(left_out) = self.faults.admit(cause, Instant::now()) {
                        tracing::warn!(
                            cause,
                            error = %e,
                            repeats_not_logged = left_out,
                            "redis connection failed ({cause}): reconnecting on the next call"
                        );
                    }
                }
            }
            Err(_) => {}
        }
        result
    }
}

impl Standalone {
    /// See [`RedisConn::unanswered`].
    fn unanswered(&self, now: Instant) {
        if !self.stall.unanswered(now) {
            return;
        }
        self.current.store(Arc::new(None));
        let cause = "no reply";
        if let Some(left_out) = self.faults.admit(cause, now) {
            tracing::warn!(
                cause,
                stalled_s = STALL_LIMIT.as_secs(),
                repeats_not_logged = left_out,
                "redis connection answered nothing for {} s: reconnecting on the next call",
                STALL_LIMIT.as_secs()
            );
        }
    }
}

/// Cluster: one async cluster connection, made on first use.
pub struct Cluster {
    client: redis::cluster::ClusterClient,
    conn: tokio::sync::OnceCell<ClusterConnection>,
}

impl Cluster {
    async fn connection(&self) -> Result<ClusterConnection, RedisError> {
        self.conn
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .cloned()
    }
}

#[cfg(test)]
mod tests;
