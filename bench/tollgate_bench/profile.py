"""Profile suite: perf record under full wrk load, one inferno flame graph per variant."""

import datetime
import re
import shutil
import subprocess
import time
from pathlib import Path

from .common import BenchError, log
from .servers import start_backend, start_redis
from .variants import VARIANTS, parse_variants, probe, start_variant, stop_variant
from .wrk import run_wrk, wrk_argv


def frame_group(frame):
    """Coarse owner of a leaf frame, for the where-does-the-time-go table."""
    f = frame.lstrip("<")
    if f.endswith("_[k]") or f.startswith(("entry_SYSCALL", "__x64_sys", "do_syscall")):
        return "kernel"
    if f.startswith(("mi_", "_mi_", "__mi")):
        return "allocator (mimalloc)"
    if f.startswith(("__memmove", "__memcpy", "__memset", "__memcmp")):
        return "libc mem*"
    head = re.split(r"::| |\(", f, maxsplit=1)[0]
    if head in ("core", "alloc", "std"):
        return "rust core/alloc/std"
    if head.startswith("pingora"):
        return "pingora"
    if head in ("tollgate", "tokio", "mio", "http", "httparse", "bytes", "redis", "combine", "prometheus"):
        return head
    return "other"


def profile(ctx):
    """perf record with DWARF call graphs under full wrk load; one flame graph SVG per variant."""
    a = ctx.args
    for tool in ("perf", "inferno-collapse-perf", "inferno-flamegraph"):
        if not shutil.which(tool):
            raise BenchError(f"profile needs {tool} (perf: apt-get install linux-perf; "
                             f"inferno: cargo install inferno)")
    variants = [v for v in parse_variants(a.variants) if v not in ("A", "B", "C")]
    backend = start_backend(ctx)
    redis = start_redis(ctx) if any(v in ("F", "G", "L", "R", "M") for v in variants) else None
    traefik_redis = start_redis(ctx, "redis-traefik") if "T" in variants else None
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = Path(a.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = {}
    for v in variants:
        g_limit = max(1, int(a.g_fallback_rps / 10)) if v == "G" else None
        sut = start_variant(ctx, v, backend, redis, g_limit, traefik_redis)
        try:
            probe(sut, (200, 429) if v == "G" else (200,))
            run_wrk(ctx, sut.port, 1, headers=sut.headers)
            data = ctx.tmp / f"perf-{v}.data"
            wrk = subprocess.Popen(wrk_argv(ctx, sut.port, a.duration + 2, headers=sut.headers),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
            rec = subprocess.run(["perf", "record", "-q", "-F", str(a.frequency), "-g",
                                  "--call-graph", "dwarf,16384", "-o", data,
                                  "-p", ",".join(str(p) for p in sut.pids()),
                                  "--", "sleep", str(a.duration)], capture_output=True, text=True)
            wrk.wait(timeout=a.duration + 60)
        finally:
            stop_variant(ctx, sut)
        if rec.returncode != 0:
            raise BenchError(f"perf record failed: {rec.stderr}")
        script = subprocess.run(["perf", "script", "-i", data], capture_output=True, text=True)
        folded = subprocess.run(["inferno-collapse-perf", "--all"], input=script.stdout,
                                capture_output=True, text=True).stdout
        svg = out_dir / f"{stamp}-{v}.svg"
        title = f"tollgate bench variant {v}: {VARIANTS[v]}"
        with open(svg, "w") as fh:
            subprocess.run(["inferno-flamegraph", "--title", title, "--width", "1600"],
                           input=folded, stdout=fh, text=True, check=True)
        groups, total, ours = {}, 0, 0
        for line in folded.splitlines():
            stack, _, n = line.rpartition(" ")
            if not n.isdigit():
                continue
            leaf = stack.rsplit(";", 1)[-1]
            groups[frame_group(leaf)] = groups.get(frame_group(leaf), 0) + int(n)
            total += int(n)
            if "tollgate::" in stack:
                ours += int(n)
        runs[v] = {"svg": svg.name, "cycles": total, "under_tollgate_frames": ours / total,
                   "leaf_share": {k: n / total for k, n in sorted(groups.items(), key=lambda x: -x[1])}}
        log(f"  {v}: {total} cycles sampled -> {svg}")
    for p in (traefik_redis, redis, backend):
        if p is not None:
            ctx.env.stop(p)
    return runs
