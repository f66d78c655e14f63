//! Every Lua script the gateway sends to Redis, embedded at build time from `lua/`. Scripts that
//! share the token bucket refill carry `lua/lib/refill.lua` in front; the algorithm templates get
//! their shared parts (`lua/lib/prelude.lua`, `lua/lib/owed.lua`, `lua/lib/tat.lua`) and their frame
//! (`lua/policy.lua`) when the quota service composes them at load time.

/// `lua/token_bucket.lua` behind the shared refill `lua/lib/refill.lua`: one exact token bucket
/// decision (or a coalesced batch of `n`) on `<prefix>:{<tenant>}:tb`.
pub const TOKEN_BUCKET_LUA: &str = concat!(
    include_str!("../../../lua/lib/refill.lua"),
    include_str!("../../../lua/token_bucket.lua")
);

/// `lua/lease.lua` behind the shared refill `lua/lib/refill.lua`: give back an instance's unused
/// leased tokens, then take a batch, in one atomic call on the token bucket's key.
pub const LEASE_LUA: &str = concat!(
    include_str!("../../../lua/lib/refill.lua"),
    include_str!("../../../lua/lease.lua")
);

/// `lua/pool_bucket.lua` behind the shared refill `lua/lib/refill.lua`: a tier's burst pool and
/// the tenant's share of it, two token buckets debited together (mirrors
/// `crate::limit::pool::decide`).
pub const POOL_BUCKET_LUA: &str = concat!(
    include_str!("../../../lua/lib/refill.lua"),
    include_str!("../../../lua/pool_bucket.lua")
);

/// `lua/usage_settle.lua` behind the shared refill `lua/lib/refill.lua`: settles a usage
/// budget (debit the reported count over the reserve, or refund the rest).
pub const USAGE_SETTLE_LUA: &str = concat!(
    include_str!("../../../lua/lib/refill.lua"),
    include_str!("../../../lua/usage_settle.lua")
);

/// `lua/gcra.lua`, a template: GCRA (theoretical arrival time) decision.
pub const GCRA_LUA: &str = include_str!("../../../lua/gcra.lua");

/// `lua/fixed_window.lua`, a template: fixed window counter aligned to the Unix epoch.
pub const FIXED_WINDOW_LUA: &str = include_str!("../../../lua/fixed_window.lua");

/// `lua/sliding_window_log.lua`, a template: one timestamp per admitted token.
pub const SLIDING_WINDOW_LOG_LUA: &str = include_str!("../../../lua/sliding_window_log.lua");

/// `lua/sliding_window_counter.lua`, a template: current and previous window counts, weighted.
pub const SLIDING_WINDOW_COUNTER_LUA: &str =
    include_str!("../../../lua/sliding_window_counter.lua");

/// `lua/leaky_bucket.lua`, a template: shaping (GCRA with the tolerance extended by the longest
/// delay).
pub const LEAKY_BUCKET_LUA: &str = include_str!("../../../lua/leaky_bucket.lua");

/// `lua/leaky_refund.lua`: gives a delayed request's leaky bucket slot back.
pub const LEAKY_REFUND_LUA: &str = include_str!("../../../lua/leaky_refund.lua");

/// `lua/block.lua`: a rule's penalty box (`limits[].block_for`): checks or sets a block key.
pub const BLOCK_LUA: &str = include_str!("../../../lua/block.lua");

/// `lua/refund.lua`: gives back what an earlier policy call debited (all or nothing across
/// hash tags).
pub const REFUND_LUA: &str = include_str!("../../../lua/refund.lua");

/// `lua/policy.lua`: the all-or-nothing frame around the algorithms' entries and the calendar
/// quotas (its closed form refills token buckets with `lua/lib/refill.lua`).
pub const POLICY_LUA: &str = concat!(
    include_str!("../../../lua/lib/refill.lua"),
    include_str!("../../../lua/policy.lua")
);

/// `lua/lib/prelude.lua`, put where a template says `--@@PRELUDE@@`: effects replication, the
/// four common arguments, the Redis clock in ms, exact integer helpers.
pub const PRELUDE_LUA: &str = include_str!("../../../lua/lib/prelude.lua");

/// `lua/lib/owed.lua`, put where a script says `--@@OWED@@`: the GCRA debt owed now, shared by
/// `lua/lib/tat.lua` and the closed form of `lua/policy.lua`.
pub const OWED_LUA: &str = include_str!("../../../lua/lib/owed.lua");

/// `lua/lib/tat.lua`, put where a template says `--@@TAT@@`: the GCRA state (TAT) and refusals
/// shared by `gcra` and `leaky_bucket`.
pub const TAT_LUA: &str = include_str!("../../../lua/lib/tat.lua");

/// `lua/peek.lua`: reads one tenant's raw policy state (TIME, HMGET/LRANGE, GET; writes nothing)
/// for the admin API.
pub const PEEK_LUA: &str = include_str!("../../../lua/peek.lua");

/// `lua/reset.lua`: deletes every key given (one tenant's), returning how many existed.
pub const RESET_LUA: &str = include_str!("../../../lua/reset.lua");

/// `lua/fleet_heartbeat.lua`: adds this instance to the fleet membership set, drops members not
/// seen lately and returns the live count.
pub const FLEET_HEARTBEAT_LUA: &str = include_str!("../../../lua/fleet_heartbeat.lua");

/// `lua/inflight_acquire.lua`: takes one fleet-wide concurrency lease of a tenant (pruning the
/// expired ones) when fewer than the maximum are held.
pub const INFLIGHT_ACQUIRE_LUA: &str = include_str!("../../../lua/inflight_acquire.lua");

/// `lua/inflight_release.lua`: gives fleet-wide concurrency leases back.
pub const INFLIGHT_RELEASE_LUA: &str = include_str!("../../../lua/inflight_release.lua");

/// `lua/inflight_renew.lua`: renews the leases one instance holds for one tenant.
pub const INFLIGHT_RENEW_LUA: &str = include_str!("../../../lua/inflight_renew.lua");

/// `lua/inflight_count.lua`: counts a tenant's unexpired leases (read-only, admin API).
pub const INFLIGHT_COUNT_LUA: &str = include_str!("../../../lua/inflight_count.lua");
