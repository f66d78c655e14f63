//! Settlement of a tier's usage budget (`tiers.<name>.usage`, docs/DESIGN.md 4e "Usage cost"):
//! the reserve was debited at admission as one entry of the tier's policy call; when the
//! response ends, one call of `lua/usage_settle.lua` debits what the backend used beyond the
//! reserve, or gives back what it did not use.

use super::QuotaService;
use crate::limit::Rate;
use crate::store::redis::client::{LuaScript, RedisFault};
use crate::store::redis::scripts::USAGE_SETTLE_LUA;
use once_cell::sync::Lazy;

static SETTLE: Lazy<LuaScript> = Lazy::new(|| LuaScript::new(USAGE_SETTLE_LUA));

/// The bucket after a settlement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Whole units left (negative: a debt the refill pays first).
    pub level: i64,
    /// Milliseconds until the bucket is full.
    pub full_ms: u64,
}

impl QuotaService {
    /// Debits `delta` units (negative: refunds) from the usage bucket `key` sized `rate`, in
    /// one script call. Errors: the Redis fault (the caller counts it; the reserve stays as
    /// debited at admission).
    pub async fn settle_usage(
        &self,
        key: String,
        rate: &Rate,
        delta: i64,
    ) -> Result<Settled, RedisFault> {
        let args = [
            rate.limit.to_string(),
            rate.per_ms.to_string(),
            rate.burst.to_string(),
            delta.to_string(),
        ];
        let reply: Vec<i64> = self.redis.eval(&SETTLE, &[key], &args).await?;
        match reply.as_slice() {
            [level, full_ms] => Ok(Settled {
                level: *level,
                full_ms: (*full_ms).max(0) as u64,
            }),
            _ => Err(RedisFault::Other),
        }
    }
}
