-- Token lease: give back an instance's unused leased tokens, then take a batch, atomically in
-- Redis. Same bucket (key, format, refill) as lua/token_bucket.lua, so leased and exact
-- instances can share a tenant's bucket (docs/DESIGN.md 4c "Lease").
--
-- KEYS[1]  bucket key: <prefix>:{<tenant>}:tb  (string '<level> <scale> <last refill ms>[tail]',
--          lua/lib/refill.lua)
-- ARGV[1]  limit   tokens per period (integer > 0)
-- ARGV[2]  per_ms  period in milliseconds (integer > 0); one token = per_ms units
-- ARGV[3]  burst   capacity in tokens (integer > 0)
-- ARGV[4]  cost    tokens the waiting request needs (0 = give back only)
-- ARGV[5]  want    tokens to take at most (>= cost): the lease size
-- ARGV[6]  refund  unused tokens given back first (never fills the bucket beyond its burst)
-- ARGV[7]  holder  the calling instance's id (optional)
-- ARGV[8]  hold_ms how long the instance may admit from this grant, its reply's latency
--                  included (with ARGV[7])
--
-- With a holder, the bucket's tail also records what each instance holds, ' <capacity> <limit>'
-- of the bucket then ' <holder> <tokens granted> <Redis ms until which it may use them>' per
-- holder, so that an admin reset (lua/reset.lua) leaves the tokens still leased out of the bucket it
-- refills. A call that grants nothing clears the holder's record (it holds nothing now).
--
-- Returns integers {granted tokens (0 = refused, or give-back only), remaining tokens (floor,
-- after the grant), retry-after ms for `cost` (-1 = never, 0 when granted), ms until full}.
-- Grants min(want, whole tokens available) when at least `cost` are available, else nothing.
-- The clock is Redis TIME; arithmetic on integers below 2^53 as in token_bucket.lua.
if redis.replicate_commands then redis.replicate_commands() end

local limit = tonumber(ARGV[1])
local scale = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local refund = tonumber(ARGV[6])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local capacity = burst * scale
local need = cost * scale

local function ceil_div(a, b) return math.floor((a + b - 1) / b) end

local stored_level, stored_scale, stored_stamp, tail = bucket_state(redis, KEYS[1])
local level = capacity
local dirty = false
if stored_level then
  -- bucket_state, refilled(): lua/lib/refill.lua, put in front of this script (LEASE_LUA); a
  -- stamp in the future is rebased to now, as in token_bucket.lua.
  level, dirty = refilled(tonumber(stored_level), tonumber(stored_scale), tonumber(stored_stamp),
    now, scale, limit, capacity)
end
if refund > 0 then
  level = level + refund * scale
  if level > capacity then level = capacity end
  dirty = true
end

local function int(x) return string.format('%d', x) end

-- The tail after this call: the holder's record is the grant, or none (it holds nothing now);
-- the other holders' records are kept while they are in force.
tail = tail or ''
local function held(grant)
  local holder = ARGV[7]
  if not holder or (grant == 0 and not stored_level) then return end
  local records = {}
  local held_by = string.match(tail, '^ %d+ %d+(.*)$') or ''
  for h, g, x in string.gmatch(held_by, ' (%S+) (%d+) (%d+)') do
    if h ~= holder and tonumber(x) > now then records[#records + 1] = ' ' .. h .. ' ' .. g .. ' ' .. x end
  end
  if grant > 0 then
    records[#records + 1] = ' ' .. holder .. ' ' .. int(grant) .. ' ' .. int(now + tonumber(ARGV[8]))
  end
  local new_tail = ''
  if #records > 0 then new_tail = ' ' .. int(capacity) .. ' ' .. int(limit) .. table.concat(records) end
  if new_tail ~= tail then
    tail = new_tail
    dirty = true
  end
end

local function store(new_level)
  local full_ms = ceil_div(capacity - new_level, limit)
  redis.call('SET', KEYS[1], int(new_level) .. ' ' .. int(scale) .. ' ' .. int(now) .. tail,
    'PX', math.max(full_ms, 1))
  return full_ms
end

-- A refusal that writes nothing still keeps the key until full at this rate (a reload that
-- slowed the refill must not let it expire early into a full bucket), as token_bucket.lua.
local function refused()
  held(0)
  if dirty then store(level)
  elseif stored_level then redis.call('PEXPIRE', KEYS[1], ceil_div(capacity - level, limit)) end
end

if need > capacity then
  held(0)
  if dirty then store(level) end
  return {0, math.floor(level / scale), -1, ceil_div(capacity - level, limit)}
end
if level < need then
  refused()
  return {0, math.floor(level / scale), ceil_div(need - level, limit), ceil_div(capacity - level, limit)}
end

local grant = math.floor(level / scale)
if grant > want then grant = want end
if grant == 0 then
  held(0)
  if dirty then store(level) end
  return {0, math.floor(level / scale), 0, ceil_div(capacity - level, limit)}
end
level = level - grant * scale
held(grant)
local full_ms = store(level)
return {grant, math.floor(level / scale), 0, full_ms}
