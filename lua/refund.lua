-- Gives back what an earlier lua/policy.lua call debited, when a later call for the same request
-- (policies under another hash tag, so another Cluster slot) refused it: all or nothing across
-- calls (docs/DESIGN.md 4e "Keys"). Each entry's debit is undone by its algorithm's inverse; a
-- state that moved on since (a new window, another limit written) is left alone, so a refund
-- can only give back less than was taken, never more: never over-admission.
--
-- KEYS[i]  entry i's key, as in the debiting call
-- ARGV     n, then per entry: algorithm (1..6, src/limit/algorithm.rs ALL; 0 for a calendar
--          quota's counter, whose key is then the window's own), the debiting call's clock
--          (Unix ms), limit, per_ms, burst, cost
-- Returns the number of entries given back. Keys keep their TTLs.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function int(x) return string.format('%d', x) end

-- Token bucket: the level (in 1/per_ms tokens) goes back up by the cost, at most to the burst.
-- Its key is the string '<level> <scale> <stamp>[tail]' (lua/lib/refill.lua); a key still in the
-- earlier hash layout (or missing) is left alone.
local function token_bucket(key, _, limit, per, burst, cost)
  local raw = redis.pcall('GET', key)
  if type(raw) ~= 'string' then return 0 end
  local l, s, rest = string.match(raw, '^(%-?%d+) (%d+)( .*)$')
  if not l or tonumber(s) ~= per then return 0 end
  local level = math.min(tonumber(l) + cost * per, burst * per)
  redis.call('SET', key, int(level) .. ' ' .. s .. rest, 'KEEPTTL')
  return 1
end

-- GCRA and leaky bucket: the TAT (ms and remainder in 1/limit ms) goes back by cost emission
-- intervals, not before the debiting call's clock.
local function tat(key, at, limit, per, _, cost)
  local s = redis.call('HMGET', key, 't', 'r', 's', 'p')
  if not s[1] or tonumber(s[3]) ~= limit then return 0 end
  if s[4] and tonumber(s[4]) ~= per then return 0 end
  local total = tonumber(s[1]) * limit + tonumber(s[2]) - cost * per
  if total < at * limit then total = at * limit end
  local whole = idiv(total, limit)
  redis.call('HSET', key, 't', int(whole), 'r', int(total - whole * limit))
  return 1
end

-- Fixed window and sliding window counter: the current window's count, while it is still the
-- window the debit went into.
local function window_count(key, at, limit, per, burst, cost)
  local w = math.max(idiv(burst * per + limit - 1, limit), 1)
  local s = redis.call('HMGET', key, 'w', 'c')
  if not s[1] or tonumber(s[1]) ~= idiv(at, w) * w then return 0 end
  redis.call('HSET', key, 'c', int(math.max(tonumber(s[2]) - cost, 0)))
  return 1
end

-- Sliding window log: the cost entries stamped with the debiting call's clock.
local function log(key, at, _, _, _, cost)
  return math.min(redis.call('LREM', key, -cost, int(at)), 1)
end

-- A calendar quota: its window's counter, down by the cost.
local function quota(key, _, _, _, _, cost)
  local used = tonumber(redis.call('GET', key) or '0')
  if used <= 0 then return 0 end
  redis.call('DECRBY', key, math.min(cost, used))
  return 1
end

local INVERSE = {[0] = quota, token_bucket, tat, window_count, log, window_count, tat}

local given = 0
local n = tonumber(ARGV[1])
for i = 1, n do
  local a = 2 + (i - 1) * 6
  local v = {}
  for j = 0, 5 do v[j + 1] = tonumber(ARGV[a + j]) end
  given = given + INVERSE[v[1]](KEYS[i], v[2], v[3], v[4], v[5], v[6])
end
return given
