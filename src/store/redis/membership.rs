//! `redis.fleet_size: auto`: every instance heartbeats into one membership key in Redis and
//! learns how many instances are alive, so the `local` fallback is sized by the fleet as it is
//! now (`limit / live instances`) rather than by a number written when the fleet was smaller.
//!
//! Each instance adds itself (a random id per process) to the sorted set
//! `<prefix>:{fleet}:members` with Redis `TIME` as score every [`HEARTBEAT_EVERY`], drops members
//! not seen for [`MEMBER_TTL`], and reads the count, all in one script
//! ([`FLEET_HEARTBEAT_LUA`]). When Redis goes down the last count seen stays: that is the fleet
//! that shares the limit during the outage. Until the first heartbeat answers, the size is 1
//! (this instance alone: an instance started during an outage cannot know its peers).

use super::client::{LuaScript, RedisStore};
use super::keys::fleet_members_key;
use super::scripts::FLEET_HEARTBEAT_LUA;
use once_cell::sync::Lazy;
use prometheus::{register_int_gauge, IntGauge};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Time between two heartbeats of one instance.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// A member not seen for this long is no longer counted (three missed heartbeats).
pub const MEMBER_TTL: Duration = Duration::from_secs(3);

/// `tollgate_fleet_size`: the live fleet size last learned (auto), or the configured one.
static FLEET_SIZE: Lazy<IntGauge> = Lazy::new(|| {
    register_int_gauge!(
        "tollgate_fleet_size",
        "Gateway instances sharing the limits, as used to size the local fallback"
    )
    .expect("register tollgate_fleet_size")
});

/// This instance's view of the fleet.
pub struct Fleet {
    id: String,
    size: AtomicU64,
    script: LuaScript,
}

impl Fleet {
    /// A fleet of `initial` instances until a heartbeat says otherwise.
    pub fn new(initial: u64) -> Self {
        FLEET_SIZE.set(initial as i64);
        Fleet {
            id: uuid::Uuid::new_v4().to_string(),
            size: AtomicU64::new(initial.max(1)),
            script: LuaScript::new(FLEET_HEARTBEAT_LUA),
        }
    }

    /// Live instances last seen (≥ 1).
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }

    /// One heartbeat through `redis`; on success the learned size is stored and returned.
    /// A failure keeps the last size (the fleet that shares the limit during an outage).
    pub async fn heartbeat(&self, redis: &RedisStore) -> Option<u64> {
        let key = fleet_members_key(redis.key_prefix());
        let ttl = MEMBER_TTL.as_millis() as u64;
        let args = [self.id.clone(), ttl.to_string()];
        let n: u64 = redis.eval(&self.script, &[key], &args).await.ok()?;
        let n = n.max(1);
        if self.size.swap(n, Ordering::Relaxed) != n {
            tracing::info!(fleet_size = n, "live fleet size changed");
        }
        FLEET_SIZE.set(n as i64);
        Some(n)
    }
}
