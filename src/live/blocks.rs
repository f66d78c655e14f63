//! Blocks set through the admin API (`store.blocks`, docs/live-state.md#blocks): an address or
//! network (IPv4 or IPv6 CIDR), a tenant or a live key id, each with a reason and an optional
//! expiry. Kept in Redis (one hash) and held whole in memory per instance ([`BlockSet`]), so the
//! request path asks no Redis call: the set is read again when a change is announced and when
//! the version check sees a version it has not loaded. When Redis does not answer, the set
//! last loaded stays in force.
//!
//! An address is matched against the networks by prefix length, most specific first: one hash
//! probe per distinct prefix length present (at most 33 for IPv4, 129 for IPv6), whatever the
//! number of blocks.

use crate::store::redis::client::{LuaScript, RedisFault, RedisStore};
use crate::store::redis::keys as rkeys;
use arc_swap::ArcSwap;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Most blocks kept (a write past it is refused).
pub const MAX_BLOCKS: usize = 100_000;

/// What a block applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An address or network: refused at the edge, before identity.
    Ip,
    /// A tenant id: refused once identity named it.
    Tenant,
    /// A live API key's id (`key_...`): refused once the key resolved.
    Key,
}

impl Kind {
    /// The kind named `text` (`ip`, `tenant`, `key`).
    pub fn parse(text: &str) -> Option<Kind> {
        match text {
            "ip" => Some(Kind::Ip),
            "tenant" => Some(Kind::Tenant),
            "key" => Some(Kind::Key),
            _ => None,
        }
    }

    /// Its name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Ip => "ip",
            Kind::Tenant => "tenant",
            Kind::Key => "key",
        }
    }
}

/// One block (stored as JSON in the blocks hash). Times are Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    #[serde(rename = "type")]
    pub kind: Kind,
    /// The canonical value: a network in CIDR form (an address is `/32` or `/128`), a tenant
    /// id or a key id.
    pub value: String,
    pub reason: String,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

impl Block {
    /// Its id in the store and the API path: `<type>:<value>`.
    pub fn id(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.value)
    }

    /// Whether it is in force at `now_s`.
    pub fn active(&self, now_s: u64) -> bool {
        self.expires_at.is_none_or(|t| now_s < t)
    }

    /// Seconds left at `now_s` (at least 1 while in force); `None` without expiry.
    pub fn remaining_s(&self, now_s: u64) -> Option<u64> {
        self.expires_at.map(|t| t.saturating_sub(now_s).max(1))
    }

    /// The JSON shown by the admin API and in a refusal.
    pub fn view(&self, now_s: u64) -> serde_json::Value {
        serde_json::json!({
            "type": self.kind.as_str(),
            "value": self.value,
            "reason": self.reason,
            "created_at": crate::live::rfc3339(self.created_at),
            "expires_at": self.expires_at.map(crate::live::rfc3339),
            "remaining_s": self.remaining_s(now_s),
        })
    }
}

/// The canonical network of an address or CIDR text (host bits cleared; an IPv4-mapped IPv6
/// address is its IPv4 one). Errors: not an address or network.
pub fn canonical_network(text: &str) -> Result<IpNet, String> {
    let net = match text.parse::<IpNet>() {
        Ok(n) => n,
        Err(_) => match text.parse::<IpAddr>() {
            Ok(a) => IpNet::from(a),
            Err(_) => {
                return Err(format!(
                    "{text:?} is not an IPv4 or IPv6 address or CIDR network (e.g. 203.0.113.7, \
                     198.51.100.0/24, 2001:db8::/32)"
                ))
            }
        },
    };
    let net = net.trunc();
    if let IpNet::V6(v6) = net {
        if let (Some(v4), true) = (v6.addr().to_ipv4_mapped(), v6.prefix_len() >= 96) {
            let len = v6.prefix_len() - 96;
            return Ok(IpNet::V4(
                ipnet::Ipv4Net::new(v4, len).map_err(|e| e.to_string())?,
            ));
        }
    }
    Ok(net)
}

/// The blocks of one moment, indexed for the request path.
#[derive(Debug, Default)]
pub struct BlockSet {
    /// By prefix length, longest first: network bits → block.
    v4: Vec<(u8, HashMap<u32, Arc<Block>>)>,
    v6: Vec<(u8, HashMap<u128, Arc<Block>>)>,
    tenants: HashMap<String, Arc<Block>>,
    keys: HashMap<String, Arc<Block>>,
    len: usize,
}

fn mask4(bits: u32, len: u8) -> u32 {
    bits & u32::MAX.checked_shl(32 - len as u32).unwrap_or(0)
}

fn mask6(bits: u128, len: u8) -> u128 {
    bits & u128::MAX.checked_shl(128 - len as u32).unwrap_or(0)
}

fn insert<T: std::hash::Hash + Eq>(
    by_len: &mut Vec<(u8, HashMap<T, Arc<Block>>)>,
    len: u8,
    bits: T,
    b: Arc<Block>,
) {
    match by_len.iter_mut().find(|(l, _)| *l == len) {
        Some((_, m)) => drop(m.insert(bits, b)),
        None => {
            by_len.push((len, HashMap::from([(bits, b)])));
            by_len.sort_by_key(|e| std::cmp::Reverse(e.0));
        }
    }
}

impl BlockSet {
    /// The set of `blocks` (unparseable IP values are left out).
    pub fn new(blocks: impl IntoIterator<Item = Block>) -> Self {
        let mut set = BlockSet::default();
        for b in blocks {
            let b = Arc::new(b);
            match b.kind {
                Kind::Ip => match b.value.parse::<IpNet>() {
                    Ok(IpNet::V4(n)) => {
                        let len = n.prefix_len();
                        insert(&mut set.v4, len, mask4(n.addr().to_bits(), len), b);
                    }
                    Ok(IpNet::V6(n)) => {
                        let len = n.prefix_len();
                        insert(&mut set.v6, len, mask6(n.addr().to_bits(), len), b);
                    }
                    Err(_) => continue,
                },
                Kind::Tenant => drop(set.tenants.insert(b.value.clone(), b)),
                Kind::Key => drop(set.keys.insert(b.value.clone(), b)),
            }
            set.len += 1;
        }
        set
    }

    /// Blocks held (expired ones included until the next load).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no block is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most specific block in force at `now_s` whose network holds `addr`.
    pub fn ip(&self, addr: IpAddr, now_s: u64) -> Option<&Arc<Block>> {
        match addr.to_canonical() {
            IpAddr::V4(a) => {
                let bits = a.to_bits();
                self.v4
                    .iter()
                    .filter_map(|(len, m)| m.get(&mask4(bits, *len)))
                    .find(|b| b.active(now_s))
            }
            IpAddr::V6(a) => {
                let bits = a.to_bits();
                self.v6
                    .iter()
                    .filter_map(|(len, m)| m.get(&mask6(bits, *len)))
                    .find(|b| b.active(now_s))
            }
        }
    }

    /// The block of tenant `id` in force at `now_s`.
    pub fn tenant(&self, id: &str, now_s: u64) -> Option<&Arc<Block>> {
        self.tenants.get(id).filter(|b| b.active(now_s))
    }

    /// The block of key `id` in force at `now_s`.
    pub fn key(&self, id: &str, now_s: u64) -> Option<&Arc<Block>> {
        self.keys.get(id).filter(|b| b.active(now_s))
    }
}

/// KEYS: blocks hash, version. `{version, record...}`.
const LOAD: &str = r#"
local out = {tostring(redis.call('GET', KEYS[2]) or '0')}
for _, r in ipairs(redis.call('HVALS', KEYS[1])) do out[#out + 1] = r end
return out
"#;

/// KEYS: blocks hash, version. ARGV: block id, record, channel, now (s), most blocks.
/// Expired blocks are dropped first. `{version, previous record or ''}`; version 0 when the
/// hash is full.
const PUT: &str = r#"
for _, r in ipairs(redis.call('HVALS', KEYS[1])) do
  local ok, b = pcall(cjson.decode, r)
  if ok and type(b.expires_at) == 'number' and b.expires_at <= tonumber(ARGV[4]) then
    redis.call('HDEL', KEYS[1], b.type .. ':' .. b.value)
  end
end
local before = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if before == '' and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[5]) then return {'0', ''} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[3], v .. ' blocks')
return {tostring(v), before}
"#;

/// KEYS: blocks hash, version. ARGV: block id, channel. `{version, removed record}`, or
/// `{'0', ''}` when there was none (nothing changes).
const REMOVE: &str = r#"
local before = redis.call('HGET', KEYS[1], ARGV[1])
if not before then return {'0', ''} end
redis.call('HDEL', KEYS[1], ARGV[1])
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], v .. ' blocks')
return {tostring(v), before}
"#;

/// The message a block change publishes after its version.
pub const ANNOUNCED: &str = "blocks";

/// Why a block could not be stored.
#[derive(Debug)]
pub enum PutError {
    /// [`MAX_BLOCKS`] are held already.
    Full,
    Store(RedisFault),
}

/// The blocks of one instance: the set in force, the version it was loaded at, the scripts.
pub struct LiveBlocks {
    prefix: String,
    set: ArcSwap<BlockSet>,
    loaded: AtomicU64,
    reloading: tokio::sync::Mutex<()>,
    load: LuaScript,
    put: LuaScript,
    remove: LuaScript,
    version: LuaScript,
}

impl LiveBlocks {
    /// No blocks yet (the first version check loads them), under `prefix` (`redis.key_prefix`).
    pub fn new(prefix: &str) -> Self {
        LiveBlocks {
            prefix: prefix.to_string(),
            set: ArcSwap::from_pointee(BlockSet::default()),
            loaded: AtomicU64::new(super::UNSEEN),
            reloading: tokio::sync::Mutex::new(()),
            load: LuaScript::new(LOAD),
            put: LuaScript::new(PUT),
            remove: LuaScript::new(REMOVE),
            version: LuaScript::new("return redis.call('GET', KEYS[1])"),
        }
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The set in force now (no Redis call).
    pub fn current(&self) -> arc_swap::Guard<Arc<BlockSet>> {
        self.set.load()
    }

    /// Reads every block from Redis and puts it in force. Errors: Redis did not answer (the
    /// set in force stays).
    pub async fn reload(&self, redis: &RedisStore) -> Result<(), RedisFault> {
        let _one = self.reloading.lock().await;
        let keys = [
            rkeys::live_blocks(&self.prefix),
            rkeys::live_version(&self.prefix),
        ];
        let out: Vec<String> = redis.eval(&self.load, &keys, &[""]).await?;
        let version = out.first().and_then(|v| v.parse().ok()).unwrap_or(0);
        let blocks = out
            .iter()
            .skip(1)
            .filter_map(|t| serde_json::from_str::<Block>(t).ok());
        self.set.store(Arc::new(BlockSet::new(blocks)));
        self.loaded.store(version, Ordering::Release);
        Ok(())
    }

    /// The live state's version in Redis (0 before any change).
    pub async fn version(&self, redis: &RedisStore) -> Result<u64, RedisFault> {
        let keys = [rkeys::live_version(&self.prefix)];
        let v: Option<u64> = redis.eval(&self.version, &keys, &[""]).await?;
        Ok(v.unwrap_or(0))
    }

    /// Reloads when `version` (the store's, read by the version check) is not the one loaded.
    /// Returns whether it reloaded.
    pub async fn checked(&self, redis: &RedisStore, version: u64) -> Result<bool, RedisFault> {
        if self.loaded.load(Ordering::Acquire) == version {
            return Ok(false);
        }
        self.reload(redis).await.map(|()| true)
    }

    /// Every block in the store (expired ones included).
    pub async fn all(&self, redis: &RedisStore) -> Result<Vec<Block>, RedisFault> {
        let keys = [
            rkeys::live_blocks(&self.prefix),
            rkeys::live_version(&self.prefix),
        ];
        let out: Vec<String> = redis.eval(&self.load, &keys, &[""]).await?;
        Ok(out
            .iter()
            .skip(1)
            .filter_map(|t| serde_json::from_str(t).ok())
            .collect())
    }

    /// Stores `block` (replacing one with its id, dropping expired ones) and announces it.
    /// Returns the block it replaced.
    pub async fn put(
        &self,
        redis: &RedisStore,
        block: &Block,
        now_s: u64,
    ) -> Result<Option<Block>, PutError> {
        let keys = [
            rkeys::live_blocks(&self.prefix),
            rkeys::live_version(&self.prefix),
        ];
        let args = [
            block.id(),
            serde_json::to_string(block).unwrap_or_default(),
            rkeys::live_channel(&self.prefix),
            now_s.to_string(),
            MAX_BLOCKS.to_string(),
        ];
        let out: Vec<String> = redis
            .eval(&self.put, &keys, &args)
            .await
            .map_err(PutError::Store)?;
        if out.first().map(String::as_str) == Some("0") {
            return Err(PutError::Full);
        }
        let _ = self.reload(redis).await;
        Ok(out.get(1).and_then(|t| serde_json::from_str(t).ok()))
    }

    /// Removes block `id` and announces it. Returns the removed block (`None`: there was none).
    pub async fn remove(&self, redis: &RedisStore, id: &str) -> Result<Option<Block>, RedisFault> {
        let keys = [
            rkeys::live_blocks(&self.prefix),
            rkeys::live_version(&self.prefix),
        ];
        let args = [id.to_string(), rkeys::live_channel(&self.prefix)];
        let out: Vec<String> = redis.eval(&self.remove, &keys, &args).await?;
        let removed = out.get(1).and_then(|t| serde_json::from_str(t).ok());
        if removed.is_some() {
            let _ = self.reload(redis).await;
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests;
