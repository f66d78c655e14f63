"""Paths, constants and helpers every module of the driver uses."""

import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
BENCH = REPO / "bench"
WRK_LUA = BENCH / "wrk"

API_KEY = "tollgate-bench-key"
TENANT = "bench"
# "Huge" limits (reject nothing); validate.rs caps burst × per_ms at 2^52.
HUGE = 1_000_000_000


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


def median(xs):
    """Median of the values that are not None; None when there are none."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def parse_duration_s(text):
    """A config duration ("100ms", "1s", "1m", "1h") in seconds."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", text)
    if not m:
        raise BenchError(f"bad duration {text!r}")
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def run_main(main):
    """Runs a command-line `main()` and exits with its status: 2 with the message on a
    BenchError, 130 on Ctrl-C."""
    try:
        sys.exit(main())
    except BenchError as e:
        log(f"error: {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)
