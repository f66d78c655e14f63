-- Settles one request's usage budget when its response ended (docs/DESIGN.md 4e "Usage cost"):
-- the admission reserved `reserve` units in lua/policy.lua (a token bucket entry); the backend
-- reported `used`. The bucket is refilled to now (Redis TIME), then debited `used - reserve`
-- (it may go below zero: later admissions are refused, with a truthful Retry-After, until the
-- refill pays the debt) or credited `reserve - used` (at most up to the burst).
--
-- KEYS[1]  the usage bucket: <prefix>:{<tenant>}:u:<name>  (hash: l = level, s = scale, t = ms)
-- ARGV[1]  limit   units per period (integer > 0)
-- ARGV[2]  per_ms  period in ms; one unit = per_ms level units
-- ARGV[3]  burst   capacity in units
-- ARGV[4]  delta   used - reserve, in units (negative: a refund)
--
-- Returns {whole units left (floor, may be negative), ms until full}. A missing key is a full
-- bucket. The key's TTL is the time until full, as for every bucket.
if redis.replicate_commands then redis.replicate_commands() end

local limit = tonumber(ARGV[1])
local scale = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local delta = tonumber(ARGV[4])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local capacity = burst * scale

local stored = redis.call('HMGET', KEYS[1], 'l', 's', 't')
local level = capacity
local last = now
if stored[1] ~= false then
  level = refilled(tonumber(stored[1]), tonumber(stored[2]), tonumber(stored[3]), now, scale,
    limit, capacity)
  -- A stamp in the future (another clock) is kept: nothing refilled, as lua/token_bucket.lua.
  last = math.max(now, tonumber(stored[3]))
end

level = level - delta * scale
if level > capacity then level = capacity end
-- Debts stay within exact doubles (config bounds keep max × per_ms ≤ 2^52).
local floor_level = -4503599627370496
if level < floor_level then level = floor_level end

local full_ms = math.floor((capacity - level + limit - 1) / limit)
redis.call('HSET', KEYS[1], 'l', string.format('%d', level), 's', string.format('%d', scale),
  't', string.format('%d', last))
redis.call('PEXPIRE', KEYS[1], math.max(full_ms, 1))
return {math.floor(level / scale), full_ms}
