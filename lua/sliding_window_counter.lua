-- Sliding window counter decision, atomic in Redis. Mirrors src/limit/sliding_window_counter.rs.
--
-- KEYS[1]  <prefix>:{<tenant>}:swc  (hash: w = current window start ms, c = its count,
--          p = previous window's count, l = window length written with)
-- ARGV[1]  limit, ARGV[2] per_ms, ARGV[3] burst: W = ceil(burst·per_ms / limit) ms; estimate
--          prev·(W − e)/W + cur, compared multiplied by W (config keeps burst·W below 2^50)
-- ARGV[4]  cost    tokens this request takes
--
-- Returns integers {admitted, remaining, retry-after ms (-1 = never), ms until the estimate is
-- 0, delay ms (0)}. Clock: Redis TIME. A stored window from the future is rebased to the
-- current one (counts kept), written even on a refusal. Counters of another window length (a
-- changed config) carry the tokens they still count into the current window's count, rounded
-- up, written even on a refusal.
--@@PRELUDE@@

local w = math.max(idiv(burst * per + limit - 1, limit), 1)
local start = idiv(now, w) * w
local e = now - start

local prev, cur, rebased = 0, 0, false
local stored = redis.call('HMGET', KEYS[1], 'w', 'c', 'p', 'l')
local len = tonumber(stored[4])
if stored[1] and len and len ~= 0 and len ~= w then
  -- carried in src/limit/sliding_window_counter.rs
  local s, c, p = tonumber(stored[1]), tonumber(stored[2]), tonumber(stored[3])
  local est = 0
  if s + len > now then
    local el = math.max(now - s, 0)
    est = ceil_div(p * (len - el) + c * len, len)
  elseif s + 2 * len > now then
    est = ceil_div(c * (len - (now - s - len)), len)
  end
  cur, rebased = est, est > 0
elseif stored[1] then
  local s = tonumber(stored[1])
  if s >= start then
    prev, cur, rebased = tonumber(stored[3]), tonumber(stored[2]), s > start
  elseif s + w >= start then
    prev = tonumber(stored[2])
  end
end
if prev > burst then prev = burst end
if cur > burst then cur = burst end
local used = prev * (w - e) + cur * w

local function full(c)
  if c > 0 then return start + 2 * w - now end
  if prev > 0 then return start + w - now end
  return 0
end
local function store(c)
  redis.call('HSET', KEYS[1], 'w', int(start), 'c', int(c), 'p', int(prev), 'l', int(w))
  redis.call('PEXPIRE', KEYS[1], start + 2 * w - now)
end

local remaining = 0
if burst * w > used then remaining = idiv(burst * w - used, w) end
if cost > burst then
  if rebased then store(cur) end
  return {0, remaining, -1, full(cur), 0}
end
if used + cost * w > burst * w then
  local wait
  if burst >= cur + cost and prev > 0 then
    wait = (w - e) - idiv((burst - cur - cost) * w, prev)
  elseif cur > 0 then
    wait = (w - e) + (w - idiv((burst - cost) * w, cur))
  else
    wait = w - e
  end
  if rebased then store(cur) end
  return {0, remaining, wait, full(cur), 0}
end
cur = cur + cost
store(cur)
return {1, idiv(burst * w - used - cost * w, w), 0, full(cur), 0}
