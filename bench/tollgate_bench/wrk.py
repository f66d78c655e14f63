"""wrk command lines (with bench/wrk/*.lua) and the parsing of report.lua's summary line."""

import json
import re
import subprocess

from .common import WRK_LUA, BenchError


def wrk_script(ctx, extra=None):
    ctx._script_n += 1
    path = ctx.tmp / f"wrk-{ctx._script_n}.lua"
    text = (WRK_LUA / "report.lua").read_text()
    if extra:
        text += "\n" + (WRK_LUA / extra).read_text()
    path.write_text(text)
    return path


def wrk_argv(ctx, port, duration, *, threads=None, conns=None, headers=(), script=None,
             script_args=(), path="/"):
    threads = threads or ctx.args.wrk_threads
    conns = conns or ctx.args.connections
    argv = [ctx.wrk, "-t", threads, "-c", conns, "-d", f"{int(duration)}s", "--timeout", "2s",
            "--latency", "-s", script or wrk_script(ctx)]
    for h in headers:
        argv += ["-H", h]
    argv.append(f"http://127.0.0.1:{port}{path}")
    if script_args:
        argv += ["--"] + [str(a) for a in script_args]
    return [str(a) for a in argv]


def parse_wrk(out):
    m = re.search(r"^TOLLGATE_BENCH_JSON (\{.*\})$", out, re.M)
    if not m:
        raise BenchError(f"wrk output not understood:\n{out}")
    r = json.loads(m.group(1))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non2xx"] = int(m.group(1)) if m else 0
    r["socket_errors"] = r["err_connect"] + r["err_read"] + r["err_write"] + r["err_timeout"]
    dur = r["duration_us"] / 1e6
    r["duration_s"] = dur
    r["rps"] = r["requests"] / dur if dur else 0.0
    r["ok_rps"] = (r["requests"] - r["non2xx"]) / dur if dur else 0.0
    r["non2xx_rps"] = r["non2xx"] / dur if dur else 0.0
    return r


def run_wrk(ctx, port, duration, **kw):
    argv = wrk_argv(ctx, port, duration, **kw)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    if p.returncode != 0:
        raise BenchError(f"wrk failed ({p.returncode}): {' '.join(argv)}\n{p.stdout}{p.stderr}")
    return parse_wrk(p.stdout)
