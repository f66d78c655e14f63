"""One soak run: start the fleet, run the load and the fault schedule, settle, take the account,
write it (JSON and a summary), and say whether every line passed."""

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

from tollgate_bench.common import REPO, BenchError, log
from tollgate_bench.processes import Env

from . import account, fleet, gwconfig, plan, resp, traffic

SAMPLE_EVERY_S = 5.0
SETTLE_S = 30.0
# Once every request has ended, its fleet-wide lease is given back within a Redis round trip;
# looking within this grace (well under the soak's lease_ttl) tells a lease given back
# from one that was leaked and would only expire.
LEASE_GRACE_S = 2.0
BACKEND_EXCUSE_S = 3.0


def parse_args(argv=None):
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    p = argparse.ArgumentParser(
        prog="bench/soak.py",
        description="Chaos soak of a three-gateway fleet on Redis Sentinel, with a loss account "
        "(bench/README.md, 'Chaos soak').")
    p.add_argument("--minutes", type=float, default=60.0, help="run length (default 60)")
    p.add_argument("--rate", type=float, default=120.0, help="requests per second offered")
    p.add_argument("--tollgate-binary", default=str(target / "release" / "tollgate"))
    p.add_argument("--echo-binary", default=str(target / "release" / "tollgate-echo"))
    p.add_argument("--out", help="account JSON path (default bench/results/soak-<time>.json)")
    p.add_argument("--keep-tmp", action="store_true", help="keep configs and process logs")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


class Run:
    def __init__(self, args, env):
        self.args = args
        self.env = env
        self.t0 = time.monotonic()
        self.fleet = fleet.Fleet(env, args.tollgate_binary, args.echo_binary)
        self.faults = []  # {"at", "kind", "arg", "start", "end", ...} in run seconds
        self.load = None
        self.before_failover = None  # tenant tallies when the first failover started

    def now(self):
        return time.monotonic() - self.t0

    async def faults_task(self, duration):
        for at, kind, arg in plan.schedule(duration):
            await asyncio.sleep(max(0.0, at - self.now()))
            rec = {"at": at, "kind": kind, "arg": arg, "start": round(self.now(), 2)}
            if kind == "failover" and self.before_failover is None:
                self.before_failover = {t: c.copy() for t, c in self.load.stats.tenants.items()}
            try:
                if kind == "failover":
                    old, new = await asyncio.to_thread(self.fleet.failover)
                    rec["detail"] = f"master {old} -> {new}"
                elif kind == "freeze":
                    port = await asyncio.to_thread(self.fleet.freeze, plan.FREEZE_S)
                    rec["detail"] = f"SIGSTOP {plan.FREEZE_S:g} s of master {port}"
                elif kind == "backend":
                    await asyncio.to_thread(self.fleet.restart_backend, arg, plan.BACKEND_DOWN_S)
                    rec["detail"] = f"SIGKILL of echo-{arg}, restarted"
                elif kind == "gateway":
                    gw = self.fleet.gateways[arg]
                    await asyncio.to_thread(
                        self.fleet.kill_gateway, gw, plan.GATEWAY_DOWN_S, self.now)
                    rec["detail"] = f"SIGKILL of gateway {arg}, restarted"
            except BenchError as e:
                rec["error"] = str(e)
            rec["end"] = round(self.now(), 2)
            log(f"fault {kind}: {rec.get('detail', rec.get('error'))} "
                f"({rec['start']:.1f}-{rec['end']:.1f} s)")
            self.faults.append(rec)

    async def reload_task(self, until):
        while self.now() + plan.RELOAD_EVERY_S < until:
            await asyncio.sleep(plan.RELOAD_EVERY_S)
            await asyncio.to_thread(self.fleet.reload)
            self.load.generation = self.fleet.generation

    async def sample_task(self, stop):
        while not stop.is_set():
            for gw in self.fleet.gateways:
                life = gw.current
                if gw.up and life and life.proc.alive():
                    life.samples.append((round(self.now(), 1), fleet.rss_mb(life.proc.pid),
                                         fleet.fds(life.proc.pid)))
            await asyncio.to_thread(lambda: [self.fleet.scrape_counters(g)
                                             for g in self.fleet.gateways if g.up])
            try:
                await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)
            except asyncio.TimeoutError:
                pass

    async def main(self):
        duration = self.args.minutes * 60.0
        await asyncio.to_thread(self.fleet.start, self.now)
        log(f"fleet up: gateways on {[g.port for g in self.fleet.gateways]}, sentinels on "
            f"{[p for _, p in self.fleet.sentinels]}; {duration:.0f} s of load at "
            f"{self.args.rate:g}/s; faults at {[(a, k) for a, k, _ in plan.schedule(duration)]}")
        self.t0 = time.monotonic()
        for gw in self.fleet.gateways:
            gw.current.started_at = 0.0
        self.load = traffic.Load(self.fleet.gateways, self.args.rate, self.now, self.args.seed)
        stop = asyncio.Event()
        sampler = asyncio.create_task(self.sample_task(stop))
        reloads = asyncio.create_task(self.reload_task(duration))
        faults = asyncio.create_task(self.faults_task(duration))
        await self.load.run(duration)
        await faults
        await reloads
        stop.set()
        await sampler
        log(f"load done at {self.now():.1f} s; settling")
        return await asyncio.to_thread(self.settle)

    def settle(self):
        """After the load: slots, queues, leases and WebSocket sessions back to 0, keys with
        TTLs, last counters."""
        out = {"gauges": {}, "leases_live": None, "keys": {}}
        deadline = time.monotonic() + SETTLE_S
        while True:
            gauges = {gw.index: upstream_gauges(self.fleet.scrape_counters(gw))
                      for gw in self.fleet.gateways}
            ws = self.fleet.ws_backend_stats()
            zero = all(v == 0 for g in gauges.values() for u in g.values() for v in u.values())
            if (zero and ws is not None and ws["open"] == 0) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        out["gauges"] = gauges
        out["ws_backend"] = ws
        master = self.fleet.master_port()
        keys = scan(master, "tollgate:*")
        lease_keys = [k for k in keys if k.endswith(":inflight")]
        deadline = time.monotonic() + LEASE_GRACE_S
        while True:
            sec, usec = resp.command(master, "TIME")
            now_ms = int(sec) * 1000 + int(usec) // 1000
            counts = resp.pipeline(master, [["ZCOUNT", k, now_ms, "+inf"] for k in lease_keys])
            live = sum(c for c in counts if isinstance(c, int))
            if live == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        out["leases_live"] = live
        out["lease_keys"] = len(lease_keys)
        ttls = resp.pipeline(master, [["PTTL", k] for k in keys]) if keys else []
        out["keys"] = {
            "total": len(keys),
            "no_ttl": [k for k, t in zip(keys, ttls) if t == -1][:20],
            "no_ttl_count": sum(1 for t in ttls if t == -1),
        }
        return out


def upstream_gauges(metrics):
    """{upstream: {"in_flight", "queue_depth"}} of one gateway's /metrics, for every upstream
    of the config (`gwconfig.UPSTREAMS`). A gauge the gateway never set (an upstream it sent
    nothing to, or one without a queue) is 0; every value is None when /metrics did not
    answer."""
    out = {}
    for u in gwconfig.UPSTREAMS:
        out[u] = {}
        for name in ("in_flight", "queue_depth"):
            v = metrics.get(f'tollgate_upstream_{name}{{upstream="{u}"}}', 0 if metrics else None)
            out[u][name] = v
    return out


def scan(port, pattern):
    keys, cursor = [], "0"
    while True:
        cursor, batch = resp.command(port, "SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
        keys += batch
        if cursor == "0":
            return keys


def build_account(run, settled, duration, commit):
    """(report dict, lines) of the run (`commit`: the checkout's commit when it started). Each
    line: (name, ok, detail)."""
    st = run.load.stats
    lives = [life for gw in run.fleet.gateways for life in gw.lives]
    episodes = sum(1 + life.breaker_closes for life in lives)
    rows = account.tenant_overs(st.tenants, gwconfig.tenant_limits(), gwconfig.FLEET_SIZE,
                                episodes)
    anon_limits = {a: ("anonymous", gwconfig.ANON_BURST, gwconfig.ANON_LIMIT_PER_MIN, 60.0,
                       "open") for a in st.anon}
    anon_rows = account.tenant_overs(st.anon, anon_limits, gwconfig.FLEET_SIZE, episodes)
    backend_windows = [(f["start"], f["end"] + BACKEND_EXCUSE_S) for f in run.faults
                       if f["kind"] == "backend"]
    fault_windows = [(f["start"], f["end"] + BACKEND_EXCUSE_S) for f in run.faults]
    failovers = [f for f in run.faults if f["kind"] == "failover"]
    lines = []

    def line(name, ok, detail):
        lines.append((name, bool(ok), detail))

    for tiers, name in ((("exact", "churn"), "over-admission, tiers exact + churn (closed)"),
                        (("local",), "over-admission, tier local (Redis + local bound)")):
        sel = [r for r in rows if r["tier"] in tiers]
        bad = [r for r in sel if r["over"] > 0]
        detail = (f"{sum(r['over'] for r in sel)} tokens over, {len(bad)} of {len(sel)} tenants; "
                  f"admitted {sum(r['admitted'] for r in sel)}, allowance "
                  f"{sum(r['allowance'] for r in sel):.0f}")
        if bad:
            worst = sorted(bad, key=lambda r: -r["over"])[:5]
            detail += "; worst: " + ", ".join(
                f"{r['tenant']} {r['admitted']}/{r['allowance']:.1f} (+{r['over']})" for r in worst)
            detail += f"; failovers at {[f['start'] for f in failovers]} s"
        line(name, not bad, detail)
    if run.before_failover is not None:
        early = account.tenant_overs(run.before_failover, gwconfig.tenant_limits(),
                                     gwconfig.FLEET_SIZE, episodes)
        ebad = [r for r in early if r["over"] > 0]
        line(f"over-admission before the first failover ({failovers[0]['start']:.0f} s), "
             "all tiers", not ebad,
             f"{sum(r['over'] for r in early)} tokens over, {len(ebad)} of {len(early)} tenants"
             + (": " + ", ".join(f"{r['tenant']} +{r['over']}" for r in ebad[:5]) if ebad else ""))
    abad = [r for r in anon_rows if r["over"] > 0]
    line("over-admission, anonymous addresses (Redis decisions)", not abad,
         f"{sum(r['over'] for r in anon_rows)} over, {len(abad)} of {len(anon_rows)} addresses; "
         f"'open' admits while Redis failed: {sum(r['open_admitted'] for r in anon_rows)}")

    ev = st.events
    undeclared = [e for e in ev if e[1].isdigit() and not account.in_window(e[0], backend_windows)]
    excused = [e for e in ev if e[1].isdigit() and account.in_window(e[0], backend_windows)]
    line("5xx not declared by a policy", not undeclared,
         f"{len(undeclared)}" + (f"; first: {undeclared[:3]}" if undeclared else "")
         + f" (502/504 within a backend restart window, excused: {len(excused)})")
    line("requests lost or hung", not st.lost,
         f"{len(st.lost)} of {st.sent} sent" + (f"; first: {st.lost[:3]}" if st.lost else ""))
    transport = [e for e in ev if e[1] == "transport error"]
    killed = [e for e in ev if e[1] == "transport error (gateway killed)"]
    line("transport errors not caused by a gateway SIGKILL", not transport,
         f"{len(transport)}" + (f"; first: {transport[:3]}" if transport else "")
         + f" (caused by a SIGKILL, retried on another gateway: {len(killed)})")
    odd = [e for e in ev if not e[1].isdigit()
           and not e[1].startswith(("transport", "ws failed", "grpc "))]
    line("unexpected answers (401 for a configured key, bad key not 401, 4xx)", not odd,
         f"{len(odd)}" + (f"; first: {odd[:3]}" if odd else ""))
    ok, detail = account.ws_verdict(st.ws, settled["ws_backend"])
    wsfail = [e for e in ev if e[1] == "ws failed"]
    line("WebSockets: opened, refused, none failed or left open", ok,
         detail + (f"; first failures: {wsfail[:3]}" if wsfail else ""))
    gunexp = [e for e in ev if e[1].startswith("grpc unexpected")]
    ok, detail = account.grpc_verdict(st.grpc, st.grpc_unavailable_at, len(gunexp),
                                      fault_windows)
    line("gRPC: OK, RESOURCE_EXHAUSTED, UNAVAILABLE only when declared or during a fault", ok,
         detail + (f"; first unexpected: {gunexp[:3]}" if gunexp else ""))

    res = []
    for gw in run.fleet.gateways:
        for n, life in enumerate(gw.lives):
            ok, detail = account.flat([s[1] for s in life.samples], [s[2] for s in life.samples])
            res.append({"gateway": gw.index, "life": n, "ok": ok, "detail": detail,
                        "samples": life.samples})
    line("RSS and open fds flat (first vs last quarter, per gateway process)",
         all(r["ok"] for r in res),
         "; ".join(f"gw{r['gateway']}.{r['life']}: {r['detail']}" for r in res))
    g = settled["gauges"]
    line("upstream slots and queues back to 0 (echo, ws, grpc)", all(
        x == 0 for v in g.values() for u in v.values() for x in u.values()),
        "; ".join(f"gw{k}: " + ", ".join(f"{u} in_flight {x['in_flight']} queue "
                                         f"{x['queue_depth']}" for u, x in v.items())
                  for k, v in g.items()))
    line("fleet-wide leases back to 0", settled["leases_live"] == 0,
         f"{settled['leases_live']} live leases in {settled['lease_keys']} lease keys, "
         f"{LEASE_GRACE_S:g} s after the last request ended (lease_ttl {gwconfig.LEASE_TTL_S} s)")
    k = settled["keys"]
    line("Redis keys all with a TTL", k["no_ttl_count"] == 0 and k["total"] > 0,
         f"{k['total']} tollgate keys, {k['no_ttl_count']} without TTL"
         + (f": {k['no_ttl']}" if k["no_ttl"] else ""))
    reload_err = sum(life.reload_errors for life in lives)
    line("config reloads", reload_err == 0,
         f"{run.fleet.generation} generations written, {sum(l.reloads_ok for l in lives)} "
         f"reloads ok over all gateway processes, {reload_err} refused")
    fault_errors = [f for f in run.faults if "error" in f]
    line("faults done as scheduled", not fault_errors and len(run.faults) == len(
        plan.schedule(duration)), f"{len(run.faults)} faults" + (
        f"; errors: {fault_errors}" if fault_errors else ""))

    report = {
        "minutes": duration / 60, "rate": run.load.rate, "commit": commit,
        "load": {"sent": st.sent, "shed_by_generator": st.shed, "retried": st.retried,
                 "client_aborts": st.aborted, "addresses": len(st.addresses),
                 "tenants_seen": len(st.tenants), "by_kind": st.by_kind,
                 "websockets": st.ws, "grpc": st.grpc},
        "faults": run.faults, "episodes": episodes,
        "lines": [{"name": n, "ok": ok, "detail": d} for n, ok, d in lines],
        "tenants": rows, "resources": res, "settled": settled,
        "events": ev[:200], "lost": st.lost[:200],
    }
    return report, lines


def git_commit():
    try:
        return os.popen(f"git -C {REPO} rev-parse --short HEAD 2>/dev/null").read().strip()
    except OSError:
        return ""


def summary(report, lines):
    ld = report["load"]
    out = [f"== soak account: {report['minutes']:g} min at {report['rate']:g} req/s, "
           f"commit {report['commit']} ==",
           f"load: {ld['sent']} sent ({ld['shed_by_generator']} shed by the generator), "
           f"{ld['addresses']} client addresses, {ld['tenants_seen']} tenants, "
           f"{ld['client_aborts']} client aborts, {ld['retried']} retried",
           "answers by kind: " + "; ".join(
               f"{k}: " + ", ".join(f"{c} {n}" for c, n in sorted(v.items()))
               for k, v in sorted(ld["by_kind"].items())),
           "websockets: " + ", ".join(f"{k} {ld['websockets'][k]}" for k in account.WS_COUNTERS),
           "grpc calls: " + (", ".join(f"{c} {n}" for c, n in sorted(ld["grpc"].items()))
                             or "none"),
           "faults: " + ", ".join(f"{f['kind']}@{f['start']:.0f}s" for f in report["faults"])]
    for name, ok, detail in lines:
        out.append(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    failed = sum(1 for _, ok, _ in lines if not ok)
    out.append(f"{len(lines) - failed} of {len(lines)} account lines passed")
    return "\n".join(out)


def main(argv=None):
    args = parse_args(argv)
    # The driver forks (gateway restarts) while grpcio's threads run; the children exec at once,
    # so grpcio's fork handlers have nothing to do (and would log each fork they skip).
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
    try:
        import grpc  # noqa: F401
        import h2  # noqa: F401
    except ImportError as e:
        raise BenchError(f"{e.name} is missing: run with the repository venv, "
                         "VENV=$(scripts/venv.sh $(grep -v '^#' bench/requirements.txt)) && "
                         "$VENV/bin/python bench/soak.py ...")
    args.tollgate_binary = os.path.abspath(args.tollgate_binary)
    args.echo_binary = os.path.abspath(args.echo_binary)
    for b in (args.tollgate_binary, args.echo_binary):
        if not os.access(b, os.X_OK):
            raise BenchError(f"{b} is not an executable (cargo build --release --bins, or pass "
                             "--tollgate-binary / --echo-binary)")
    duration = args.minutes * 60.0
    commit = git_commit()  # now: the checkout may move on during a long run
    with Env(keep_tmp=args.keep_tmp) as env:
        run = Run(args, env)
        try:
            settled = asyncio.run(run.main())
        except BaseException:
            env.keep_tmp = True
            raise
        report, lines = build_account(run, settled, duration, commit)
        if not all(ok for _, ok, _ in lines):
            env.keep_tmp = True
    out = Path(args.out) if args.out else (
        REPO / "bench" / "results" / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    text = summary(report, lines)
    out.with_suffix(".txt").write_text(text + "\n")
    print(text)
    log(f"account written to {out} and {out.with_suffix('.txt')}")
    return 0 if all(ok for _, ok, _ in lines) else 1
