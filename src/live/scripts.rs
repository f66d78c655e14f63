//! The Lua scripts of the live state. Every key they touch shares the hash tag
//! [`crate::store::redis::keys::LIVE_TAG`] (one Cluster slot); a change increments the version
//! and publishes `<version> <digests>` on the channel in the same call.

use crate::store::redis::client::LuaScript;

/// KEYS: digest key. ARGV: record key prefix. The record's JSON, or nil.
const LOOKUP: &str = r#"
local id = redis.call('GET', KEYS[1])
if not id then return false end
return redis.call('GET', ARGV[1] .. id)
"#;

/// KEYS: one key. The value, or nil.
const GET: &str = r#"return redis.call('GET', KEYS[1])"#;

/// KEYS: digest keys. The key id of each (nil where there is none).
const IDS: &str = r#"return redis.call('MGET', unpack(KEYS))"#;

/// KEYS: tenant hash. ARGV: record key prefix. Every record of the tenant's keys.
const LIST: &str = r#"
local out = {}
for _, id in ipairs(redis.call('HVALS', KEYS[1])) do
  local r = redis.call('GET', ARGV[1] .. id)
  if r then out[#out + 1] = r end
end
return out
"#;

/// KEYS: digest key, record key, tenant hash, version. ARGV: id, record, name, channel, digest.
/// 0 when the name or digest is taken, else the new version.
const CREATE: &str = r#"
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then return 0 end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[1])
local v = redis.call('INCR', KEYS[4])
redis.call('PUBLISH', ARGV[4], v .. ' ' .. ARGV[5])
return v
"#;

/// KEYS: record key, version, tenant hash, digest keys... ARGV: record, channel, digests, name.
const REVOKE: &str = r#"
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[4])
for i = 4, #KEYS do redis.call('DEL', KEYS[i]) end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], v .. ' ' .. ARGV[3])
return v
"#;

/// KEYS: record key, version, new digest key, replaced digest key, [dropped digest key].
/// ARGV: record, channel, digests, id, grace ms.
const ROTATE: &str = r#"
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[3], ARGV[4])
if tonumber(ARGV[5]) > 0 then
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
else
  redis.call('DEL', KEYS[4])
end
if KEYS[5] then redis.call('DEL', KEYS[5]) end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], v .. ' ' .. ARGV[3])
return v
"#;

/// The scripts, with their SHA-1s computed once.
pub(super) struct Scripts {
    pub lookup: LuaScript,
    pub get: LuaScript,
    pub ids: LuaScript,
    pub list: LuaScript,
    pub create: LuaScript,
    pub revoke: LuaScript,
    pub rotate: LuaScript,
}

impl Scripts {
    pub fn new() -> Self {
        Scripts {
            lookup: LuaScript::new(LOOKUP),
            get: LuaScript::new(GET),
            ids: LuaScript::new(IDS),
            list: LuaScript::new(LIST),
            create: LuaScript::new(CREATE),
            revoke: LuaScript::new(REVOKE),
            rotate: LuaScript::new(ROTATE),
        }
    }
}
