#!/usr/bin/env python3
"""What open client connections cost the gateway in memory. Standard library only.

    bench/connections.py --tollgate-binary target/release/tollgate [--counts 3000,9000]
                         [--env MIMALLOC_PURGE_DELAY=0] [--label after]

One gateway (2 threads, no Redis, one anonymous catch-all route to a `tollgate-echo` backend,
`header_read_timeout` and `keepalive_timeout` 120 s so no connection is closed by the gateway
during a run). For each count N, in turn, from the same process:

1. `idle`: N connections are opened and send nothing; the gateway's RSS (VmRSS of
   /proc/<pid>/status) is read once they are all accepted (the gateway's open-connection count
   settles) and compared with the RSS before;
2. `kept-alive`: each of the N connections then sends one `GET /` and reads its answer, and
   stays open, idle; RSS again;
3. all N are closed; RSS 2 s and 15 s later (what the allocator gave back).

Then, with `--cpu-requests M`, M requests each on a new connection (`Connection: close`, 4
client threads: connection churn, where returning memory to the OS costs most) and the
gateway's CPU time (utime + stime of /proc/<pid>/stat) per request.

Prints a Markdown table and writes bench/results/connections-<label>-<timestamp>.json.
"""

import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tollgate_bench.results import write_script_run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_http(port, path="/healthz", timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"port {port} did not answer 200")


def settle_fds(pid, want_at_least, timeout=60):
    """Waits until the gateway holds at least `want_at_least` descriptors, then until the
    count stops moving (accepts done)."""
    deadline = time.time() + timeout
    last = -1
    while time.time() < deadline:
        n = open_fds(pid)
        if n >= want_at_least and n == last:
            return n
        last = n
        time.sleep(0.5)
    return open_fds(pid)


def one_get(sock):
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError("closed")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += sock.recv(4096)
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head[:40])


def cpu_ticks(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def churn(port, total, threads=4):
    def worker(n):
        for _ in range(n):
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                while s.recv(65536):
                    pass
    ts = [threading.Thread(target=worker, args=(total // threads,)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return (total // threads) * threads


def run(binary, echo, counts, env_extra, cpu_requests=0):
    gw_port, admin_port, be_port = free_port(), free_port(), free_port()
    tmp = Path(tempfile.mkdtemp(prefix="tollgate-conns-"))
    config = tmp / "gateway.yaml"
    config.write_text(
        f"""listen: ["127.0.0.1:{gw_port}"]
admin: {{ listen: "127.0.0.1:{admin_port}" }}
server: {{ threads: 2, grace_period_s: 1, header_read_timeout: 120s, keepalive_timeout: 120s }}
observability: {{ access_log: false }}
upstreams:
  echo: {{ backends: ["127.0.0.1:{be_port}"] }}
routes:
  - {{ path_prefix: "/", upstream: echo, auth: none }}
"""
    )
    backend = subprocess.Popen([echo, "--listen", f"127.0.0.1:{be_port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = dict(os.environ, RUST_LOG="warn", **env_extra)
    gw = subprocess.Popen([binary, "run", "-c", str(config)], env=env,
                          stdout=subprocess.DEVNULL, stderr=open(tmp / "gateway.log", "w"))
    rows = []
    try:
        wait_http(be_port, "/")
        wait_http(admin_port)
        # Warm-up: a few requests so first-use allocations are not counted per connection.
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", gw_port)) as s:
                one_get(s)
        time.sleep(1)
        for n in counts:
            base_fds = open_fds(gw.pid)
            base = rss_kib(gw.pid)
            socks = []
            for _ in range(n):
                socks.append(socket.create_connection(("127.0.0.1", gw_port)))
            settle_fds(gw.pid, base_fds + n)
            idle = rss_kib(gw.pid)
            for s in socks:
                one_get(s)
            time.sleep(1)
            kept = rss_kib(gw.pid)
            for s in socks:
                s.close()
            time.sleep(2)
            after2 = rss_kib(gw.pid)
            time.sleep(13)
            after15 = rss_kib(gw.pid)
            rows.append({
                "connections": n,
                "rss_before_kib": base,
                "rss_idle_kib": idle,
                "rss_kept_alive_kib": kept,
                "rss_closed_2s_kib": after2,
                "rss_closed_15s_kib": after15,
                "idle_bytes_per_connection": round((idle - base) * 1024 / n),
                "kept_alive_bytes_per_connection": round((kept - base) * 1024 / n),
            })
        if cpu_requests:
            before = cpu_ticks(gw.pid)
            start = time.time()
            done = churn(gw_port, cpu_requests)
            elapsed = time.time() - start
            ticks = cpu_ticks(gw.pid) - before
            hz = os.sysconf("SC_CLK_TCK")
            rows.append({
                "churn_requests": done,
                "gateway_cpu_us_per_request": round(ticks / hz * 1e6 / done, 1),
                "requests_per_second": round(done / elapsed),
                "rss_after_churn_kib": rss_kib(gw.pid),
            })
    finally:
        gw.terminate()
        backend.terminate()
        gw.wait(10)
        backend.wait(10)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tollgate-binary", required=True)
    ap.add_argument("--echo-binary", default=str(ROOT / "target/release/tollgate-echo"))
    ap.add_argument("--counts", default="3000,9000")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the gateway")
    ap.add_argument("--label", default="run")
    ap.add_argument("--cpu-requests", type=int, default=0)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    counts = [int(c) for c in args.counts.split(",")]
    env_extra = dict(e.split("=", 1) for e in args.env)
    counts = [c for c in counts if c > 0]
    rows = run(args.tollgate_binary, args.echo_binary, counts, env_extra, args.cpu_requests)
    out, load = write_script_run("connections", args.label, args.tollgate_binary, rows,
                                 env=env_extra)
    print(f"{args.label} ({args.tollgate_binary}, env {env_extra}), load {load[0]:.2f}; {out.name}")
    print("| N | RSS before | idle | per idle conn | kept-alive | per kept-alive conn | closed +2 s | closed +15 s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "churn_requests" in r:
            print(f"\nchurn: {r['churn_requests']} requests, {r['gateway_cpu_us_per_request']} µs "
                  f"gateway CPU per request, {r['requests_per_second']} req/s, "
                  f"RSS after {r['rss_after_churn_kib'] / 1024:.0f} MiB")
            continue
        mib = lambda k: f"{r[k] / 1024:.0f} MiB"
        print(f"| {r['connections']} | {mib('rss_before_kib')} | {mib('rss_idle_kib')} | "
              f"{r['idle_bytes_per_connection'] / 1024:.1f} KiB | {mib('rss_kept_alive_kib')} | "
              f"{r['kept_alive_bytes_per_connection'] / 1024:.1f} KiB | "
              f"{mib('rss_closed_2s_kib')} | {mib('rss_closed_15s_kib')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
