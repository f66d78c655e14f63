"""Command line of the benchmark driver: argument parsing and the subcommands."""

import argparse
import os
from pathlib import Path
import signal

from .accuracy import accuracy
from .common import BENCH
from .capacity import capacity
from .compare import compare
from .instructions import instructions
from .memory import memory
from .processes import Ctx, Env
from .profile import profile
from .report import (accuracy_report, capacity_report, instructions_report, memory_report,
                     profile_report, throughput_report)
from .results import build, check_tools, environment, write_results
from .targets import memory_targets, throughput_figures, throughput_ratios, throughput_targets
from .throughput import throughput
from .traefik import which_traefik_for
from .variants import parse_variants

# The description printed by `bench/run.py --help` (unchanged from the single-file driver).
USAGE = """tollgate benchmark driver (standard library only). See bench/README.md.

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


def main(argv=None):
    """Parses `argv` (default sys.argv[1:]), runs the subcommand; returns the exit status."""
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
    g.add_argument("--work-stealing", type=lambda t: {"true": True, "false": False}[t.lower()],
                   default=True, metavar="true|false",
                   help="tollgate server.work_stealing and the same runtime for the Pingora floor P "
                        "(default true, tollgate's default)")
    g.add_argument("--tollgate-binary", default=None,
                   help="bench this tollgate binary instead of the target dir's (e.g. another commit's)")
    g.add_argument("--floor-binary", default=None,
                   help="run this Pingora floor (variant P) instead of the target dir's "
                        "release/examples/pingora_floor (e.g. one built with another allocator)")
    g.add_argument("--results-dir", default=str(BENCH / "results"))
    g.add_argument("--keep-tmp", action="store_true", help="keep configs and logs of the run")

    tp = argparse.ArgumentParser(add_help=False)
    g = tp.add_argument_group("throughput")
    g.add_argument("--reps", type=int, default=3, help="repetitions, interleaved (default 3)")
    g.add_argument("--duration", type=int, default=10, help="seconds per measured run (default 10)")
    g.add_argument("--warmup", type=int, default=2, help="warm-up seconds before each run (default 2)")
    g.add_argument("--variants", default="ABCT0TPDKEFRMGL",
                   help="subset of A B C T0 T P D K E F R M G L H I N S X, written together "
                        "(default ABCT0TPDKEFRMGL)")
    g.add_argument("--lease-tokens", type=int, default=100, help="L: tier lease tokens (default 100)")
    g.add_argument("--lease-hold", default="250ms", help="L: tier lease max_hold (default 250ms)")
    g.add_argument("--h2-conns", type=int, default=8,
                   help="X: h2load connections (-c, default 8)")
    g.add_argument("--h2-streams", type=int, default=8,
                   help="X: h2load concurrent streams per connection (-m, default 8; "
                        "8 x 8 = wrk's 64 requests in flight)")
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

    cp = argparse.ArgumentParser(add_help=False)
    g = cp.add_argument_group("capacity")
    g.add_argument("--cap-conns", type=int, default=4, help="Redis connections (default 4)")
    g.add_argument("--cap-pipeline", type=int, default=8,
                   help="EVALSHA calls in flight per connection (default 8: the gateway's ~6.5 "
                        "commands per read under load)")
    g.add_argument("--cap-tenants", type=int, default=1000, help="distinct bucket keys (default 1000)")
    g.add_argument("--cap-rates", default="1000,5000,10000,20000",
                   help="per-instance admitted req/s of the fleet table")
    g.add_argument("--cap-spreads", default="1,100",
                   help="active tenants per instance the rate is spread over (fleet table)")

    parser = argparse.ArgumentParser(description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    cap = argparse.ArgumentParser(add_help=False)
    g = cap.add_argument_group("lease")
    g.add_argument("--lease-tokens", type=int, default=100, help="lease tokens (default 100)")
    g.add_argument("--lease-hold", default="250ms", help="lease max_hold (default 250ms)")
    g.add_argument("--duration", type=int, default=5, help="seconds per script (default 5)")
    sub.add_parser("capacity", parents=[common, cp, cap],
                   help="Redis script calls per core-second, pipelined; fleet size per Redis")
    ip = argparse.ArgumentParser(add_help=False)
    g = ip.add_argument_group("instructions")
    g.add_argument("--variants", default="PDF", help="subset of P D K E F L G R (default PDF)")
    g.add_argument("--requests-small", type=int, default=300, help="requests of the short run (N1)")
    g.add_argument("--requests-large", type=int, default=1300, help="requests of the long run (N2)")
    g.add_argument("--lease-tokens", type=int, default=100, help="L: tier lease tokens (default 100)")
    g.add_argument("--lease-hold", default="250ms", help="L: tier lease max_hold (default 250ms)")
    sub.add_parser("instructions", parents=[common, ip],
                   help="user-space instructions per request under callgrind (P, D, F, ...)")
    c = sub.add_parser("compare", help="compare two result files")
    c.add_argument("old")
    c.add_argument("new")
    args = parser.parse_args(argv)

    if args.cmd == "compare":
        compare(args)
        return 0

    def on_term(signum, frame):
        raise SystemExit(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)

    check_tools()
    # The capacity run needs no gateway binary.
    binary, floor = build(args) if args.cmd != "capacity" else (None, None)
    if args.tollgate_binary:
        binary = Path(args.tollgate_binary).resolve()
    if args.floor_binary:
        floor = Path(args.floor_binary).resolve()
    data = {"environment": environment(args, binary, floor), "params": vars(args)}
    reports = []
    with Env(args.keep_tmp) as env:
        ctx = Ctx(args, env)
        ctx.tollgate = str(binary)
        ctx.floor = str(floor)
        if args.cmd in ("throughput", "all", "profile"):
            ctx.traefik = which_traefik_for(parse_variants(args.variants))
        if args.cmd in ("throughput", "all"):
            res = data["throughput"] = throughput(ctx)
            res.update(throughput_figures(res, os.cpu_count()))
            res["ratios"] = throughput_ratios(res["summary"])
            verdicts = throughput_targets(res, args.paced_fraction)
            res["targets"] = [v.as_json() for v in verdicts]
            reports.append(("throughput (medians of %d reps, %ds each, wrk -t%d -c%d)"
                            % (args.reps, args.duration, args.wrk_threads, args.connections),
                            throughput_report(res, verdicts)))
        if args.cmd == "capacity":
            data["capacity"] = capacity(ctx)
            reports.append(("Redis capacity (one redis-server, pipelined EVALSHA)",
                            capacity_report(data["capacity"])))
        if args.cmd == "instructions":
            data["instructions"] = instructions(ctx)
            reports.append(("instructions per request (callgrind, user space, one kept-alive "
                            "connection)", instructions_report(data["instructions"])))
        if args.cmd == "profile":
            data["profile"] = profile(ctx)
            reports.append(("profile (perf, DWARF call graphs, flame graphs in the results dir)",
                            profile_report(data["profile"])))
        if args.cmd in ("memory", "all"):
            res = data["memory"] = memory(ctx)
            verdicts = memory_targets(res)
            res["targets"] = [v.as_json() for v in verdicts]
            reports.append(("memory (edge limiter, distinct X-Forwarded-For clients)",
                            memory_report(res, verdicts)))
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
