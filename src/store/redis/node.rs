//! How to reach one Redis node: its ACL credentials and TLS trust, and which errors mean the
//! node at the other end is gone or no longer a writable master, and how one command is sent
//! on a node's connection. Shared by every `redis.mode`
//! ([`conn`](super::conn)) and by the sentinel follower ([`sentinel`](super::sentinel)).

use redis::aio::ConnectionManager;
use redis::{Cmd, ConnectionInfo, IntoConnectionInfo, RedisError, TlsCertificates, Value};

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
