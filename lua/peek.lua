-- Read-only look at one tenant's policy state, for the admin API (src/quota/peek.rs). Issues only
-- TIME, HMGET, LRANGE and GET: nothing is written, nothing debited, no TTL touched. The decision
-- math runs in Rust on the raw state, with the same reference functions (src/limit/) the
-- algorithm scripts mirror.
--
-- KEYS[1]      the main limit's key, <prefix>:{<tenant>}:<tb|gcra|fw|swl|swc|lb>
-- KEYS[1 + i]  quota i's counter, <prefix>:{<tenant>}:q:<period>:<window start ms>
-- ARGV[1]      'list' (sliding_window_log: the whole list), 'bucket' (token bucket: its
--              string's level, scale and stamp) or 'hash'; then, for 'hash', the field names
--              to read (ARGV[2..])
--
-- Returns {TIME seconds, TIME microseconds, main values (HMGET reply, the bucket's three numbers or LRANGE reply),
-- quota counters (GET replies, nil when absent)}.
local time = redis.call('TIME')
local main
if ARGV[1] == 'list' then
  main = redis.call('LRANGE', KEYS[1], 0, -1)
elseif ARGV[1] == 'bucket' then
  -- A token bucket's string '<l> <s> <t>[tail]' (lua/lib/refill.lua) as {l, s, t}; a key still
  -- holding the earlier hash layout is read from its fields.
  local raw = redis.pcall('GET', KEYS[1])
  if type(raw) == 'string' then
    main = {string.match(raw, '^(%-?%d+) (%d+) (%d+)')}
  elseif raw then
    main = redis.call('HMGET', KEYS[1], 'l', 's', 't')
  else
    main = {}
  end
else
  main = redis.call('HMGET', KEYS[1], unpack(ARGV, 2))
end
local quotas = {}
for i = 2, #KEYS do quotas[i - 1] = redis.call('GET', KEYS[i]) end
return {time[1], time[2], main, quotas}
