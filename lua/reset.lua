-- Deletes one tenant's keys (admin API `POST /v1/tenants/{id}/reset`, src/quota/peek.rs).
--
-- KEYS     every key of the tenant to delete (all under its hash tag, so one Cluster slot)
-- ARGV[1]  optional: the index in KEYS of the token bucket key, whose string may record tokens
--          leased out to instances (lua/lease.lua: its tail of holder records)
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
  local raw = i == tb and redis.pcall('GET', key)
  -- '<level> <scale> <stamp> <capacity> <limit>' then ' <holder> <tokens> <until ms>' per holder
  local scale, cap, limit, held
  if type(raw) == 'string' then
    scale, cap, limit, held = string.match(raw, '^%-?%d+ (%d+) %d+ (%d+) (%d+)(.*)$')
  end
  if held then
    local time = redis.call('TIME')
    local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    local out, records = 0, {}
    for holder, tokens, till in string.gmatch(held, ' (%S+) (%d+) (%d+)') do
      if tonumber(till) > now then
        out = out + tonumber(tokens)
        records[#records + 1] = ' ' .. holder .. ' ' .. tokens .. ' ' .. till
      end
    end
    local c, k, s = tonumber(cap), tonumber(limit), tonumber(scale)
    if out > 0 and k > 0 then
      local level = math.max(c - out * s, 0)
      redis.call('SET', key, string.format('%d', level) .. ' ' .. scale .. ' '
        .. string.format('%d', now) .. ' ' .. cap .. ' ' .. limit .. table.concat(records),
        'PX', math.max(math.floor((c - level + k - 1) / k), 1))
      n = n + 1
      kept = true
    end
  end
  if not kept then n = n + redis.call('DEL', key) end
end
return n
