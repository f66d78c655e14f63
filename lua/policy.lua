-- One decision over several policies, all or nothing: any number of limit entries (a tier's
-- main limit and limit rules, each with one of the six algorithms' scripts, inserted below at
-- load time by src/quota/policy_script.rs) and a tier's calendar quotas. Every policy is checked
-- first; only if all admit is every one debited (docs/DESIGN.md 4c, 4e).
--
-- How the algorithm scripts are composed: each runs unchanged as one function of ALGORITHMS with
-- a `redis` whose `call` passes reads through and buffers writes, and whose TIME is this call's
-- clock (so every policy sees the same instant). An entry's buffered writes are applied when
-- every policy admits, or when that entry itself refused (then they only normalise its state,
-- e.g. a rebased window); never when only another policy refused. Algorithm scripts read
-- before they write. A shadow entry is decided and debited like the others but its refusal
-- does not refuse the call.
--
-- KEYS[i]       entry i's key (i = 1..ne), e.g. <prefix>:{<tenant>}:<tb|gcra|fw|swl|swc|lb>
-- KEYS[ne + j]  quota j's key base <prefix>:{<tenant>}:q:<period>; the window start (Unix ms) is
--               appended here, from Redis TIME (same hash tag, so the same Cluster slot)
-- ARGV[1]       ne, the number of entries; then per entry: algorithm (1..6, in the order of
--               src/limit/algorithm.rs ALL), shadow (0|1), m, and its m script arguments
-- then          cost (tokens debited from every quota), nq, per quota: period
--               (hour|day|week|month), limit
-- then          optional, tests only (the gateway never sends it): the clock in Unix ms
--
-- Returns integers {all admitted (0|1), the clock (Unix ms), ne, per entry {n, its script's n
-- reply values}, nq, per quota {admitted, remaining, retry-after ms (-1 = never), ms until the
-- window ends}}.
if redis.replicate_commands then redis.replicate_commands() end

local real = redis
local ne = tonumber(ARGV[1])
local entries = {}
local at = 2
for i = 1, ne do
  local e = {alg = tonumber(ARGV[at]), shadow = ARGV[at + 1] == '1', argv = {}}
  local m = tonumber(ARGV[at + 2])
  for j = 1, m do e.argv[j] = ARGV[at + 2 + j] end
  entries[i] = e
  at = at + 3 + m
end
local cost = tonumber(ARGV[at])
local nq = tonumber(ARGV[at + 1])
local test_now = ARGV[at + 2 + 2 * nq]

local clock
if test_now then
  local ms = tonumber(test_now)
  clock = {string.format('%d', math.floor(ms / 1000)), string.format('%d', (ms % 1000) * 1000)}
else
  clock = real.call('TIME')
end
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local READS = {HMGET = true, HGET = true, HGETALL = true, GET = true, LRANGE = true,
  LLEN = true, LINDEX = true, PTTL = true, EXISTS = true}
local function buffered(writes)
  local proxy = {}
  proxy.call = function(cmd, ...)
    local c = string.upper(cmd)
    if c == 'TIME' then return clock end
    if READS[c] then return real.call(cmd, ...) end
    writes[#writes + 1] = {cmd, ...}
    return 0
  end
  return setmetatable(proxy, {__index = real})
end
local function apply(writes)
  for _, w in ipairs(writes) do real.call(unpack(w)) end
end

--@@ALGORITHMS@@

local all = true
for i, e in ipairs(entries) do
  e.writes = {}
  e.reply = ALGORITHMS[e.alg]({KEYS[i]}, e.argv, buffered(e.writes))
  if e.reply[1] ~= 1 and not e.shadow then all = false end
end

local DAY = 86400000
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
-- Days since 1970-01-01 of the first of month m of year y (src/limit/calendar.rs).
local function days_from_civil(y, mo)
  if mo <= 2 then y = y - 1 end
  local era = idiv(y, 400)
  local yoe = y - era * 400
  local mp = (mo + 9) % 12
  local doy = idiv(153 * mp + 2, 5)
  local doe = yoe * 365 + idiv(yoe, 4) - idiv(yoe, 100) + doy
  return era * 146097 + doe - 719468
end
local function year_month(days)
  local z = days + 719468
  local era = idiv(z, 146097)
  local doe = z - era * 146097
  local yoe = idiv(doe - idiv(doe, 1460) + idiv(doe, 36524) - idiv(doe, 146096), 365)
  local doy = doe - (365 * yoe + idiv(yoe, 4) - idiv(yoe, 100))
  local mp = idiv(5 * doy + 2, 153)
  local mo = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if mo <= 2 then y = y + 1 end
  return y, mo
end
local function window(period)
  if period == 'hour' then
    local s = idiv(now, 3600000) * 3600000
    return s, s + 3600000
  elseif period == 'day' then
    local s = idiv(now, DAY) * DAY
    return s, s + DAY
  elseif period == 'week' then
    local days = idiv(now, DAY)
    local s = (days - (days + 3) % 7) * DAY
    return s, s + 7 * DAY
  end
  local y, mo = year_month(idiv(now, DAY))
  local ny, nm = y, mo + 1
  if mo == 12 then ny, nm = y + 1, 1 end
  return days_from_civil(y, mo) * DAY, days_from_civil(ny, nm) * DAY
end

local quotas = {}
for i = 1, nq do
  local period = ARGV[at + 2 * i]
  local limit = tonumber(ARGV[at + 1 + 2 * i])
  local s, e = window(period)
  local key = KEYS[ne + i] .. ':' .. string.format('%d', s)
  local used = tonumber(real.call('GET', key) or '0')
  local to_end = e - now
  if used + cost <= limit then
    quotas[i] = {key, to_end, {1, limit - used - cost, 0, to_end}}
  else
    all = false
    local retry = to_end
    if cost > limit then retry = -1 end
    quotas[i] = {key, to_end, {0, math.max(limit - used, 0), retry, to_end}}
  end
end

for _, e in ipairs(entries) do
  if all or e.reply[1] ~= 1 then apply(e.writes) end
end
if all then
  for _, q in ipairs(quotas) do
    real.call('INCRBY', q[1], cost)
    real.call('PEXPIRE', q[1], q[2])
  end
end

local reply = {all and 1 or 0, now, ne}
for _, e in ipairs(entries) do
  reply[#reply + 1] = #e.reply
  for _, v in ipairs(e.reply) do reply[#reply + 1] = v end
end
reply[#reply + 1] = nq
for _, q in ipairs(quotas) do
  for _, v in ipairs(q[3]) do reply[#reply + 1] = v end
end
return reply
