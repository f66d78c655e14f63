-- The GCRA debt owed now, shared by lua/lib/tat.lua and the closed form of lua/policy.lua, put
-- in place of their OWED placeholder line (src/quota/policy_script.rs expand, compose). Needs
-- idiv and ceil_div (lua/lib/prelude.lua) in scope.
--
-- owed_at(tat, rem, scale, now, limit, max_debt) → owed, capped: a TAT `tat` (ms) with remainder
-- `rem` written under limit `scale`, as the debt owed at `now` in units of 1/limit ms; a TAT
-- further ahead than max_debt allows (clock stepped back, lowered burst) is capped at max_debt
-- and flagged.
local function owed_at(tat, rem, scale, now, limit, max_debt)
  if tat < now then return 0, false end
  if scale ~= limit and scale ~= 0 then rem = idiv(rem * limit, scale) end
  local ahead = tat - now
  if ahead > ceil_div(max_debt, limit) then return max_debt, true end
  local owed = ahead * limit + rem
  if owed > max_debt then return max_debt, true end
  return owed, false
end
