"""Starts the processes a run needs on free loopback ports: nginx (backend and proxies),
redis-server and tollgate with a generated config."""

import hashlib
import json
import os
import re
import signal
import subprocess
import time

from .clients import http_get
from .common import API_KEY, TENANT, BenchError, log
from .processes import children_of, free_port, wait_port


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


def start_redis(ctx, name="redis"):
    port = free_port()
    d = ctx.tmp / name
    d.mkdir(exist_ok=True)
    p = ctx.env.start(name, [ctx.redis_server, "--port", port, "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no", "--daemonize", "no",
                                "--protected-mode", "no", "--dir", d, "--loglevel", "warning"],
                      stop_signal=signal.SIGTERM)
    wait_port(port, p)
    p.port = port
    log(f"{name}: redis-server on 127.0.0.1:{port}")
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
    if not ctx.args.work_stealing:
        # Written only when not tollgate's default (true), so older binaries (--tollgate-binary)
        # that predate the field still run the default.
        cfg["server"]["work_stealing"] = False
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


def start_tollgate(ctx, name, cfg, rust_log=None, env=None):
    path = ctx.tmp / f"{name}.yaml"
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    check = subprocess.run([ctx.tollgate, "check", "-c", path], capture_output=True, text=True,
                           cwd=ctx.tmp)
    if check.returncode != 0:
        raise BenchError(f"tollgate check rejected {path}:\n{check.stdout}{check.stderr}")
    env = dict(os.environ, **(env or {}))
    if rust_log:
        env["RUST_LOG"] = rust_log
    env.setdefault("RUST_LOG", "warn")
    p = ctx.env.start(name, [ctx.tollgate, "run", "-c", path], stop_signal=signal.SIGINT, env=env)
    port = int(cfg["listen"][0].rsplit(":", 1)[1])
    admin = int(cfg["admin"]["listen"].rsplit(":", 1)[1])
    wait_port(port, p)
    wait_port(admin, p)
    p.port, p.admin = port, admin
    return p
