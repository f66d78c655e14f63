//! How to reach one Redis node: its ACL credentials and TLS trust, and which errors mean the
//! node at the other end is gone or no longer a writable master, how one command is sent on a
//! node's connection, and when a connection that answers nothing is given up. Shared by every `redis.mode`
//! ([`conn`](super::conn)) and by the sentinel follower ([`sentinel`](super::sentinel)).

use redis::aio::ConnectionManager;
use redis::{Cmd, ConnectionInfo, IntoConnectionInfo, RedisError, TlsCertificates, Value};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// ACL credentials and TLS trust, resolved from the environment and files at build time.
/// `Debug` never prints the password.
#[derive(Clone, Default)]
pub struct Credentials {
    pub username: Option<String>,
    pub password: Option<String>,
    /// PEM bytes of the CA bundle for `rediss://`.
    pub ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("ca_pem", &self.ca_pem.as_ref().map(|p| p.len()))
            .finish()
    }
}

impl Credentials {
    /// Reads `username_env` / `password_env` and the CA file. Errors name the field.
    pub fn load(
        username_env: &Option<String>,
        password_env: &Option<String>,
        ca_file: &Option<String>,
        field: &str,
    ) -> Result<Self, (String, String)> {
        let var = |name: &Option<String>, key: &str| -> Result<Option<String>, (String, String)> {
            match name {
                None => Ok(None),
                Some(n) => std::env::var(n).map(Some).map_err(|_| {
                    (
                        format!("{field}.{key}"),
                        format!("environment variable {n} is not set"),
                    )
                }),
            }
        };
        let ca_pem = match ca_file {
            None => None,
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                (
                    "redis.tls.ca_file".to_string(),
                    crate::config::unreadable(path, &e),
                )
            })?),
        };
        Ok(Credentials {
            username: var(username_env, "username_env")?,
            password: var(password_env, "password_env")?,
            ca_pem,
        })
    }

    /// The CA as redis-rs takes it, when one is configured.
    pub fn certs(&self) -> Option<TlsCertificates> {
        self.ca_pem.as_ref().map(|ca| TlsCertificates {
            client_tls: None,
            root_cert: Some(ca.clone()),
        })
    }

    /// A client for one node URL with these credentials and CA.
    pub fn client(&self, url: &str) -> Result<redis::Client, RedisError> {
        self.client_at(url.into_connection_info()?)
    }

    /// A client for one node with these credentials and CA.
    pub fn client_at(&self, info: ConnectionInfo) -> Result<redis::Client, RedisError> {
        let mut redis_info = info.redis_settings().clone();
        if let Some(u) = &self.username {
            redis_info = redis_info.set_username(u);
        }
        if let Some(p) = &self.password {
            redis_info = redis_info.set_password(p);
        }
        let info = info.set_redis_settings(redis_info);
        match self.certs() {
            Some(certs) => redis::Client::build_with_tls(info, certs),
            None => redis::Client::open(info),
        }
    }
}

/// Whether an error means "the server at the other end of this connection is not (or no longer)
/// a usable master": reconnect (and re-discover) instead of using this connection again.
pub fn is_wrong_role(e: &RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown | ServerErrorKind::BusyLoading
        )
    )
}

/// Whether `e` means the connection is gone (dropped, refused, or an I/O failure).
pub fn is_dead_link(e: &RedisError) -> bool {
    e.is_connection_dropped() || e.is_connection_refusal() || e.is_io_error()
}

/// Sends `cmd` on `manager` and reads its reply; an error reply (also one inside an array) is
/// an `Err`, as `Cmd::query_async` gives it, without that call's boxed future.
pub async fn send(manager: &mut ConnectionManager, cmd: &Cmd) -> Result<Value, RedisError> {
    manager.send_packed_command(cmd).await?.extract_error()
}

/// How long a reply the caller stopped waiting for is still waited for
/// ([`late`](super::late)).
pub const LATE_WAIT: Duration = Duration::from_secs(30);

/// How long a connection may leave every call unanswered before it is presumed dead (a link
/// dropped without a reset, a frozen peer) and replaced: as long as a late reply is waited for
/// ([`LATE_WAIT`]), so no reply that could still come is cut off.
pub const STALL_LIMIT: Duration = LATE_WAIT;

/// Since when a connection has answered nothing: opened by the first call left unanswered after
/// an answer, closed by the next answer.
#[derive(Default)]
pub struct Stall {
    /// The start of the current stall, if one is open.
    since: parking_lot::Mutex<Option<Instant>>,
    /// A stall is open (so an answered call, the usual case, takes no lock).
    open: std::sync::atomic::AtomicBool,
}

impl Stall {
    /// A call went unanswered at `now`: whether the connection has now answered nothing for
    /// [`STALL_LIMIT`] (it is to be replaced; the stall starts over).
    pub fn unanswered(&self, now: Instant) -> bool {
        let mut since = self.since.lock();
        self.open.store(true, std::sync::atomic::Ordering::Relaxed);
        match *since {
            Some(at) if now.saturating_duration_since(at) >= STALL_LIMIT => {
                *since = None;
                true
            }
            Some(_) => false,
            None => {
                *since = Some(now);
                false
            }
        }
    }

    /// A call answered: the stall, if any, is over.
    pub fn answered(&self) {
        let open = &self.open;
        if open.load(std::sync::atomic::Ordering::Relaxed)
            && open.swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            *self.since.lock() = None;
        }
    }
}

/// One call on its way: its reply, or the connection's error.
pub type Pending = Pin<Box<dyn Future<Output = Result<Value, RedisError>> + Send>>;
