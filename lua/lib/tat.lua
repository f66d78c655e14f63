-- GCRA state and refusals shared by lua/gcra.lua and lua/leaky_bucket.lua, put in place of their
-- TAT placeholder line (after the prelude and their `max_delay`): the debt owed now (a TAT further
-- ahead than burst·T + max_delay is capped, one written under another limit or period converted
-- in tokens; both flagged for rewriting), store(debt) writing the TAT and
-- returning it (ms, remainder), and the two refusals. Falls through with `new`, the debt after
-- this request, when it is admitted.
local cap = burst * per
local max_debt = cap + max_delay * limit
local need = cost * per

local owed, capped = 0, false
local stored = redis.call('HMGET', KEYS[1], 't', 'r', 's', 'p')
if stored[1] then
  -- owed_at: lua/lib/owed.lua, put in before this part.
  owed, capped = owed_at(tonumber(stored[1]), tonumber(stored[2]), tonumber(stored[3]),
    tonumber(stored[4]), now, limit, per, max_debt)
end

local function store(debt)
  local whole = idiv(debt, limit)
  redis.call('HSET', KEYS[1], 't', int(now + whole), 'r', int(debt - whole * limit), 's', int(limit),
    'p', int(per))
  redis.call('PEXPIRE', KEYS[1], ceil_div(debt, limit))
  return now + whole, debt - whole * limit
end

local remaining = 0
if cap > owed then remaining = idiv(cap - owed, per) end
if need > cap then
  if capped then store(owed) end
  return {0, remaining, -1, ceil_div(owed, limit), 0}
end
local new = owed + need
if new > max_debt then
  if capped then store(owed) end
  return {0, remaining, ceil_div(new - max_debt, limit), ceil_div(owed, limit), 0}
end
