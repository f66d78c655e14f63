-- Constant-rate ("paced") load for wrk 4, which has no -R option (that is wrk2, not in Debian).
-- Usage: wrk -t T -c C ... -s pace.lua -- <total requests/s> <T>
--
-- Each wrk thread owns a fixed schedule of send slots, one every T/rate seconds, starting when
-- the thread starts. wrk calls delay() before every request on every connection; each call takes
-- the next slot and returns how long to wait for it (LuaJIT ffi clock_gettime(CLOCK_MONOTONIC)).
-- A connection that is still busy simply takes its slot later (so this is rate-limited closed
-- loop, not coordinated-omission corrected like wrk2): latency is measured by wrk from the actual
-- send. If the thread falls behind (all connections busy) it catches up by at most 50 ms of
-- slots, never with an unbounded burst. wrk's timer has 1 ms granularity, so sends come in
-- ~1 ms micro-batches of rate/1000 requests; the average rate is exact.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } tollgate_bench_timespec;
int clock_gettime(int clk_id, tollgate_bench_timespec *tp);
]]
local ts = ffi.new("tollgate_bench_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local interval_ms = nil
local next_at = nil

function init(args)
  local rate = tonumber(args[1])
  local threads = tonumber(args[2] or "1")
  interval_ms = 1000.0 * threads / rate
end

function delay()
  local now = now_ms()
  if next_at == nil then next_at = now end
  if next_at < now - 50 then next_at = now - 50 end
  local wait = next_at - now
  next_at = next_at + interval_ms
  if wait <= 0 then return 0 end
  return math.floor(wait + 0.5)
end
