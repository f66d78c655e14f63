//! The live state (`store:`, docs/live-state.md): API keys issued through the admin API, kept in
//! Redis (only each secret's SHA-256) and served on the request path from a bounded
//! per-instance cache ([`cache`]), so a cached identity costs no Redis call.
//!
//! Every change increments a version counter and is announced on a pub/sub channel (its new
//! version and the digests it touched, [`crate::store::redis::keys::live_channel`]); each
//! instance forgets those digests at once, and its version check (every `store.propagation`,
//! in `runtime::live`) drops the whole cache when it sees a version it has no message for, so a
//! lost message or a partition delays a change by at most `store.propagation`.

pub mod blocks;
pub mod cache;
pub mod keys;
pub mod overrides;
mod scripts;

use crate::config::StoreSettings;
use crate::store::redis::client::{RedisFault, RedisStore};
use crate::store::redis::keys as rkeys;
use cache::{Cached, KeyCache};
use keys::LiveKey;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// No version seen yet.
const UNSEEN: u64 = u64::MAX;

/// RFC 3339 UTC text of a Unix time in seconds.
pub fn rfc3339(unix_s: u64) -> String {
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::from_unix_timestamp(unix_s as i64)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// What a presented key resolves to.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// A key with this digest exists (valid or not: see [`LiveKey::check`]).
    Found(Arc<LiveKey>),
    /// No live key has this digest.
    Unknown,
    /// Not cached and the store did not answer.
    Unavailable(RedisFault),
}

/// The live state of one instance: settings, the key cache, the version last seen, the
/// scripts, and the limit overrides.
pub struct LiveKeys {
    pub settings: StoreSettings,
    prefix: String,
    cache: KeyCache,
    seen: AtomicU64,
    epoch: Instant,
    scripts: scripts::Scripts,
    /// The live limit overrides (`store.overrides`), `None` when off.
    pub overrides: Option<overrides::Overrides>,
}

impl LiveKeys {
    /// The live keys under `prefix` (`redis.key_prefix`).
    pub fn new(settings: &StoreSettings, prefix: &str) -> Self {
        let c = &settings.cache;
        LiveKeys {
            settings: settings.clone(),
            prefix: prefix.to_string(),
            cache: KeyCache::new(
                c.max_entries,
                c.ttl.as_millis() as u64,
                c.negative_ttl.as_millis() as u64,
            ),
            seen: AtomicU64::new(UNSEEN),
            epoch: Instant::now(),
            scripts: scripts::Scripts::new(),
            overrides: settings
                .overrides
                .then(|| overrides::Overrides::new(prefix, c.max_entries)),
        }
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Entries cached now.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// The key of `digest`: from the cache, else one Redis call (its answer cached, an unknown
    /// digest for `negative_ttl`); a cached key past its TTL is served when Redis fails.
    pub async fn resolve(&self, redis: &RedisStore, digest: [u8; 32]) -> Resolved {
        let now = self.now_ms();
        let stale = match self.cache.get(&digest, now) {
            Cached::Fresh(Some(k)) => return Resolved::Found(k),
            Cached::Fresh(None) => return Resolved::Unknown,
            Cached::Stale(k) => Some(k),
            Cached::Miss => None,
        };
        match self.lookup(redis, &hex::encode(digest)).await {
            Ok(found) => {
                let found = found.map(Arc::new);
                self.cache.put(digest, found.clone(), now);
                found.map_or(Resolved::Unknown, Resolved::Found)
            }
            Err(fault) => match stale {
                Some(k) => Resolved::Found(k),
                None => Resolved::Unavailable(fault),
            },
        }
    }

    /// The record of the key whose secret has `digest_hex`, read from Redis.
    pub async fn lookup(
        &self,
        redis: &RedisStore,
        digest_hex: &str,
    ) -> Result<Option<LiveKey>, RedisFault> {
        let keys = [rkeys::live_digest_key(&self.prefix, digest_hex)];
        let args = [rkeys::live_record_prefix(&self.prefix)];
        let text: Option<String> = redis.eval(&self.scripts.lookup, &keys, &args).await?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// The digests of `digests` (lower-case hex) that a key issued through the admin API has
    /// too, each with that key's id: one script call per 1000 digests.
    pub async fn shared_digests(
        &self,
        redis: &RedisStore,
        digests: &[String],
    ) -> Result<Vec<(String, String)>, RedisFault> {
        let mut shared = Vec::new();
        for chunk in digests.chunks(1000) {
            let keys: Vec<String> = chunk
                .iter()
                .map(|d| rkeys::live_digest_key(&self.prefix, d))
                .collect();
            let ids: Vec<Option<String>> = redis.eval(&self.scripts.ids, &keys, &[""]).await?;
            shared.extend(
                chunk
                    .iter()
                    .zip(ids)
                    .filter_map(|(d, id)| Some((d.clone(), id?))),
            );
        }
        Ok(shared)
    }

    /// The record of key `id`.
    pub async fn get(&self, redis: &RedisStore, id: &str) -> Result<Option<LiveKey>, RedisFault> {
        let keys = [rkeys::live_record_key(&self.prefix, id)];
        let text: Option<String> = redis.eval(&self.scripts.get, &keys, &[""]).await?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// Every live (not revoked) key of `tenant`.
    pub async fn of_tenant(
        &self,
        redis: &RedisStore,
        tenant: &str,
    ) -> Result<Vec<LiveKey>, RedisFault> {
        let keys = [rkeys::live_tenant_keys(&self.prefix, tenant)];
        let args = [rkeys::live_record_prefix(&self.prefix)];
        let texts: Vec<String> = redis.eval(&self.scripts.list, &keys, &args).await?;
        Ok(texts
            .iter()
            .filter_map(|t| serde_json::from_str(t).ok())
            .collect())
    }

    /// Stores a new key. `Ok(false)`: the tenant has a key of that name already.
    pub async fn create(&self, redis: &RedisStore, key: &LiveKey) -> Result<bool, RedisFault> {
        let p = &self.prefix;
        let keys = [
            rkeys::live_digest_key(p, &key.digest),
            rkeys::live_record_key(p, &key.id),
            rkeys::live_tenant_keys(p, &key.tenant),
            rkeys::live_version(p),
        ];
        let record = serde_json::to_string(key).unwrap_or_default();
        let args = [
            key.id.clone(),
            record,
            key.name.clone(),
            rkeys::live_channel(p),
            key.digest.clone(),
        ];
        let v: i64 = redis.eval(&self.scripts.create, &keys, &args).await?;
        Ok(v > 0)
    }

    /// Writes `key` revoked (its secrets no longer resolve).
    pub async fn revoke(&self, redis: &RedisStore, key: &LiveKey) -> Result<(), RedisFault> {
        let p = &self.prefix;
        let mut keys = vec![
            rkeys::live_record_key(p, &key.id),
            rkeys::live_version(p),
            rkeys::live_tenant_keys(p, &key.tenant),
            rkeys::live_digest_key(p, &key.digest),
        ];
        let mut digests = vec![key.digest.clone()];
        if let Some(old) = &key.previous_digest {
            keys.push(rkeys::live_digest_key(p, old));
            digests.push(old.clone());
        }
        let record = serde_json::to_string(key).unwrap_or_default();
        let args = [
            record,
            rkeys::live_channel(p),
            digests.join(","),
            key.name.clone(),
        ];
        let _: i64 = redis.eval(&self.scripts.revoke, &keys, &args).await?;
        Ok(())
    }

    /// Writes `key` rotated: its new digest resolves, `replaced` (the previous current digest)
    /// for `grace_ms` more (deleted when 0), and `dropped` (an older rotated-out digest) no more.
    pub async fn rotate(
        &self,
        redis: &RedisStore,
        key: &LiveKey,
        replaced: &str,
        dropped: Option<&str>,
        grace_ms: u64,
    ) -> Result<(), RedisFault> {
        let p = &self.prefix;
        let mut keys = vec![
            rkeys::live_record_key(p, &key.id),
            rkeys::live_version(p),
            rkeys::live_digest_key(p, &key.digest),
            rkeys::live_digest_key(p, replaced),
        ];
        let mut digests = vec![key.digest.clone(), replaced.to_string()];
        if let Some(d) = dropped.filter(|d| *d != replaced) {
            keys.push(rkeys::live_digest_key(p, d));
            digests.push(d.to_string());
        }
        let record = serde_json::to_string(key).unwrap_or_default();
        let args = [
            record,
            rkeys::live_channel(p),
            digests.join(","),
            key.id.clone(),
            grace_ms.to_string(),
        ];
        let _: i64 = redis.eval(&self.scripts.rotate, &keys, &args).await?;
        Ok(())
    }

    /// The live state's version in Redis (0 before any change).
    pub async fn version(&self, redis: &RedisStore) -> Result<u64, RedisFault> {
        let keys = [rkeys::live_version(&self.prefix)];
        let v: Option<u64> = redis.eval(&self.scripts.get, &keys, &[""]).await?;
        Ok(v.unwrap_or(0))
    }

    /// A change announced on the channel: `<version> <digest>,<digest>...`. Its digests are
    /// forgotten; the version counts as seen when it is the next one.
    pub fn announced(&self, message: &str) {
        let (version, digests) = message.split_once(' ').unwrap_or(("", message));
        for d in digests.split(',') {
            let mut digest = [0u8; 32];
            if hex::decode_to_slice(d, &mut digest).is_ok() {
                self.cache.forget(&digest);
            }
        }
        if let Ok(v) = version.parse::<u64>() {
            let _ = self.seen.compare_exchange(
                v.wrapping_sub(1),
                v,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
    }

    /// The version check: a version other than the last seen (a change whose message did not
    /// arrive, or the first check) drops the whole cache. Returns whether it did.
    pub fn checked(&self, version: u64) -> bool {
        let before = self.seen.swap(version, Ordering::AcqRel);
        if before != version {
            self.cache.clear();
            return before != UNSEEN;
        }
        false
    }
}
