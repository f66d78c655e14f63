"""The driver's temp directory and every process it starts (Env, Proc), free ports, and the
/proc readings (children, CPU seconds, RSS) the measurements use."""

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .common import BenchError, log

CLK_TCK = os.sysconf("SC_CLK_TCK")

_libc = None


def _die_with_parent():
    """preexec_fn: the child gets SIGTERM if this driver dies (PR_SET_PDEATHSIG)."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(1, signal.SIGTERM, 0, 0, 0)
    except Exception:
        pass


_used_ports = set()


def free_port():
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _used_ports:
            _used_ports.add(port)
            return port
    raise BenchError("no free port")


class Proc:
    """One started process: its Popen, log file and how it is stopped."""

    def __init__(self, name, popen, log_path, stop_signal):
        self.name = name
        self.popen = popen
        self.pid = popen.pid
        self.log_path = log_path
        self.stop_signal = stop_signal

    def alive(self):
        return self.popen.poll() is None

    def pids(self):
        """The process and its direct children (nginx workers)."""
        return [self.pid] + children_of(self.pid)

    def log_tail(self, n=30):
        try:
            lines = Path(self.log_path).read_text(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""


class Env:
    """Temp directory plus every process started in it; tears all of it down at exit."""

    def __init__(self, keep_tmp=False):
        self.tmp = Path(tempfile.mkdtemp(prefix="tollgate-bench-"))
        self.keep_tmp = keep_tmp
        self.procs = []
        self._n = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop_all()
        if self.keep_tmp:
            log(f"kept temp dir {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False

    def start(self, name, argv, stop_signal=signal.SIGTERM, cwd=None, env=None):
        self._n += 1
        log_path = self.tmp / f"{self._n:02d}-{name}.log"
        out = open(log_path, "wb")
        popen = subprocess.Popen(
            [str(a) for a in argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(cwd or self.tmp),
            env=env,
            start_new_session=True,  # a Ctrl-C reaches only this driver, which stops them in order
            preexec_fn=_die_with_parent,
        )
        out.close()
        p = Proc(name, popen, log_path, stop_signal)
        self.procs.append(p)
        return p

    def stop(self, p, timeout=10):
        if p in self.procs:
            self.procs.remove(p)
        if p.alive():
            try:
                os.kill(p.pid, p.stop_signal)
            except ProcessLookupError:
                pass
            try:
                p.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"{p.name} (pid {p.pid}) did not stop in {timeout}s: SIGKILL")
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.popen.wait(5)

    def stop_all(self):
        for p in reversed(list(self.procs)):
            try:
                self.stop(p)
            except Exception as e:  # keep tearing down the rest
                log(f"stopping {p.name}: {e}")


def children_of(pid):
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            if int(rest[1]) == pid:
                kids.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return kids


def cpu_seconds(pids):
    """utime + stime of the processes (all their threads), seconds."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            total += int(rest[11]) + int(rest[12])  # fields 14 and 15 of stat(5)
        except (OSError, IndexError, ValueError):
            pass
    return total / CLK_TCK


def rss_kb(pids):
    """Sum of VmRSS (kB). For nginx, master + workers (shared pages are counted twice)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def wait_port(port, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise BenchError(f"{proc.name} exited (code {proc.popen.returncode}):\n{proc.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"{proc.name if proc else 'port'} {port} not listening after {timeout}s:\n"
                     f"{proc.log_tail() if proc else ''}")


class Ctx:
    """Binaries, options and the Env of one driver invocation."""

    def __init__(self, args, env):
        self.args = args
        self.env = env
        self.tmp = env.tmp
        self.tollgate = None  # path of the tollgate binary (set by cli)
        self.floor = None  # path of examples/pingora_floor (variant P)
        self.traefik = None  # path of the Traefik binary (variants T0, T)
        self.nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.wrk = shutil.which("wrk")
        self.redis_server = shutil.which("redis-server")
        self._script_n = 0
