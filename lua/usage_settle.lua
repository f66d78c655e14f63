-- Settles one request's usage budget when its response ended (docs/DESIGN.md 4e "Usage cost"):
-- the admission reserved `reserve` units in lua/policy.lua (a token bucket entry); the backend
-- reported `used`. The bucket is refilled to now (Redis TIME), then debited `used - reserve`
-- (it may go below zero: later admissions are refused, with a truthful Retry-After, until the
-- refill pays the debt) or credited `reserve - used` (at most up to the burst).
--
-- KEYS[1]  the usage bucket: <prefix>:{<tenant>}:u:<name>  (string '<level> <scale> <ms>', lua/lib/refill.lua)
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

local stored_level, stored_scale, stored_stamp = bucket_state(redis, KEYS[1])
local level = capacity
local last = now
if stored_level then
  level = refilled(tonumber(stored_level), tonumber(stored_scale), tonumber(stored_stamp), now,
    scale, limit, capacity)
  -- A stamp in the future (another clock) is kept: nothing refilled, as lua/token_bucket.lua.
  last = math.max(now, tonumber(stored_stamp))
end

level = level - delta * scale
if level > capacity then level = capacity end
-- Debts stay within exact doubles (config bounds keep max × per_ms ≤ 2^52).
local floor_level = -4503599627370496
if level < floor_level then level = floor_level end

local full_ms = math.floor((capacity - level + limit - 1) / limit)
redis.call('SET', KEYS[1], string.format('%d', level) .. ' ' .. ARGV[2] .. ' '
  .. string.format('%d', last), 'PX', math.max(full_ms, 1))
return {math.floor(level / scale), full_ms}
