-- Leaky bucket (shaping) decision, atomic in Redis. Mirrors src/limit/leaky_bucket.rs (GCRA with
-- the tolerance extended by max_delay, src/limit/gcra.rs) step for step.
--
-- KEYS[1]  <prefix>:{<tenant>}:lb  (hash: t = TAT ms, r = remainder in 1/s ms, s = limit and
--          p = per_ms written with; another limit or period converts the debt in tokens)
-- ARGV[1]  limit   tokens per period (integer > 0); time is counted in units of 1/limit ms
-- ARGV[2]  per_ms  period in milliseconds (integer > 0); emission interval T = per_ms units
-- ARGV[3]  burst   tokens admitted back to back (integer > 0); tolerance burst·T
-- ARGV[4]  cost    tokens this request takes (integer > 0)
-- ARGV[5]  max_delay_ms  longest delay until the request's slot (integer >= 0)
--
-- Returns integers {admitted (0|1), remaining tokens (floor), retry-after ms (-1 = never),
-- ms until full, delay ms until the slot, then when admitted the written TAT (ms, remainder)
-- that identifies the reservation for lua/leaky_refund.lua}. Clock: Redis TIME. A TAT further
-- ahead than burst·T + max_delay (clock step back, lowered burst) is rebased to that and written
-- even on a refusal, as is a state converted from another limit or period.
--@@PRELUDE@@
local max_delay = tonumber(ARGV[5])

--@@OWED@@
--@@TAT@@
local tat, rem = store(new)
local left, delay = 0, 0
if cap > new then left = idiv(cap - new, per) else delay = ceil_div(new - cap, limit) end
return {1, left, 0, ceil_div(new, limit), delay, tat, rem}
