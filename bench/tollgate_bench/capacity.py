"""Redis capacity suite: script calls per second one Redis core sustains, pipelined as the gateway
pipelines (many concurrent decisions multiplexed on a few connections), for the exact
token-bucket script and the lease script; and from that, the fleet size one Redis supports at a
given per-instance rate with and without leasing (`fleet_table`, pure)."""

import hashlib
import socket
import multiprocessing
import time

from .clients import redis_cmd, redis_info
from .common import HUGE, REPO, BenchError, log, parse_duration_s
from .servers import start_redis

SCRIPTS = {"token_bucket": REPO / "lua" / "token_bucket.lua", "lease": REPO / "lua" / "lease.lua"}
# Both scripts start from the shared refill, put in front of them as the gateway does
# (TOKEN_BUCKET_LUA, LEASE_LUA).
REFILL = REPO / "lua" / "lib" / "refill.lua"


def resp(*args):
    """One RESP command."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        b = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


def batch(sha, script, tenants, start, depth, lease_tokens):
    """`depth` pipelined EVALSHA calls on distinct tenants' bucket keys (huge limits: every
    call admits and writes, the gateway's common case), with the arguments the gateway sends
    (a token bucket's cost of 1 is left out)."""
    out = b""
    for i in range(depth):
        key = f"tollgate-cap:{{t{(start + i) % tenants}}}:tb"
        if script == "lease":
            out += resp("EVALSHA", sha, 1, key, HUGE, 1000, HUGE, 1, lease_tokens, 0)
        else:
            out += resp("EVALSHA", sha, 1, key, HUGE, 1000, HUGE)
    return out


def load_client(port, payload, depth, stop, lines_per_reply):
    """One client process: sends `payload` (depth calls), reads depth replies
    (`lines_per_reply` lines each: 1 for the token bucket's integer, 5 for the lease's four
    integers), repeats until `stop`."""
    need = lines_per_reply * depth
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while not stop.is_set():
            s.sendall(payload)
            lines = 0
            while lines < need:
                chunk = s.recv(65536)
                if not chunk:
                    raise BenchError("redis closed the connection")
                if chunk.startswith(b"-"):
                    raise BenchError(f"redis error: {chunk[:200]!r}")
                lines += chunk.count(b"\n")


def measure_script(ctx, redis, script, a):
    source = REFILL.read_text() + SCRIPTS[script].read_text()
    sha = hashlib.sha1(source.encode()).hexdigest()
    if redis_cmd(redis.port, "SCRIPT", "LOAD", source) != sha:
        raise BenchError("SCRIPT LOAD returned another SHA")
    redis_cmd(redis.port, "FLUSHALL")
    # Processes, not threads: the clients must not be limited by one interpreter lock.
    mp = multiprocessing.get_context("fork")
    stop = mp.Event()
    threads = [mp.Process(target=load_client, daemon=True,
                          args=(redis.port, batch(sha, script, a.cap_tenants, i * a.cap_pipeline,
                                                  a.cap_pipeline, a.lease_tokens),
                                a.cap_pipeline, stop, 1 if script == "token_bucket" else 5))
               for i in range(a.cap_conns)]
    for t in threads:
        t.start()
    time.sleep(1)  # warm-up: keys created, connections busy
    before, t0 = redis_info(redis.port), time.monotonic()
    time.sleep(a.duration)
    after, t1 = redis_info(redis.port), time.monotonic()
    stop.set()
    for t in threads:
        t.join(10)
        if t.exitcode != 0:
            raise BenchError(f"a capacity client failed (exit {t.exitcode})")
    calls = after["cmdstat_evalsha"]["calls"] - before["cmdstat_evalsha"]["calls"]
    cpu = (after["used_cpu_user"] + after["used_cpu_sys"]) - (before["used_cpu_user"] + before["used_cpu_sys"])
    reads = after.get("total_reads_processed", 0) - before.get("total_reads_processed", 0)
    return {
        "script": script, "calls": int(calls), "seconds": t1 - t0,
        "calls_per_s": calls / (t1 - t0),
        "redis_cpu_s": cpu, "redis_cpu_share": cpu / (t1 - t0),
        "redis_cpu_us_per_call": cpu / calls * 1e6 if calls else None,
        "calls_per_core_s": calls / cpu if cpu else None,
        "calls_per_read": calls / reads if reads else None,
        "pipeline": a.cap_pipeline, "connections": a.cap_conns, "tenants": a.cap_tenants,
    }


def calls_per_admission(tenant_rps, tokens, hold_s):
    """Pure: Redis script calls per admitted request of a leased tenant admitted at `tenant_rps`
    by one instance. A lease serves min(tokens, tenant_rps x hold_s) requests; a lease not used
    up by max_hold costs a second call to give the rest back."""
    used = min(tokens, tenant_rps * hold_s)
    if used < 1:
        return 2.0  # at most one request per lease: one call to take, one to give back
    return (1 + (1 if used < tokens else 0)) / used


def fleet_table(exact_per_core_s, lease_per_core_s, tokens, hold_s, rates, spreads):
    """Pure: instances one Redis core supports, for each per-instance admitted rate R (req/s)
    spread evenly over K active tenants. Exact: one call per admission, `capacity / R`.
    Leased: `lease capacity / (R x calls_per_admission(R / K, tokens, hold_s))`."""
    rows = []
    for r in rates:
        for k in spreads:
            cpa = calls_per_admission(r / k, tokens, hold_s)
            rows.append({
                "instance_rps": r, "tenants": k, "tenant_rps": r / k,
                "exact_instances": exact_per_core_s / r,
                "leased_calls_per_admission": cpa,
                "leased_instances": lease_per_core_s / (r * cpa),
            })
    return rows


def capacity(ctx):
    a = ctx.args
    redis = start_redis(ctx, "redis-capacity")
    log(f"capacity: {a.cap_conns} connections x {a.cap_pipeline} pipelined EVALSHA, "
        f"{a.cap_tenants} tenants, {a.duration}s per script")
    runs = {}
    for script in ("token_bucket", "lease"):
        runs[script] = r = measure_script(ctx, redis, script, a)
        log(f"  {script}: {r['calls_per_s']:.0f} calls/s with Redis at {r['redis_cpu_share']:.0%} of a core, "
            f"{r['redis_cpu_us_per_call']:.2f} µs CPU/call -> {r['calls_per_core_s']:.0f} calls per core-second")
    ctx.env.stop(redis)
    rates = [int(x) for x in a.cap_rates.split(",")]
    spreads = [int(x) for x in a.cap_spreads.split(",")]
    hold_s = parse_duration_s(a.lease_hold)
    table = fleet_table(runs["token_bucket"]["calls_per_core_s"], runs["lease"]["calls_per_core_s"],
                        a.lease_tokens, hold_s, rates, spreads)
    return {"runs": runs, "lease_tokens": a.lease_tokens, "lease_hold_s": hold_s, "fleet": table}
