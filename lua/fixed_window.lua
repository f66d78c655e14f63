-- Fixed window decision, atomic in Redis. Mirrors src/limit/fixed_window.rs step for step.
--
-- KEYS[1]  <prefix>:{<tenant>}:fw  (hash: w = window start ms, c = tokens counted, l = window
--          length written with)
-- ARGV[1]  limit, ARGV[2] per_ms, ARGV[3] burst: at most burst tokens per window of
--          W = ceil(burst·per_ms / limit) ms, windows aligned to the Unix epoch
-- ARGV[4]  cost    tokens this request takes
--
-- Returns integers {admitted, remaining, retry-after ms (-1 = never), ms until the window
-- ends (0 when nothing is counted), delay ms (0)}. Clock: Redis TIME. A stored window counts
-- while it lasts by its own length; one from the future or of another length (a changed config)
-- carries its count into the current window, written even on a refusal.
--@@PRELUDE@@

local w = math.max(idiv(burst * per + limit - 1, limit), 1)
local start = idiv(now, w) * w
local end_in = start + w - now

local count, rebased = 0, false
local stored = redis.call('HMGET', KEYS[1], 'w', 'c', 'l')
if stored[1] then
  local s = tonumber(stored[1])
  local len = tonumber(stored[3])
  if not len or len == 0 then len = w end
  if s + len > now then count, rebased = tonumber(stored[2]), s ~= start or len ~= w end
end

local function store(c)
  redis.call('HSET', KEYS[1], 'w', int(start), 'c', int(c), 'l', int(w))
  redis.call('PEXPIRE', KEYS[1], end_in)
end

local remaining = math.max(burst - count, 0)
local full = 0
if count > 0 then full = end_in end
if cost > burst or count + cost > burst then
  if rebased then store(count) end
  local retry = end_in
  if cost > burst then retry = -1 end
  return {0, remaining, retry, full, 0}
end
count = count + cost
store(count)
return {1, burst - count, 0, end_in, 0}
