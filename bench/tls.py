#!/usr/bin/env python3
"""TLS handshakes per second and HTTP/2 throughput: tollgate vs nginx, same certificate, same box.

    CARGO_TARGET_DIR=/work/tgt/x bench/tls.py [--duration 5] [--threads 1] [--skip-build]

Starts on free loopback ports: a fast backend (nginx `return 200`, plain HTTP), tollgate with one
TLS listener (`h2: true`, no limits configured, one catch-all route to the backend) and nginx with
`listen ... ssl http2` proxying to the same backend with upstream keepalive. Both use the same
ECDSA P-256 certificate made here with the openssl CLI, and the same number of worker threads
(`server.threads` = `worker_processes`).

- handshakes/s: wrk over HTTPS with `Connection: close`, so every request is a new TCP connection
  and a full TLS handshake (wrk keeps no session tickets) plus one proxied HTTP/1.1 request;
- h2 req/s: h2load, 16 connections x 10 concurrent streams, for `--duration` seconds.

Writes `bench/results/tls-<timestamp>.json` with the figures and tollgate/nginx ratios.
Needs: nginx, wrk, h2load (Debian `nghttp2-client`), openssl, cargo. Standard library only.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def make_cert(tmp):
    crt, key = tmp / "gw.crt", tmp / "gw.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=bench.test",
         "-addext", "subjectAltName=DNS:bench.test"],
        check=True, capture_output=True)
    return crt, key


def nginx_conf(tmp, name, body, workers):
    conf = tmp / f"{name}.conf"
    conf.write_text(f"""
worker_processes {workers};
daemon off;
pid {tmp}/{name}.pid;
error_log {tmp}/{name}.error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  keepalive_requests 10000000;   # the default 1000 closes h2 connections; h2load does not reconnect
  client_body_temp_path {tmp}/{name}-body;
  proxy_temp_path {tmp}/{name}-proxy;
  fastcgi_temp_path {tmp}/{name}-fcgi;
  uwsgi_temp_path {tmp}/{name}-uwsgi;
  scgi_temp_path {tmp}/{name}-scgi;
  {body}
}}
""")
    return conf


def start(argv, log, **kw):
    return subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, **kw)


def wrk_rps(port, duration, conns):
    out = subprocess.run(
        ["wrk", "-t", "1", "-c", str(conns), "-d", f"{duration}s", "-H", "Connection: close",
         "-H", "Host: bench.test", f"https://127.0.0.1:{port}/"],
        capture_output=True, text=True, check=True).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if not m:
        raise SystemExit(f"wrk output not understood:\n{out}")
    return float(m.group(1)), int(errors.group(1)) if errors else 0, out


def h2load_rps(port, duration):
    out = subprocess.run(
        ["h2load", "-c", "16", "-m", "10", "-D", str(duration), "--warm-up-time", "1",
         f"https://127.0.0.1:{port}/"],
        capture_output=True, text=True, check=True).stdout
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    status = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    if not m or "h2" not in out:
        raise SystemExit(f"h2load output not understood:\n{out}")
    bad = sum(int(x) for x in status.groups()[1:]) if status else 0
    return float(m.group(1)), bad, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--duration", type=int, default=5, help="seconds per measurement")
    ap.add_argument("--threads", type=int, default=1, help="tollgate threads = nginx workers")
    ap.add_argument("--conns", type=int, default=32, help="wrk connections (handshake test)")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--keep-tmp", action="store_true", help="keep configs and logs")
    ap.add_argument("--results-dir", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args()
    for tool in ("nginx", "wrk", "h2load", "openssl"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found (h2load: apt-get install nghttp2-client)")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not args.skip_build:
        subprocess.run(["cargo", "build", "--release", "--bin", "tollgate"], cwd=ROOT, check=True)
    gateway_bin = target / "release" / "tollgate"

    tmp = Path(tempfile.mkdtemp(prefix="tollgate-tls-bench-"))
    procs = []
    try:
        log = open(tmp / "processes.log", "w")
        crt, key = make_cert(tmp)
        backend, gw_port, admin, ngx_port = (free_port() for _ in range(4))
        conf = nginx_conf(tmp, "backend", f"server {{ listen 127.0.0.1:{backend}; "
                          "location / { return 200 'ok'; } }", 1)
        procs.append(start(["nginx", "-p", tmp, "-c", conf], log))
        conf = nginx_conf(tmp, "tls", f"""
  upstream backend {{ server 127.0.0.1:{backend}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{ngx_port} ssl http2;
    ssl_certificate {crt};
    ssl_certificate_key {key};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_tickets off;
    location / {{ proxy_pass http://backend; proxy_http_version 1.1;
                 proxy_set_header Connection ""; }}
  }}""", args.threads)
        procs.append(start(["nginx", "-p", tmp, "-c", conf], log))
        yaml = tmp / "gateway.yaml"
        yaml.write_text(f"""listen:
  - {{ addr: "127.0.0.1:{gw_port}", tls: {{ cert_file: "{crt}", key_file: "{key}" }}, h2: true }}
admin: {{ listen: "127.0.0.1:{admin}" }}
server: {{ threads: {args.threads}, grace_period_s: 1 }}
upstreams:
  backend: {{ backends: ["127.0.0.1:{backend}"] }}
routes:
  - {{ path_prefix: "/", upstream: backend, auth: none }}
observability: {{ access_log: false }}
""")
        procs.append(start([gateway_bin, "run", "-c", yaml], log,
                           env={**os.environ, "RUST_LOG": "error"}))
        for p in (backend, ngx_port, gw_port):
            wait_port(p)

        results = {}
        for name, port in (("nginx", ngx_port), ("tollgate", gw_port)):
            wrk_rps(port, 1, args.conns)  # warm-up
            hs, hs_bad, _ = wrk_rps(port, args.duration, args.conns)
            h2, h2_bad, h2_out = h2load_rps(port, args.duration)
            if h2 == 0 or hs_bad or h2_bad or os.environ.get("TLS_BENCH_VERBOSE"):
                print(h2_out, flush=True)
            results[name] = {"handshakes_per_s": hs, "handshake_non_2xx": hs_bad,
                             "h2_req_per_s": h2, "h2_non_2xx": h2_bad}
            print(f"{name:9} handshakes/s {hs:10.0f}   h2 req/s {h2:10.0f}", flush=True)
        ratios = {k: round(results["tollgate"][k] / results["nginx"][k], 3)
                  for k in ("handshakes_per_s", "h2_req_per_s")}
        print(f"tollgate/nginx: handshakes {ratios['handshakes_per_s']}  "
              f"h2 {ratios['h2_req_per_s']}")
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        out = Path(args.results_dir) / f"tls-{stamp}.json"
        out.write_text(json.dumps({
            "kind": "tls", "utc": stamp, "duration_s": args.duration, "threads": args.threads,
            "wrk_connections": args.conns, "h2load": "-c 16 -m 10", "cert": "ECDSA P-256",
            "cpus": os.cpu_count(), "loadavg_before": os.getloadavg(),
            "results": results, "ratios_tollgate_over_nginx": ratios,
        }, indent=2) + "\n")
        print(f"wrote {out}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        if args.keep_tmp:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
