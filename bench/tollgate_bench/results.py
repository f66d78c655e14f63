"""The build, the tool check, the environment record and the results JSON of a run."""

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from .common import REPO, BenchError, log


def build(args):
    target = os.environ.get("CARGO_TARGET_DIR")
    target_dir = Path(target) if target else REPO / "target"
    if not target_dir.is_absolute():
        target_dir = REPO / target_dir
    if not args.skip_build:
        log(f"cargo build --release --bins --example pingora_floor (target dir {target_dir})")
        r = subprocess.run(["cargo", "build", "--release", "--bins", "--example", "pingora_floor"],
                           cwd=REPO)
        if r.returncode != 0:
            raise BenchError("cargo build --release failed (use --skip-build to bench the "
                             "last built binaries)")
    # --tollgate-binary / --floor-binary replace the target dir's builds.
    binary = Path(args.tollgate_binary) if getattr(args, "tollgate_binary", None) else \
        target_dir / "release" / "tollgate"
    floor = Path(args.floor_binary) if getattr(args, "floor_binary", None) else \
        target_dir / "release" / "examples" / "pingora_floor"
    for b in (binary, floor):
        if not b.exists():
            raise BenchError(f"{b} not found (build first, or set CARGO_TARGET_DIR)")
    return binary, floor


def environment(args, binary, floor=None):
    def git(*a):
        r = subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True)
        return r.stdout.strip()

    def version(argv):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (r.stdout or r.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return None
    def mtime_of(path):
        return (datetime.datetime.fromtimestamp(os.stat(path).st_mtime).isoformat(timespec="seconds")
                if path and os.path.exists(path) else None)
    mtime = mtime_of(binary)
    return {
        "git_commit": git("rev-parse", "HEAD"),
        "git_branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "git_dirty_files": len([l for l in git("status", "--porcelain").splitlines() if l]),
        "tollgate_binary": str(binary),
        "tollgate_binary_mtime": mtime,
        "floor_binary": str(floor) if floor else None,
        "floor_binary_mtime": mtime_of(floor),
        "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "nginx": version(["nginx", "-v"]), "wrk": version(["wrk", "--version"]),
        "redis": version(["redis-server", "--version"]),
        "argv": sys.argv[1:],
    }


def write_results(args, data):
    out_dir = Path(args.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = out_dir / f"{stamp}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def write_script_run(name, label, binary, rows, out_dir=REPO / "bench" / "results", **extra):
    """A bench script's run as `out_dir/<name>-<label>-<local timestamp>.json`: `label`, `binary`,
    the `extra` fields, the UTC `date`, the `loadavg` (1, 5, 15 min) and `rows`.
    Returns (path, loadavg)."""
    load = os.getloadavg()
    result = {
        "label": label,
        "binary": binary,
        **extra,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "loadavg": load,
        "rows": rows,
    }
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(out_dir) / f"{name}-{label}-{stamp}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path, load


def _present(tool):
    """`tool` is on PATH (nginx also in /usr/sbin, off a non-root PATH)."""
    return bool(shutil.which(tool)) or (tool == "nginx" and os.path.exists("/usr/sbin/nginx"))


# Command -> Debian package, as scripts/prereqs.sh takes them.
BENCH_TOOLS = {"wrk": "wrk", "nginx": "nginx-light", "redis-server": "redis-server"}


def check_tools(run=subprocess.run):
    """Installs what the benchmark lacks the way the test command does: `scripts/prereqs.sh`
    (apt-get as root; otherwise it prints the install command). Raises BenchError naming the
    tools still missing, with that command."""
    missing = [t for t in BENCH_TOOLS if not _present(t)]
    if not shutil.which("cargo"):
        raise BenchError("missing tools: cargo (install the Rust toolchain: https://rustup.rs)")
    if not missing:
        return
    wanted = [f"{t}:{BENCH_TOOLS[t]}" for t in missing]
    log(f"missing {', '.join(missing)}: scripts/prereqs.sh {' '.join(wanted)}")
    r = run([str(REPO / "scripts" / "prereqs.sh"), *wanted], cwd=REPO)
    still = [t for t in BENCH_TOOLS if not _present(t)]
    if r.returncode != 0 or still:
        packages = " ".join(BENCH_TOOLS[t] for t in (still or missing))
        raise BenchError(f"missing tools: {', '.join(still or missing)} "
                         f"(install them: sudo apt-get install -y {packages})")
