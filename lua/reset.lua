-- Deletes one tenant's keys (admin API `POST /v1/tenants/{id}/reset`, src/quota/peek.rs).
--
-- KEYS     every key of the tenant to delete (all under its hash tag, so one Cluster slot)
-- ARGV[1]  optional: the index in KEYS of the token bucket key, whose hash may record tokens
--          leased out to instances (lua/lease.lua: h:<holder>, x:<holder>, c, k)
--
-- Tokens an instance still holds (its record not expired by Redis TIME) may still be used
-- without asking Redis, so a reset does not hand them out again: the token bucket is refilled
-- to its capacity less those tokens (with the records kept, for the holders' give-backs and a
-- later reset) instead of deleted. Every other key is deleted.
--
-- Returns the number of keys that existed and were deleted (or refilled).
local tb = tonumber(ARGV[1] or '0') or 0
local n = 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local kept = false
  if i == tb and redis.call('TYPE', key).ok == 'hash' then
    local time = redis.call('TIME')
    local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    local h = {}
    local flat = redis.call('HGETALL', key)
    for j = 1, #flat, 2 do h[flat[j]] = flat[j + 1] end
    local out, holders = 0, {}
    for f, v in pairs(h) do
      local holder = string.match(f, '^h:(.+)$')
      if holder and tonumber(h['x:' .. holder] or '0') > now then
        out = out + tonumber(v)
        holders[#holders + 1] = holder
      end
    end
    local cap, limit, scale = tonumber(h.c), tonumber(h.k), tonumber(h.s)
    if out > 0 and cap and limit and scale and limit > 0 then
      local level = math.max(cap - out * scale, 0)
      local fields = {'l', string.format('%d', level), 's', h.s, 't', string.format('%d', now),
        'c', h.c, 'k', h.k}
      for _, holder in ipairs(holders) do
        fields[#fields + 1] = 'h:' .. holder
        fields[#fields + 1] = h['h:' .. holder]
        fields[#fields + 1] = 'x:' .. holder
        fields[#fields + 1] = h['x:' .. holder]
      end
      redis.call('DEL', key)
      redis.call('HSET', key, unpack(fields))
      redis.call('PEXPIRE', key, math.max(math.floor((cap - level + limit - 1) / limit), 1))
      n = n + 1
      kept = true
    end
  end
  if not kept then n = n + redis.call('DEL', key) end
end
return n
