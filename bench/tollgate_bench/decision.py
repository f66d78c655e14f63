"""Variant X, the decision service: h2load (Debian `nghttp2-client`) sends one fixed
`ShouldRateLimit` call (Envoy's rate limit service v3, gRPC over h2c) to tollgate's
`decision.grpc.listen`, whose one `limits:` rule (token bucket, sized to refuse nothing) decides
each call in Redis; decisions per second and CPU per decision (gateway and Redis), to set beside F's
per proxied request."""

import re
import shutil
import struct
import subprocess
import time

from .common import HUGE, TENANT, BenchError, log

# The gRPC path of ShouldRateLimit.
RLS_PATH = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
DOMAIN = "bench"


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def rls_request(domain, entries):
    """The protobuf bytes of a `RateLimitRequest` (domain = 1; descriptors = 2, one descriptor
    whose `entries` = 1 are (key = 1, value = 2) pairs), hits_addend unset."""
    entry_bytes = b"".join(_field(1, _field(1, k.encode()) + _field(2, v.encode()))
                           for k, v in entries)
    return _field(1, domain.encode()) + _field(2, entry_bytes)


def grpc_frame(message):
    """One gRPC length-prefixed message: uncompressed flag 0, big-endian u32 length, bytes."""
    return b"\x00" + struct.pack(">I", len(message)) + message


def decision_rule():
    """The `limits:` rule of variant X: the descriptor `tenant` in domain `bench`, one token
    bucket per value, sized to refuse nothing."""
    return {"name": "x-tenant", "match": {"domain": DOMAIN, "descriptors": ["tenant"]},
            "key": ["descriptor:tenant"], "limit": HUGE, "per": "1s", "burst": HUGE}


def h2load_path():
    h2 = shutil.which("h2load")
    if not h2:
        raise BenchError("variant X needs h2load: sudo apt-get install -y nghttp2-client")
    return h2


def parse_h2load(out):
    """{"rps", "requests", "succeeded", "failed", "errored", "status_2xx", "duration_s"} from
    h2load's summary ("finished in 5.00s, 123.45 req/s, ...", "requests: N total, ...",
    "status codes: N 2xx, ...")."""
    m = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", out)
    r = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored", out)
    s = re.search(r"status codes: (\d+) 2xx", out)
    if not (m and r and s):
        raise BenchError(f"h2load output not understood:\n{out}")
    dur = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    return {"rps": float(m.group(3)), "duration_s": dur, "requests": int(r.group(3)),
            "succeeded": int(r.group(4)), "failed": int(r.group(5)), "errored": int(r.group(6)),
            "status_2xx": int(s.group(1))}


def run_h2load(ctx, port, body_path, duration):
    a = ctx.args
    argv = [h2load_path(), "-D", str(int(duration)), "-t", str(a.wrk_threads),
            "-c", str(a.h2_conns), "-m", str(a.h2_streams), "-d", str(body_path),
            "-H", "content-type: application/grpc", "-H", "te: trailers",
            f"http://127.0.0.1:{port}{RLS_PATH}"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    if p.returncode != 0:
        raise BenchError(f"h2load failed ({p.returncode}): {' '.join(argv)}\n{p.stdout}{p.stderr}")
    return parse_h2load(p.stdout)


def body_file(ctx):
    path = ctx.tmp / "rls-request.bin"
    path.write_bytes(grpc_frame(rls_request(DOMAIN, [("tenant", TENANT)])))
    return path


def measure_decision(ctx, sut, backend):
    """Warm-up, then one measured h2load run against variant X with the CPU, Redis and metrics
    deltas around it; per-request figures are per decision (one call, one descriptor)."""
    from .measure import delta_metrics, delta_redis, snapshot
    from .processes import rss_kb

    a = ctx.args
    port = sut.extra["grpc_port"]
    body = body_file(ctx)
    if a.warmup > 0:
        run_h2load(ctx, port, body, a.warmup)
    time.sleep(0.2)
    before = snapshot(ctx, sut, backend, sut.redis)
    h = run_h2load(ctx, port, body, a.duration)
    time.sleep(0.3)
    after = snapshot(ctx, sut, backend, sut.redis)
    n = max(h["succeeded"], 1)
    rec = {"variant": "X", "rps": h["rps"], "ok_rps": h["succeeded"] / h["duration_s"],
           "non2xx_rps": 0.0, "requests": h["requests"], "non2xx": h["requests"] - h["status_2xx"],
           "h2load_failed": h["failed"] + h["errored"], "duration_s": h["duration_s"],
           "h2_conns": a.h2_conns, "h2_streams": a.h2_streams}
    rec["proxy_cpu_s"] = after["proxy_cpu"] - before["proxy_cpu"]
    rec["proxy_cpu_us_per_req"] = rec["proxy_cpu_s"] / n * 1e6
    rec["rss_mb"] = rss_kb(sut.pids()) / 1024
    r = delta_redis(before, after)
    rec["redis"] = r
    rec["redis_cpu_us_per_req"] = r["cpu_s"] / n * 1e6
    rec["evalsha_per_req"] = r["evalsha"] / n
    rec["script_calls_per_req"] = (r["evalsha"] + r["eval"]) / n
    rec["redis_client_cmds_per_req"] = r["client_commands"] / n
    rec["tollgate"] = m = delta_metrics(before, after)
    # Every call one admitted rule decision (the bench's rule refuses nothing): proves the calls
    # were answered OK, as gRPC errors travel in HTTP 200 trailers that h2load does not read.
    rec["rule_decisions"] = sum(v for k, v in m.items() if k.startswith("rule_"))
    rec["script_calls_per_decision"] = ((r["evalsha"] + r["eval"]) / rec["rule_decisions"]
                                        if rec["rule_decisions"] else None)
    log(f"  X: {h['rps']:.0f} decisions/s, {rec['proxy_cpu_us_per_req']:.1f} gateway CPU µs and "
        f"{rec['redis_cpu_us_per_req']:.1f} Redis CPU µs per decision, "
        f"{rec['script_calls_per_req']:.3f} script calls per call; "
        f"{rec['rule_decisions']} rule decisions for {h['succeeded']} calls")
    return rec


def probe_decision(ctx, sut):
    """One call: h2load -n 1 must see a 200 (gRPC answers errors in trailers, so the body of
    the probe is checked by the run's own counters: script calls per decision > 0)."""
    body = body_file(ctx)
    argv = [h2load_path(), "-n", "1", "-c", "1", "-d", str(body), "-H", "content-type: application/grpc",
            "-H", "te: trailers", f"http://127.0.0.1:{sut.extra['grpc_port']}{RLS_PATH}"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    h = parse_h2load(p.stdout)
    if h["status_2xx"] != 1:
        raise BenchError(f"variant X: the probe call was not answered 200:\n{p.stdout}")
    return {"status": 200}
