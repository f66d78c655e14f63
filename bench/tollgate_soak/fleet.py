"""The soak's processes on free loopback ports, and the faults done to them.

A Redis master and its replica, three sentinels watching them (`down-after-milliseconds` 5 s,
longer than a freeze), two `tollgate-echo` backends, a WebSocket backend (`wsbackend`), the gRPC
server of demo/grpc/ (both run by this Python, the repository venv's), and three gateways sharing
one Redis through the sentinels. Built on the benchmark driver's `Env` (temp dir, logs, teardown at exit).
Blocking calls; the driver runs them in threads.
"""

import json
import os
import signal
import sys
import time
import urllib.request

from tollgate_bench.common import REPO, BenchError, log
from tollgate_bench.processes import free_port, wait_port

from . import gwconfig, plan, resp

MASTER_NAME = "tollgate"
GRPC_SERVER = REPO / "demo" / "grpc" / "server.py"
DOWN_AFTER_MS = 5000


class GatewayProcess:
    """One life of a gateway (from start to SIGKILL or teardown): its samples and counters."""

    def __init__(self, proc, started_at):
        self.proc = proc
        self.started_at = started_at
        self.samples = []  # (t, rss MiB, open fds)
        self.breaker_closes = 0
        self.reload_errors = 0
        self.reloads_ok = 0
        self.killed_at = None  # set just before its SIGKILL


class Gateway:
    """A gateway slot: fixed ports and config path; `lives` holds each process it ran."""

    def __init__(self, index, tmp):
        self.index = index
        self.port = free_port()
        self.admin = free_port()
        self.config = tmp / f"gateway-{index}.yaml"
        self.lives = []
        self.up = False

    @property
    def current(self):
        return self.lives[-1] if self.lives else None


class Fleet:
    """Every process of one soak run. `env` is a tollgate_bench `Env`."""

    def __init__(self, env, tollgate, echo):
        self.env = env
        self.tollgate = tollgate
        self.echo = echo
        self.redis = []  # [Proc, port]
        self.sentinels = []  # [Proc, port]
        self.backends = []  # [Proc or None, port]
        self.ws_backend = None  # [Proc, port]
        self.grpc_backend = None  # [Proc, port]
        self.gateways = [Gateway(i, env.tmp) for i in range(3)]
        self.generation = 0

    # ---- start ------------------------------------------------------------------------------

    def start(self, t0):
        """Starts everything and waits until each gateway's /healthz answers 200."""
        master = self._start_redis(None)
        self._start_redis(master)
        self._wait_replica_synced()
        for _ in range(3):
            self._start_sentinel(master)
        self._wait_sentinels_agree()
        for i in range(2):
            self.backends.append([None, free_port()])
            self.start_backend(i)
        self.ws_backend = self._start_python("ws-backend", ["-m", "tollgate_soak.wsbackend"])
        self.grpc_backend = self._start_python("grpc-server", [GRPC_SERVER])
        self.write_configs()
        for gw in self.gateways:
            self.start_gateway(gw, t0)

    def _start_redis(self, master_port):
        port = free_port()
        d = self.env.tmp / f"redis-{port}"
        d.mkdir()
        args = ["redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--protected-mode", "no",
                "--repl-diskless-sync-delay", "0", "--dir", d]
        if master_port is not None:
            args += ["--replicaof", "127.0.0.1", master_port]
        proc = self.env.start(f"redis-{port}", args)
        wait_port(port, proc)
        self.redis.append([proc, port])
        return port

    def _wait_replica_synced(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.info(self.redis[1][1], "replication")
            if info.get("master_link_status") == "up":
                return
            time.sleep(0.1)
        raise BenchError("the replica did not sync with the master")

    def _start_sentinel(self, master_port):
        port = free_port()
        conf = self.env.tmp / f"sentinel-{port}.conf"
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {self.env.tmp}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} 10000\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
        proc = self.env.start(f"sentinel-{port}", ["redis-server", conf, "--sentinel"])
        wait_port(port, proc)
        self.sentinels.append([proc, port])

    def _wait_sentinels_agree(self, timeout=30.0):
        """Until every sentinel knows the replica and the other sentinels."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = True
            for _, port in self.sentinels:
                try:
                    m = resp.command(port, "SENTINEL", "MASTER", MASTER_NAME)
                    fields = dict(zip(m[::2], m[1::2]))
                    ok &= int(fields.get("num-slaves", 0)) >= 1
                    ok &= int(fields.get("num-other-sentinels", 0)) >= 2
                except (OSError, resp.RedisError, ValueError):
                    ok = False
            if ok:
                return
            time.sleep(0.2)
        raise BenchError("the sentinels did not discover each other and the replica")

    def start_backend(self, i):
        port = self.backends[i][1]
        proc = self.env.start(
            f"echo-{i}",
            [self.echo, "--listen", f"127.0.0.1:{port}", "--name", f"echo-{i}", "--threads", "1"],
        )
        wait_port(port, proc)
        self.backends[i][0] = proc

    def _start_python(self, name, argv):
        """Starts `python <argv> --port P` (this interpreter, bench/ on its path); [Proc, P]."""
        port = free_port()
        env = dict(os.environ, PYTHONPATH=str(REPO / "bench"))
        proc = self.env.start(name, [sys.executable, *argv, "--port", port], env=env)
        wait_port(port, proc)
        return [proc, port]

    def start_gateway(self, gw, now):
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"), NO_COLOR="1")
        proc = self.env.start(
            f"gateway-{gw.index}", [self.tollgate, "run", "-c", gw.config], env=env
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not proc.alive():
                raise BenchError(f"gateway {gw.index} exited:\n{proc.log_tail()}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{gw.admin}/healthz", timeout=1
                ) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise BenchError(f"gateway {gw.index} not healthy in 60 s:\n{proc.log_tail()}")
        gw.lives.append(GatewayProcess(proc, now()))
        gw.up = True

    # ---- reads ------------------------------------------------------------------------------

    @staticmethod
    def info(port, section):
        text = resp.command(port, "INFO", section)
        out = {}
        for line in text.splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                out[k] = v.strip()
        return out

    def master_port(self):
        """The port the sentinels name as master (the first sentinel that answers)."""
        for _, port in self.sentinels:
            try:
                addr = resp.command(port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
                return int(addr[1])
            except (OSError, resp.RedisError, TypeError, IndexError):
                continue
        raise BenchError("no sentinel names a master")

    def redis_proc(self, port):
        return next(p for p, q in self.redis if q == port)

    @staticmethod
    def metrics(gw):
        """The gateway's /metrics as {"name{labels}": value}; {} when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{gw.admin}/metrics", timeout=3) as r:
                text = r.read().decode()
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
        return out

    def ws_backend_stats(self):
        """The WebSocket backend's /stats ({"opened", "open", "closed", "dropped"}), or None when
        it does not answer."""
        try:
            url = f"http://127.0.0.1:{self.ws_backend[1]}/stats"
            with urllib.request.urlopen(url, timeout=3) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def scrape_counters(self, gw):
        """Updates the current life's breaker closes and reload counts from /metrics."""
        m = self.metrics(gw)
        life = gw.current
        if not m or life is None:
            return m
        life.breaker_closes = int(m.get('tollgate_redis_breaker_transitions_total{to="closed"}', 0))
        life.reload_errors = int(m.get('tollgate_config_reloads_total{result="error"}', 0))
        life.reloads_ok = int(m.get('tollgate_config_reloads_total{result="ok"}', 0))
        return m

    # ---- faults -----------------------------------------------------------------------------

    def write_configs(self):
        sentinel_ports = [p for _, p in self.sentinels]
        backends = [f"127.0.0.1:{p}" for _, p in self.backends]
        for gw in self.gateways:
            text = gwconfig.gateway_yaml(
                self.generation, gw.port, gw.admin, sentinel_ports, MASTER_NAME, backends,
                f"127.0.0.1:{self.ws_backend[1]}", f"127.0.0.1:{self.grpc_backend[1]}"
            )
            tmp = gw.config.with_suffix(".tmp")
            tmp.write_text(text)
            os.replace(tmp, gw.config)

    def reload(self):
        """Writes the next generation's configs and sends SIGHUP to every running gateway."""
        self.generation += 1
        self.write_configs()
        for gw in self.gateways:
            if gw.up and gw.current.proc.alive():
                os.kill(gw.current.proc.pid, signal.SIGHUP)

    def failover(self, timeout=60.0):
        """`SENTINEL FAILOVER`, then waits until the sentinels name the replica and the old
        master is its replica again with a live link. Returns (old port, new port)."""
        old = self.master_port()
        deadline = time.monotonic() + timeout
        while True:
            try:
                resp.command(self.sentinels[0][1], "SENTINEL", "FAILOVER", MASTER_NAME)
                break
            except resp.RedisError as e:  # INPROG / NOGOODSLAVE while a replica resyncs
                if time.monotonic() > deadline:
                    raise BenchError(f"SENTINEL FAILOVER refused: {e}")
                time.sleep(0.5)
        while time.monotonic() < deadline:
            try:
                new = self.master_port()
                if new != old and self.info(new, "replication").get("role") == "master":
                    r = self.info(old, "replication")
                    if r.get("role") == "slave" and r.get("master_link_status") == "up":
                        return old, new
            except (OSError, resp.RedisError, BenchError):
                pass
            time.sleep(0.2)
        raise BenchError("the failover did not settle in 60 s")

    def freeze(self, seconds):
        """SIGSTOP of the master for `seconds`, then SIGCONT. Returns the frozen port."""
        port = self.master_port()
        pid = self.redis_proc(port).pid
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(pid, signal.SIGCONT)
        return port

    def restart_backend(self, i, down_s):
        proc = self.backends[i][0]
        self._sigkill(proc)
        time.sleep(down_s)
        self.start_backend(i)

    def kill_gateway(self, gw, down_s, now):
        """Scrapes its counters, SIGKILLs it, waits `down_s`, starts it again (current config)."""
        self.scrape_counters(gw)
        gw.up = False
        gw.current.killed_at = now()
        self._sigkill(gw.current.proc)
        time.sleep(down_s)
        self.start_gateway(gw, now)

    def _sigkill(self, proc):
        if proc in self.env.procs:
            self.env.procs.remove(proc)
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.popen.wait(10)

    def log(self, msg):
        log(msg)


def fds(pid):
    """Open file descriptors of `pid` (0 when it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
