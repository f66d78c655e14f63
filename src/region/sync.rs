//! The `global` store of `multi_region.mode: sync`: where regions publish each tenant's recent
//! demand and read everybody's. Only the background sync task talks to it, never a request.
//!
//! Keys: `<prefix>:{<encoded tenant>}:region:<region>` = tokens asked for in this region during
//! its last sync interval, with a TTL of three intervals, so a region that stops publishing (idle,
//! partitioned, gone) drops out of the others' view by itself. One tenant's keys share its hash
//! tag (one Cluster slot). One exchange is one pipelined round trip for all tenants: per tenant a
//! `SET … PX` (or `DEL` when idle here) then an `MGET` of every region's key.

use crate::store::redis::keys::region_key;
use std::time::Duration;
use tokio::sync::Mutex;

/// A client of the `global` Redis: one multiplexed connection, re-made after any failure.
pub struct GlobalStore {
    client: redis::Client,
    conn: Mutex<Option<redis::aio::MultiplexedConnection>>,
    key_prefix: String,
    timeout: Duration,
}

/// One tenant of an exchange: its id and the tokens asked for here in the last interval.
pub struct Published<'a> {
    pub tenant: &'a str,
    pub demand: u64,
}

impl GlobalStore {
    /// A client for `url` (checked by config validation); connects on the first exchange. Every
    /// exchange, connection included, is bounded by `timeout`.
    /// Errors: (field path, reason) for a URL redis-rs refuses.
    pub fn new(url: &str, key_prefix: &str, timeout: Duration) -> Result<Self, (String, String)> {
        let client = redis::Client::open(url)
            .map_err(|e| ("multi_region.global.url".to_string(), e.to_string()))?;
        Ok(GlobalStore {
            client,
            conn: Mutex::new(None),
            key_prefix: key_prefix.to_string(),
            timeout,
        })
    }

    /// Key of `region`'s demand for `tenant` ([`region_key`]).
    pub fn key(&self, tenant: &str, region: &str) -> String {
        region_key(&self.key_prefix, tenant, region)
    }

    /// Publishes this `region`'s demands (TTL `ttl`) and returns, per tenant in the same order,
    /// every region's last published demand in the order of `regions` (0 for none).
    /// Errors: any Redis or connection error, or no answer within the timeout.
    pub async fn exchange(
        &self,
        region: &str,
        regions: &[String],
        ttl: Duration,
        tenants: &[Published<'_>],
    ) -> Result<Vec<Vec<u64>>, String> {
        let mut pipe = redis::pipe();
        // Answers even with no tenant to exchange, so an idle region still notices a partition.
        pipe.cmd("PING").ignore();
        for t in tenants {
            let own = self.key(t.tenant, region);
            if t.demand > 0 {
                pipe.cmd("SET")
                    .arg(&own)
                    .arg(t.demand)
                    .arg("PX")
                    .arg(ttl.as_millis().max(1) as u64)
                    .ignore();
            } else {
                pipe.cmd("DEL").arg(&own).ignore();
            }
            let keys: Vec<String> = regions.iter().map(|r| self.key(t.tenant, r)).collect();
            pipe.cmd("MGET").arg(keys);
        }
        let mut slot = self.conn.lock().await;
        let attempt = async {
            if slot.is_none() {
                *slot = Some(
                    self.client
                        .get_multiplexed_async_connection()
                        .await
                        .map_err(|e| e.to_string())?,
                );
            }
            let conn = slot.as_mut().expect("connection set above");
            pipe.query_async::<Vec<Vec<Option<u64>>>>(conn)
                .await
                .map_err(|e| e.to_string())
        };
        let result = match tokio::time::timeout(self.timeout, attempt).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
        };
        match result {
            Ok(rows) => Ok(rows
                .into_iter()
                .map(|row| row.into_iter().map(Option::unwrap_or_default).collect())
                .collect()),
            Err(e) => {
                // A dead or half-answered connection is not reused.
                *slot = None;
                Err(e)
            }
        }
    }
}
