-- Token bucket decision, atomic in Redis. Mirrors src/limit/token_bucket.rs step for step.
--
-- KEYS[1]  bucket key: <prefix>:{<tenant>}:tb  (string '<level> <scale> <last refill ms>[tail]',
--          lua/lib/refill.lua bucket_state)
-- ARGV[1]  limit   tokens per period (integer > 0)
-- ARGV[2]  per_ms  period in milliseconds (integer > 0); one token = per_ms units
-- ARGV[3]  burst   capacity in tokens (integer > 0)
-- ARGV[4]  cost    tokens this request takes (integer > 0; absent: 1)
-- ARGV[5]  n       optional: decide n requests of `cost` each at once, in order (request
--                  coalescing, src/quota/coalesce.rs); the first ones are admitted while the
--                  bucket holds their cost, exactly as n calls at one instant would decide.
--
-- Returns one integer, the level before this request in units of 1/per_ms token, from which
-- src/limit/token_bucket.rs (decide_batch, n = 1) derives the decision and its headers (an array
-- reply costs Redis about as much as a redis.call);
-- with ARGV[5]: {requests admitted (0..n), the level before them}, from which decide_batch derives
-- each request's decision;
-- composed into lua/policy.lua (FOUR_VALUES true): integers {admitted (0|1), remaining tokens
-- (floor), retry-after ms (-1 = never), ms until full}.
-- Writes the bucket when admitted, or when a refusal rebased a stamp that was in the future; any
-- other refusal sets the key's TTL to the time until full at the current rate (a reload that
-- slowed the refill must not let the key expire, a full bucket, before that).
-- The clock is Redis TIME, so gateway clock skew cannot mint or starve tokens. All arithmetic is on
-- integers at most 2^53 (src/limit/bounds.rs, applied by config validation to every effective rate),
-- exact in Lua doubles, and stored as plain digits with string.format('%d', x).
-- Effects replication is the default from Redis 5 and the only mode from 7 (REDIS_VERSION_NUM
-- is there from 7 on), where the call would only cost time.
if not redis.REDIS_VERSION_NUM and redis.replicate_commands then redis.replicate_commands() end

-- Number <-> digits conversions (strtod, sprintf) are most of this script's own cost in Redis's
-- Lua, so each value is converted at most once: the scale is stored as its argument's digits and
-- read back only when it differs, and the stamp is written as the digits TIME gave.
local limit = tonumber(ARGV[1])
local scale_digits = ARGV[2]
local scale = tonumber(scale_digits)
local burst = tonumber(ARGV[3])
-- A cost of one token, the common case (sent as no argument), is known without converting it.
local cost_digits = ARGV[4]
local cost = (cost_digits == nil or cost_digits == '1') and 1 or tonumber(cost_digits)
-- src/quota/policy_script.rs sets this true where it composes the script into lua/policy.lua.
local FOUR_VALUES = false

-- now = seconds * 1000 + floor(microseconds / 1000), as digits: TIME's microseconds have no
-- leading zeros, so their milliseconds are all but the last three digits, padded to three.
local time = redis.call('TIME')
local micros = time[2]
local now_digits = time[1] .. string.sub('000' .. string.sub(micros, 1, -4), -3)
local now = tonumber(now_digits)

local capacity = burst * scale
local need = cost * scale

-- refilled, bucket_state: lua/lib/refill.lua, in front of this script. The string is read
-- here as bucket_state reads it (a function call less); a key still in the earlier hash
-- layout (GET answers WRONGTYPE) is read by bucket_state.
local raw = redis.pcall('GET', KEYS[1])
local stored_level, stored_scale, stored_stamp, tail
if raw then
  if raw.err then
    stored_level, stored_scale, stored_stamp, tail = bucket_state(redis, KEYS[1])
  else
    stored_level, stored_scale, stored_stamp, tail = string.match(raw, '^(%-?%d+) (%d+) (%d+)(.*)$')
  end
end
local level = capacity
local rebased = false
if stored_level then
  -- A stamp in the future (written under another clock) counts as now: the level is kept,
  -- nothing refills, and the rebased stamp is stored even on a rejection, so Retry-After holds.
  local old_scale = scale
  if stored_scale ~= scale_digits then old_scale = tonumber(stored_scale) end
  level, rebased = refilled(tonumber(stored_level), old_scale, tonumber(stored_stamp), now,
    scale, limit, capacity)
end

-- Admitted, the common case, first and written out: Redis's Lua builds a closure (and its
-- upvalues) for every local function a call passes, so the helpers below are built only on the
-- other paths. One SET with the TTL (at least 1 ms: SET refuses PX 0, and a bucket full in 0 ms
-- is the missing key it expires to); the tail (lease holders) is kept as it is.
local before = level
if not ARGV[5] and need <= level then
  level = level - need
  local full_ms = math.floor((capacity - level + limit - 1) / limit)
  redis.call('SET', KEYS[1], string.format('%d', level) .. ' ' .. scale_digits .. ' '
    .. now_digits .. (tail or ''), 'PX', full_ms > 0 and string.format('%d', full_ms) or '1')
  if not FOUR_VALUES then return before end
  return {1, math.floor(level / scale), 0, full_ms}
end

local function ceil_div(a, b) return math.floor((a + b - 1) / b) end

-- As the admitted path writes.
local function store(new_level)
  local full_ms = ceil_div(capacity - new_level, limit)
  redis.call('SET', KEYS[1], string.format('%d', new_level) .. ' ' .. scale_digits .. ' '
    .. now_digits .. (tail or ''), 'PX', full_ms > 0 and string.format('%d', full_ms) or '1')
  return full_ms
end
-- A refusal that writes nothing: the key lives until the bucket is full at this rate.
local function keep()
  local full_ms = ceil_div(capacity - level, limit)
  if full_ms > 0 then redis.call('PEXPIRE', KEYS[1], string.format('%d', full_ms)) end
end

if ARGV[5] then
  local n = tonumber(ARGV[5])
  local admitted = 0
  if need <= capacity then
    -- floor(level / need), corrected for the rounding of the double quotient
    admitted = math.floor(level / need)
    if admitted * need > level then admitted = admitted - 1
    elseif (admitted + 1) * need <= level then admitted = admitted + 1 end
    if admitted > n then admitted = n end
  end
  if admitted > 0 then
    store(level - admitted * need)
  elseif rebased and need <= capacity then
    store(level)
  elseif need <= capacity and stored_level then
    keep()
  end
  return {admitted, level}
end

if need > capacity then
  if not FOUR_VALUES then return before end
  return {0, math.floor(level / scale), -1, ceil_div(capacity - level, limit)}
end
if level < need then
  if rebased then store(level) else keep() end
  if not FOUR_VALUES then return before end
  return {0, math.floor(level / scale), ceil_div(need - level, limit), ceil_div(capacity - level, limit)}
end
