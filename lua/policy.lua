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
-- The arguments below may come packed: ARGV[1] holds the first ones as words separated by
-- spaces (the gateway sends everything up to the request count so, one argument instead of
-- dozens: a rule plan's call is the same text for every request), and each further ARGV
-- follows its words. Unpacked (one word per ARGV) reads the same.
-- ARGV[1]       ne, the number of entries; then per entry: algorithm (1..6, in the order of
--               src/limit/algorithm.rs ALL), shadow (0|1), m, and its m script arguments
-- then          cost (tokens debited from every quota), nq, per quota: period
--               (hour|day|week|month), limit
-- then          requests: how many identical requests to decide, one after another at this
--               call's instant (coalesced calls, src/quota/coalesce.rs)
-- then          optional: 'carry', then what the `local` fallback admitted while Redis was
--               unreachable (src/quota/policy_carry.rs), taken into entry 1 and the quotas
--               before anything is decided: debt (tokens entry 1 still owes: token bucket,
--               GCRA, leaky bucket), np, np pairs (age ms, tokens) of entry 1's admissions
--               (window algorithms), nqp, nqp pairs (age ms, tokens) of the quotas' admissions
-- then          optional, tests only (the gateway never sends it): the clock in Unix ms, then
--               'loop' to decide request by request even where the closed form would
--
-- Returns integers, per request in turn: {all admitted (0|1), the clock (Unix ms), ne, per
-- entry {n, its script's n reply values}, nq, per quota {admitted, remaining, retry-after ms
-- (-1 = never), ms until the window ends}}.
--
-- Requests (one or several) whose entries all use a scalable algorithm (below), each on its own
-- key, are decided in closed form instead when the state read can be replayed (replayable), and
-- the reply is one string of integers separated by spaces (a client reads one string faster
-- than an array of integers): -1, the clock, k = requests admitted (the first k), per entry its
-- state before the call, per quota the tokens used before the call. A token bucket's state is
-- one value, its level at the call's clock (units of 1/per_ms token, refilled; a missing bucket
-- is full), a GCRA's one value, its debt at the call's clock (units of 1/limit ms,
-- lua/lib/owed.lua), any other's m, then the m values of its hash as read (m = 0: no state).
-- The gateway knows each entry's algorithm and the number of quotas from its arguments, so the
-- reply carries neither ne nor nq; src/quota/policy_script/replay.rs derives each request's
-- decisions from that state with the algorithms' Rust mirrors, exactly as this script's loop
-- would decide them.
if redis.replicate_commands then redis.replicate_commands() end

local real = redis
-- The arguments unpacked (see above): ARGV[1]'s words, then ARGV[2], ARGV[3], ...
local ARGV = (function(given)
  local all, n = {}, 0
  for w in string.gmatch(given[1], '%S+') do
    n = n + 1
    all[n] = w
  end
  for i = 2, #given do all[n + i - 1] = given[i] end
  return all
end)(ARGV)
local ne = tonumber(ARGV[1])
-- Entry i: its algorithm, whether it is in shadow mode, and where its m script arguments start
-- in ARGV (`first`); `argv` (a table of them) is built only for its algorithm script.
local entries = {}
local at = 2
for i = 1, ne do
  local m = tonumber(ARGV[at + 2])
  entries[i] = {alg = tonumber(ARGV[at]), shadow = ARGV[at + 1] == '1', first = at + 3, m = m}
  at = at + 3 + m
end
local function argv_of(e)
  if not e.argv then
    local argv = {}
    for j = 1, e.m do argv[j] = ARGV[e.first + j - 1] end
    e.argv = argv
  end
  return e.argv
end
local cost = tonumber(ARGV[at])
local nq = tonumber(ARGV[at + 1])
local after = at + 2 + 2 * nq
-- The carry's arguments (absent: nil, the usual case).
local carried
if ARGV[after] == 'carry' then
  carried = {debt = tonumber(ARGV[after + 1]), entry = {}, quota = {}}
  local c = after + 2
  for _, list in ipairs({carried.entry, carried.quota}) do
    local n = tonumber(ARGV[c])
    for j = 1, n do list[j] = {tonumber(ARGV[c + 2 * j - 1]), tonumber(ARGV[c + 2 * j])} end
    c = c + 1 + 2 * n
  end
  after = c
end
local requests = tonumber(ARGV[after])
local test_now = ARGV[after + 1]
local test_loop = ARGV[after + 2] == 'loop'

local clock
if test_now then
  local ms = tonumber(test_now)
  clock = {string.format('%d', math.floor(ms / 1000)), string.format('%d', (ms % 1000) * 1000)}
else
  clock = real.call('TIME')
end
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local DAY = 86400000
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function ceil_div(a, b) return idiv(a + b - 1, b) end
--@@OWED@@
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

-- Quota i's counter key (this window's), limit, tokens used so far and ms until the window ends.
local function quota(i)
  local s, e = window(ARGV[at + 2 * i])
  local key = KEYS[ne + i] .. ':' .. string.format('%d', s)
  return key, tonumber(ARGV[at + 1 + 2 * i]), tonumber(real.call('GET', key) or '0'), e - now
end

-- The loop's machinery: the hash cache, the algorithm scripts run through a buffering `redis`,
-- one request decided in full (`decide`) and an entry's trial runs (`run`, `fitting`). Built on
-- first use only: the closed form of token buckets and GCRA needs none of it.
local loop
local function machinery()
  if loop then return loop end
  -- Hashes (the state of every algorithm but the sliding window log) are read from Redis once
  -- per call and written back once at its end, so the requests of a coalesced call see each
  -- other's writes here and n requests cost one HMGET, HSET and PEXPIRE per key, not n of each.
  -- hashes[key] = {fields = {name = value | false}, dirty = {name = true}, order = {names},
  -- ttl = ms | nil, deleted = true | nil}. Any other command on a cached key writes it back first.
  local hashes = {}
  local touched = {}
  local function hash(key)
    local h = hashes[key]
    if not h then
      h = {fields = {}, dirty = {}, order = {}}
      hashes[key] = h
      touched[#touched + 1] = key
    end
    return h
  end
  local function hmget(key, ...)
    local names = {...}
    local h = hash(key)
    local out, complete = {}, true
    for i, f in ipairs(names) do
      out[i] = h.fields[f]
      if out[i] == nil then complete = false end
    end
    if complete then return out end
    local got = h.deleted and {} or real.call('HMGET', key, ...)
    if not h.read then h.read = got end
    for i, f in ipairs(names) do
      if h.fields[f] == nil then h.fields[f] = got[i] or false end
      out[i] = h.fields[f]
    end
    return out
  end
  local function hset(key, ...)
    local h = hash(key)
    local args = {...}
    for i = 1, #args, 2 do
      local f = args[i]
      if not h.dirty[f] then
        h.dirty[f] = true
        h.order[#h.order + 1] = f
      end
      h.fields[f] = args[i + 1]
    end
    return 0
  end
  local function pexpire(key, ms)
    local h = hashes[key]
    if tonumber(ms) > 0 then
      h.ttl = ms
    else
      -- Redis deletes a key given a TTL that is not positive.
      hashes[key] = {fields = {}, dirty = {}, order = {}, deleted = true}
    end
    return 1
  end
  local function write_back(key)
    local h = hashes[key]
    if not h then return end
    hashes[key] = nil
    if h.deleted then real.call('DEL', key) end
    if #h.order > 0 then
      local args = {}
      for _, f in ipairs(h.order) do
        args[#args + 1] = f
        args[#args + 1] = h.fields[f]
      end
      real.call('HSET', key, unpack(args))
    end
    if h.ttl then real.call('PEXPIRE', key, h.ttl) end
  end
  -- A command of the algorithm scripts, through the hash cache.
  local function command(cmd, key, ...)
    local c = string.upper(cmd)
    if c == 'HMGET' then return hmget(key, ...) end
    if c == 'HSET' then return hset(key, ...) end
    if c == 'PEXPIRE' and hashes[key] then return pexpire(key, ...) end
    write_back(key)
    return real.call(cmd, key, ...)
  end

  local READS = {HMGET = true, HGET = true, HGETALL = true, GET = true, LRANGE = true,
    LLEN = true, LINDEX = true, PTTL = true, EXISTS = true}
  local function buffered(writes)
    local proxy = {}
    proxy.call = function(cmd, ...)
      local c = string.upper(cmd)
      if c == 'TIME' then return clock end
      if READS[c] then return command(cmd, ...) end
      writes[#writes + 1] = {cmd, ...}
      return 0
    end
    return setmetatable(proxy, {__index = real})
  end
  local function apply(writes)
    for _, w in ipairs(writes) do command(unpack(w)) end
  end

  --@@ALGORITHMS@@

  -- Decides one request, appending its reply to `reply`.
  local function decide(reply)
    local all = true
    for i, e in ipairs(entries) do
      e.writes = {}
      e.reply = ALGORITHMS[e.alg]({KEYS[i]}, argv_of(e), buffered(e.writes))
      if e.reply[1] ~= 1 and not e.shadow then all = false end
    end

    local quotas = {}
    for i = 1, nq do
      local key, limit, used, to_end = quota(i)
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

    reply[#reply + 1] = all and 1 or 0
    reply[#reply + 1] = now
    reply[#reply + 1] = ne
    for _, e in ipairs(entries) do
      reply[#reply + 1] = #e.reply
      for _, v in ipairs(e.reply) do reply[#reply + 1] = v end
    end
    reply[#reply + 1] = nq
    for _, q in ipairs(quotas) do
      for _, v in ipairs(q[3]) do reply[#reply + 1] = v end
    end
  end

  -- Entry i decided as one request of m times its cost, its writes kept in e.writes.
  local function run(i, e, m)
    local argv = {}
    for j, v in ipairs(argv_of(e)) do argv[j] = v end
    argv[4] = string.format('%d', m * tonumber(argv[4]))
    e.writes = {}
    return ALGORITHMS[e.alg]({KEYS[i]}, argv, buffered(e.writes))[1] == 1
  end
  -- The most of n requests entry i admits in turn (0..n): monotone in m, so a binary search.
  -- When all n fit, their writes are kept (e.all_writes) for the debit of the whole batch.
  local function fitting(i, e, n)
    if run(i, e, n) then
      e.all_writes = e.writes
      return n
    end
    local lo, hi = 0, n - 1
    while lo < hi do
      local mid = math.floor((lo + hi + 1) / 2)
      if run(i, e, mid) then lo = mid else hi = mid - 1 end
    end
    return lo
  end

  loop = {
    decide = decide,
    run = run,
    fitting = fitting,
    apply = apply,
    -- The hash values of `key` as first read from Redis (nil when never read).
    read_of = function(key)
      local h = hashes[key]
      return h and h.read
    end,
    -- Every cached hash written back.
    flush = function()
      for _, key in ipairs(touched) do write_back(key) end
    end,
  }
  return loop
end

-- Closed form. An algorithm is scalable when m requests of cost c at one instant decide and
-- leave state exactly as one request of cost m·c does (docs/redis.md#request-coalescing-always-on):
-- token bucket, GCRA, fixed window and sliding window counter (codes in src/limit/algorithm.rs
-- ALL). Not the sliding window log (one log entry per request) nor the leaky bucket (a cost
-- beyond the burst may still fit in its delay).
local SCALABLE = {[1] = true, [2] = true, [3] = true, [5] = true}
-- Per scalable algorithm: how many hash fields it reads, and which of them holds the scale the
-- state was written with, with the argument it must equal (token bucket: s = per_ms; GCRA:
-- s = limit). The reply returns the state read, for the gateway to replay.
local FIELDS = {[1] = 3, [2] = 4, [3] = 3, [5] = 4}
local SCALE = {[1] = {{2, 2}}, [2] = {{3, 1}, {4, 2}}}
-- Window algorithms: the field holding the window length the state was written with.
local WINDOW = {[3] = 3, [5] = 4}

-- Entry i's hash values as first read from Redis ({} when never read).
local function read_of(i)
  if entries[i].read then return entries[i].read end
  return loop and loop.read_of(KEYS[i]) or {}
end
-- Field j of entry i's hash as read, as a number (nil when absent or not a number); a kernel's
-- fields are converted once, when read.
local function field(i, j)
  local nums = entries[i].nums
  if nums then return nums[j] end
  return tonumber(read_of(i)[j])
end

-- Whether the state every entry read can be replayed by the gateway exactly as this script
-- decides: every field a non-negative integer, written with the current scale. Anything else
-- (a usage budget in debt, a state written before a reload changed the scale, a partial hash)
-- is decided by the loop instead; nothing has been written yet.
local function replayable()
  for i, e in ipairs(entries) do
    local read = read_of(i)
    if read[1] then
      for j = 1, FIELDS[e.alg] do
        local v = field(i, j)
        if not v or v < 0 or v ~= math.floor(v) then return false end
      end
      for _, sc in ipairs(SCALE[e.alg] or {}) do
        if field(i, sc[1]) ~= tonumber(ARGV[e.first + sc[2] - 1]) then return false end
      end
      local wf = WINDOW[e.alg]
      if wf then
        local f = e.first
        local l, p, b = tonumber(ARGV[f]), tonumber(ARGV[f + 1]), tonumber(ARGV[f + 2])
        if field(i, wf) ~= math.max(idiv(b * p + l - 1, l), 1) then return false end
      end
    end
  end
  return true
end

-- Closed-form kernels of the token bucket and GCRA: the same arithmetic as their scripts
-- (lua/token_bucket.lua, lua/gcra.lua with lua/lib/tat.lua) on the hash read once, without
-- running the script through the buffering `redis` for every trial count. Each script decides
-- "m requests of cost c" as one request of cost m*c; here `state` reads entry e's hash and sets
-- its state in numbers (`nums`: the hash's fields as numbers), `fit` says how many of n such
-- requests it admits, and `write` issues what the script would write for d admitted requests
-- (d = 0: for one request it refuses), `before` the state the reply carries (the level or debt
-- at the call's clock, before any debit). A scale is written back as its argument's digits.
local function int(x) return string.format('%d', x) end
local KERNELS = {}
KERNELS[1] = {
  -- The bucket's string (lua/lib/refill.lua bucket_state) as the three values of the old hash.
  read = function(e, key)
    local l, s, t, tail = bucket_state(real, key)
    e.tail = tail or ''
    if l then return {l, s, t} end
    return {}
  end,
  state = function(e, read, nums)
    e.capacity = e.burst * e.per
    e.level, e.rebased = e.capacity, false
    if read[1] then
      e.level, e.rebased = refilled(nums[1], nums[2], nums[3], now, e.per, e.limit, e.capacity)
    end
  end,
  fit = function(e, n)
    local need = e.cost * e.per
    if need > e.capacity or e.level < need then return 0 end
    return math.min(n, idiv(e.level, need))
  end,
  before = function(e) return e.level end,
  write = function(key, e, d)
    local need = e.cost * e.per
    local level = e.level - d * need
    -- A refusal writes only a rebased stamp, and only when the cost fits the bucket at all.
    if d == 0 and not (e.rebased and need <= e.capacity) then
      -- As lua/token_bucket.lua's keep(): the key lives until the bucket is full at this rate.
      local full = math.floor((e.capacity - level + e.limit - 1) / e.limit)
      if need <= e.capacity and e.read[1] and full > 0 then real.call('PEXPIRE', key, full) end
      return
    end
    -- the script's ceil_div and SET (lua/token_bucket.lua), its tail (lease holders) kept
    local full = math.floor((e.capacity - level + e.limit - 1) / e.limit)
    real.call('SET', key, int(level) .. ' ' .. ARGV[e.first + 1] .. ' ' .. int(now) .. e.tail,
      'PX', math.max(full, 1))
  end,
}
KERNELS[2] = {
  fields = {'t', 'r', 's', 'p'},
  state = function(e, read, nums)
    e.capacity, e.owed, e.capped = e.burst * e.per, 0, false
    if read[1] then
      e.owed, e.capped = owed_at(nums[1], nums[2], nums[3], nums[4], now, e.limit, e.per,
        e.capacity)
    end
  end,
  fit = function(e, n)
    local need = e.cost * e.per
    if need > e.capacity or e.owed + need > e.capacity then return 0 end
    return math.min(n, idiv(e.capacity - e.owed, need))
  end,
  before = function(e) return e.owed end,
  write = function(key, e, d)
    local need, limit = e.cost * e.per, e.limit
    local debt = e.owed + d * need
    -- A refusal writes only a capped TAT.
    if d == 0 and not e.capped then return end
    local whole = idiv(debt, limit)
    real.call('HSET', key, 't', int(now + whole), 'r', int(debt - whole * limit), 's', ARGV[e.first],
      'p', ARGV[e.first + 1])
    real.call('PEXPIRE', key, ceil_div(debt, limit))
  end,
}

-- The closed-form reply, or nil when the state read is not replayable (then nothing is written).
local function closed_form()
  local k = requests
  for i, e in ipairs(entries) do
    local kernel = KERNELS[e.alg]
    if kernel then
      e.kernel = kernel
      local f = e.first
      e.limit, e.per = tonumber(ARGV[f]), tonumber(ARGV[f + 1])
      e.burst, e.cost = tonumber(ARGV[f + 2]), tonumber(ARGV[f + 3])
      local read
      if kernel.read then
        read = kernel.read(e, KEYS[i])
      else
        read = real.call('HMGET', KEYS[i], unpack(kernel.fields))
      end
      local nums = {}
      for j = 1, FIELDS[e.alg] do nums[j] = tonumber(read[j]) end
      e.read, e.nums = read, nums
      kernel.state(e, read, e.nums)
      e.fit = kernel.fit(e, requests)
    else
      e.fit = machinery().fitting(i, e, requests)
    end
    if not e.shadow and e.fit < k then k = e.fit end
  end
  if not replayable() then return nil end
  local quotas = {}
  for i = 1, nq do
    local key, limit, used, to_end = quota(i)
    -- As the loop decides: admitted while used + cost <= limit.
    local fit = 0
    if used + cost <= limit then
      fit = requests
      if cost > 0 then fit = math.floor((limit - used) / cost) end
    end
    if fit < k then k = fit end
    quotas[i] = {key, to_end, used}
  end
  -- Debits: an entry takes its share of the k admitted requests (a shadow entry only those it
  -- admitted itself); one that refused the first request keeps what its refusal wrote.
  for i, e in ipairs(entries) do
    local d = k
    if e.shadow and e.fit < k then d = e.fit end
    if e.kernel then
      if d > 0 or e.kernel.fit(e, 1) == 0 then e.kernel.write(KEYS[i], e, d) end
    elseif d == requests and e.all_writes then
      loop.apply(e.all_writes)
    elseif d > 0 then
      loop.run(i, e, d)
      loop.apply(e.writes)
    elseif not loop.run(i, e, 1) then
      loop.apply(e.writes)
    end
  end
  if k > 0 then
    for _, q in ipairs(quotas) do
      real.call('INCRBY', q[1], k * cost)
      real.call('PEXPIRE', q[1], q[2])
    end
  end
  local reply = {'-1', int(now), int(k)}
  for i, e in ipairs(entries) do
    if e.kernel then
      reply[#reply + 1] = int(e.kernel.before(e))
    else
      local read = read_of(i)
      if read[1] then
        reply[#reply + 1] = int(#read)
        for j = 1, #read do reply[#reply + 1] = int(field(i, j)) end
      else
        reply[#reply + 1] = '0'
      end
    end
  end
  for _, q in ipairs(quotas) do reply[#reply + 1] = int(q[3]) end
  return table.concat(reply, ' ')
end

-- The carry (src/limit/carry.rs mirrors it): what the `local` fallback admitted, taken into
-- entry 1's state and the quotas' counters in each algorithm's own terms, as of `now`. Ages
-- become times; a window counts the admissions that fall in it. Never beyond full: a count
-- above the burst (limit) is lowered to the burst (limit) or to what was there already.
local function capped(old, new, most)
  if new > most then return math.max(most, old) end
  return new
end
-- A carried key's TTL: at least a second, as the decision that follows in this script reads it
-- (a key expiring meanwhile would read as empty); a state kept longer decides the same.
local function keep(key, ms) real.call('PEXPIRE', key, math.max(ms, 1000)) end
local function carry_entry(c)
  local e, key = entries[1], KEYS[1]
  local f = e.first
  local limit, per, burst = tonumber(ARGV[f]), tonumber(ARGV[f + 1]), tonumber(ARGV[f + 2])
  local w = math.max(idiv(burst * per + limit - 1, limit), 1)
  local start = idiv(now, w) * w
  local function sum(from)
    local x = 0
    for _, a in ipairs(c.entry) do
      if now - a[1] >= from then x = x + a[2] end
    end
    return x
  end
  if e.alg == 1 and c.debt > 0 then
    local capacity = burst * per
    -- The bucket's string (lua/lib/refill.lua bucket_state), its tail (lease holders) kept.
    local l, sc, t, tail = bucket_state(real, key)
    local level = capacity
    if l then
      level = refilled(tonumber(l), tonumber(sc), tonumber(t), now, per, limit, capacity)
    end
    level = level - math.min(level, c.debt * per)
    real.call('SET', key, int(level) .. ' ' .. int(per) .. ' ' .. int(now) .. (tail or ''), 'PX',
      math.max(ceil_div(capacity - level, limit), 1000))
  elseif (e.alg == 2 or e.alg == 6) and c.debt > 0 then
    local max_debt = burst * per
    if e.alg == 6 then max_debt = max_debt + tonumber(ARGV[f + 4]) * limit end
    local got = real.call('HMGET', key, 't', 'r', 's', 'p')
    local owed = 0
    if got[1] then
      owed = owed_at(tonumber(got[1]), tonumber(got[2]), tonumber(got[3]), tonumber(got[4]), now,
        limit, per, max_debt)
    end
    local new = math.min(owed + c.debt * per, max_debt)
    if new > owed then
      local whole = idiv(new, limit)
      real.call('HSET', key, 't', int(now + whole), 'r', int(new - whole * limit), 's', int(limit),
        'p', int(per))
      keep(key, ceil_div(new, limit))
    end
  elseif e.alg == 3 then
    local x = sum(start)
    if x == 0 then return end
    local got = real.call('HMGET', key, 'w', 'c', 'l')
    local s, count, len = start, 0, w
    if got[1] then
      local gs, gl = tonumber(got[1]), tonumber(got[3])
      if not gl or gl == 0 then gl = w end
      if gs + gl > now then s, count, len = gs, tonumber(got[2]), gl end
    end
    real.call('HSET', key, 'w', int(s), 'c', int(capped(count, count + x, burst)), 'l', int(len))
    keep(key, s + len - now)
  elseif e.alg == 5 then
    local xc = sum(start)
    local xp = sum(start - w) - xc
    if xc + xp == 0 then return end
    local got = real.call('HMGET', key, 'w', 'c', 'p', 'l')
    local len = tonumber(got[4])
    -- Counters of another window length are not carried into.
    if got[1] and len and len ~= 0 and len ~= w then return end
    local prev, cur = 0, 0
    if got[1] then
      local s = tonumber(got[1])
      if s >= start then
        prev, cur = tonumber(got[3]), tonumber(got[2])
      elseif s + w >= start then
        prev = tonumber(got[2])
      end
    end
    prev, cur = capped(prev, prev + xp, burst), capped(cur, cur + xc, burst)
    real.call('HSET', key, 'w', int(start), 'c', int(cur), 'p', int(prev), 'l', int(w))
    keep(key, start + 2 * w - now)
  elseif e.alg == 4 then
    local log = {}
    for _, v in ipairs(real.call('LRANGE', key, 0, -1)) do
      v = tonumber(v)
      if v + w > now then log[#log + 1] = v end
    end
    local n = #log
    for _, a in ipairs(c.entry) do
      local t = now - a[1]
      if t + w > now then
        for _ = 1, math.min(a[2], burst) do log[#log + 1] = t end
      end
    end
    if #log == n then return end
    table.sort(log)
    -- The newest `burst` entries decide every request as the whole log would.
    local first = math.max(#log - burst + 1, 1)
    real.call('DEL', key)
    local chunk = {}
    for i = first, #log do
      chunk[#chunk + 1] = int(log[i])
      if #chunk == 1000 or i == #log then
        real.call('RPUSH', key, unpack(chunk))
        chunk = {}
      end
    end
    keep(key, log[#log] + w - now)
  end
end
local function carry_quotas(c)
  for i = 1, nq do
    local s = window(ARGV[at + 2 * i])
    local x = 0
    for _, a in ipairs(c.quota) do
      if now - a[1] >= s then x = x + a[2] end
    end
    if x > 0 then
      local key, limit, used, to_end = quota(i)
      local new = capped(used, used + x, limit)
      if new > used then real.call('SET', key, int(new), 'PX', math.max(to_end, 1000)) end
    end
  end
end
if carried then
  carry_entry(carried)
  carry_quotas(carried)
end

-- Scalable entries, each on a key of its own (two entries on one key interleave their writes
-- request by request, which only the loop does). One request too: the closed form reads and
-- writes what the loop would, without building the loop's machinery.
local scalable = not test_loop
local keyed = {}
for i, e in ipairs(entries) do
  scalable = scalable and SCALABLE[e.alg] == true and not keyed[KEYS[i]]
  keyed[KEYS[i]] = true
end

local reply = scalable and closed_form()
if not reply then
  reply = {}
  local decide = machinery().decide
  for _ = 1, requests do decide(reply) end
end
if loop then loop.flush() end
return reply
