//! Redis side of a tier's burst pool: [`POOL_BUCKET_LUA`] on [`pool_key`] and [`share_key`].

use crate::config::PoolSettings;
use crate::limit::pool::share_rate;
use crate::limit::Decision;
use crate::store::redis::client::{bucket_late, decision_of, LuaScript, RedisFault};
use crate::store::redis::keys::{pool_key, share_key};
use crate::store::redis::scripts::POOL_BUCKET_LUA;
use std::sync::OnceLock;

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
        let late = || {
            let buckets = [(keys[0].as_str(), pool.rate), (keys[1].as_str(), share)];
            bucket_late(&buckets, cost, |r| r.first().copied())
        };
        let reply: Vec<i64> = store
            .eval_undoable(script, &keys, &args, Some(late))
            .await?;
        decision_of(&reply)
    }
}
