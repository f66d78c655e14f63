#!/usr/bin/env python3
"""What hot reloads leave behind in the gateway. Standard library only.

    bench/reload_hygiene.py --tollgate-binary target/release/tollgate [--reloads 500]
                            [--sample-every 50] [--label after]

Two `redis-server`s (A and B, free ports, no persistence), one `tollgate-echo` backend and one
gateway (2 threads) with a tier that takes fleet-wide leases (`max_in_flight`) and token leases
(`lease:`), `reload: { watch: true }`. The reloads come in turns of four kinds: SIGHUP moving
`redis:` to the other server, a file change alone (the watch) with `redis:` unchanged, SIGHUP
without a change, a file change moving `redis:`; each is waited for through
`tollgate_config_reloads_total{result="ok"}` and followed by one admitted request (so the new
store connects). Every `--sample-every` reloads, and once more when the reloads are done (back
on A, after 2 s): the gateway's RSS (VmRSS), open descriptors (/proc/<pid>/fd), threads
(/proc/<pid>/task; the gateway exposes no task count), and the connections on A and on B
(`CLIENT LIST`, the asking one left out).

Prints a Markdown table and writes bench/results/reload-hygiene-<label>-<timestamp>.json.
Exit status 1 when, at the end, a server's connections are not back at the baseline or the
descriptors are more than 8 over it.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tollgate_bench.clients import http_get, msum, redis_cmd, scrape  # noqa: E402
from tollgate_bench.results import write_script_run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KEY = "key-k1-0123456789"
KEY_SHA256 = None  # filled in main()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_figures(pid):
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return {
        "rss_kib": rss,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "threads": len(os.listdir(f"/proc/{pid}/task")),
    }


def redis_clients(port):
    """Connections to the Redis on `port` other than the one asking."""
    text = redis_cmd(port, "CLIENT", "LIST")
    lines = [l for l in text.split("\n") if "addr=" in l]
    return sum(1 for l in lines if "cmd=client|list" not in l)


def reloads_ok(admin_port):
    """`tollgate_config_reloads_total{result="ok"}` on the admin listener `admin_port`."""
    return msum(scrape(admin_port), "tollgate_config_reloads_total", result="ok")


def wait_until(check, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def config(gw_port, admin_port, be_port, redis_port, variant):
    return f"""listen: ["127.0.0.1:{gw_port}"]
admin: {{ listen: "127.0.0.1:{admin_port}" }}
server: {{ threads: 2, grace_period_s: 1 }}
observability: {{ access_log: false }}
redis: {{ url: "redis://127.0.0.1:{redis_port}", timeout: 2s, on_failure: closed, lease_ttl: 30s }}
reload: {{ watch: true, debounce: 50ms }}
identity:
  api_keys:
    header: X-API-Key
    keys:
      - {{ sha256: "{KEY_SHA256}", tenant: k1, tier: T }}
tiers:
  T: {{ limit: 1, per: 1d, burst: 1000000, max_in_flight: 50, lease: {{ tokens: 10, max_hold: 1s }} }}
upstreams:
  echo: {{ backends: ["127.0.0.1:{be_port}"] }}
routes:
  - {{ path_prefix: "/", upstream: echo, auth: required }}
# variant {variant}
"""


def run(binary, echo, redis_server, reloads, sample_every):
    ports = {n: free_port() for n in ("gw", "admin", "be", "a", "b")}
    tmp = Path(tempfile.mkdtemp(prefix="tollgate-reloads-"))
    procs = []
    rows = []
    try:
        for name in ("a", "b"):
            procs.append(subprocess.Popen(
                [redis_server, "--port", str(ports[name]), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(tmp)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([echo, "--listen", f"127.0.0.1:{ports['be']}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for name in ("a", "b"):
            wait_until(lambda p=ports[name]: redis_cmd(p, "PING") == "PONG", 10,
                       f"redis {name}")
        cfg = tmp / "gateway.yaml"

        def write(text):
            (tmp / "next.yaml").write_text(text)
            os.replace(tmp / "next.yaml", cfg)

        write(config(ports["gw"], ports["admin"], ports["be"], ports["a"], 0))
        env = dict(os.environ, RUST_LOG="warn")
        gw = subprocess.Popen([binary, "run", "-c", str(cfg)], env=env,
                              stdout=subprocess.DEVNULL, stderr=open(tmp / "gateway.log", "w"))
        procs.append(gw)
        wait_until(lambda: http_get(ports["admin"], "/healthz")[0] == 200, 30, "the gateway")

        def admitted():
            status, _, body, _ = http_get(ports["gw"], "/x", {"X-API-Key": KEY}, timeout=10)
            if status != 200:
                raise RuntimeError(f"request answered {status}: {body[:200]!r}")

        def sample(n):
            row = {"reloads": n, **proc_figures(gw.pid),
                   "clients_a": redis_clients(ports["a"]), "clients_b": redis_clients(ports["b"])}
            rows.append(row)
            return row

        admitted()
        time.sleep(1)
        sample(0)
        on_a = True
        for i in range(1, reloads + 1):
            hup, moves = {1: (True, True), 2: (False, False), 3: (True, False), 0: (False, True)}[i % 4]
            on_a ^= moves
            before = reloads_ok(ports["admin"])
            write(config(ports["gw"], ports["admin"], ports["be"], ports["a" if on_a else "b"], i))
            if hup:
                gw.send_signal(signal.SIGHUP)
            wait_until(lambda: reloads_ok(ports["admin"]) > before, 10, f"reload {i}")
            admitted()
            if i % sample_every == 0 and i != reloads:
                sample(i)
        time.sleep(2)
        sample(reloads)
    except Exception:
        log = tmp / "gateway.log"
        if log.exists():
            print("gateway log tail:\n" + "\n".join(log.read_text().splitlines()[-20:]), file=sys.stderr)
        raise
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main():
    global KEY_SHA256
    import hashlib
    KEY_SHA256 = hashlib.sha256(KEY.encode()).hexdigest()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tollgate-binary", required=True)
    ap.add_argument("--echo-binary", default=str(ROOT / "target/release/tollgate-echo"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--reloads", type=int, default=500)
    ap.add_argument("--sample-every", type=int, default=50)
    ap.add_argument("--label", default="run")
    args = ap.parse_args()
    rows = run(args.tollgate_binary, args.echo_binary, args.redis_server, args.reloads,
               args.sample_every)
    out, load = write_script_run("reload-hygiene", args.label, args.tollgate_binary, rows)
    print(f"{args.label} ({args.tollgate_binary}), load {load[0]:.2f}; {out.name}")
    print("| reloads | RSS | descriptors | threads | connections to A | connections to B |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['reloads']} | {r['rss_kib'] / 1024:.1f} MiB | {r['fds']} | {r['threads']} | "
              f"{r['clients_a']} | {r['clients_b']} |")
    first, last = rows[0], rows[-1]
    leaked = (last["clients_a"] != first["clients_a"] or last["clients_b"] != first["clients_b"]
              or last["fds"] > first["fds"] + 8)
    print("FAIL: not back at the baseline" if leaked else "PASS: connections and descriptors back at the baseline")
    return 1 if leaked else 0


if __name__ == "__main__":
    sys.exit(main())
