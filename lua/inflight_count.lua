-- Counts a tenant's unexpired fleet-wide concurrency leases, for the admin API: read-only (TIME
-- and ZCOUNT; expired members are left for the next acquire to prune).
--
-- KEYS[1]  <prefix>:{<tenant>}:inflight
-- Returns the number of leases whose expiry is after now.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
