-- Token bucket decision, atomic in Redis. Mirrors src/limit/token_bucket.rs step for step.
--
-- KEYS[1]  bucket key: <prefix>:{<tenant>}:tb  (hash: l = level, s = scale, t = last refill ms)
-- ARGV[1]  limit   tokens per period (integer > 0)
-- ARGV[2]  per_ms  period in milliseconds (integer > 0); one token = per_ms units
-- ARGV[3]  burst   capacity in tokens (integer > 0)
-- ARGV[4]  cost    tokens this request takes (integer > 0)
-- ARGV[5]  n       optional: decide n requests of `cost` each at once, in order (request
--                  coalescing, src/quota/coalesce.rs); the first ones are admitted while the
--                  bucket holds their cost, exactly as n calls at one instant would decide.
--
-- Returns integers {admitted (0|1), remaining tokens (floor), retry-after ms (-1 = never), ms until full};
-- with ARGV[5]: {requests admitted (0..n), the level before them in units of 1/per_ms token}, from
-- which src/limit/token_bucket.rs (decide_batch) derives each request's decision and headers.
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
-- A cost of one token, the common case, is known without converting it.
local cost = ARGV[4] == '1' and 1 or tonumber(ARGV[4])

-- now = seconds * 1000 + floor(microseconds / 1000), as digits: TIME's microseconds have no
-- leading zeros, so their milliseconds are all but the last three digits, padded to three.
local time = redis.call('TIME')
local micros = time[2]
local now_digits = time[1] .. string.sub('000' .. string.sub(micros, 1, -4), -3)
local now = tonumber(now_digits)

local capacity = burst * scale
local need = cost * scale

local function ceil_div(a, b) return math.floor((a + b - 1) / b) end

-- refilled: lua/lib/refill.lua, in front of this script.
local stored = redis.call('HMGET', KEYS[1], 'l', 's', 't')
local level = capacity
local rebased = false
if stored[1] ~= false then
  -- A stamp in the future (written under another clock) counts as now: the level is kept,
  -- nothing refills, and the rebased stamp is stored even on a rejection, so Retry-After holds.
  local old_scale = scale
  if stored[2] ~= scale_digits then old_scale = tonumber(stored[2]) end
  level, rebased = refilled(tonumber(stored[1]), old_scale, tonumber(stored[3]), now,
    scale, limit, capacity)
end

local function store(new_level)
  local full_ms = ceil_div(capacity - new_level, limit)
  redis.call('HSET', KEYS[1], 'l', string.format('%d', new_level), 's', scale_digits,
    't', now_digits)
  redis.call('PEXPIRE', KEYS[1], string.format('%d', full_ms))
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
  elseif need <= capacity and stored[1] ~= false then
    keep()
  end
  return {admitted, level}
end

if need > capacity then
  return {0, math.floor(level / scale), -1, ceil_div(capacity - level, limit)}
end
if level < need then
  if rebased then store(level) else keep() end
  return {0, math.floor(level / scale), ceil_div(need - level, limit), ceil_div(capacity - level, limit)}
end

level = level - need
local full_ms = store(level)
return {1, math.floor(level / scale), 0, full_ms}
