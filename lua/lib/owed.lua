-- The GCRA debt owed now, shared by lua/lib/tat.lua and the closed form of lua/policy.lua, put
-- in place of their OWED placeholder line (src/quota/policy_script.rs expand, compose). Needs
-- idiv and ceil_div (lua/lib/prelude.lua) in scope. Mirrors `debt` in src/limit/gcra.rs.
--
-- owed_at(tat, rem, scale, per_old, now, limit, per, max_debt) → owed, rewrite: a TAT `tat` (ms)
-- with remainder `rem` written under limit `scale` and period `per_old` (nil or 0: the current
-- ones), as the debt owed at `now` in units of 1/limit ms; a TAT further ahead than max_debt
-- allows (clock stepped back, lowered burst) is capped at max_debt, and a state written under
-- another limit or period is converted in tokens (docs/algorithms.md#changing-a-limit): both
-- are flagged for rewriting.
local EXACT = 4503599627370496 -- 2^52
local function owed_at(tat, rem, scale, per_old, now, limit, per, max_debt)
  if tat < now then return 0, false end
  if not scale or scale == 0 then scale = limit end
  if not per_old or per_old == 0 then per_old = per end
  local ahead = tat - now
  if scale == limit and per_old == per then
    if ahead > ceil_div(max_debt, limit) then return max_debt, true end
    local owed = ahead * limit + rem
    if owed > max_debt then return max_debt, true end
    return owed, false
  end
  -- Another rate: the old debt (units of 1/scale ms, per_old of them a token) in whole tokens q
  -- and a rest r, as units of the new rate, rounded up.
  if ahead > idiv(EXACT, scale) then return max_debt, true end
  local old = ahead * scale + rem
  local q = idiv(old, per_old)
  local r = old - q * per_old
  if q >= ceil_div(max_debt, per) then return max_debt, true end
  local frac = 0
  if r > 0 then
    if r * per <= EXACT then frac = ceil_div(r * per, per_old) else frac = per end
  end
  local owed = q * per + frac
  if owed > max_debt then owed = max_debt end
  return owed, owed > 0
end
