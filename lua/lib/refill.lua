-- Token bucket refill and key format shared by lua/token_bucket.lua, lua/pool_bucket.lua,
-- lua/lease.lua, lua/usage_settle.lua and lua/policy.lua, put in front of each at build time
-- (src/store/redis/scripts.rs). Mirrors the refill of src/limit/token_bucket.rs.
--
-- refilled(level, old_scale, last, now, scale, limit, capacity) → level, rebased. Levels are in
-- units of 1/scale token: `level` written with `old_scale` at `last` (ms) is rescaled to `scale`
-- and capped at `capacity`, then gains `limit` units per ms since `last`, up to `capacity`. A
-- `last` after `now` (a stamp written under another clock) counts as now: nothing refills and
-- `rebased` is true.
local function refilled(level, old_scale, last, now, scale, limit, capacity)
  if old_scale ~= scale and old_scale > 0 then
    local whole = math.floor(level / old_scale)
    local rest = level - whole * old_scale
    level = whole * scale + math.floor(rest * scale / old_scale)
  end
  if level > capacity then level = capacity end
  if now > last then
    local elapsed = now - last
    local to_full = math.floor((capacity - level + limit - 1) / limit)
    if elapsed > to_full then elapsed = to_full end
    level = level + elapsed * limit
  end
  if level > capacity then level = capacity end
  return level, now < last
end


-- A token bucket's key holds a string, '<level> <scale> <stamp>' in decimal digits (level may be
-- negative: a usage debt), then an optional tail the scripts keep as it is (lua/lease.lua's
-- holder records: ' <capacity> <limit>' and ' <holder> <tokens> <until ms>' per holder). One GET
-- reads it and one SET … PX writes it with its TTL: a hash took HMGET, HSET and PEXPIRE.
--
-- bucket_state(r, key) → level, scale, stamp (digits), tail; or nil when the key is missing.
-- `r` is the script's `redis` (lua/policy.lua passes its buffering one). A key still holding the
-- hash layout of earlier versions (fields l, s, t) is read once from the hash; the script's
-- next SET replaces it with a string (lua/lease.lua's holder fields of such a hash are dropped).
local function bucket_state(r, key)
  local raw = r.pcall('GET', key)
  if type(raw) == 'string' then return string.match(raw, '^(%-?%d+) (%d+) (%d+)(.*)$') end
  if raw and raw.err then
    local h = r.call('HMGET', key, 'l', 's', 't')
    if h[1] then return h[1], h[2], h[3], '' end
  end
  return nil
end
