-- Sliding window log decision, atomic in Redis. Mirrors src/limit/sliding_window_log.rs.
--
-- KEYS[1]  <prefix>:{<tenant>}:swl  (list: one timestamp ms per admitted token, ascending)
-- ARGV[1]  limit, ARGV[2] per_ms, ARGV[3] burst: at most burst tokens in the last
--          W = ceil(burst·per_ms / limit) ms; an entry at ts counts during [ts, ts + W)
-- ARGV[4]  cost    tokens this request takes (one entry each; burst is bounded by config)
--
-- Returns integers {admitted, remaining, retry-after ms (-1 = never), ms until the log is
-- empty, delay ms (0)}. Clock: Redis TIME. Entries after now are rebased to now and expired
-- ones dropped, written even on a refusal; a refusal also sets the key's TTL to when its last
-- entry leaves by the current W (a changed config may have lengthened it). All reads happen
-- before any write.
--@@PRELUDE@@

local w = math.max(idiv(burst * per + limit - 1, limit), 1)
local log = redis.call('LRANGE', KEYS[1], 0, -1)
local n = #log
for i = 1, n do log[i] = tonumber(log[i]) end
local rebased = 0
for i = n, 1, -1 do
  if log[i] <= now then break end
  log[i] = now
  rebased = rebased + 1
end
local first = 1
while first <= n and log[first] + w <= now do first = first + 1 end
local trimmed = first - 1
local count = n - trimmed

local full = 0
if count > 0 then full = log[n] + w - now end

local function normalise()
  if trimmed > 0 then redis.call('LTRIM', KEYS[1], trimmed, -1) end
  for j = 1, rebased do redis.call('LSET', KEYS[1], -j, int(now)) end
  if (trimmed > 0 or rebased > 0) and count > 0 then redis.call('PEXPIRE', KEYS[1], full) end
end
local function refuse(retry)
  normalise()
  if trimmed == 0 and rebased == 0 and count > 0 then redis.call('PEXPIRE', KEYS[1], full) end
  return {0, math.max(burst - count, 0), retry, full, 0}
end

if cost > burst then return refuse(-1) end
if count + cost > burst then return refuse(log[trimmed + count + cost - burst] + w - now) end
normalise()
local stamp = int(now)
local left = cost
while left > 0 do
  local chunk = {}
  for i = 1, math.min(left, 1000) do chunk[i] = stamp end
  redis.call('RPUSH', KEYS[1], unpack(chunk))
  left = left - #chunk
end
redis.call('PEXPIRE', KEYS[1], w)
return {1, burst - count - cost, 0, w, 0}
