-- Common start of the algorithm scripts, put in place of their PRELUDE placeholder line by
-- src/quota/policy_script.rs (expand): effects replication, the four common arguments
-- (ARGV[1..4] = limit, per_ms, burst, cost), the Redis clock in ms and exact integer helpers.
if redis.replicate_commands then redis.replicate_commands() end

local limit = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- floor(a / b) for integers below 2^53, corrected for the rounding of the double quotient.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function ceil_div(a, b) return idiv(a + b - 1, b) end
-- An integer value (below 2^53) as plain decimal digits, for storing. '%d' rather than '%.0f':
-- the same digits for integers, at a fraction of the cost in Redis's Lua.
local function int(x) return string.format('%d', x) end
