#!/usr/bin/env python3
"""Noisy-neighbour benchmark of upstream fairness. Standard library only.

    bench/fairness.py [--duration 10] [--debug] [--no-build]

One upstream with 4 slots (max_concurrency: 4) in front of tollgate-echo answering after 40 ms,
a queue of 32 places (timeout 5 s), tenants identified by API key:

    noisy   tier bulk  weight 1   40 concurrent client loops (10x the upstream's slots)
    quiet1  tier std   weight 1    4 loops
    quiet2  tier std   weight 1    4 loops
    quiet4  tier gold  weight 4   12 loops

Every loop sends a request as soon as the previous one is answered, and waits 25 ms after a
503. Only answers received before the deadline count (afterwards the queue drains without
contention). The scenario runs twice, with `queue.fair: false` (arrival order) and `queue.fair: true`.
Per tenant: requests, 200s, share of all 200s next to the weighted fair share (w / sum w, all
tenants being backlogged), 503 rate by reason, and queue wait (client latency minus the 40 ms
service time) p50/p99; Jain's fairness index over 200s per unit of weight.

Builds `cargo build --release --bins` (honouring CARGO_TARGET_DIR) unless --no-build; --debug
takes the binaries from target/debug instead. Writes bench/results/fairness-<timestamp>.json and
prints a Markdown table.
"""

import argparse
import datetime
import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"

SLOTS = 4
SERVICE_MS = 40
QUEUE_MAX = 32
QUEUE_TIMEOUT_MS = 5000
BACKOFF_S = 0.025
# (tenant, tier, weight, client loops)
TENANTS = [
    ("noisy", "bulk", 1, 40),
    ("quiet1", "std", 1, 4),
    ("quiet2", "std", 1, 4),
    ("quiet4", "gold", 4, 12),
]
TIER_WEIGHTS = {"bulk": 1, "std": 1, "gold": 4}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


def binaries(debug, build):
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    profile = "debug" if debug else "release"
    if build:
        cmd = ["cargo", "build", "--bins"] + ([] if debug else ["--release"])
        subprocess.run(cmd, cwd=REPO, check=True)
    return target / profile / "tollgate", target / profile / "tollgate-echo", profile


def config(redis_port, backend_port, listen, admin, fair):
    keys = "".join(
        f'    - {{ sha256: "{hashlib.sha256(("key-" + t).encode()).hexdigest()}", '
        f"tenant: {t}, tier: {tier} }}\n"
        for t, tier, _, _ in TENANTS
    )
    tiers = "".join(
        f"  {tier}: {{ limit: 1000000, per: 1s, weight: {w} }}\n"
        for tier, w in TIER_WEIGHTS.items()
    )
    return (
        f'listen: ["127.0.0.1:{listen}"]\n'
        f'admin: {{ listen: "127.0.0.1:{admin}" }}\n'
        "server: { threads: 2, grace_period_s: 1 }\n"
        "observability: { access_log: false }\n"
        f'redis: {{ url: "redis://127.0.0.1:{redis_port}/0" }}\n'
        f"identity:\n  api_keys:\n    keys:\n{keys}"
        f"tiers:\n{tiers}"
        f'upstreams:\n  echo: {{ backends: ["127.0.0.1:{backend_port}"], '
        f"max_concurrency: {SLOTS}, queue: {{ max: {QUEUE_MAX}, "
        f"timeout_ms: {QUEUE_TIMEOUT_MS}, fair: {str(fair).lower()} }} }}\n"
        'routes:\n  - { path_prefix: "/", upstream: echo, auth: required }\n'
    )


def client_loop(port, tenant, deadline, out, lock):
    conn = None
    while time.time() < deadline:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        started = time.monotonic()
        try:
            conn.request(
                "GET", f"/work?delay_ms={SERVICE_MS}", headers={"X-API-Key": "key-" + tenant}
            )
            resp = conn.getresponse()
            body = resp.read()
            status = resp.status
            if resp.getheader("connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            conn = None
            status, body = 0, b""
        took_ms = (time.monotonic() - started) * 1000
        if time.time() > deadline:
            # After the deadline the queue drains without contention: not measured.
            break
        with lock:
            rec = out[tenant]
            if status == 200:
                rec["ok"] += 1
                rec["waits_ms"].append(max(0.0, took_ms - SERVICE_MS))
            else:
                try:
                    reason = json.loads(body).get("reason") or f"status {status}"
                except ValueError:
                    reason = f"status {status}"
                rec["rejected"][reason] = rec["rejected"].get(reason, 0) + 1
        if status != 200:
            time.sleep(BACKOFF_S)


def pct(values, q):
    if not values:
        return 0.0
    v = sorted(values)
    return v[max(0, min(len(v) - 1, int(len(v) * q + 0.999999) - 1))]


def jain(ok_by_tenant):
    xs = [ok_by_tenant[t] / w for t, _, w, _ in TENANTS]
    sq = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * sq) if sq else 0.0


def run_scenario(gw_bin, echo_bin, fair, duration, workdir):
    procs = []
    try:
        redis_port, backend_port = free_port(), free_port()
        listen, admin = free_port(), free_port()
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [str(echo_bin), "--listen", f"127.0.0.1:{backend_port}", "--name", "slow",
             "--threads", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_port(redis_port)
        wait_port(backend_port)
        cfg = Path(workdir) / f"gateway-{'fair' if fair else 'fifo'}.yaml"
        cfg.write_text(config(redis_port, backend_port, listen, admin, fair))
        log = open(Path(workdir) / f"gateway-{'fair' if fair else 'fifo'}.log", "w")
        procs.append(subprocess.Popen([str(gw_bin), "run", "-c", str(cfg)],
                                      stdout=log, stderr=subprocess.STDOUT, cwd=workdir))
        wait_port(listen)
        wait_port(admin)
        out = {t: {"ok": 0, "rejected": {}, "waits_ms": []} for t, _, _, _ in TENANTS}
        lock = threading.Lock()
        deadline = time.time() + duration
        threads = [
            threading.Thread(target=client_loop, args=(listen, t, deadline, out, lock))
            for t, _, _, loops in TENANTS for _ in range(loops)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return summarize(out, fair, duration)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def summarize(out, fair, duration):
    total_ok = sum(r["ok"] for r in out.values())
    weight_sum = sum(w for _, _, w, _ in TENANTS)
    tenants = {}
    for t, tier, w, loops in TENANTS:
        r = out[t]
        rejected = sum(r["rejected"].values())
        sent = r["ok"] + rejected
        tenants[t] = {
            "tier": tier,
            "weight": w,
            "client_loops": loops,
            "sent": sent,
            "ok": r["ok"],
            "share": r["ok"] / total_ok if total_ok else 0.0,
            "fair_share": w / weight_sum,
            "rejected": r["rejected"],
            "rate_503": rejected / sent if sent else 0.0,
            "wait_p50_ms": pct(r["waits_ms"], 0.50),
            "wait_p99_ms": pct(r["waits_ms"], 0.99),
        }
    return {
        "fair": fair,
        "duration_s": duration,
        "grants": total_ok,
        "grants_per_s": total_ok / duration,
        "jain_index": jain({t: out[t]["ok"] for t, _, _, _ in TENANTS}),
        "tenants": tenants,
    }


def table(results):
    lines = [
        "| queue | tenant (weight) | sent | 200 | share of 200s | fair share | 503 rate "
        "| wait p50 / p99 ms | Jain |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        mode = "fair" if r["fair"] else "fifo"
        for t, v in r["tenants"].items():
            lines.append(
                f"| {mode} | {t} ({v['weight']}) | {v['sent']} | {v['ok']} | {v['share']:.3f} "
                f"| {v['fair_share']:.3f} | {v['rate_503']:.1%} "
                f"| {v['wait_p50_ms']:.0f} / {v['wait_p99_ms']:.0f} | {r['jain_index']:.3f} |"
            )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per scenario")
    ap.add_argument("--debug", action="store_true", help="use target/debug binaries")
    ap.add_argument("--no-build", action="store_true", help="do not run cargo build")
    args = ap.parse_args()
    if shutil.which("redis-server") is None:
        sys.exit("redis-server not found")
    gw_bin, echo_bin, profile = binaries(args.debug, not args.no_build)
    with tempfile.TemporaryDirectory(prefix="tollgate-fairness-") as workdir:
        results = [run_scenario(gw_bin, echo_bin, fair, args.duration, workdir)
                   for fair in (False, True)]
    doc = {
        "benchmark": "fairness",
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "profile": profile,
        "cpus": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
        "setup": {
            "slots": SLOTS, "service_ms": SERVICE_MS, "queue_max": QUEUE_MAX,
            "queue_timeout_ms": QUEUE_TIMEOUT_MS, "backoff_ms": BACKOFF_S * 1000,
            "tenants": [
                {"tenant": t, "tier": tier, "weight": w, "client_loops": loops}
                for t, tier, w, loops in TENANTS
            ],
        },
        "results": results,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"fairness-{stamp}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(table(results))
    print(f"\nprofile {profile}, load average {doc['loadavg_1m']:.1f}; wrote {path}")


if __name__ == "__main__":
    main()
