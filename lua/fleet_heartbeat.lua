-- Fleet membership heartbeat (redis.fleet_size: auto), atomic in Redis.
--
-- KEYS[1]  membership key: <prefix>:{fleet}:members (sorted set: member = instance id,
--          score = Redis TIME in ms of its last heartbeat)
-- ARGV[1]  instance id (a UUID per process)
-- ARGV[2]  ttl_ms: a member whose last heartbeat is older than this is gone
--
-- Returns the number of live members, this instance included. The key expires ttl_ms after the
-- last heartbeat of anyone, so a fleet that is gone leaves nothing behind.
if redis.replicate_commands then redis.replicate_commands() end

local ttl = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZCARD', KEYS[1])
