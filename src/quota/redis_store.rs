//! The Redis side of the tenant stage: one multiplexed connection, one Lua script per decision.
//!
//! The connection (redis-rs `ConnectionManager`) is created lazily on first use, inside the
//! serving runtime, and shared by all worker threads; concurrent decisions pipeline on it.
//! Every call is bounded by `redis.timeout_ms`, connection establishment included. Scripts run
//! with EVALSHA; on NOSCRIPT (Redis restart, `SCRIPT FLUSH`, failover) the script is loaded and
//! the call retried once, so no request fails because of it.

use crate::config::RedisSettings;
use crate::identity::tenant_id;
use crate::limit::{Decision, Rate};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::OnceLock;
use std::time::Duration;

/// The token bucket script, embedded at build time from `lua/token_bucket.lua`.
pub const TOKEN_BUCKET_LUA: &str = include_str!("../../lua/token_bucket.lua");

/// Why a Redis call failed; the label of `tollgate_redis_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisFault {
    /// No answer within `redis.timeout_ms`.
    Timeout,
    /// Connection refused, dropped or not established.
    Connection,
    /// The script failed (or NOSCRIPT persisted after a reload).
    Script,
    /// Anything else (unexpected reply shape, protocol error).
    Other,
}

impl RedisFault {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RedisFault::Timeout => "timeout",
            RedisFault::Connection => "connection",
            RedisFault::Script => "script",
            RedisFault::Other => "other",
        }
    }

    pub(super) fn classify(e: &redis::RedisError) -> Self {
        if e.is_timeout() {
            RedisFault::Timeout
        } else if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
            RedisFault::Connection
        } else if matches!(e.kind(), redis::ErrorKind::Server(_)) {
            RedisFault::Script
        } else {
            RedisFault::Other
        }
    }
}

/// A Redis endpoint holding tenant buckets.
pub struct RedisStore {
    client: redis::Client,
    pub(super) timeout: Duration,
    pub(super) key_prefix: String,
    script: redis::Script,
    conn: OnceLock<ConnectionManager>,
}

impl RedisStore {
    /// Prepares the client; connects nothing yet. Errors: an unparsable URL.
    pub fn new(settings: &RedisSettings) -> Result<Self, String> {
        let client = redis::Client::open(settings.url.as_str()).map_err(|e| e.to_string())?;
        Ok(RedisStore {
            client,
            timeout: settings.timeout,
            key_prefix: settings.key_prefix.clone(),
            script: redis::Script::new(TOKEN_BUCKET_LUA),
            conn: OnceLock::new(),
        })
    }

    /// Bucket key of a tenant: `<prefix>:{<encoded tenant>}:tb`. The braces are the Redis Cluster
    /// hash tag; the tenant is percent-encoded ([`tenant_id::encode`]: no `{`/`}` inside), so the
    /// tag is exactly the tenant.
    pub fn bucket_key(&self, tenant: &str) -> String {
        format!("{}:{{{}}}:tb", self.key_prefix, tenant_id::encode(tenant))
    }

    pub(super) fn connection(&self) -> Result<ConnectionManager, RedisFault> {
        if let Some(c) = self.conn.get() {
            return Ok(c.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100));
        let manager = ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            .map_err(|_| RedisFault::Connection)?;
        Ok(self.conn.get_or_init(|| manager).clone())
    }

    /// Runs the token bucket script for `tenant`: one EVALSHA (plus SCRIPT LOAD and a retry on
    /// NOSCRIPT). Bounded by the configured timeout.
    pub async fn token_bucket(
        &self,
        tenant: &str,
        rate: &Rate,
        cost: u64,
    ) -> Result<Decision, RedisFault> {
        let mut conn = self.connection()?;
        let mut call = self.script.key(self.bucket_key(tenant));
        call.arg(rate.limit)
            .arg(rate.per_ms)
            .arg(rate.burst)
            .arg(cost);
        let reply: Vec<i64> =
            match tokio::time::timeout(self.timeout, call.invoke_async(&mut conn)).await {
                Err(_) => return Err(RedisFault::Timeout),
                Ok(Err(e)) => return Err(RedisFault::classify(&e)),
                Ok(Ok(v)) => v,
            };
        let [admitted, remaining, retry_ms, full_ms] = reply[..] else {
            return Err(RedisFault::Other);
        };
        Ok(Decision {
            admitted: admitted == 1,
            remaining: remaining.max(0) as u64,
            retry_after_ms: if retry_ms < 0 {
                u64::MAX
            } else {
                retry_ms as u64
            },
            full_ms: full_ms.max(0) as u64,
        })
    }
}
