//! Every Redis key the gateway writes or reads, as pure functions of the key prefix
//! (`redis.key_prefix`) and the names in it. The Lua scripts and the integration tests depend on
//! these exact strings.
//!
//! The part in braces is the Redis Cluster hash tag: every key one script touches shares it, so
//! one call stays on one slot. Tenant keys are tagged by the tenant, written percent-encoded
//! ([`tenant_tag`]: no `{`, `}` or `:` inside) so the tag is exactly the tenant.
//!
//! Every key is injective across families (docs/redis.md#redis-key-layout): a tenant's tag never
//! holds a `:`, while every other family's tag does (`{pool:<tier>}`, `{r:<rule>:...}`,
//! `{c:<rule>:...}`) or is `{fleet}`, whose one key (`:members`) no tenant key ends with; tier,
//! rule, usage and region names are `[A-Za-z0-9_-]` (no `:`), and rule key texts are
//! length-prefixed and percent-encoded ([`rule_key_text`]). So no tenant id, rule name or key
//! value can spell another family's key.

use crate::limit::algorithm::Algorithm;
use crate::limit::calendar::Period;
use crate::tenant_id;
use percent_encoding::{percent_encode, AsciiSet, NON_ALPHANUMERIC};
use sha2::{Digest, Sha256};
use std::borrow::Cow;

/// The tenant as written inside its hash tag: [`tenant_id::encode`] (which escapes `%`, `{`,
/// `}`, controls and non-ASCII), with `:` escaped too (`%3A`), so a tenant's tag never looks
/// like another family's (`pool:free`, `r:login:tb:...`). Injective: `%` is already escaped, so
/// a tenant's own `%3A` is `%253A`.
pub fn tenant_tag(tenant: &str) -> Cow<'_, str> {
    match tenant_id::encode(tenant) {
        Cow::Borrowed(t) if !t.contains(':') => Cow::Borrowed(t),
        encoded => Cow::Owned(encoded.replace(':', "%3A")),
    }
}

/// The hash tag of every key of the live state (`store:`): it holds a `:`, so no tenant's tag
/// spells it, and one script call touching several of them stays on one Cluster slot.
pub const LIVE_TAG: &str = "{live:store}";

/// `<prefix>:{live:store}:key:<digest hex>`: the id of the live API key whose secret has this
/// SHA-256.
pub fn live_digest_key(prefix: &str, digest_hex: &str) -> String {
    format!("{prefix}:{LIVE_TAG}:key:{digest_hex}")
}

/// `<prefix>:{live:store}:id:`: the prefix of a live API key's record (`...:id:<key id>`, JSON).
pub fn live_record_prefix(prefix: &str) -> String {
    format!("{prefix}:{LIVE_TAG}:id:")
}

/// `<prefix>:{live:store}:id:<key id>`: a live API key's record (JSON).
pub fn live_record_key(prefix: &str, id: &str) -> String {
    format!("{}{id}", live_record_prefix(prefix))
}

/// `<prefix>:{live:store}:tenant:<tenant tag>`: hash of a tenant's live keys, name → key id.
pub fn live_tenant_keys(prefix: &str, tenant: &str) -> String {
    format!("{prefix}:{LIVE_TAG}:tenant:{}", tenant_tag(tenant))
}

/// `<prefix>:{live:store}:blocks`: hash of the blocks set through the admin API, block id
/// (`ip:<network>`, `tenant:<id>`, `key:<key id>`) → its record (JSON).
pub fn live_blocks(prefix: &str) -> String {
    format!("{prefix}:{LIVE_TAG}:blocks")
}

/// `<prefix>:{live:store}:version`: the live state's version, incremented by every change.
pub fn live_version(prefix: &str) -> String {
    format!("{prefix}:{LIVE_TAG}:version")
}

/// `<prefix>:{live:store}:overrides`: hash of the live limit overrides, target (`t:<tenant
/// id>`) → the override's JSON.
pub fn live_overrides(prefix: &str) -> String {
    format!("{prefix}:{LIVE_TAG}:overrides")
}

/// `<prefix>:{live:store}:overrides:generation`: incremented by every override change (beside
/// the shared [`live_version`]), so an instance reads the overrides again only when they changed.
pub fn live_overrides_generation(prefix: &str) -> String {
    format!("{prefix}:{LIVE_TAG}:overrides:generation")
}

/// `<prefix>:live:changes`: the pub/sub channel every change is announced on (the message:
/// the changed keys' digests, comma-separated).
pub fn live_channel(prefix: &str) -> String {
    format!("{prefix}:live:changes")
}

/// `<prefix>:{<tenant tag>}:<suffix>`: a key of one tenant; every key of a tenant shares its
/// Cluster slot.
pub fn tenant_key(prefix: &str, tenant: &str, suffix: &str) -> String {
    [prefix, ":{", &tenant_tag(tenant), "}:", suffix].concat()
}

/// `<prefix>:{<tenant tag>}:tb`: the tenant's token bucket (exact decisions and leases).
pub fn bucket_key(prefix: &str, tenant: &str) -> String {
    tenant_key(prefix, tenant, "tb")
}

/// `<prefix>:{<tenant tag>}:<tb|gcra|fw|swl|swc|lb>`: the main limit's state of algorithm
/// `alg`, as the admin API reads and deletes it.
pub fn main_key(prefix: &str, tenant: &str, alg: Algorithm) -> String {
    tenant_key(prefix, tenant, alg.key_suffix())
}

/// `<prefix>:{<tenant tag>}:q:<period>:<window start ms>`: one calendar quota counter, as
/// the admin API reads and deletes it.
pub fn quota_key(prefix: &str, tenant: &str, period: Period, start_ms: u64) -> String {
    format!(
        "{prefix}:{{{}}}:q:{}:{start_ms}",
        tenant_tag(tenant),
        period.as_str()
    )
}

/// `<prefix>:{<tenant tag>}:q:<period>`: the key base of a calendar quota in a policy call;
/// `lua/policy.lua` appends `:<window start ms>` ([`quota_key`]).
pub fn quota_base_key(prefix: &str, tenant: &str, period: Period) -> String {
    tenant_key(prefix, tenant, &format!("q:{}", period.as_str()))
}

/// Longest encoded rule key kept as is; a longer one is replaced by its SHA-256.
pub const MAX_RULE_KEY_BYTES: usize = 128;

/// Bytes a rule key value keeps as they are: RFC 3986 unreserved characters. Every other byte
/// (`:`, `=`, `{`, `}`, `%`, controls, non-ASCII) is percent-encoded.
const RULE_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The encoded key of one bucket of a limit rule: its parts, in order, each written
/// `<part>=<byte length>.<percent-encoded value>` and joined by `:` (e.g.
/// `tenant=4.acme:method=3.GET`), so neither a value's text nor its place can alias another key;
/// past [`MAX_RULE_KEY_BYTES`] it is `sha256.<hex digest of that text>`. `parts` are (part as
/// written in `key:`, value).
pub fn rule_key_text(parts: &[(&str, &[u8])]) -> String {
    let mut text = RuleKeyText::default();
    for (part, value) in parts {
        text.push(&[part], value);
    }
    text.finish()
}

/// [`rule_key_text`] built one part at a time (a request's parts are read in turn).
#[derive(Debug)]
pub struct RuleKeyText {
    text: String,
}

impl Default for RuleKeyText {
    fn default() -> Self {
        RuleKeyText {
            text: String::with_capacity(64),
        }
    }
}

impl RuleKeyText {
    /// Appends a part: its name as written in `key:`, given in pieces that are written one
    /// after the other (`["header:", "x-user"]`), and its value.
    pub fn push(&mut self, part: &[&str], value: &[u8]) {
        if !self.text.is_empty() {
            self.text.push(':');
        }
        for piece in part {
            self.text
                .extend(percent_encode(piece.as_bytes(), RULE_VALUE));
        }
        self.text.push('=');
        self.text.push_str(itoa::Buffer::new().format(value.len()));
        self.text.push('.');
        self.text.extend(percent_encode(value, RULE_VALUE));
    }

    /// The key text: as pushed, or its SHA-256 past [`MAX_RULE_KEY_BYTES`].
    pub fn finish(self) -> String {
        if self.text.len() > MAX_RULE_KEY_BYTES {
            return format!(
                "sha256.{}",
                hex::encode(Sha256::digest(self.text.as_bytes()))
            );
        }
        self.text
    }
}

/// The key of limit rule `rule` (algorithm `alg`) for the encoded key text `key`
/// ([`rule_key_text`]): `<prefix>:{<tenant tag>}:r:<rule>:<alg>:<key>` under the tenant's
/// hash tag when the rule's key holds `tenant` (decided with the tier's policies in one call),
/// else `<prefix>:{r:<rule>:<alg>:<key>}` under its own. The algorithm is part of the key, so a
/// reload that changes it starts afresh instead of misreading the old state.
pub fn rule_key(
    prefix: &str,
    rule: &str,
    alg: Algorithm,
    tenant: Option<&str>,
    key: &str,
) -> String {
    let suffix = alg.key_suffix();
    match tenant {
        Some(t) => [
            prefix,
            ":{",
            &tenant_tag(t),
            "}:r:",
            rule,
            ":",
            suffix,
            ":",
            key,
        ]
        .concat(),
        None => [prefix, ":{r:", rule, ":", suffix, ":", key, "}"].concat(),
    }
}

/// The penalty box of a rule bucket `rule_key` ([`rule_key`], `limits[].block_for`):
/// `<rule key>:blk`, in the bucket's hash tag; a string that expires when the block ends.
pub fn block_key(rule_key: &str) -> String {
    [rule_key, ":blk"].concat()
}

/// `<prefix>:{<tenant tag>}:u:<name>`: the tenant's usage budget `tiers.<tier>.usage`
/// (a token bucket string, reserved by `lua/policy.lua`, settled by `lua/usage_settle.lua`).
pub fn usage_key(prefix: &str, tenant: &str, name: &str) -> String {
    tenant_key(prefix, tenant, &format!("u:{name}"))
}

/// The usage budget `name` of limit rule `rule` (`limits[].usage`) for the encoded key text
/// `key`: `<prefix>:{<tenant tag>}:r:<rule>:u:<name>:<key>` when the rule's key holds
/// `tenant`, else `<prefix>:{r:<rule>:<alg>:<key>}:u:<name>`, in the hash tag of the rule's own
/// bucket ([`rule_key`]), so both are decided in one call.
pub fn rule_usage_key(
    prefix: &str,
    rule: &str,
    alg: Algorithm,
    tenant: Option<&str>,
    key: &str,
    name: &str,
) -> String {
    match tenant {
        Some(t) => tenant_key(prefix, t, &format!("r:{rule}:u:{name}:{key}")),
        None => format!("{}:u:{name}", rule_key(prefix, rule, alg, None, key)),
    }
}

/// `<prefix>:{<tenant tag>}:inflight`: the tenant's fleet-wide concurrency leases (a sorted
/// set scored by expiry).
pub fn inflight_key(prefix: &str, tenant: &str) -> String {
    tenant_key(prefix, tenant, "inflight")
}

/// The lease set of a concurrency rule (`max_in_flight`) for the encoded key text `key`:
/// `<prefix>:{<tenant tag>}:c:<rule>:<key>` when the rule's key holds `tenant`, else
/// `<prefix>:{c:<rule>:<key>}`.
pub fn inflight_rule_key(prefix: &str, rule: &str, tenant: Option<&str>, key: &str) -> String {
    match tenant {
        Some(t) => tenant_key(prefix, t, &format!("c:{rule}:{key}")),
        None => format!("{prefix}:{{c:{rule}:{key}}}"),
    }
}

/// `<prefix>:{pool:<tier>}:tb`: a tier's burst pool bucket, in its own hash tag.
pub fn pool_key(prefix: &str, tier: &str) -> String {
    format!("{prefix}:{{pool:{tier}}}:tb")
}

/// `<prefix>:{pool:<tier>}:share:<tenant tag>`: the tenant's share of the pool, in the pool's
/// hash tag so the pool script touches one slot.
pub fn share_key(prefix: &str, tier: &str, tenant: &str) -> String {
    format!("{prefix}:{{pool:{tier}}}:share:{}", tenant_tag(tenant))
}

/// `<prefix>:{<tenant tag>}:region:<region>`: the tenant's recent demand in `region`, in
/// the `global` store of `multi_region.mode: sync`.
pub fn region_key(prefix: &str, tenant: &str, region: &str) -> String {
    format!("{prefix}:{{{}}}:region:{region}", tenant_tag(tenant))
}

/// `<prefix>:{fleet}:members`: the fleet membership sorted set (`redis.fleet_size: auto`).
pub fn fleet_members_key(prefix: &str) -> String {
    format!("{prefix}:{{fleet}}:members")
}

#[cfg(test)]
mod tests;
