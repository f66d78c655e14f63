-- Appended to every wrk script used by bench/run.py: prints one machine-readable line with the
-- exact summary (wrk's text output rounds), parsed by run.py. Latency values are microseconds.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "TOLLGATE_BENCH_JSON {\"duration_us\":%d,\"requests\":%d,\"bytes\":%d," ..
    "\"err_connect\":%d,\"err_read\":%d,\"err_write\":%d,\"err_status\":%d,\"err_timeout\":%d," ..
    "\"lat_mean_us\":%.1f,\"lat_max_us\":%d,\"p50_us\":%d,\"p90_us\":%d,\"p99_us\":%d,\"p999_us\":%d}\n",
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.max, latency:percentile(50.0), latency:percentile(90.0),
    latency:percentile(99.0), latency:percentile(99.9)))
end
