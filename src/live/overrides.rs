//! Live limit overrides (docs/live-state.md#live-limit-overrides): a tenant's limits set through
//! `PUT /v1/tenants/{id}/limits`, kept in one Redis hash beside the live keys and held by every
//! instance as a full in-memory copy, so the request path reads them without a Redis call.
//!
//! The copy is bounded: the hash holds at most `store.cache.max_entries` overrides (a write
//! beyond is refused). Every change increments the overrides' generation and the shared live
//! version and announces `<version> overrides` on the live channel; an instance reads the hash
//! again on that message, and its version check (every `store.propagation`) reads it again
//! whenever the generation differs from the one it holds, so a lost message delays a change by
//! at most `store.propagation`. When Redis does not answer, the copy held stays in force. An
//! expired override stops applying on every instance at its expiry (each checks the time).
//!
//! The same hash holds the overrides of single keys of limit rules (`PUT
//! /v1/rules/{rule}/keys/{key}/limits`), field `r:<rule>:<key text>`, held beside the tenants'
//! and looked up by rule name and key text; with none held the request path asks nothing.

use crate::config::{LimitOverride, TenantOverride};
use crate::limit::calendar::{CalendarQuota, Period};
use crate::store::redis::client::{LuaScript, RedisFault, RedisStore};
use crate::store::redis::keys as rkeys;
use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The kind of change in a live channel message (`<version> overrides`).
pub const KIND: &str = "overrides";

/// No generation read yet.
const UNSEEN: u64 = u64::MAX;

/// One calendar quota limit of an override, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredQuota {
    pub limit: u64,
    /// `hour`, `day`, `week` or `month`.
    pub period: String,
}

/// The bucket fields of an override (a tier's usage budget, or one key of a limit rule), as
/// stored: `per` as written (`"1d"`) and in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StoredRate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

impl StoredRate {
    /// The checked `fields` of a bucket's override, with `per` as it was written.
    pub fn from_fields(fields: &TenantOverride, per: Option<String>) -> Self {
        StoredRate {
            limit: fields.limit,
            per,
            per_ms: fields.per_ms,
            burst: fields.burst,
        }
    }

    /// The fields as an override of a bucket.
    pub fn fields(&self) -> TenantOverride {
        TenantOverride {
            tier: None,
            limit: self.limit,
            per_ms: self.per_ms,
            burst: self.burst,
        }
    }

    /// The JSON shown by the admin API: the fields set (`per` as written).
    pub fn view(&self) -> Value {
        let mut v = json!({});
        if let Some(l) = self.limit {
            v["limit"] = json!(l);
        }
        if let Some(p) = &self.per {
            v["per"] = json!(p);
        }
        if let Some(b) = self.burst {
            v["burst"] = json!(b);
        }
        v
    }
}

/// Which key of which limit rule an override governs: the rule's name, the key's values as
/// given (one per part of the rule's `key:`, in order) and their encoded key text
/// ([`rule_key_text`](crate::store::redis::keys::rule_key_text)), which the request path
/// looks up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleKey {
    pub rule: String,
    pub values: Vec<String>,
    pub text: String,
}

/// An override as stored in Redis (JSON): a tenant's (`tenant` set), or one key of a limit
/// rule's (`rule_key` set, then only the bucket's `rate`). Times are Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredOverride {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_key: Option<RuleKey>,
    /// The main bucket's fields (`limit`, `per`, `per_ms`, `burst`, at the record's top level).
    #[serde(flatten)]
    pub rate: StoredRate,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<StoredQuota>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u64>,
    /// The tier's usage budget's bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<StoredRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    pub updated_at: u64,
}

impl StoredOverride {
    /// Whether it applies at `now_s` (not expired).
    pub fn in_force(&self, now_s: u64) -> bool {
        self.expires_at.is_none_or(|t| now_s < t)
    }

    /// The limits it sets (a quota of an unknown period, which validation never stores, is
    /// skipped).
    pub fn limits(&self) -> LimitOverride {
        LimitOverride {
            rate: self.rate.fields(),
            quotas: self
                .quotas
                .iter()
                .filter_map(|q| {
                    Period::parse(&q.period).map(|period| CalendarQuota {
                        limit: q.limit,
                        period,
                    })
                })
                .collect(),
            max_in_flight: self.max_in_flight,
            usage: self.usage.as_ref().map(StoredRate::fields),
        }
    }

    /// The JSON shown by the admin API: the fields set (`quotas` as period → limit),
    /// `expires_at` and `updated_at` as RFC 3339 text.
    pub fn view(&self) -> Value {
        let mut v = self.rate.view();
        v["updated_at"] = json!(super::rfc3339(self.updated_at));
        let set = |v: &mut Value, k: &str, x: Option<Value>| {
            if let Some(x) = x {
                v[k] = x;
            }
        };
        if !self.quotas.is_empty() {
            let by_period: serde_json::Map<String, Value> = self
                .quotas
                .iter()
                .map(|q| (q.period.clone(), json!(q.limit)))
                .collect();
            v["quotas"] = Value::Object(by_period);
        }
        set(
            &mut v,
            "max_in_flight",
            self.max_in_flight.map(|x| json!(x)),
        );
        set(&mut v, "usage", self.usage.as_ref().map(StoredRate::view));
        set(
            &mut v,
            "expires_at",
            self.expires_at.map(|t| json!(super::rfc3339(t))),
        );
        v
    }
}

/// An override held in memory: the record and the limits it sets.
#[derive(Debug)]
struct Held {
    stored: StoredOverride,
    limits: Arc<LimitOverride>,
}

/// The overrides held in memory: tenants' by tenant id, rule keys' by rule name then key text.
#[derive(Debug, Default)]
struct Memory {
    tenants: HashMap<String, Held>,
    rules: HashMap<String, HashMap<String, Held>>,
}

/// KEYS: hash, generation. ARGV: the generation held. `{generation}` when it is the one held,
/// else `{generation, record...}`.
const LOAD: &str = r#"
local g = redis.call('GET', KEYS[2]) or '0'
if g == ARGV[1] then return {g} end
local out = {g}
for _, r in ipairs(redis.call('HVALS', KEYS[1])) do out[#out + 1] = r end
return out
"#;

/// KEYS: hash. ARGV: field. The record, or nil.
const GET: &str = r#"return redis.call('HGET', KEYS[1], ARGV[1])"#;

/// KEYS: hash, generation, version. ARGV: field, record, most entries, channel. -1 when the
/// hash is full, else the new version.
const PUT: &str = r#"
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0
   and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[2])
local v = redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[4], v .. ' overrides')
return v
"#;

/// KEYS: hash, generation, version. ARGV: field, channel. 0 when there was none, else the new
/// version.
const DELETE: &str = r#"
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('INCR', KEYS[2])
local v = redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[2], v .. ' overrides')
return v
"#;

/// The hash field of tenant `id`'s override.
fn field(tenant: &str) -> String {
    format!("t:{tenant}")
}

/// The hash field of an override: `t:<tenant>`, or `r:<rule>:<key text>` (rule names hold no
/// `:`).
fn field_of(o: &StoredOverride) -> String {
    match &o.rule_key {
        Some(k) => rule_field(&k.rule, &k.text),
        None => field(&o.tenant),
    }
}

/// The hash field of the override of key `text` of rule `rule`.
fn rule_field(rule: &str, text: &str) -> String {
    format!("r:{rule}:{text}")
}

/// The overrides of one instance: the in-memory copy and the generation it was read at.
pub struct Overrides {
    prefix: String,
    max_entries: usize,
    held: ArcSwap<Memory>,
    /// Whether `held` has any rule key's override: the request path's one check.
    any_rule_key: AtomicBool,
    generation: AtomicU64,
    load: LuaScript,
    get: LuaScript,
    put: LuaScript,
    delete: LuaScript,
}

impl Overrides {
    /// The overrides under `prefix` (`redis.key_prefix`), at most `max_entries` of them.
    pub fn new(prefix: &str, max_entries: usize) -> Self {
        Overrides {
            prefix: prefix.to_string(),
            max_entries: max_entries.max(1),
            held: ArcSwap::from_pointee(Memory::default()),
            any_rule_key: AtomicBool::new(false),
            generation: AtomicU64::new(UNSEEN),
            load: LuaScript::new(LOAD),
            get: LuaScript::new(GET),
            put: LuaScript::new(PUT),
            delete: LuaScript::new(DELETE),
        }
    }

    /// Most overrides the store holds.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The limits set for `tenant` in force at `now_s` (from memory; no Redis call).
    pub fn of(&self, tenant: &str, now_s: u64) -> Option<Arc<LimitOverride>> {
        let held = self.held.load();
        let h = held.tenants.get(tenant)?;
        h.stored.in_force(now_s).then(|| h.limits.clone())
    }

    /// Whether any key of a limit rule has an override (in force or not): when none has, the
    /// request path looks no further.
    pub fn any_rule_key(&self) -> bool {
        self.any_rule_key.load(Ordering::Acquire)
    }

    /// The bucket fields set for key `text` ([`rule_key_text`](crate::store::redis::keys::rule_key_text))
    /// of rule `rule`, in force at `now_s` (from memory; no Redis call).
    pub fn of_rule_key(&self, rule: &str, text: &str, now_s: u64) -> Option<TenantOverride> {
        let held = self.held.load();
        let h = held.rules.get(rule)?.get(text)?;
        h.stored.in_force(now_s).then(|| h.limits.rate.clone())
    }

    /// Overrides held now (expired ones included until the next read).
    pub fn held(&self) -> usize {
        let held = self.held.load();
        held.tenants.len() + held.rules.values().map(HashMap::len).sum::<usize>()
    }

    fn keys(&self) -> [String; 3] {
        [
            rkeys::live_overrides(&self.prefix),
            rkeys::live_overrides_generation(&self.prefix),
            rkeys::live_version(&self.prefix),
        ]
    }

    /// Reads the overrides again when their generation in Redis differs from the one held
    /// (one call; the records only when they changed). Returns whether the copy changed. On
    /// a fault the copy held stays.
    pub async fn refresh(&self, redis: &RedisStore) -> Result<bool, RedisFault> {
        let [hash, generation, _] = self.keys();
        let held = self.generation.load(Ordering::Acquire);
        let known = if held == UNSEEN {
            String::new()
        } else {
            held.to_string()
        };
        let out: Vec<String> = redis
            .eval(&self.load, &[hash, generation], &[known])
            .await?;
        let Some((g, records)) = out.split_first() else {
            return Ok(false);
        };
        let g: u64 = g.parse().unwrap_or(0);
        if g == held {
            return Ok(false);
        }
        let mut copy = Memory::default();
        for stored in records
            .iter()
            .filter_map(|r| serde_json::from_str::<StoredOverride>(r).ok())
        {
            let limits = Arc::new(stored.limits());
            match stored.rule_key.clone() {
                Some(k) => {
                    let held = Held { stored, limits };
                    copy.rules.entry(k.rule).or_default().insert(k.text, held);
                }
                None => {
                    let id = stored.tenant.clone();
                    copy.tenants.insert(id, Held { stored, limits });
                }
            }
        }
        let any_rule_key = !copy.rules.is_empty();
        self.held.store(Arc::new(copy));
        self.any_rule_key.store(any_rule_key, Ordering::Release);
        self.generation.store(g, Ordering::Release);
        Ok(true)
    }

    /// The stored override of `tenant` (expired or not), read from Redis.
    pub async fn get(
        &self,
        redis: &RedisStore,
        tenant: &str,
    ) -> Result<Option<StoredOverride>, RedisFault> {
        self.get_field(redis, field(tenant)).await
    }

    /// The stored override of key `text` of rule `rule` (expired or not), read from Redis.
    pub async fn get_rule_key(
        &self,
        redis: &RedisStore,
        rule: &str,
        text: &str,
    ) -> Result<Option<StoredOverride>, RedisFault> {
        self.get_field(redis, rule_field(rule, text)).await
    }

    async fn get_field(
        &self,
        redis: &RedisStore,
        field: String,
    ) -> Result<Option<StoredOverride>, RedisFault> {
        let [hash, _, _] = self.keys();
        let text: Option<String> = redis.eval(&self.get, &[hash], &[field]).await?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// Stores `o` (replacing the tenant's, or the rule key's, override). `Ok(false)`: the
    /// store is full.
    pub async fn put(&self, redis: &RedisStore, o: &StoredOverride) -> Result<bool, RedisFault> {
        let record = serde_json::to_string(o).unwrap_or_default();
        let args = [
            field_of(o),
            record,
            self.max_entries.to_string(),
            rkeys::live_channel(&self.prefix),
        ];
        let v: i64 = redis.eval(&self.put, &self.keys(), &args).await?;
        if v > 0 {
            self.refresh(redis).await.ok();
        }
        Ok(v > 0)
    }

    /// Removes `tenant`'s override. `Ok(false)`: it had none.
    pub async fn delete(&self, redis: &RedisStore, tenant: &str) -> Result<bool, RedisFault> {
        self.delete_field(redis, field(tenant)).await
    }

    /// Removes the override of key `text` of rule `rule`. `Ok(false)`: it had none.
    pub async fn delete_rule_key(
        &self,
        redis: &RedisStore,
        rule: &str,
        text: &str,
    ) -> Result<bool, RedisFault> {
        self.delete_field(redis, rule_field(rule, text)).await
    }

    async fn delete_field(&self, redis: &RedisStore, field: String) -> Result<bool, RedisFault> {
        let args = [field, rkeys::live_channel(&self.prefix)];
        let v: i64 = redis.eval(&self.delete, &self.keys(), &args).await?;
        if v > 0 {
            self.refresh(redis).await.ok();
        }
        Ok(v > 0)
    }
}

/// Whether a live channel message announces an override change.
pub fn announces_overrides(message: &str) -> bool {
    message
        .split_once(' ')
        .is_some_and(|(_, kind)| kind == KIND)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(expires_at: Option<u64>) -> StoredOverride {
        StoredOverride {
            tenant: "acme".into(),
            rate: StoredRate {
                limit: Some(6),
                per: Some("1d".into()),
                per_ms: Some(86_400_000),
                burst: None,
            },
            quotas: vec![StoredQuota {
                limit: 9,
                period: "month".into(),
            }],
            max_in_flight: Some(2),
            usage: Some(StoredRate {
                limit: Some(50),
                per: Some("1d".into()),
                per_ms: Some(86_400_000),
                burst: None,
            }),
            rule_key: None,
            expires_at,
            updated_at: 100,
        }
    }

    #[test]
    fn expiry_ends_an_override() {
        let s = stored(Some(200));
        assert!(s.in_force(199));
        assert!(!s.in_force(200));
        assert!(stored(None).in_force(u64::MAX));
    }

    #[test]
    fn limits_and_view_carry_the_fields_set() {
        let s = stored(None);
        let l = s.limits();
        assert_eq!(l.rate.limit, Some(6));
        assert_eq!(l.rate.burst, None);
        assert_eq!(l.quotas[0].period, Period::Month);
        assert_eq!(l.max_in_flight, Some(2));
        let v = s.view();
        assert_eq!(v["per"], "1d");
        assert!(v.get("burst").is_none());
        assert_eq!(v["quotas"]["month"], 9);
        assert_eq!(v["usage"], json!({"limit": 50, "per": "1d"}));
        assert_eq!(l.usage.as_ref().and_then(|u| u.limit), Some(50));
        let back: StoredOverride =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn the_bucket_fields_stay_at_the_records_top_level() {
        let text = r#"{"tenant":"acme","limit":6,"per":"1d","per_ms":86400000,"quotas":[{"limit":9,"period":"month"}],"max_in_flight":2,"usage":{"limit":50,"per":"1d","per_ms":86400000},"updated_at":100}"#;
        let read: StoredOverride = serde_json::from_str(text).unwrap();
        assert_eq!(read, stored(None));
        let written: Value = serde_json::to_value(&read).unwrap();
        assert_eq!(written, serde_json::from_str::<Value>(text).unwrap());
    }

    #[test]
    fn fields_of_tenants_and_rule_keys_never_meet() {
        let mut s = stored(None);
        assert_eq!(field_of(&s), "t:acme");
        s.tenant = String::new();
        s.rule_key = Some(RuleKey {
            rule: "per-user".into(),
            values: vec!["alice".into()],
            text: "header%3Ax-user=5.alice".into(),
        });
        assert_eq!(field_of(&s), "r:per-user:header%3Ax-user=5.alice");
        let text = serde_json::to_string(&s).unwrap();
        assert!(!text.contains("\"tenant\""), "{text}");
        assert_eq!(serde_json::from_str::<StoredOverride>(&text).unwrap(), s);
    }

    #[test]
    fn messages_of_the_overrides_kind() {
        assert!(announces_overrides("7 overrides"));
        assert!(!announces_overrides("7 abcdef"));
        assert!(!announces_overrides("overrides"));
    }
}
