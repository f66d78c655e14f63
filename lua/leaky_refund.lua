-- Gives a leaky_bucket reservation back (its client went away while delayed). Mirrors
-- leaky_bucket::refund in src/limit/leaky_bucket.rs: only while the stored TAT is exactly the one
-- the reservation wrote (no later reservation), so nobody can overtake a queued request.
--
-- KEYS[1]  <prefix>:{<tenant>}:lb
-- ARGV[1]  tat_ms, ARGV[2] rem, ARGV[3] scale: the state the reservation wrote
-- ARGV[4]  cost (tokens), ARGV[5] per_ms
-- Returns 1 when the slot was given back, 0 otherwise. The key keeps its TTL.
local stored = redis.call('HMGET', KEYS[1], 't', 'r', 's')
if stored[1] ~= ARGV[1] or stored[2] ~= ARGV[2] or stored[3] ~= ARGV[3] then return 0 end
local tat, rem, scale = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if scale <= 0 then return 0 end
local need = tonumber(ARGV[4]) * tonumber(ARGV[5])
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
if rem >= need then
  rem = rem - need
else
  local borrow = idiv(need - rem + scale - 1, scale)
  tat = math.max(tat - borrow, 0)
  rem = rem + borrow * scale - need
end
redis.call('HSET', KEYS[1], 't', string.format('%d', tat), 'r', string.format('%d', rem))
return 1
