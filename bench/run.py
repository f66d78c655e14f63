#!/usr/bin/env python3
"""tollgate benchmark driver (standard library only). See bench/README.md.

    bench/run.py throughput [--reps 3 --duration 10 --connections 64]
    bench/run.py memory     [--clients 1000000 --max-clients 200000]
    bench/run.py accuracy   [--instances 1,2,4 --acc-duration 10]
    bench/run.py all
    bench/run.py compare OLD.json NEW.json

Everything (a fast nginx backend, Redis, nginx and tollgate under test) is started on free
loopback ports in a private temp directory and torn down at exit. The only thing built is
`cargo build --release --bins --example pingora_floor` (honouring CARGO_TARGET_DIR); the
binaries are taken from there (tollgate from release/, the Pingora floor from release/examples/).
Results: a table on the terminal, PASS/FAIL lines for the targets, and
bench/results/<timestamp>.json.
"""

import argparse
import ctypes
import datetime
import hashlib
import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
WRK_LUA = BENCH / "wrk"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Commands the tenant-bucket script runs inside Redis (from lua/*.lua), lower case as in
# INFO commandstats. If the gateway ever sent one of these itself, it would be miscounted as
# script-internal; the JSON keeps the raw commandstats.
SCRIPT_COMMANDS = {
    m.lower() for f in (REPO / "lua").glob("*.lua")
    for m in re.findall(r"redis\.p?call\(\s*['\"](\w+)['\"]", f.read_text())
}

API_KEY = "tollgate-bench-key"
TENANT = "bench"
# "Huge" limits (reject nothing); validate.rs caps burst × per_ms at 2^52.
HUGE = 1_000_000_000

VARIANTS = {
    "A": "direct to the backend (nginx return 200)",
    "B": "nginx proxy_pass, upstream keepalive",
    "C": "nginx + limit_req/limit_conn per IP (reject nothing)",
    "P": "Pingora floor: bare pingora-proxy, none of tollgate's code (examples/pingora_floor.rs)",
    "D": "tollgate, no limiting",
    "E": "tollgate, edge + concurrency (memory, reject nothing)",
    "F": "tollgate, edge + API key + Redis tenant bucket + concurrency",
    "G": "tollgate as F, one tenant flooding ~10x its limit",
}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Processes, ports, /proc
# --------------------------------------------------------------------------------------------

_libc = None


def _die_with_parent():
    """preexec_fn: the child gets SIGTERM if this driver dies (PR_SET_PDEATHSIG)."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(1, signal.SIGTERM, 0, 0, 0)
    except Exception:
        pass


_used_ports = set()


def free_port():
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _used_ports:
            _used_ports.add(port)
            return port
    raise BenchError("no free port")


class Proc:
    """One started process: its Popen, log file and how it is stopped."""

    def __init__(self, name, popen, log_path, stop_signal):
        self.name = name
        self.popen = popen
        self.pid = popen.pid
        self.log_path = log_path
        self.stop_signal = stop_signal

    def alive(self):
        return self.popen.poll() is None

    def pids(self):
        """The process and its direct children (nginx workers)."""
        return [self.pid] + children_of(self.pid)

    def log_tail(self, n=30):
        try:
            lines = Path(self.log_path).read_text(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""


class Env:
    """Temp directory plus every process started in it; tears all of it down at exit."""

    def __init__(self, keep_tmp=False):
        self.tmp = Path(tempfile.mkdtemp(prefix="tollgate-bench-"))
        self.keep_tmp = keep_tmp
        self.procs = []
        self._n = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop_all()
        if self.keep_tmp:
            log(f"kept temp dir {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False

    def start(self, name, argv, stop_signal=signal.SIGTERM, cwd=None, env=None):
        self._n += 1
        log_path = self.tmp / f"{self._n:02d}-{name}.log"
        out = open(log_path, "wb")
        popen = subprocess.Popen(
            [str(a) for a in argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(cwd or self.tmp),
            env=env,
            start_new_session=True,  # a Ctrl-C reaches only this driver, which stops them in order
            preexec_fn=_die_with_parent,
        )
        out.close()
        p = Proc(name, popen, log_path, stop_signal)
        self.procs.append(p)
        return p

    def stop(self, p, timeout=10):
        if p in self.procs:
            self.procs.remove(p)
        if p.alive():
            try:
                os.kill(p.pid, p.stop_signal)
            except ProcessLookupError:
                pass
            try:
                p.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"{p.name} (pid {p.pid}) did not stop in {timeout}s: SIGKILL")
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.popen.wait(5)

    def stop_all(self):
        for p in reversed(list(self.procs)):
            try:
                self.stop(p)
            except Exception as e:  # keep tearing down the rest
                log(f"stopping {p.name}: {e}")


def children_of(pid):
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            if int(rest[1]) == pid:
                kids.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return kids


def cpu_seconds(pids):
    """utime + stime of the processes (all their threads), seconds."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            total += int(rest[11]) + int(rest[12])  # fields 14 and 15 of stat(5)
        except (OSError, IndexError, ValueError):
            pass
    return total / CLK_TCK


def rss_kb(pids):
    """Sum of VmRSS (kB). For nginx, master + workers (shared pages are counted twice)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def wait_port(port, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise BenchError(f"{proc.name} exited (code {proc.popen.returncode}):\n{proc.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"{proc.name if proc else 'port'} {port} not listening after {timeout}s:\n"
                     f"{proc.log_tail() if proc else ''}")


# --------------------------------------------------------------------------------------------
# HTTP and Redis clients (tiny, stdlib)
# --------------------------------------------------------------------------------------------

def http_get(port, path="/", headers=None, timeout=5.0):
    """(status, {lower-case header: value}, body, keepalive) for one GET."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body, not r.will_close
    finally:
        conn.close()


def scrape(admin_port):
    """Prometheus text → {(name, ((label, value), ...)): float}."""
    status, _, body, _ = http_get(admin_port, "/metrics")
    if status != 200:
        raise BenchError(f"/metrics answered {status}")
    out = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$', line)
        if not m:
            continue
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or "")))
        try:
            out[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            pass
    return out


def msum(metrics, name, **want):
    total = 0.0
    for (n, labels), v in metrics.items():
        if n != name:
            continue
        d = dict(labels)
        if all(d.get(k) == val for k, val in want.items()):
            total += v
    return total


def redis_cmd(port, *args, timeout=5.0):
    """One command over a fresh RESP connection."""
    payload = f"*{len(args)}\r\n".encode()
    for a in args:
        b = str(a).encode()
        payload += b"$%d\r\n%s\r\n" % (len(b), b)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        f = s.makefile("rb")
        return _resp_read(f)


def _resp_read(f):
    line = f.readline()
    if not line:
        raise BenchError("redis closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise BenchError(f"redis error: {rest.decode()}")
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp_read(f) for _ in range(n)]
    raise BenchError(f"unexpected redis reply {line!r}")


def redis_info(port):
    """INFO all → flat dict; commandstats as cmdstat_<cmd> → {calls, usec, ...}."""
    text = redis_cmd(port, "INFO", "all")
    info = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        if k.startswith("cmdstat_"):
            info[k] = {kv.split("=")[0]: float(kv.split("=")[1]) for kv in v.split(",") if "=" in kv}
        else:
            try:
                info[k] = float(v) if "." in v else int(v)
            except ValueError:
                info[k] = v
    return info


# --------------------------------------------------------------------------------------------
# Systems under test
# --------------------------------------------------------------------------------------------

class Ctx:
    """Binaries, options and the Env of one driver invocation."""

    def __init__(self, args, env):
        self.args = args
        self.env = env
        self.tmp = env.tmp
        self.tollgate = None
        self.nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.wrk = shutil.which("wrk")
        self.redis_server = shutil.which("redis-server")
        self._script_n = 0


def nginx_conf(ctx, name, workers, http_body):
    d = ctx.tmp / name
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi", "logs"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o755)
    for sub in d.iterdir():
        os.chmod(sub, 0o777)  # workers may run as nobody when the driver is root
    conf = f"""
worker_processes {workers};
pid {d}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 16384; multi_accept on; }}
worker_rlimit_nofile 65536;
http {{
    access_log off;
    default_type text/plain;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests 1000000000;
    keepalive_timeout 300s;
{http_body}
}}
"""
    path = d / "nginx.conf"
    path.write_text(conf)
    return d, path


def start_nginx(ctx, name, workers, http_body, port):
    prefix, conf = nginx_conf(ctx, name, workers, http_body)
    t = subprocess.run([ctx.nginx, "-t", "-q", "-p", prefix, "-c", conf, "-g", "daemon off;"],
                       capture_output=True, text=True)
    if t.returncode != 0:
        raise BenchError(f"nginx -t failed for {name}:\n{t.stderr}")
    p = ctx.env.start(name, [ctx.nginx, "-p", prefix, "-c", conf, "-g", "daemon off;"],
                      stop_signal=signal.SIGTERM)
    wait_port(port, p)
    p.port = port
    # Workers are forked right after the master binds; wait until all exist.
    deadline = time.monotonic() + 5
    while len(children_of(p.pid)) < workers and time.monotonic() < deadline:
        time.sleep(0.05)
    return p


def start_backend(ctx):
    port = free_port()
    body = f"""
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location = /__nginx_status {{ stub_status; }}
        location / {{ return 200 "ok\\n"; }}
    }}"""
    p = start_nginx(ctx, "backend", ctx.args.backend_workers, body, port)
    log(f"backend nginx (return 200, {ctx.args.backend_workers} workers) on 127.0.0.1:{port}")
    return p


def backend_accepts(backend):
    """Connections accepted by the backend so far (stub_status), to verify upstream keepalive."""
    _, _, body, _ = http_get(backend.port, "/__nginx_status")
    m = re.search(r"\n\s*(\d+)\s+(\d+)\s+(\d+)", body.decode())
    return int(m.group(1)) if m else 0


def start_nginx_proxy(ctx, name, backend_port, limited):
    port = free_port()
    limits_http = ""
    limits_loc = ""
    if limited:
        # Per client IP, numbers far above anything a 2-core box can push: rejects nothing.
        limits_http = """
    limit_req_zone $binary_remote_addr zone=perip:10m rate=10000000r/s;
    limit_conn_zone $binary_remote_addr zone=perconn:10m;
    limit_req_status 429;
    limit_conn_status 503;"""
        limits_loc = """
            limit_req zone=perip burst=1000000 nodelay;
            limit_conn perconn 60000;"""
    body = f"""{limits_http}
    upstream backend {{
        server 127.0.0.1:{backend_port};
        keepalive 256;
        keepalive_requests 1000000000;
        keepalive_timeout 300s;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{{limits_loc}
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}"""
    p = start_nginx(ctx, name, ctx.args.threads, body, port)
    return p


def start_redis(ctx):
    port = free_port()
    d = ctx.tmp / "redis"
    d.mkdir(exist_ok=True)
    p = ctx.env.start("redis", [ctx.redis_server, "--port", port, "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no", "--daemonize", "no",
                                "--protected-mode", "no", "--dir", d, "--loglevel", "warning"],
                      stop_signal=signal.SIGTERM)
    wait_port(port, p)
    p.port = port
    log(f"redis-server on 127.0.0.1:{port}")
    return p


def tollgate_config(ctx, name, port, admin, backend_port, *, edge=None, concurrency=None,
                    tier=None, redis_port=None, fleet_size=1, on_failure=None, auth="none"):
    """A gateway.yaml (written as JSON, which YAML accepts) for one system under test."""
    cfg = {
        "listen": [f"127.0.0.1:{port}"],
        "admin": {"listen": f"127.0.0.1:{admin}"},
        "server": {
            "threads": ctx.args.threads,
            "grace_period_s": 1,
            "graceful_shutdown_timeout_s": 1,
            # Distinct per instance: several gateways run at once in the accuracy run.
            "upgrade_sock": str(ctx.tmp / f"{name}.upgrade.sock"),
            "pid_file": str(ctx.tmp / f"{name}.pid"),
        },
        "upstreams": {"backend": {"backends": [f"127.0.0.1:{backend_port}"]}},
        "routes": [{"path_prefix": "/", "upstream": "backend", "auth": auth}],
        "observability": {"access_log": False},
    }
    if edge:
        cfg["edge"] = edge
    if concurrency:
        cfg["upstreams"]["backend"]["max_concurrency"] = concurrency
    if tier:
        cfg["redis"] = {"url": f"redis://127.0.0.1:{redis_port}/0", "key_prefix": "tollgate-bench",
                        "fleet_size": fleet_size}
        if on_failure:
            cfg["redis"]["on_failure"] = on_failure
        cfg["tiers"] = {"bench": tier}
        cfg["identity"] = {"api_keys": {"header": "X-API-Key", "keys": [
            {"sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "tenant": TENANT,
             "tier": "bench"}]}}
    return cfg


def start_tollgate(ctx, name, cfg):
    path = ctx.tmp / f"{name}.yaml"
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    check = subprocess.run([ctx.tollgate, "check", "-c", path], capture_output=True, text=True,
                           cwd=ctx.tmp)
    if check.returncode != 0:
        raise BenchError(f"tollgate check rejected {path}:\n{check.stdout}{check.stderr}")
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "warn")
    p = ctx.env.start(name, [ctx.tollgate, "run", "-c", path], stop_signal=signal.SIGINT, env=env)
    port = int(cfg["listen"][0].rsplit(":", 1)[1])
    admin = int(cfg["admin"]["listen"].rsplit(":", 1)[1])
    wait_port(port, p)
    wait_port(admin, p)
    p.port, p.admin = port, admin
    return p


# --------------------------------------------------------------------------------------------
# wrk
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Measurement of one run
# --------------------------------------------------------------------------------------------

class Sut:
    """A running system under test: where to send load and which processes to account."""

    def __init__(self, variant, port, procs, kind, headers=(), admin=None, extra=None):
        self.variant = variant
        self.port = port
        self.procs = procs  # proxy processes (nginx master+workers, or tollgate); [] for A
        self.kind = kind  # "direct" | "nginx" | "tollgate"
        self.headers = list(headers)
        self.admin = admin
        self.extra = extra or {}

    def pids(self):
        return [pid for p in self.procs for pid in p.pids()]


def snapshot(ctx, sut, backend, redis):
    s = {"t": time.monotonic(), "proxy_cpu": cpu_seconds(sut.pids()),
         "backend_cpu": cpu_seconds(backend.pids()), "backend_accepts": backend_accepts(backend)}
    if redis is not None:
        s["redis"] = redis_info(redis.port)
    if sut.admin:
        s["metrics"] = scrape(sut.admin)
    return s


def delta_redis(a, b):
    ra, rb = a["redis"], b["redis"]

    def calls(info, cmd):
        return info.get(f"cmdstat_{cmd}", {}).get("calls", 0)

    cmds = {}
    for k in set(ra) | set(rb):
        if k.startswith("cmdstat_"):
            d = calls(rb, k[8:]) - calls(ra, k[8:])
            if d:
                cmds[k[8:]] = int(d)
    # Our own INFO calls: the "before" INFO is counted in total_commands_processed of the
    # "after" reply, and the "after" INFO's read event in its total_reads_processed; remove both.
    cmds["info"] = cmds.get("info", 0) - 1
    if cmds["info"] <= 0:
        cmds.pop("info")
    total = rb["total_commands_processed"] - ra["total_commands_processed"] - 1
    # total_commands_processed (and commandstats) also count the commands the Lua script runs
    # with redis.call (TIME, HMGET, HSET, PEXPIRE: 5 "commands" per decision). Pipelining is
    # about what the gateway sends, so subtract the calls of the script's own commands.
    internal = sum(v for k, v in cmds.items() if k in SCRIPT_COMMANDS)
    out = {
        "commands": total,
        "client_commands": total - internal,
        "script_internal_commands": internal,
        "evalsha": int(calls(rb, "evalsha") - calls(ra, "evalsha")),
        "commandstats": cmds,
        "cpu_s": (rb["used_cpu_user"] + rb["used_cpu_sys"]) - (ra["used_cpu_user"] + ra["used_cpu_sys"]),
    }
    out["script_commands_assumed"] = sorted(SCRIPT_COMMANDS)
    if "total_reads_processed" in rb:
        out["reads"] = rb["total_reads_processed"] - ra["total_reads_processed"] - 1
        out["reads_source"] = "INFO stats total_reads_processed"
    else:  # older Redis: no read counter; one read per client round trip ~ net input commands
        out["reads"] = None
        out["reads_source"] = "not available in this Redis (total_reads_processed missing)"
    return out


def delta_metrics(a, b):
    ma, mb = a["metrics"], b["metrics"]

    def d(name, **labels):
        return int(round(msum(mb, name, **labels) - msum(ma, name, **labels)))

    out = {}
    for layer in ("edge", "identity", "tenant", "upstream", "route"):
        for outcome in ("admitted", "limited", "fallback", "failed_open", "failed_closed",
                        "unauthenticated", "rejected", "error", "not_found"):
            v = d("tollgate_decisions_total", layer=layer, outcome=outcome)
            if v:
                out[f"{layer}_{outcome}"] = v
    out["requests"] = d("tollgate_requests_total")
    out["redis_errors"] = d("tollgate_redis_errors_total")
    out["upstream_rejections"] = d("tollgate_upstream_rejections_total")
    return out


def measure(ctx, sut, backend, redis, duration, *, paced_rate=None, label=None):
    """Warm up, then one measured wrk run with CPU/Redis/metrics deltas around it."""
    script_extra, script_args = None, ()
    if paced_rate:
        script_extra, script_args = "pace.lua", (paced_rate, ctx.args.wrk_threads)
    if ctx.args.warmup > 0:
        run_wrk(ctx, sut.port, ctx.args.warmup, headers=sut.headers,
                script=wrk_script(ctx, script_extra), script_args=script_args)
    time.sleep(0.2)
    before = snapshot(ctx, sut, backend, redis)
    w = run_wrk(ctx, sut.port, duration, headers=sut.headers,
                script=wrk_script(ctx, script_extra), script_args=script_args)
    time.sleep(0.3)  # let in-flight requests finish before reading counters
    after = snapshot(ctx, sut, backend, redis)
    n = max(w["requests"], 1)
    rec = {
        "variant": label or sut.variant,
        "rps": w["rps"], "ok_rps": w["ok_rps"], "non2xx_rps": w["non2xx_rps"],
        "requests": w["requests"], "non2xx": w["non2xx"], "status_ge_400": w["err_status"],
        "socket_errors": w["socket_errors"], "duration_s": w["duration_s"],
        "p50_ms": w["p50_us"] / 1000, "p90_ms": w["p90_us"] / 1000,
        "p99_ms": w["p99_us"] / 1000, "p999_ms": w["p999_us"] / 1000,
        "mean_ms": w["lat_mean_us"] / 1000, "max_ms": w["lat_max_us"] / 1000,
        "backend_cpu_us_per_req": (after["backend_cpu"] - before["backend_cpu"]) / n * 1e6,
        "backend_conns_opened": after["backend_accepts"] - before["backend_accepts"] - 1,
    }
    if paced_rate:
        rec["target_rps"] = paced_rate
    if sut.procs:
        rec["proxy_cpu_s"] = after["proxy_cpu"] - before["proxy_cpu"]
        rec["proxy_cpu_us_per_req"] = rec["proxy_cpu_s"] / n * 1e6
        rec["rss_mb"] = rss_kb(sut.pids()) / 1024
    if redis is not None and sut.kind == "tollgate" and sut.extra.get("redis"):
        r = delta_redis(before, after)
        rec["redis"] = r
        rec["redis_cmds_per_req"] = r["commands"] / n
        rec["redis_client_cmds_per_req"] = r["client_commands"] / n
        rec["evalsha_per_req"] = r["evalsha"] / n
        rec["redis_cmds_per_read"] = (r["commands"] / r["reads"]) if r.get("reads") else None
        rec["redis_client_cmds_per_read"] = (r["client_commands"] / r["reads"]) if r.get("reads") else None
        rec["redis_cpu_us_per_req"] = r["cpu_s"] / n * 1e6
    if sut.admin:
        m = delta_metrics(before, after)
        rec["tollgate"] = m
        decisions = sum(v for k, v in m.items() if k.startswith("tenant_"))
        if "redis" in rec and decisions:
            rec["tenant_decisions"] = decisions
            rec["evalsha_per_tenant_decision"] = rec["redis"]["evalsha"] / decisions
            adm = m.get("tenant_admitted", 0)
            rec["evalsha_per_admitted"] = (rec["redis"]["evalsha"] / adm) if adm else None
    rec.update({k: v for k, v in sut.extra.items() if k != "redis"})
    return rec


# --------------------------------------------------------------------------------------------
# Throughput
# --------------------------------------------------------------------------------------------

def probe(sut, expect):
    status, headers, body, keepalive = http_get(sut.port, "/", dict(h.split(": ", 1) for h in sut.headers))
    if status not in expect:
        raise BenchError(f"variant {sut.variant}: probe answered {status}, expected {expect}: {body[:300]!r}")
    return {"status": status, "keepalive": keepalive,
            "ratelimit": headers.get("ratelimit"), "ratelimit_policy": headers.get("ratelimit-policy")}


def start_variant(ctx, v, backend, redis, g_limit=None):
    a = ctx.args
    conc = max(256, 4 * a.connections)
    edge = {"limit": HUGE, "per": "1s", "burst": HUGE, "max_clients": 100000}
    key_header = [f"X-API-Key: {API_KEY}"]
    if v == "A":
        return Sut("A", backend.port, [], "direct")
    if v in ("B", "C"):
        p = start_nginx_proxy(ctx, f"nginx-{v}", backend.port, limited=(v == "C"))
        return Sut(v, p.port, [p], "nginx")
    if v == "P":
        port = free_port()
        p = ctx.env.start("pingora-floor", [ctx.floor, f"127.0.0.1:{port}",
                                            f"127.0.0.1:{backend.port}", str(a.threads)],
                          stop_signal=signal.SIGINT)
        wait_port(port, p)
        return Sut(v, port, [p], "pingora")
    port, admin = free_port(), free_port()
    name = f"tollgate-{v}"
    extra = {}
    if v == "D":
        cfg = tollgate_config(ctx, name, port, admin, backend.port)
    elif v == "E":
        cfg = tollgate_config(ctx, name, port, admin, backend.port, edge=edge, concurrency=conc)
    elif v == "F":
        cfg = tollgate_config(ctx, name, port, admin, backend.port, edge=edge, concurrency=conc,
                              tier={"limit": HUGE, "per": "1s", "burst": HUGE},
                              redis_port=redis.port, auth="required")
        extra["redis"] = True
    elif v == "G":
        cfg = tollgate_config(ctx, name, port, admin, backend.port, edge=edge, concurrency=conc,
                              tier={"limit": g_limit, "per": "1s", "burst": g_limit},
                              redis_port=redis.port, auth="required")
        extra["redis"] = True
        extra["g_tier_limit_per_s"] = g_limit
    else:
        raise BenchError(f"unknown variant {v}")
    if redis is not None:
        redis_cmd(redis.port, "FLUSHALL")
    p = start_tollgate(ctx, name, cfg)
    headers = key_header if v in ("F", "G") else []
    return Sut(v, p.port, [p], "tollgate", headers=headers, admin=p.admin, extra=extra)


def stop_variant(ctx, sut):
    for p in sut.procs:
        ctx.env.stop(p)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(records):
    """Median over repetitions of every numeric field, per variant label."""
    by = {}
    for r in records:
        by.setdefault(r["variant"], []).append(r)
    out = {}
    for v, rs in by.items():
        s = {"reps": len(rs)}
        keys = [k for k in rs[0] if isinstance(rs[0][k], (int, float)) and not isinstance(rs[0][k], bool)]
        for k in keys:
            s[k] = median([r.get(k) for r in rs])
        s["rps_min"] = min(r["rps"] for r in rs)
        s["rps_max"] = max(r["rps"] for r in rs)
        for sub in ("tollgate", "redis"):
            if sub in rs[0]:
                s[sub] = {k: median([r[sub].get(k) for r in rs]) for k in rs[0][sub]
                          if isinstance(rs[0][sub][k], (int, float))}
        out[v] = s
    return out


def paced_runs(ctx, backend, redis, rate, suffix):
    """A and F at a constant `rate`, interleaved, `--reps` times; labels `A@<rate><suffix>`."""
    out = []
    for rep in range(1, ctx.args.reps + 1):
        for v in ("A", "F"):
            sut = start_variant(ctx, v, backend, redis)
            try:
                rec = measure(ctx, sut, backend, redis, ctx.args.duration, paced_rate=rate,
                              label=f"{v}@{rate}{suffix}")
            finally:
                stop_variant(ctx, sut)
            rec["rep"] = rep
            out.append(rec)
            log(f"  rep {rep} {v}@{rate}: {rec['rps']:.0f} req/s, p50 {rec['p50_ms']:.3f} ms, "
                f"p99 {rec['p99_ms']:.3f} ms")
    return out


def throughput(ctx):
    a = ctx.args
    variants = [v for v in a.variants.upper() if v in VARIANTS]
    need_redis = any(v in "FG" for v in variants)
    backend = start_backend(ctx)
    redis = start_redis(ctx) if need_redis else None
    records, probes = [], {}
    log(f"throughput: variants {''.join(variants)}, {a.reps} reps x {a.duration}s "
        f"(+{a.warmup}s warm-up), wrk -t{a.wrk_threads} -c{a.connections}")
    for rep in range(1, a.reps + 1):
        f_rps = None
        for v in variants:
            g_limit = None
            if v == "G":
                f_rps = f_rps or median([r["rps"] for r in records if r["variant"] == "F"])
                g_limit = max(1, int(round((f_rps or a.g_fallback_rps) / 10)))
            sut = start_variant(ctx, v, backend, redis, g_limit)
            try:
                expect = (200, 429) if v == "G" else (200,)
                probes[v] = probe(sut, expect)
                rec = measure(ctx, sut, backend, redis, a.duration)
            finally:
                stop_variant(ctx, sut)
            rec["rep"] = rep
            records.append(rec)
            if v == "F":
                f_rps = rec["rps"]
            log(f"  rep {rep} {v}: {rec['rps']:.0f} req/s, non-2xx {rec['non2xx']}, "
                f"p99 {rec['p99_ms']:.2f} ms, sock-err {rec['socket_errors']}")
    summary = summarize(records)

    paced = []
    if not a.no_paced and "A" in variants and "F" in variants and "B" in summary:
        rate = int(summary["B"]["rps"] * a.paced_fraction)
        log(f"paced latency: A and F at {rate} req/s ({a.paced_fraction:.0%} of B's median max)")
        paced += paced_runs(ctx, backend, redis, rate, "")
        # Information, not a target: the same A-vs-F comparison at half of F's own max rate,
        # i.e. the latency tollgate adds when it is not saturated on this machine.
        rate = int(summary["F"]["rps"] * 0.5)
        log(f"paced latency (info): A and F at {rate} req/s (50% of F's median max)")
        paced += paced_runs(ctx, backend, redis, rate, "/halfF")
    paced_summary = summarize(paced)
    for p in (redis, backend):
        if p is not None:
            ctx.env.stop(p)
    return {"records": records, "summary": summary, "probes": probes,
            "paced_records": paced, "paced_summary": paced_summary}


def ratio(a, b):
    return (a / b) if (a is not None and b) else None


def fmt(x, spec, width):
    """Right-aligned number, or '-' for missing values."""
    return format(x, spec).rjust(width) if x is not None else "-".rjust(width)


TABLE = [  # (header, key, format, width)
    ("req/s", "rps", ".0f", 9),
    ("min-max", None, None, 16),
    ("2xx/s", "ok_rps", ".0f", 9),
    ("non2xx/s", "non2xx_rps", ".0f", 9),
    ("p50 ms", "p50_ms", ".3f", 8),
    ("p99 ms", "p99_ms", ".3f", 8),
    ("proxy CPU µs/req", "proxy_cpu_us_per_req", ".1f", 17),
    ("backend µs/req", "backend_cpu_us_per_req", ".1f", 15),
    ("RSS MB", "rss_mb", ".1f", 8),
    ("be-conns", "backend_conns_opened", ".0f", 9),
    ("redis cmd/req", "redis_cmds_per_req", ".3f", 14),
    ("client cmd/req", "redis_client_cmds_per_req", ".3f", 15),
    ("EVALSHA/req", "evalsha_per_req", ".3f", 12),
    ("client cmd/read", "redis_client_cmds_per_read", ".2f", 16),
]


def target_recorder(targets, lines):
    """Starts the "targets:" block of a report; the returned `target(name, value, ok, shown)`
    records one target in `targets` (for the JSON) and prints its PASS / FAIL / n/a line."""
    lines.append("")
    lines.append("  targets:")

    def target(name, value, ok, shown):
        targets.append({"target": name, "value": value, "pass": ok})
        verdict = "n/a " if ok is None else ("PASS" if ok else "FAIL")
        lines.append(f"  {verdict}  {name:<58} {shown}")
    return target


def throughput_report(res, args):
    s, ps = res["summary"], res["paced_summary"]
    lines = []
    for v, desc in VARIANTS.items():
        if v in s:
            lines.append(f"  {v}: {desc}")
    if ps:
        lines.append("  X@N: variant X paced at a constant N req/s (see README: pace.lua); "
                     "X@N/halfF: paced at 50% of F's max (information)")
    lines.append("")
    lines.append(f"  {'variant':<10}" + "".join(h.rjust(w) for h, _, _, w in TABLE))
    for v in list(s) + list(ps):
        r = s.get(v) or ps.get(v)
        row = f"  {v:<10}"
        for h, k, spec, w in TABLE:
            if k is None:
                row += f"({r['rps_min']:.0f}-{r['rps_max']:.0f})".rjust(w)
            else:
                row += fmt(r.get(k), spec, w)
        lines.append(row)
    lines.append("  (medians over reps; be-conns = new backend connections during the run: small means "
                 "upstream keep-alive works; for A they are wrk's own connections)")
    g = lambda v, k: (s.get(v) or {}).get(k)
    ratios = {
        "F/B rps": ratio(g("F", "rps"), g("B", "rps")),
        "F/D rps": ratio(g("F", "rps"), g("D", "rps")),
        "E/D rps": ratio(g("E", "rps"), g("D", "rps")),
        "C/B rps": ratio(g("C", "rps"), g("B", "rps")),
        "D/B rps": ratio(g("D", "rps"), g("B", "rps")),
        "P/B rps": ratio(g("P", "rps"), g("B", "rps")),
        "D/P rps": ratio(g("D", "rps"), g("P", "rps")),
        "G 429/s ÷ F 200/s": ratio(g("G", "non2xx_rps"), g("F", "ok_rps")),
    }
    lines.append("")
    lines.append("  ratios (medians): " + ", ".join(
        f"{k} = {v:.3f}" if v is not None else f"{k} = n/a" for k, v in ratios.items()))
    if g("P", "proxy_cpu_us_per_req") is not None and g("D", "proxy_cpu_us_per_req") is not None:
        lines.append(f"  proxy CPU µs/req: nginx B {fmt(g('B', 'proxy_cpu_us_per_req'), '.1f', 0)}, "
                     f"Pingora floor P {g('P', 'proxy_cpu_us_per_req'):.1f}, tollgate D "
                     f"{g('D', 'proxy_cpu_us_per_req'):.1f} (tollgate's own request path on top of "
                     f"Pingora: {g('D', 'proxy_cpu_us_per_req') - g('P', 'proxy_cpu_us_per_req'):+.1f})")
    if g("B", "rps") and g("F", "redis_cpu_us_per_req") is not None:
        # With every core busy during B, cores / B req/s is the whole machine's CPU per request
        # (wrk, backend, proxy, kernel). F needs at least that plus Redis's CPU per decision
        # even if its proxy path cost exactly nginx's: the best F/B this machine can show.
        t_b = os.cpu_count() / g("B", "rps") * 1e6
        r_f = g("F", "redis_cpu_us_per_req")
        res["f_over_b_ceiling"] = t_b / (t_b + r_f)
        lines.append(f"  info  F/B ceiling on this machine: B uses {t_b:.1f} CPU-µs per request "
                     f"({os.cpu_count()} cores / B req/s), Redis adds {r_f:.1f} per F request on the same "
                     f"cores, so even a proxy path as cheap as nginx's gives F/B <= "
                     f"{res['f_over_b_ceiling']:.3f}")
    if "G" in s:
        gl = g("G", "g_tier_limit_per_s")
        lines.append(f"  G: tier limit {gl:.0f}/s (burst = 1 s), offered {g('G', 'rps'):.0f} req/s "
                     f"= {g('G', 'rps') / gl:.1f}x the limit; admitted {g('G', 'ok_rps'):.0f}/s, "
                     f"rejected {g('G', 'non2xx_rps'):.0f}/s")
    for v in ("D", "E", "F", "G"):
        t = (s.get(v) or {}).get("tollgate")
        if t:
            lines.append(f"  {v} tollgate counters per run (median): " +
                         ", ".join(f"{k}={v2:.0f}" for k, v2 in t.items() if v2))
    for r in res["records"] + res["paced_records"]:
        t = r.get("tollgate") or {}
        local = {k: v for k, v in t.items() if v and (k in ("tenant_fallback", "redis_errors")
                                                   or k.startswith("tenant_failed"))}
        if local:
            lines.append(f"  warning: {r['variant']} rep {r['rep']}: Redis not used for every decision "
                         f"({', '.join(f'{k}={v}' for k, v in local.items())} of "
                         f"{r.get('tenant_decisions', '?')} tenant decisions; timeouts or open breaker): "
                         f"this run does not measure the Redis path alone")
    rd = [r["redis"]["reads_source"] for r in res["records"] if "redis" in r]
    if rd:
        lines.append(f"  Redis reads: {rd[0]}")
    added = None
    half_f = [k for k in ps if k.endswith("/halfF")]
    pa = [k for k in ps if k.startswith("A@") and k not in half_f]
    pf = [k for k in ps if k.startswith("F@") and k not in half_f]
    lo = sorted(half_f)  # ["A@N/halfF", "F@N/halfF"]
    if len(lo) == 2:
        lo_a, lo_f = lo
        lines.append(f"  info  paced at {ps[lo_a]['target_rps']:.0f} req/s (50% of F's max): A p99 "
                     f"{ps[lo_a]['p99_ms']:.3f} ms, F p99 {ps[lo_f]['p99_ms']:.3f} ms (achieved "
                     f"{ps[lo_f]['rps']:.0f}/s); added p99 {ps[lo_f]['p99_ms'] - ps[lo_a]['p99_ms']:.3f} ms, "
                     f"added p50 {ps[lo_f]['p50_ms'] - ps[lo_a]['p50_ms']:.3f} ms")
        res["added_p99_ms_at_half_f"] = ps[lo_f]["p99_ms"] - ps[lo_a]["p99_ms"]
    if pa and pf:
        added = ps[pf[0]]["p99_ms"] - ps[pa[0]]["p99_ms"]
        lines.append(f"  paced at {ps[pa[0]]['target_rps']:.0f} req/s: A p99 {ps[pa[0]]['p99_ms']:.3f} ms "
                     f"(achieved {ps[pa[0]]['rps']:.0f}/s), F p99 {ps[pf[0]]['p99_ms']:.3f} ms "
                     f"(achieved {ps[pf[0]]['rps']:.0f}/s); added p99 {added:.3f} ms")
        for k in (pa[0], pf[0]):
            if ps[k]["rps"] < 0.95 * ps[k]["target_rps"]:
                lines.append(f"  warning: {k} reached only {ps[k]['rps']:.0f} of {ps[k]['target_rps']:.0f} "
                             f"req/s: it was saturated, so its latency is queueing, not added latency")
    targets = []
    target = target_recorder(targets, lines)
    fb = ratios["F/B rps"]
    target("F rps >= 0.90 x B rps", fb, None if fb is None else fb >= 0.90,
           f"F/B = {fb:.3f}" if fb is not None else "needs B and F")
    ed = ratios["E/D rps"]
    target("E rps >= 0.95 x D rps", ed, None if ed is None else ed >= 0.95,
           f"E/D = {ed:.3f}" if ed is not None else "needs D and E")
    # Exactly one EVALSHA per tenant decision, every rep (integer counts, not a median).
    # F: every decision is an admission; integer counts of every rep, not a median.
    rs = [r for r in res["records"] if r["variant"] == "F" and "redis" in r]
    if rs:
        pairs = [(r["redis"]["evalsha"], r["tollgate"].get("tenant_admitted", 0),
                  r["tenant_decisions"]) for r in rs]
        ok = all(e == a and a == d for e, a, d in pairs)
        other = [(r["rep"], {k: v for k, v in r["tollgate"].items()
                             if k.startswith("tenant_") and k != "tenant_admitted" and v}
                  | ({"redis_errors": r["tollgate"]["redis_errors"]}
                     if r["tollgate"].get("redis_errors") else {})) for r in rs]
        other = [(rep, o) for rep, o in other if o]
        target("exactly 1.0 EVALSHA per admitted tenant decision (F)",
               [e / a if a else None for e, a, _ in pairs], ok,
               "EVALSHA/admitted per rep: " + ", ".join(
                   f"{e}/{a} = {e / a:.4f}" if a else f"{e}/0" for e, a, _ in pairs)
               + "".join(f"; rep {rep}: {o}" for rep, o in other))
    cpr = g("F", "redis_client_cmds_per_read")
    target("> 1 Redis command per read under concurrency (F)", cpr,
           None if cpr is None else cpr > 1.0,
           (f"gateway-sent commands/read = {cpr:.2f} (incl. script-internal: "
            f"{g('F', 'redis_cmds_per_read'):.2f})") if cpr is not None else "n/a")
    for r in (rec for rec in res["records"] if rec["variant"] == "G" and "redis" in rec):
        cs = r["redis"]["commandstats"]
        t = r["tollgate"]
        lines.append(
            f"  info  G rep {r['rep']}: {r['redis']['evalsha']} EVALSHA for {r['tenant_decisions']} tenant "
            f"decisions ({t.get('tenant_admitted', 0)} admitted, {t.get('tenant_limited', 0)} limited): "
            f"{r['evalsha_per_tenant_decision']:.3f} per decision (fewer than 1: rejections answered "
            f"without Redis, e.g. a local deny cache); script writes (HSET) {cs.get('hset', 0)} "
            f"vs admitted {t.get('tenant_admitted', 0)}")
    gf = ratios["G 429/s ÷ F 200/s"]
    target("G 429s/s >= 2 x F 200s/s", gf, None if gf is None else gf >= 2.0,
           f"G 429/s = {g('G', 'non2xx_rps'):.0f}, F 200/s = {g('F', 'ok_rps'):.0f}, ratio {gf:.3f}"
           if gf is not None else "needs F and G")
    target(f"added p99 of F over A at {args.paced_fraction:.0%} of B's max rate <= 1 ms", added,
           None if added is None else added <= 1.0,
           f"{added:.3f} ms" if added is not None else "needs A, B, F and the paced phase")
    res["ratios"] = ratios
    res["targets"] = targets
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------

def memory(ctx):
    a = ctx.args
    backend = start_backend(ctx)
    # Reference: the same gateway with an edge store of one client, warmed the same way. Its RSS
    # is the baseline that also charges the store's up-front reservation to the tracked clients.
    rport, radmin = free_port(), free_port()
    redge = {"limit": 1000, "per": "1s", "burst": 1000, "trusted_proxies": ["127.0.0.1/32"],
             "max_clients": 1}
    ref = start_tollgate(ctx, "tollgate-mem-ref",
                         tollgate_config(ctx, "tollgate-mem-ref", rport, radmin, backend.port, edge=redge))
    run_wrk(ctx, rport, 2, headers=["X-Forwarded-For: 10.9.9.9"])
    time.sleep(0.5)
    ref_rss_kb = rss_kb([ref.pid])
    ctx.env.stop(ref)
    port, admin = free_port(), free_port()
    edge = {"limit": 1000, "per": "1s", "burst": 1000, "trusted_proxies": ["127.0.0.1/32"],
            "max_clients": a.max_clients}
    cfg = tollgate_config(ctx, "tollgate-mem", port, admin, backend.port, edge=edge)
    tg = start_tollgate(ctx, "tollgate-mem", cfg)
    pids = [tg.pid]
    # Baseline: warmed up (connections, pools, thread stacks) with a single client address.
    run_wrk(ctx, port, 2, headers=["X-Forwarded-For: 10.9.9.9"])
    time.sleep(0.5)
    m = scrape(admin)
    base = {"clients_sent": 0, "rss_kb": rss_kb(pids),
            "tracked": int(msum(m, "tollgate_edge_tracked_clients")),
            "evictions": int(msum(m, "tollgate_edge_evictions_total"))}
    log(f"memory: base RSS {base['rss_kb'] / 1024:.1f} MB, tracked {base['tracked']}; sending "
        f"{a.clients} distinct X-Forwarded-For addresses in {a.checkpoints} steps, "
        f"edge.max_clients {a.max_clients}")
    checkpoints = [base]
    step = a.clients // a.checkpoints
    sent = 0
    script = wrk_script(ctx, "xff.lua")
    t_start = time.monotonic()
    for i in range(a.checkpoints):
        count = step if i < a.checkpoints - 1 else a.clients - sent
        start_requests = msum(scrape(admin), "tollgate_requests_total")
        argv = wrk_argv(ctx, port, 3600, script=script, script_args=(sent, count, a.wrk_threads))
        w = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        last, last_change = start_requests, time.monotonic()
        while True:
            time.sleep(0.25)
            if w.poll() is not None:
                break
            now_req = msum(scrape(admin), "tollgate_requests_total")
            if now_req != last:
                last, last_change = now_req, time.monotonic()
            # Every thread stops itself after its share; wrk itself only ends on its timer.
            if now_req - start_requests >= count or time.monotonic() - last_change > 2.0:
                w.send_signal(signal.SIGINT)
                break
        out, _ = w.communicate(timeout=30)
        wr = parse_wrk(out)
        sent += count
        time.sleep(0.5)
        m = scrape(admin)
        cp = {"clients_sent": sent, "rss_kb": rss_kb(pids),
              "tracked": int(msum(m, "tollgate_edge_tracked_clients")),
              "evictions": int(msum(m, "tollgate_edge_evictions_total")),
              "requests_answered": wr["requests"], "rps": wr["rps"], "non2xx": wr["non2xx"]}
        checkpoints.append(cp)
        log(f"  {sent:>9} addresses: RSS {cp['rss_kb'] / 1024:7.1f} MB, tracked {cp['tracked']}, "
            f"evicted {cp['evictions']}, {wr['rps']:.0f} req/s")
    elapsed = time.monotonic() - t_start
    final = checkpoints[-1]
    full = [c for c in checkpoints[1:] if c["tracked"] >= a.max_clients]
    first_full = full[0] if full else None
    # Plateau check: RSS change over the second half of the checkpoints (all past the bound
    # when --clients is several times --max-clients).
    mid = checkpoints[len(checkpoints) // 2]
    growth = ((final["rss_kb"] - mid["rss_kb"]) / mid["rss_kb"]) if first_full else None
    bpc = ((final["rss_kb"] - ref_rss_kb) * 1024 / final["tracked"]) if final["tracked"] else None
    bpc_after_start = ((final["rss_kb"] - base["rss_kb"]) * 1024 / final["tracked"]) if final["tracked"] else None
    # Marginal cost while the store fills: from the first checkpoint to the one where the bound was
    # reached (excludes the fixed cost of first use, e.g. allocator arenas and table growth).
    marginal = None
    if first_full is not None and checkpoints[1] is not first_full:
        c1 = checkpoints[1]
        if first_full["tracked"] - c1["tracked"] >= 0.1 * a.max_clients:
            marginal = (first_full["rss_kb"] - c1["rss_kb"]) * 1024 / (first_full["tracked"] - c1["tracked"])
    ctx.env.stop(tg)
    ctx.env.stop(backend)
    return {"max_clients": a.max_clients, "marginal_bytes_per_client_while_filling": marginal, "clients": a.clients, "checkpoints": checkpoints,
            "elapsed_s": elapsed, "bytes_per_tracked_client": bpc,
            "reference_rss_kb": ref_rss_kb, "bytes_per_tracked_client_after_start": bpc_after_start,
            "rss_growth_second_half": growth,
            "rss_growth_from_kb": mid["rss_kb"], "rss_growth_from_clients_sent": mid["clients_sent"],
            # The store may round the bound (e.g. up to a multiple of its shard count); a plateau
            # is "no growth over the last two checkpoints, within 1% of edge.max_clients".
            "plateau_at_bound": (len(checkpoints) >= 3
                                 and checkpoints[-1]["tracked"] == checkpoints[-2]["tracked"]
                                 and abs(final["tracked"] - a.max_clients) <= 0.01 * a.max_clients)}


def memory_report(res):
    lines = [f"  {'addresses sent':>15}{'tracked':>10}{'evicted':>10}{'RSS MB':>9}{'Δ vs base MB':>14}"]
    base = res["checkpoints"][0]["rss_kb"]
    for c in res["checkpoints"]:
        lines.append(f"  {c['clients_sent']:>15}{c['tracked']:>10}{c['evictions']:>10}"
                     f"{c['rss_kb'] / 1024:>9.1f}{(c['rss_kb'] - base) / 1024:>14.1f}")
    bpc = res["bytes_per_tracked_client"]
    g = res["rss_growth_second_half"]
    lines.append("")
    lines.append(f"  tracked clients at the end: {res['checkpoints'][-1]['tracked']} "
                 f"(edge.max_clients {res['max_clients']}); RSS change from {res['rss_growth_from_clients_sent']} "
                 f"addresses sent to the end: "
                 + (f"{g:+.1%}" if g is not None else "n/a (bound never reached)"))
    lines.append(f"  reference gateway (edge.max_clients 1, same warm-up): RSS {res['reference_rss_kb'] / 1024:.1f} MB; "
                 f"growth after start only: {res['bytes_per_tracked_client_after_start']:.0f} bytes per tracked client")
    mg = res.get("marginal_bytes_per_client_while_filling")
    if mg is not None:
        lines.append(f"  marginal RSS per added client while filling (checkpoint 1 -> bound reached): {mg:.0f} bytes")
    targets = []
    target = target_recorder(targets, lines)
    tr = res["checkpoints"][-1]["tracked"]
    target("tracked clients plateau at edge.max_clients", tr, res["plateau_at_bound"],
           f"{tr} tracked, edge.max_clients {res['max_clients']} ({tr - res['max_clients']:+d})")
    target("RSS plateau <= 200 bytes per tracked edge client", bpc,
           None if bpc is None else bpc <= 200,
           f"(RSS_end - RSS_reference) / tracked = {bpc:.0f} bytes" if bpc is not None else "n/a")
    res["targets"] = targets
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Accuracy
# --------------------------------------------------------------------------------------------

def parse_duration_s(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", text)
    if not m:
        raise BenchError(f"bad duration {text!r}")
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def paced_http(targets, rate, duration, headers, workers_per_target=2):
    """Open-ish loop: request k is sent at t0 + k/rate to target k % N, by one of a few threads
    per target (each with its own keep-alive connection). Returns [(k, t_send, status)]."""
    n = int(rate * duration)
    results = []
    lock = threading.Lock()
    t0 = time.monotonic() + 0.3
    nt = len(targets)

    def worker(ti, wi):
        port = targets[ti]
        mine = [k for k in range(ti, n, nt) if (k // nt) % workers_per_target == wi]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        local = []
        for k in mine:
            wait = t0 + k / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            ts = time.monotonic()
            try:
                conn.request("GET", "/", headers=headers)
                r = conn.getresponse()
                r.read()
                status = r.status
                if r.will_close:
                    conn.close()
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            local.append((k, ts, status))
        conn.close()
        with lock:
            results.extend(local)

    threads = [threading.Thread(target=worker, args=(ti, wi), daemon=True)
               for ti in range(nt) for wi in range(workers_per_target)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.sort()
    return results


def accuracy(ctx):
    a = ctx.args
    per_s = parse_duration_s(a.acc_per)
    rate = a.acc_limit / per_s  # tokens per second
    burst = a.acc_burst if a.acc_burst else a.acc_limit
    offered = rate * a.acc_factor
    backend = start_backend(ctx)
    redis = start_redis(ctx)
    instances = [int(x) for x in a.instances.split(",") if x.strip()]
    log(f"accuracy: tier limit {a.acc_limit} per {a.acc_per} ({rate:g}/s), burst {burst}; one tenant "
        f"offered {offered:g} req/s ({a.acc_factor:g}x) for {a.acc_duration}s over {instances} instance(s)")
    runs = []
    for n in instances:
        redis_cmd(redis.port, "FLUSHALL")
        tgs = []
        try:
            for i in range(n):
                port, admin = free_port(), free_port()
                cfg = tollgate_config(ctx, f"tollgate-acc{n}-{i}", port, admin, backend.port,
                                      tier={"limit": a.acc_limit, "per": a.acc_per, "burst": burst},
                                      redis_port=redis.port, fleet_size=n, on_failure="closed",
                                      auth="required")
                tgs.append(start_tollgate(ctx, f"tollgate-acc{n}-{i}", cfg))
            # Warm each instance's Redis connection and script cache with another tenant's key?
            # There is only one key; instead check the instances answer 401 without a key.
            for t in tgs:
                st = http_get(t.port, "/")[0]
                if st != 401:
                    raise BenchError(f"accuracy: instance without key answered {st}, expected 401")
            before = [scrape(t.admin) for t in tgs]
            res = paced_http([t.port for t in tgs], offered, a.acc_duration, {"X-API-Key": API_KEY})
            time.sleep(0.3)
            after = [scrape(t.admin) for t in tgs]
        finally:
            for t in tgs:
                ctx.env.stop(t)
        ok = [r for r in res if r[2] == 200]
        limited = [r for r in res if r[2] == 429]
        other = [r for r in res if r[2] not in (200, 429)]
        window = res[-1][1] - res[0][1] if res else 0.0
        allowance = burst + rate * window
        nominal = burst + rate * a.acc_duration
        m_adm = sum(msum(y, "tollgate_decisions_total", layer="tenant", outcome="admitted") -
                    msum(x, "tollgate_decisions_total", layer="tenant", outcome="admitted")
                    for x, y in zip(before, after))
        fallback = sum(msum(y, "tollgate_decisions_total", layer="tenant", outcome="fallback") -
                       msum(x, "tollgate_decisions_total", layer="tenant", outcome="fallback")
                       for x, y in zip(before, after))
        run = {"instances": n, "offered": len(res), "offered_rps": offered, "admitted": len(ok),
               "rejected_429": len(limited), "other": len(other),
               "other_statuses": sorted({r[2] for r in other}), "window_s": window,
               "allowance_exact": allowance, "allowance_nominal": nominal,
               "error": len(ok) - allowance, "error_pct": (len(ok) - allowance) / allowance * 100,
               "metrics_admitted": int(m_adm), "metrics_fallback": int(fallback),
               "per_instance_admitted": [
                   sum(1 for r in ok if r[0] % n == i) for i in range(n)]}
        runs.append(run)
        log(f"  {n} instance(s): admitted {len(ok)} of {len(res)}, allowance "
            f"{allowance:.1f} (burst {burst} + {rate:g}/s x {window:.3f}s), 429 {len(limited)}, "
            f"other {len(other)}")
    ctx.env.stop(redis)
    ctx.env.stop(backend)
    return {"limit": a.acc_limit, "per": a.acc_per, "burst": burst, "rate_per_s": rate,
            "factor": a.acc_factor, "duration_s": a.acc_duration, "runs": runs}


def accuracy_report(res):
    lines = [f"  {'instances':>9}{'offered':>9}{'admitted':>10}{'allowance':>11}{'error':>9}"
             f"{'error %':>9}{'429':>7}{'other':>7}{'per-instance admitted':>26}"]
    for r in res["runs"]:
        lines.append(f"  {r['instances']:>9}{r['offered']:>9}{r['admitted']:>10}"
                     f"{r['allowance_exact']:>11.1f}{r['error']:>+9.1f}{r['error_pct']:>+9.2f}"
                     f"{r['rejected_429']:>7}{r['other']:>7}{str(r['per_instance_admitted']):>26}")
    lines.append(f"  allowance = burst + rate x (last send - first send); burst {res['burst']}, "
                 f"rate {res['rate_per_s']:g}/s, offered {res['factor']:g}x for {res['duration_s']}s "
                 f"(nominal allowance {res['burst'] + res['rate_per_s'] * res['duration_s']:.0f})")
    if any(r["other"] for r in res["runs"]):
        lines.append("  note: 'other' are neither 200 nor 429 (e.g. 503 when Redis timed out: on_failure closed)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Profile (perf + inferno flame graphs)
# --------------------------------------------------------------------------------------------

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
    variants = [v for v in a.variants.upper() if v in VARIANTS and v not in "ABC"]
    backend = start_backend(ctx)
    redis = start_redis(ctx) if any(v in "FG" for v in variants) else None
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = Path(a.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = {}
    for v in variants:
        g_limit = max(1, int(a.g_fallback_rps / 10)) if v == "G" else None
        sut = start_variant(ctx, v, backend, redis, g_limit)
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
    for p in (redis, backend):
        if p is not None:
            ctx.env.stop(p)
    return runs


def profile_report(res):
    lines = ["  share of sampled cycles by the frame on top of the stack (self time):"]
    groups = sorted({g for r in res.values() for g in r["leaf_share"]},
                    key=lambda g: -max(r["leaf_share"].get(g, 0) for r in res.values()))
    lines.append(f"  {'':<24}" + "".join(v.rjust(8) for v in res))
    for g in groups:
        lines.append(f"  {g:<24}" + "".join(f"{r['leaf_share'].get(g, 0):8.1%}" for r in res.values()))
    lines.append(f"  {'under a tollgate:: frame':<24}" +
                 "".join(f"{r['under_tollgate_frames']:8.1%}" for r in res.values()) +
                 "   (inclusive: our code and the libraries it calls)")
    for v, r in res.items():
        lines.append(f"  {v}: flame graph {r['svg']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Build, environment, output
# --------------------------------------------------------------------------------------------

def build(args):
    target = os.environ.get("CARGO_TARGET_DIR")
    target_dir = Path(target) if target else REPO / "target"
    if not target_dir.is_absolute():
        target_dir = REPO / target_dir
    if not args.skip_build:
        log(f"cargo build --release --bins --example pingora_floor (target dir {target_dir})")
        r = subprocess.run(["cargo", "build", "--release", "--bins", "--example", "pingora_floor"],
                           cwd=REPO)
        if r.returncode != 0:
            raise BenchError("cargo build --release failed (use --skip-build to bench the "
                             "last built binaries)")
    binary = target_dir / "release" / "tollgate"
    floor = target_dir / "release" / "examples" / "pingora_floor"
    for b in (binary, floor):
        if not b.exists():
            raise BenchError(f"{b} not found (build first, or set CARGO_TARGET_DIR)")
    return binary, floor


def environment(args, binary):
    def git(*a):
        r = subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True)
        return r.stdout.strip()

    def version(argv):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (r.stdout or r.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return None
    st = os.stat(binary)
    return {
        "git_commit": git("rev-parse", "HEAD"),
        "git_branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "git_dirty_files": len([l for l in git("status", "--porcelain").splitlines() if l]),
        "tollgate_binary": str(binary),
        "tollgate_binary_mtime": datetime.datetime.fromtimestamp(st.st_mtime).isoformat(timespec="seconds"),
        "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "nginx": version(["nginx", "-v"]), "wrk": version(["wrk", "--version"]),
        "redis": version(["redis-server", "--version"]),
        "argv": sys.argv[1:],
    }


def write_results(args, data):
    out_dir = Path(args.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = out_dir / f"{stamp}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def compare(args):
    """Side by side medians of two result files (throughput, memory, accuracy, targets)."""
    a, b = (json.loads(Path(p).read_text()) for p in (args.old, args.new))
    for name, d, p in (("old", a, args.old), ("new", b, args.new)):
        e = d.get("environment", {})
        print(f"{name}: {p}  commit {e.get('git_commit', '?')[:10]} "
              f"({e.get('git_dirty_files', '?')} uncommitted files), load {e.get('loadavg_at_start', ['?'])[0]}")

    def merged(d):
        t = d.get("throughput", {})
        out = dict(t.get("summary", {}))
        for k, v in t.get("paced_summary", {}).items():  # "A@17693" -> "A@paced"
            out[k.split("@")[0] + ("@halfF" if k.endswith("/halfF") else "@paced")] = v
        return out
    sa, sb = merged(a), merged(b)
    keys = [("rps", "req/s"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"),
            ("proxy_cpu_us_per_req", "proxy CPU µs/req"), ("rss_mb", "RSS MB"),
            ("redis_client_cmds_per_read", "client cmd/read")]

    def num(x):
        return "-" if x is None else (f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}")
    if sa or sb:
        print(f"\n{'variant':<10}" + "".join(f"{h:>30}" for _, h in keys))
        for v in sorted(set(sa) | set(sb)):
            row = f"{v:<10}"
            for k, _ in keys:
                x, y = (sa.get(v) or {}).get(k), (sb.get(v) or {}).get(k)
                cell = f"{num(x)} -> {num(y)}"
                if x and y is not None:
                    cell += f" ({(y - x) / x:+.1%})"
                row += f"{cell if (x is not None or y is not None) else '-':>30}"
            print(row)
    for section in ("throughput", "memory"):
        ta = {t["target"]: t for t in a.get(section, {}).get("targets", [])}
        tb = {t["target"]: t for t in b.get(section, {}).get("targets", [])}
        if ta or tb:
            print(f"\n{section} targets (old -> new):")
            verdict = lambda t: "-" if t is None else ("n/a" if t["pass"] is None else
                                                        "PASS" if t["pass"] else "FAIL")
            for name in list(ta) + [n for n in tb if n not in ta]:
                print(f"  {verdict(ta.get(name)):>4} -> {verdict(tb.get(name)):<4}  {name}")
    for name, d in (("old", a), ("new", b)):
        m = d.get("memory")
        if m and m.get("bytes_per_tracked_client") is not None:
            print(f"memory ({name}): {m['bytes_per_tracked_client']:.0f} bytes per tracked client, "
                  f"{m['checkpoints'][-1]['tracked']} tracked")
        acc = d.get("accuracy")
        if acc:
            print(f"accuracy ({name}): " + ", ".join(
                f"{r['instances']} inst: {r['admitted']} admitted / {r['allowance_exact']:.1f} allowed"
                for r in acc["runs"]))


def check_tools():
    missing = [t for t in ("wrk", "redis-server", "nginx", "cargo") if not shutil.which(t)
               and not (t == "nginx" and os.path.exists("/usr/sbin/nginx"))]
    if missing:
        raise BenchError(f"missing tools: {', '.join(missing)}")


def main():
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("common")
    g.add_argument("--skip-build", action="store_true",
                   help="do not run cargo build; use the binaries already in the target dir")
    g.add_argument("--threads", type=int, default=2,
                   help="worker processes/threads of every proxy: nginx worker_processes and "
                        "tollgate server.threads (default 2)")
    g.add_argument("--backend-workers", type=int, default=2,
                   help="worker_processes of the nginx backend (default 2)")
    g.add_argument("--connections", type=int, default=64, help="wrk -c (default 64)")
    g.add_argument("--wrk-threads", type=int, default=2, help="wrk -t (default 2)")
    g.add_argument("--results-dir", default=str(BENCH / "results"))
    g.add_argument("--keep-tmp", action="store_true", help="keep configs and logs of the run")

    tp = argparse.ArgumentParser(add_help=False)
    g = tp.add_argument_group("throughput")
    g.add_argument("--reps", type=int, default=3, help="repetitions, interleaved (default 3)")
    g.add_argument("--duration", type=int, default=10, help="seconds per measured run (default 10)")
    g.add_argument("--warmup", type=int, default=2, help="warm-up seconds before each run (default 2)")
    g.add_argument("--variants", default="ABCPDEFG", help="subset of ABCPDEFG (default all)")
    g.add_argument("--no-paced", action="store_true", help="skip the constant-rate latency phase")
    g.add_argument("--paced-fraction", type=float, default=0.5,
                   help="constant rate as a fraction of B's median max rate (default 0.5)")
    g.add_argument("--g-fallback-rps", type=float, default=10000,
                   help="F rate assumed for sizing G when F is not run (default 10000)")

    mp = argparse.ArgumentParser(add_help=False)
    g = mp.add_argument_group("memory")
    g.add_argument("--clients", type=int, default=1_000_000, help="distinct addresses (default 1e6)")
    g.add_argument("--max-clients", type=int, default=200_000, help="edge.max_clients (default 2e5)")
    g.add_argument("--checkpoints", type=int, default=10, help="RSS checkpoints (default 10)")

    ap = argparse.ArgumentParser(add_help=False)
    g = ap.add_argument_group("accuracy")
    g.add_argument("--instances", default="1,2,4", help="gateway counts sharing one Redis (default 1,2,4)")
    g.add_argument("--acc-limit", type=int, default=6000, help="tier limit (default 6000)")
    g.add_argument("--acc-per", default="1m", help="tier period (default 1m, i.e. 100/s)")
    g.add_argument("--acc-burst", type=int, default=100, help="tier burst (default 100)")
    g.add_argument("--acc-factor", type=float, default=3.0, help="offered load / rate (default 3)")
    g.add_argument("--acc-duration", type=int, default=10, help="seconds of offered load (default 10)")

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("throughput", parents=[common, tp], help="variants A-G (and P) and the paced latency runs")
    sub.add_parser("memory", parents=[common, mp], help="edge limiter RSS with 1M client addresses")
    sub.add_parser("accuracy", parents=[common, ap], help="admitted vs allowance, 1/2/4 instances")
    sub.add_parser("all", parents=[common, tp, mp, ap], help="throughput, memory and accuracy")
    pp = argparse.ArgumentParser(add_help=False)
    g = pp.add_argument_group("profile")
    g.add_argument("--frequency", type=int, default=499, help="perf sampling Hz (default 499)")
    sub.add_parser("profile", parents=[common, tp, pp],
                   help="perf + inferno flame graphs of P/D/E/F/G under full load")
    c = sub.add_parser("compare", help="compare two result files")
    c.add_argument("old")
    c.add_argument("new")
    args = parser.parse_args()

    if args.cmd == "compare":
        compare(args)
        return 0

    def on_term(signum, frame):
        raise SystemExit(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)

    check_tools()
    binary, floor = build(args)
    data = {"environment": environment(args, binary), "params": vars(args)}
    reports = []
    with Env(args.keep_tmp) as env:
        ctx = Ctx(args, env)
        ctx.tollgate = str(binary)
        ctx.floor = str(floor)
        if args.cmd in ("throughput", "all"):
            data["throughput"] = throughput(ctx)
            reports.append(("throughput (medians of %d reps, %ds each, wrk -t%d -c%d)"
                            % (args.reps, args.duration, args.wrk_threads, args.connections),
                            throughput_report(data["throughput"], args)))
        if args.cmd == "profile":
            data["profile"] = profile(ctx)
            reports.append(("profile (perf, DWARF call graphs, flame graphs in the results dir)",
                            profile_report(data["profile"])))
        if args.cmd in ("memory", "all"):
            data["memory"] = memory(ctx)
            reports.append(("memory (edge limiter, distinct X-Forwarded-For clients)",
                            memory_report(data["memory"])))
        if args.cmd in ("accuracy", "all"):
            data["accuracy"] = accuracy(ctx)
            reports.append(("accuracy (one tenant, shared Redis bucket)",
                            accuracy_report(data["accuracy"])))
    data["environment"]["loadavg_at_end"] = os.getloadavg()
    path = write_results(args, data)
    print()
    env = data["environment"]
    print(f"tollgate {env['git_commit'][:10]} ({env['git_dirty_files']} uncommitted files), "
          f"{env['cpus']} CPUs, load {env['loadavg_at_start'][0]:.1f} -> {env['loadavg_at_end'][0]:.1f}")
    for title, text in reports:
        print(f"\n== {title}\n{text}")
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        log(f"error: {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)
