"""Instructions suite: user-space instructions per proxied request, counted by valgrind's
callgrind. Where the CPU-time figures of `throughput` swing by ±20 % on a shared 2-core box, an
instruction count is the same to a fraction of a percent from run to run, so it is the figure to
compare code changes (and tollgate against the Pingora floor) with.

Each variant runs twice under callgrind, serving N1 and then N2 sequential requests on one
kept-alive connection; (Ir(N2) - Ir(N1)) / (N2 - N1) cancels start-up, config loading and the
first connections, leaving the steady cost of one request. Kernel work (the same ~5 system calls
per request for every variant) is not counted.
"""

import http.client
import re
import shutil
import stat

from .common import BenchError, log
from .servers import start_backend, start_redis
from .variants import parse_variants, start_variant, stop_variant

SUPPORTED = ("P", "D", "K", "E", "F", "L")


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
        sut = start_variant(ctx, v, backend, redis)
    finally:
        ctx.floor, ctx.tollgate = saved
    try:
        headers = dict(h.split(": ", 1) for h in sut.headers)
        conn = http.client.HTTPConnection("127.0.0.1", sut.port, timeout=30)
        for i in range(n):
            conn.request("GET", f"/?{i}", headers=headers)
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                raise BenchError(f"variant {v} under callgrind answered {r.status}")
        conn.close()
    finally:
        stop_variant(ctx, sut)
    return _callgrind_total(out)


def instructions(ctx):
    """{variant: {"ir_per_req", "n1", "n2", "ir_n1", "ir_n2"}} for the P/D/K/E/F/L variants asked."""
    if not shutil.which("valgrind"):
        raise BenchError("instructions needs valgrind (apt-get install valgrind)")
    a = ctx.args
    variants = [v for v in parse_variants(a.variants) if v in SUPPORTED]
    if not variants:
        raise BenchError(f"instructions: none of {a.variants} is one of {''.join(SUPPORTED)}")
    backend = start_backend(ctx)
    redis = start_redis(ctx) if any(v in ("F", "L") for v in variants) else None
    n1, n2 = a.requests_small, a.requests_large
    runs = {}
    for v in variants:
        ir1 = _serve(ctx, v, backend, redis, n1)
        ir2 = _serve(ctx, v, backend, redis, n2)
        runs[v] = {"n1": n1, "n2": n2, "ir_n1": ir1, "ir_n2": ir2,
                   "ir_per_req": (ir2 - ir1) / (n2 - n1)}
        log(f"  {v}: {runs[v]['ir_per_req']:.0f} instructions per request")
    for p in (redis, backend):
        if p is not None:
            ctx.env.stop(p)
    base = runs.get("P", {}).get("ir_per_req")
    ratios = {f"P/{v} Ir/req": base / r["ir_per_req"] for v, r in runs.items() if base and v != "P"}
    return {"runs": runs, "ratios": ratios}
