#!/usr/bin/env python3
"""Measures the six rate-limit algorithms as tollgate runs them in Redis (standard library only).

    bench/algorithms.py [--trace-seconds 600] [--json out.json]

Starts a private redis-server on a free loopback port, loads the production policy script composed
exactly as src/quota/policy_script.rs does (lua/policy.lua with every algorithm's script inserted),
calls it with one entry of each algorithm in turn, and reports per algorithm, for one tier (limit
100 per 10 s, burst 100; W = 10 s):

- Redis commands per decision (INFO commandstats, all commands the script ran, EVALSHA excluded),
- bytes per decision on the wire (the RESP request and reply of one EVALSHA),
- Redis memory of one tenant's key (MEMORY USAGE, with 50 tokens used in the window),
- script CPU per decision (usec_per_call of EVALSHA in INFO commandstats),
- accuracy on one synthetic trace: admitted vs the exact sliding-window count, and the largest
  number admitted in any window of length W (the exact limit is burst = 100),
- boundary burst: most admitted within 1 s when a client spends twice its burst 1 s before and
  again at a window boundary,
- and the cost of one calendar quota on top (token_bucket + a day quota).

The trace and the boundary test run through the real scripts with the test-only clock argument
(the last ARGV, which the gateway never sends), so they take seconds, not the trace's length.
Nothing here needs a tollgate build: the decisions are the scripts'.
"""

import argparse
import json
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LUA = REPO / "lua"
ALGORITHMS = [
    ("token_bucket", "tb"),
    ("gcra", "gcra"),
    ("fixed_window", "fw"),
    ("sliding_window_log", "swl"),
    ("sliding_window_counter", "swc"),
    ("leaky_bucket", "lb"),
]
LIMIT, PER_MS, BURST = 100, 10_000, 100
W = (BURST * PER_MS + LIMIT - 1) // LIMIT


def expand(alg):
    """lua/<alg>.lua with its shared parts in place, as src/quota/policy_script.rs `expand` does
    (the token bucket behind its refill, as src/store/redis/scripts.rs embeds it)."""
    body = (LUA / f"{alg}.lua").read_text()
    for placeholder, part in [("PRELUDE", "prelude"), ("OWED", "owed"), ("TAT", "tat")]:
        body = body.replace(f"--@@{placeholder}@@\n", (LUA / "lib" / f"{part}.lua").read_text(), 1)
    if alg == "token_bucket":
        body = (LUA / "lib" / "refill.lua").read_text() + body
    return body


def compose(alg):
    """The policy script as src/quota/policy_script.rs `compose` builds it: every algorithm's
    script in the ALGORITHMS table (the same text whatever `alg` is measured)."""
    table = "local ALGORITHMS = {\n" + "".join(
        f"function(KEYS, ARGV, redis)\n{expand(a)}\nend,\n" for a, _ in ALGORITHMS) + "}"
    policy = (LUA / "lib" / "refill.lua").read_text() + (LUA / "policy.lua").read_text()
    policy = policy.replace("--@@OWED@@\n", (LUA / "lib" / "owed.lua").read_text(), 1)
    return policy.replace("--@@ALGORITHMS@@", table, 1)


class Resp:
    """A minimal RESP2 client that also counts the bytes it sends and receives."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""
        self.sent = self.received = 0

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
            self.received += len(chunk)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            self.buf += chunk
            self.received += len(chunk)
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def call(self, *args):
        req = self.encode(*args)
        self.sock.sendall(req)
        self.sent += len(req)
        return self._reply()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(tmp):
    exe = shutil.which("redis-server")
    if not exe:
        sys.exit("redis-server not found (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", tmp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            r = Resp(port)
            r.call("PING")
            return proc, r
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start")


def args_for(alg, tenant, cost=1, now=None, max_delay=0, day_quota=None):
    main = [LIMIT, PER_MS, BURST, cost] + ([max_delay] if alg == "leaky_bucket" else [])
    suffix = dict(ALGORITHMS)[alg]
    keys = [f"bench:{{{tenant}}}:{suffix}"]
    quotas = []
    if day_quota:
        keys.append(f"bench:{{{tenant}}}:q:day")
        quotas = ["day", day_quota]
    # One entry (algorithm code, not shadow, its arguments), the quotas, one request.
    code = [a for a, _ in ALGORITHMS].index(alg) + 1
    argv = [1, code, 0, len(main), *main, cost, len(quotas) // 2, *quotas, 1]
    argv += [now] if now is not None else []
    return keys, argv


def decide(r, sha, alg, tenant, now=None, cost=1, day_quota=None):
    keys, argv = args_for(alg, tenant, cost, now, day_quota=day_quota)
    reply = r.call("EVALSHA", sha, len(keys), *keys, *argv)
    return reply[0] == 1


def commandstats(r):
    stats = {}
    for line in r.call("INFO", "commandstats").splitlines():
        m = re.match(r"cmdstat_(\w+):calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)", line)
        if m:
            stats[m.group(1)] = (int(m.group(2)), int(m.group(3)), float(m.group(4)))
    return stats


def measure_costs(r, sha, alg, n=2000, day_quota=None):
    """Commands, bytes and CPU per decision on the real clock: 10 tenants, 200 requests each
    at once, so half of the decisions admit (burst 100)."""
    r.call("CONFIG", "RESETSTAT")
    sent0, recv0 = r.sent, r.received
    for i in range(n):
        decide(r, sha, alg, f"c{i % 10}", day_quota=day_quota)
    sent, recv = r.sent - sent0, r.received - recv0
    stats = commandstats(r)
    inner = sum(c for name, (c, _, _) in stats.items() if name not in ("evalsha", "config"))
    cpu = stats["evalsha"][2]
    return inner / n, (sent + recv) / n, cpu


def key_memory(r, sha, alg):
    for _ in range(50):
        decide(r, sha, alg, "mem")
    suffix = dict(ALGORITHMS)[alg]
    return r.call("MEMORY", "USAGE", f"bench:{{mem}}:{suffix}", "SAMPLES", "0")


def synthetic_trace(seconds, seed=13):
    """Request times (ms): a client at ~1.3x the rate, with bursts of 30 every ~25 s."""
    rng = random.Random(seed)
    t, out = 1_796_083_200_000, []
    end = t + seconds * 1000
    mean_gap = PER_MS / LIMIT / 1.3
    next_burst = t + 12_500
    while t < end:
        t += max(1, int(rng.expovariate(1 / mean_gap)))
        out.append(t)
        if t >= next_burst:
            out.extend([t] * 30)
            next_burst += rng.randint(15_000, 35_000)
    return out


def exact_admitted(trace):
    """The exact sliding window: admit when fewer than BURST were admitted in the last W ms."""
    log, admitted = deque(), 0
    for t in trace:
        while log and log[0] + W <= t:
            log.popleft()
        if len(log) < BURST:
            log.append(t)
            admitted += 1
    return admitted


def worst_window(times):
    """Largest number of admitted requests in any window [t, t + W)."""
    worst, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] + W <= t:
            lo += 1
        worst = max(worst, hi - lo + 1)
    return worst


def accuracy(r, sha, alg, trace):
    admitted = [t for t in trace if decide(r, sha, alg, "trace", now=t)]
    return len(admitted), worst_window(admitted)


def boundary_burst(r, sha, alg):
    """A client that spends 1 s before a window boundary and again at the boundary. (Not closer:
    key TTLs run on the real clock, and a TTL of 1 ms would expire between test-clock calls.)"""
    t0 = 1_796_083_200_000 + 7 * W  # a window boundary (multiple of W)
    n = 0
    for t in (t0 - 1000, t0):
        for _ in range(BURST * 2):
            n += decide(r, sha, alg, "boundary", now=t)
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace-seconds", type=int, default=600)
    ap.add_argument("--json")
    opts = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tollgate-algos-")
    proc, r = start_redis(tmp)
    try:
        version = r.call("INFO", "server")
        version = re.search(r"redis_version:(\S+)", version).group(1)
        trace = synthetic_trace(opts.trace_seconds)
        exact = exact_admitted(trace)
        rows = []
        for alg, _ in ALGORITHMS:
            sha = r.call("SCRIPT", "LOAD", compose(alg))
            cmds, nbytes, cpu = measure_costs(r, sha, alg)
            mem = key_memory(r, sha, alg)
            admitted, worst = accuracy(r, sha, alg, trace)
            boundary = boundary_burst(r, sha, alg)
            rows.append(dict(algorithm=alg, commands=round(cmds, 2), bytes=round(nbytes),
                             memory=mem, usec_per_call=cpu, admitted=admitted,
                             vs_exact_pct=round(100 * (admitted - exact) / exact, 2),
                             worst_window=worst, boundary_burst=boundary))
            r.call("FLUSHALL")
        sha = r.call("SCRIPT", "LOAD", compose("token_bucket"))
        cmds, nbytes, cpu = measure_costs(r, sha, "token_bucket", day_quota=10**9)
        quota_row = dict(commands=round(cmds, 2), bytes=round(nbytes), usec_per_call=cpu)
    finally:
        proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"redis {version}; tier limit {LIMIT} per {PER_MS} ms, burst {BURST} (W = {W} ms); "
          f"trace {len(trace)} requests over {opts.trace_seconds} s, exact sliding window "
          f"admits {exact}")
    print("| algorithm | Redis commands / decision | bytes / decision | memory / tenant key (B) "
          "| script CPU / decision (µs) | admitted vs exact | worst window (limit 100) "
          "| boundary burst |")
    print("|---|---|---|---|---|---|---|---|")
    for x in rows:
        print(f"| `{x['algorithm']}` | {x['commands']} | {x['bytes']} | {x['memory']} "
              f"| {x['usec_per_call']:.2f} | {x['admitted']} ({x['vs_exact_pct']:+.2f} %) "
              f"| {x['worst_window']} | {x['boundary_burst']} |")
    print(f"| `token_bucket` + 1 day quota | {quota_row['commands']} | {quota_row['bytes']} "
          f"| + one counter key per window | {quota_row['usec_per_call']:.2f} | | | |")
    if opts.json:
        Path(opts.json).write_text(json.dumps(
            dict(redis=version, exact=exact, rows=rows, token_bucket_plus_day_quota=quota_row),
            indent=2))


if __name__ == "__main__":
    main()
