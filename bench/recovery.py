#!/usr/bin/env python3
"""Recovery from Redis outages under the `local` failure policy, the long version of
tests/recovery.rs: a fleet of gateways (`fleet_size` = their number) on one real redis-server,
several tenants each sending a steady multiple of their limit through every gateway, and Redis
frozen (SIGSTOP) for 2.5 windows several times, with healthy windows between.

Per tenant it counts what was admitted against the allowance of a limiter that never lost Redis
(burst + limit x elapsed) and against the documented bound of `local`
(docs/redis.md#when-redis-is-slow-or-down-failure-policy): per outage one burst more (the local
buckets start full) and, in a fleet of n, up to (n - 1) / n of one when it ends (what the local
buckets admitted is carried into Redis when each instance's breaker closes; until the last
carry landed, the instances back first may take what it would have). It also
counts, per outage, what was admitted in the healthy windows after it against limit x their
length: a Redis bucket handed out fresh on top of the local admissions shows as one burst more
there.

    bench/recovery.py [--windows-between 3] [--outages 3] [--tenants 4] [--gateways 2]
                      [--algorithm token_bucket|gcra|fixed_window|sliding_window_log|
                                   sliding_window_counter|leaky_bucket]

With another algorithm than the token bucket the tier is decided by the policy script, and its
local admissions are carried in that algorithm's terms (a fixed window may admit its burst twice
across a window boundary, as it does without an outage: its excess can exceed the bound by that).

Uses the debug binaries (target/debug/tollgate, tollgate-echo) unless told otherwise; writes
bench/results/<UTC date-time>-recovery.json and prints the figures. Python standard library only.
"""

import argparse
import datetime
import hashlib
import http.client
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from tollgate_bench import recovery_account as account  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port} after {timeout} s")


def key_of(tenant):
    return f"key-{tenant}-0123456789"


def gateway_yaml(port, admin, redis_port, backend, tenants, args):
    keys = "\n".join(
        f'      - {{ sha256: "{hashlib.sha256(key_of(t).encode()).hexdigest()}", tenant: "{t}", tier: T }}'
        for t in tenants
    )
    return f"""listen: [ {{ addr: "127.0.0.1:{port}" }} ]
admin: {{ listen: "127.0.0.1:{admin}" }}
server: {{ threads: 1, grace_period_s: 1 }}
redis:
  url: "redis://127.0.0.1:{redis_port}"
  timeout: 200ms
  fleet_size: {args.gateways}
  on_failure: local
  circuit_breaker: {{ min_calls: 3, failure_ratio: 0.5, window: 1s, break: 2s, probes: 1 }}
identity:
  api_keys:
    header: "X-API-Key"
    keys:
{keys}
tiers:
  T: {{ algorithm: {args.algorithm}, limit: {account.LIMIT}, per: {args.window_s}s, burst: {account.BURST} }}
upstreams:
  echo: {{ backends: ["{backend}"] }}
routes:
  - {{ path_prefix: "/", upstream: echo, auth: required }}
observability: {{ access_log: false }}
"""


class Fleet:
    """redis-server, one echo backend and the gateways, stopped together."""

    def __init__(self, args, tenants, tmp):
        self.procs = []
        self.redis_port = free_port()
        self.redis = self.start(["redis-server", "--port", str(self.redis_port), "--bind",
                                 "127.0.0.1", "--save", "", "--appendonly", "no"], tmp, "redis")
        wait_port(self.redis_port)
        backend = free_port()
        self.start([args.echo, "--listen", f"127.0.0.1:{backend}", "--name", "echo",
                    "--threads", "2"], tmp, "echo")
        wait_port(backend)
        self.ports = []
        for i in range(args.gateways):
            port, admin = free_port(), free_port()
            config = tmp / f"gateway-{i}.yaml"
            config.write_text(gateway_yaml(port, admin, self.redis_port, f"127.0.0.1:{backend}",
                                           tenants, args))
            self.start([args.tollgate, "run", "-c", str(config)], tmp, f"gateway-{i}")
            wait_port(port)
            wait_port(admin)
            self.ports.append(port)

    def start(self, argv, tmp, name):
        log = open(tmp / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def freeze(self):
        os.kill(self.redis.pid, signal.SIGSTOP)

    def thaw(self):
        os.kill(self.redis.pid, signal.SIGCONT)

    def stop(self):
        self.thaw()
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def drive(port, tenant, per_s, start, end_s, out):
    """Paced GETs of `tenant` through the gateway on `port` until `end_s` after `start`;
    appends (seconds since start, admitted, degraded) for each answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    gap = 1.0 / per_s
    nxt = start
    while nxt < start + end_s:
        time.sleep(max(0.0, nxt - time.monotonic()))
        nxt += gap
        conn.request("GET", "/", headers={"X-API-Key": key_of(tenant)})
        r = conn.getresponse()
        r.read()
        if r.status not in (200, 429):
            raise SystemExit(f"unexpected {r.status} for {tenant} on {port}")
        out.append((time.monotonic() - start, r.status == 200,
                    r.getheader("Tollgate-Degraded") is not None))
        nxt = max(nxt, time.monotonic())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tollgate", default=str(ROOT / "target/debug/tollgate"))
    ap.add_argument("--echo", default=str(ROOT / "target/debug/tollgate-echo"))
    ap.add_argument("--window-s", type=int, default=2, help="the tier's `per` (s)")
    ap.add_argument("--outages", type=int, default=3)
    ap.add_argument("--windows-between", type=float, default=3.0)
    ap.add_argument("--tenants", type=int, default=4)
    ap.add_argument("--gateways", type=int, default=2)
    ap.add_argument("--load-factor", type=float, default=2.5,
                    help="each tenant's offered load, in multiples of its limit")
    ap.add_argument("--algorithm", default="token_bucket", help="the tier's algorithm")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    tenants = [f"t{i}" for i in range(args.tenants)]
    plan = account.plan(args.window_s, args.outages, args.windows_between)
    with tempfile.TemporaryDirectory(prefix="tollgate-recovery-") as tmp:
        fleet = Fleet(args, tenants, pathlib.Path(tmp))
        try:
            answers = {t: [] for t in tenants}
            per_s = args.load_factor * account.LIMIT / args.window_s / args.gateways
            start = time.monotonic() + 0.5
            threads = [
                threading.Thread(target=drive, args=(port, t, per_s, start, plan.end_s, answers[t]))
                for t in tenants for port in fleet.ports
            ]
            for th in threads:
                th.start()
            for at, until in plan.outages:
                time.sleep(max(0.0, start + at - time.monotonic()))
                fleet.freeze()
                time.sleep(max(0.0, start + until - time.monotonic()))
                fleet.thaw()
            for th in threads:
                th.join()
            elapsed = time.monotonic() - start
        finally:
            fleet.stop()
    figures = account.figures(plan, args.window_s, {t: sorted(a) for t, a in answers.items()},
                              elapsed, args.gateways)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out or ROOT / "bench" / "results" / f"{stamp}-recovery.json")
    result = {"recovery": {"params": vars(args) | {"plan": plan._asdict()}, "figures": figures}}
    out.write_text(json.dumps(result, indent=1) + "\n")
    for line in account.report(figures):
        print(line)
    print(f"results: {out}")
    return 0 if figures["within_bound"] else 1


if __name__ == "__main__":
    sys.exit(main())
