//! Penalty boxes (`limits[].block_for`, docs/rules.md#penalty-box): a key refused by a rule with
//! `block_for` is refused for that long. In Redis, one key per blocked rule key with an expiry,
//! shared by the fleet (`lua/block.lua`); when Redis cannot answer, [`LocalBlocks`] in this
//! instance's memory.

use super::QuotaService;
use crate::store::redis::client::{LuaScript, RedisFault};
use crate::store::redis::scripts::BLOCK_LUA;
use once_cell::sync::Lazy;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static BLOCK: Lazy<LuaScript> = Lazy::new(|| LuaScript::new(BLOCK_LUA));

/// Most blocks held in memory at once; at the limit, expired ones are dropped first, then the
/// block closest to its end.
pub const MAX_LOCAL_BLOCKS: usize = 100_000;

impl QuotaService {
    /// The remaining ms of the block at `key` (0: none). `extend_ms`: a block found is started
    /// again for that long (`extend_on_refusal`). Errors: the Redis fault.
    pub async fn block_left(&self, key: &str, extend_ms: Option<u64>) -> Result<u64, RedisFault> {
        let args = [
            "check".to_string(),
            extend_ms.unwrap_or(0).to_string(),
            u8::from(extend_ms.is_some()).to_string(),
        ];
        let left: i64 = self.redis.eval(&BLOCK, &[key.to_string()], &args).await?;
        Ok(left.max(0) as u64)
    }

    /// Blocks `key` for `ms` (a running block kept as it is unless `extend`): the block's
    /// remaining ms. Errors: the Redis fault.
    pub async fn block(&self, key: &str, ms: u64, extend: bool) -> Result<u64, RedisFault> {
        let args = [
            "set".to_string(),
            ms.to_string(),
            u8::from(extend).to_string(),
        ];
        let left: i64 = self.redis.eval(&BLOCK, &[key.to_string()], &args).await?;
        Ok(left.max(0) as u64)
    }
}

/// Blocks held in this instance's memory (the `local` failure policy), bounded by
/// [`MAX_LOCAL_BLOCKS`].
#[derive(Debug, Default)]
pub struct LocalBlocks {
    until: Mutex<HashMap<String, Instant>>,
}

impl LocalBlocks {
    /// The process-wide blocks.
    pub fn global() -> &'static LocalBlocks {
        static BLOCKS: Lazy<LocalBlocks> = Lazy::new(LocalBlocks::default);
        &BLOCKS
    }

    /// What is left of the block at `key` at `now` (zero: none); `extend`: a block found
    /// starts again for that long.
    pub fn left(&self, key: &str, now: Instant, extend: Option<Duration>) -> Duration {
        let mut map = self.until.lock().unwrap_or_else(|e| e.into_inner());
        let Some(until) = map.get_mut(key) else {
            return Duration::ZERO;
        };
        if *until <= now {
            map.remove(key);
            return Duration::ZERO;
        }
        if let Some(d) = extend {
            *until = now + d;
        }
        *until - now
    }

    /// Blocks `key` from `now` for `d` (a running block kept unless `extend`): what is left.
    pub fn block(&self, key: &str, now: Instant, d: Duration, extend: bool) -> Duration {
        let mut map = self.until.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(until) = map.get(key).filter(|u| **u > now && !extend) {
            return *until - now;
        }
        if map.len() >= MAX_LOCAL_BLOCKS && !map.contains_key(key) {
            map.retain(|_, u| *u > now);
            if map.len() >= MAX_LOCAL_BLOCKS {
                let soonest = map.iter().min_by_key(|(_, u)| **u).map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    map.remove(&k);
                }
            }
        }
        map.insert(key.to_string(), now + d);
        d
    }
}

#[cfg(test)]
mod tests;
