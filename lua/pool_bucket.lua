-- Burst pool decision, atomic in Redis. Mirrors src/limit/pool.rs (two token buckets of
-- src/limit/token_bucket.rs, debited together or not at all).
--
-- Consulted only after the tenant's own bucket refused. Both keys share the pool's Cluster hash
-- tag, so one script touches one slot:
-- KEYS[1]  pool bucket:   <prefix>:{pool:<tier>}:tb            (string, as token_bucket.lua)
-- KEYS[2]  tenant share:  <prefix>:{pool:<tier>}:share:<tenant> (same layout; a bucket of
--          max_share × the pool's limit and burst, so one tenant cannot drain more than that)
-- ARGV[1..3]  pool  limit, per_ms, burst (integers > 0)
-- ARGV[4..5]  share limit, burst (integers > 0; same per_ms)
-- ARGV[6]     cost  tokens this request takes (integer > 0)
--
-- Returns integers {admitted (0|1), pool tokens remaining (floor), retry-after ms (-1 = never),
-- pool ms until full}. Writes both buckets (with a TTL of the ms until full) only when admitted; a
-- refusal writes nothing. Clock: Redis TIME. A stored stamp in the future counts as now.
if redis.replicate_commands then redis.replicate_commands() end

local scale = tonumber(ARGV[2])
local cost = tonumber(ARGV[6])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function ceil_div(a, b) return math.floor((a + b - 1) / b) end

-- Level (in units of 1/scale token) of the bucket at KEYS[i] now (refilled: lua/lib/refill.lua,
-- in front of this script, as bucket_state).
local function level_of(key, limit, capacity)
  local l, s, t = bucket_state(redis, key)
  if not l then return capacity end
  local level = refilled(tonumber(l), tonumber(s), tonumber(t), now, scale, limit, capacity)
  return level
end

local function store(key, level, limit, capacity)
  local full_ms = ceil_div(capacity - level, limit)
  redis.call('SET', key, string.format('%d', level) .. ' ' .. ARGV[2] .. ' '
    .. string.format('%d', now), 'PX', math.max(full_ms, 1))
  return full_ms
end

local p_limit, p_cap = tonumber(ARGV[1]), tonumber(ARGV[3]) * scale
local s_limit, s_cap = tonumber(ARGV[4]), tonumber(ARGV[5]) * scale
local need = cost * scale
local p_level = level_of(KEYS[1], p_limit, p_cap)
local s_level = level_of(KEYS[2], s_limit, s_cap)

if need > p_cap or need > s_cap then
  return {0, math.floor(p_level / scale), -1, ceil_div(p_cap - p_level, p_limit)}
end
if p_level < need or s_level < need then
  -- Nothing written: each key still lives until full at this rate (a reload that slowed the
  -- refill must not let it expire early into a full bucket), as lua/token_bucket.lua.
  for _, k in ipairs({{KEYS[1], p_level, p_limit, p_cap}, {KEYS[2], s_level, s_limit, s_cap}}) do
    local full_ms = ceil_div(k[4] - k[2], k[3])
    if full_ms > 0 then redis.call('PEXPIRE', k[1], full_ms) end
  end
  local wait = 0
  if p_level < need then wait = ceil_div(need - p_level, p_limit) end
  if s_level < need then wait = math.max(wait, ceil_div(need - s_level, s_limit)) end
  return {0, math.floor(p_level / scale), wait, ceil_div(p_cap - p_level, p_limit)}
end

p_level = p_level - need
local full_ms = store(KEYS[1], p_level, p_limit, p_cap)
store(KEYS[2], s_level - need, s_limit, s_cap)
return {1, math.floor(p_level / scale), 0, full_ms}
