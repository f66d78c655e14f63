-- Token bucket refill shared by lua/token_bucket.lua, lua/pool_bucket.lua, lua/lease.lua,
-- lua/usage_settle.lua and lua/policy.lua, put in front of each at build time (src/store/redis/scripts.rs). Mirrors the refill of src/limit/token_bucket.rs.
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

