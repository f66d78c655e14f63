"""Instructions suite: user-space instructions per proxied request, counted by valgrind's
callgrind. Where the CPU-time figures of `throughput` swing by ±20 % on a shared 2-core box, an
instruction count is the same to a fraction of a percent from run to run, so it is the figure to
compare code changes (and tollgate against the Pingora floor) with.

Each variant runs twice under callgrind, serving N1 and then N2 sequential requests on one
kept-alive connection; (Ir(N2) - Ir(N1)) / (N2 - N1) cancels start-up, config loading and the
first connections, leaving the steady cost of one request. Kernel work (the same ~5 system calls
per request for every variant) is not counted.
"""

import hashlib
import http.client
import re
import shutil
import signal
import socket
import stat

from .capacity import REFILL, SCRIPTS, batch
from .clients import redis_cmd
from .common import BenchError, log
from .processes import free_port, wait_port
from .servers import start_backend, start_redis
from .variants import parse_variants, start_variant, stop_variant

SUPPORTED = ("P", "D", "K", "E", "F", "L", "G", "R", "S", "I", "N")
# Variants that decide in Redis (the suite starts one for them).
WITH_REDIS = ("F", "G", "L", "R", "M", "S", "I", "N")
# G here: F's limiting with a tier of 1 token per second, so nearly every request is a 429
# (the rejection path: RateLimit headers, problem+json body, the deny cache).
G_LIMIT_PER_S = 1


def _callgrind_total(path):
    text = path.read_text(errors="replace")
    m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    if not m:
        raise BenchError(f"no instruction total in {path}")
    return int(m.group(1))


def _serve(ctx, v, backend, redis, n):
    """Ir of variant `v` started under callgrind and stopped after `n` requests."""
    out = ctx.tmp / f"callgrind-{v}-{n}.out"
    real = ctx.floor if v == "P" else ctx.tollgate
    wrapper = ctx.tmp / f"callgrind-{v}.sh"
    wrapper.write_text(f'#!/bin/sh\nexec valgrind --tool=callgrind -q --callgrind-out-file={out} '
                       f'{real} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    saved = ctx.floor, ctx.tollgate
    ctx.floor = ctx.tollgate = str(wrapper)
    try:
        sut = start_variant(ctx, v, backend, redis, g_limit=G_LIMIT_PER_S if v == "G" else None)
    finally:
        ctx.floor, ctx.tollgate = saved
    rejected = 0
    try:
        headers = dict(h.split(": ", 1) for h in sut.headers)
        conn = http.client.HTTPConnection("127.0.0.1", sut.port, timeout=30)
        expected = (200, 429) if v == "G" else (200,)
        for i in range(n):
            conn.request("GET", f"/?{i}", headers=headers)
            r = conn.getresponse()
            r.read()
            if r.status not in expected:
                raise BenchError(f"variant {v} under callgrind answered {r.status}")
            rejected += r.status == 429
        conn.close()
    finally:
        stop_variant(ctx, sut)
    return _callgrind_total(out), rejected


def _redis_serve(ctx, script, n, depth=16):
    """Ir of a redis-server started under callgrind and stopped after `n` EVALSHA calls of
    `script` (a key of capacity.SCRIPTS, behind the shared refill as the gateway sends it),
    pipelined `depth` deep on one connection over 64 tenants' buckets, every call admitting."""
    out = ctx.tmp / f"callgrind-redis-{script}-{n}.out"
    port = free_port()
    d = ctx.tmp / f"redis-callgrind-{n}"
    d.mkdir(exist_ok=True)
    p = ctx.env.start(f"redis-callgrind-{n}",
                      ["valgrind", "--tool=callgrind", "-q", f"--callgrind-out-file={out}",
                       ctx.redis_server, "--port", port, "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--dir", d, "--loglevel", "warning"],
                      stop_signal=signal.SIGTERM)
    try:
        wait_port(port, p, timeout=60)
        source = REFILL.read_text() + SCRIPTS[script].read_text()
        sha = hashlib.sha1(source.encode()).hexdigest()
        if redis_cmd(port, "SCRIPT", "LOAD", source, timeout=60) != sha:
            raise BenchError("SCRIPT LOAD returned another SHA")
        with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
            f = conn.makefile("rb")
            for start in range(0, n, depth):
                k = min(depth, n - start)
                conn.sendall(batch(sha, script, 64, start, k, 1))
                for _ in range(k):
                    head = f.readline()
                    if head.startswith(b":"):
                        continue
                    if not head.startswith(b"*"):
                        raise BenchError(f"redis answered {head[:200]!r}")
                    for _ in range(int(head[1:])):
                        f.readline()
    finally:
        ctx.env.stop(p, timeout=60)
    return _callgrind_total(out)


def instructions(ctx):
    """{variant: {"ir_per_req", "n1", "n2", "ir_n1", "ir_n2"}} for the P/D/K/E/F/L/G variants asked."""
    if not shutil.which("valgrind"):
        raise BenchError("instructions needs valgrind (apt-get install valgrind)")
    a = ctx.args
    variants = [v for v in parse_variants(a.variants) if v in SUPPORTED]
    if not variants:
        raise BenchError(f"instructions: none of {a.variants} is one of {''.join(SUPPORTED)}")
    backend = start_backend(ctx)
    redis = start_redis(ctx) if any(v in WITH_REDIS for v in variants) else None
    n1, n2 = a.requests_small, a.requests_large
    runs = {}
    for v in variants:
        ir1, rej1 = _serve(ctx, v, backend, redis, n1)
        ir2, rej2 = _serve(ctx, v, backend, redis, n2)
        runs[v] = {"n1": n1, "n2": n2, "ir_n1": ir1, "ir_n2": ir2,
                   "ir_per_req": (ir2 - ir1) / (n2 - n1)}
        if v == "G":
            runs[v]["rejected_n1"], runs[v]["rejected_n2"] = rej1, rej2
        log(f"  {v}: {runs[v]['ir_per_req']:.0f} instructions per request"
            + (f" ({rej2} of {n2} answered 429)" if v == "G" else ""))
    for p in (redis, backend):
        if p is not None:
            ctx.env.stop(p)
    # Redis's side of an exact decision (F, G): the server's instructions per token-bucket
    # script call, pipelined as the gateway pipelines, network handling included.
    redis_runs = {}
    if redis is not None:
        ir1 = _redis_serve(ctx, "token_bucket", n1)
        ir2 = _redis_serve(ctx, "token_bucket", n2)
        redis_runs["token_bucket"] = {"n1": n1, "n2": n2, "ir_n1": ir1, "ir_n2": ir2,
                                      "ir_per_call": (ir2 - ir1) / (n2 - n1)}
        log(f"  redis: {redis_runs['token_bucket']['ir_per_call']:.0f} instructions per "
            "token-bucket script call")
    base = runs.get("P", {}).get("ir_per_req")
    ratios = {f"P/{v} Ir/req": base / r["ir_per_req"] for v, r in runs.items() if base and v != "P"}
    return {"runs": runs, "ratios": ratios, "redis": redis_runs}
