//! Redis side of a tier's burst pool: the script and its keys (see `lua/pool_bucket.lua`).

use crate::config::PoolSettings;
use crate::limit::pool::share_rate;
use crate::limit::Decision;
use crate::store::redis::client::{LuaScript, RedisFault};
use crate::tenant_id;
use std::sync::OnceLock;

/// The pool script (two token buckets debited together; mirrors `crate::limit::pool::decide`),
/// `lua/pool_bucket.lua` behind the shared refill `lua/lib/refill.lua`.
pub const POOL_BUCKET_LUA: &str = concat!(
    include_str!("../../lua/lib/refill.lua"),
    include_str!("../../lua/pool_bucket.lua")
);

/// `<prefix>:{pool:<tier>}:tb`: the pool bucket, in its own Cluster hash tag.
pub fn pool_key(prefix: &str, tier: &str) -> String {
    format!("{prefix}:{{pool:{tier}}}:tb")
}

/// `<prefix>:{pool:<tier>}:share:<encoded tenant>`: the tenant's share bucket, in the pool's hash
/// tag so the script touches one slot (the tenant is percent-encoded like every tenant key).
pub fn share_key(prefix: &str, tier: &str, tenant: &str) -> String {
    format!(
        "{prefix}:{{pool:{tier}}}:share:{}",
        tenant_id::encode(tenant)
    )
}

/// The pool's answer for one request that the tenant's own bucket refused, or why there is none.
impl super::QuotaService {
    /// Runs the pool script for `tenant` of `tier` through [`RedisStore::eval`](crate::store::redis::client::RedisStore::eval)
    /// (one EVALSHA on the pool's slot, bounded by `redis.timeout_ms`).
    ///
    /// Errors: a [`RedisFault`]; the caller then keeps the tenant bucket's refusal (a pool that
    /// cannot be asked admits nothing extra).
    pub async fn decide_pool(
        &self,
        tier: &str,
        tenant: &str,
        pool: &PoolSettings,
        cost: u64,
    ) -> Result<Decision, RedisFault> {
        static SCRIPT: OnceLock<LuaScript> = OnceLock::new();
        let script = SCRIPT.get_or_init(|| LuaScript::new(POOL_BUCKET_LUA));
        let store = &self.redis;
        let share = share_rate(&pool.rate, pool.max_share);
        let keys = [
            pool_key(store.key_prefix(), tier),
            share_key(store.key_prefix(), tier, tenant),
        ];
        let args = [
            pool.rate.limit,
            pool.rate.per_ms,
            pool.rate.burst,
            share.limit,
            share.burst,
            cost,
        ];
        let reply: Vec<i64> = store.eval(script, &keys, &args).await?;
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
