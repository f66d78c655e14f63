-- Takes one fleet-wide concurrency lease of a tenant (docs/DESIGN.md 4e "Fleet-wide
-- concurrency"): leases are members of a sorted set scored by their expiry on Redis TIME, so an
-- instance that dies leaks nothing longer than the lease's time to live, whatever the gateways'
-- clocks say. Expired leases are pruned in the same call.
--
-- KEYS[1]  <prefix>:{<tenant>}:inflight (sorted set: member = lease id, score = expiry, Unix ms)
-- ARGV[1]  the lease id, ARGV[2] max leases at once, ARGV[3] time to live in ms
--
-- Returns {taken (0|1), leases held after the call, expired leases pruned}. The key lives as long
-- as its longest lease.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
local expired = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[2]) then
  return {0, held, expired}
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, held + 1, expired}
