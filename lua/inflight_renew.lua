-- Renews the fleet-wide concurrency leases one instance holds for one tenant (requests running
-- longer than a third of the lease's time to live): each still held gets a new expiry; one that
-- expired meanwhile (the instance could not reach Redis for a whole time to live) is not taken
-- again.
--
-- KEYS[1]  <prefix>:{<tenant>}:inflight
-- ARGV[1]  time to live in ms; ARGV[2..] the lease ids
-- Returns {renewed, expired}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', now + ttl, ARGV[i])
end
if renewed > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return {renewed, #ARGV - 1 - renewed}
