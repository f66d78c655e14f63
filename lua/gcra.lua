-- GCRA decision, atomic in Redis. Mirrors src/limit/gcra.rs step for step.
--
-- KEYS[1]  <prefix>:{<tenant>}:gcra  (hash: t = TAT ms, r = remainder in 1/s ms, s = limit written with)
-- ARGV[1]  limit   tokens per period (integer > 0); time is counted in units of 1/limit ms
-- ARGV[2]  per_ms  period in milliseconds (integer > 0); emission interval T = per_ms units
-- ARGV[3]  burst   tokens admitted back to back (integer > 0); tolerance burst·T
-- ARGV[4]  cost    tokens this request takes (integer > 0)
--
-- Returns integers {admitted (0|1), remaining tokens (floor), retry-after ms (-1 = never),
-- ms until full, delay ms (always 0)}. Clock: Redis TIME. A TAT further ahead than burst·T (clock
-- step back, lowered burst) is rebased to now + burst·T and written even on a refusal.
if redis.replicate_commands then redis.replicate_commands() end

local limit = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local max_delay = 0

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- floor(a / b) for integers below 2^53, corrected for the rounding of the double quotient.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function ceil_div(a, b) return idiv(a + b - 1, b) end
local function int(x) return string.format('%.0f', x) end

local cap = burst * per
local max_debt = cap + max_delay * limit
local need = cost * per

local owed, capped = 0, false
local stored = redis.call('HMGET', KEYS[1], 't', 'r', 's')
if stored[1] then
  local tat, rem, scale = tonumber(stored[1]), tonumber(stored[2]), tonumber(stored[3])
  if tat >= now then
    if scale ~= limit and scale ~= 0 then rem = idiv(rem * limit, scale) end
    local ahead = tat - now
    if ahead > ceil_div(max_debt, limit) then
      owed, capped = max_debt, true
    else
      owed = ahead * limit + rem
      if owed > max_debt then owed, capped = max_debt, true end
    end
  end
end

local function store(debt)
  local whole = idiv(debt, limit)
  redis.call('HSET', KEYS[1], 't', int(now + whole), 'r', int(debt - whole * limit), 's', int(limit))
  redis.call('PEXPIRE', KEYS[1], ceil_div(debt, limit))
end

local remaining = 0
if cap > owed then remaining = idiv(cap - owed, per) end
if need > cap then
  if capped then store(owed) end
  return {0, remaining, -1, ceil_div(owed, limit), 0}
end
local new = owed + need
if new > max_debt then
  if capped then store(owed) end
  return {0, remaining, ceil_div(new - max_debt, limit), ceil_div(owed, limit), 0}
end
store(new)
local left = 0
if cap > new then left = idiv(cap - new, per) end
return {1, left, 0, ceil_div(new, limit), 0}
