-- One distinct client address per request in X-Forwarded-For (for the edge memory run).
-- Usage: wrk -t T ... -s xff.lua -- <first index> <count>
-- Address i is 11.0.0.0 + i (never 127.0.0.1, the trusted proxy). The [first, first+count) range
-- is split evenly over the threads; a thread that has sent its share stops itself, so exactly
-- `count` distinct addresses are offered (run.py interrupts wrk once all threads are done).
local counter = 0
local threads = {}

function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

local lo, hi, i
local last = nil

local function addr(n)
  n = n + 11 * 16777216
  return string.format("%d.%d.%d.%d", math.floor(n / 16777216) % 256,
    math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end

function init(args)
  local first, count, nthreads = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local per = math.floor(count / nthreads)
  lo = first + tid * per
  hi = lo + per
  if tid == nthreads - 1 then hi = first + count end
  i = lo
end

function request()
  if i >= hi then
    wrk.thread:stop()
    if last then return last end
    return wrk.format(nil, nil, { ["X-Forwarded-For"] = addr(hi - 1) })
  end
  last = wrk.format(nil, nil, { ["X-Forwarded-For"] = addr(i) })
  i = i + 1
  return last
end
