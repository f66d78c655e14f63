-- Gives fleet-wide concurrency leases back (their requests ended, on any path).
--
-- KEYS[1]  <prefix>:{<tenant>}:inflight
-- ARGV     the lease ids
-- Returns how many were still held.
return redis.call('ZREM', KEYS[1], unpack(ARGV))
