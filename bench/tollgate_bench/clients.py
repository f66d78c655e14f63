"""Tiny standard-library clients: one HTTP GET, the admin /metrics scrape, Redis over RESP."""

import http.client
import re
import socket

from .common import BenchError


def http_get(port, path="/", headers=None, timeout=5.0):
    """(status, {lower-case header: value}, body, keepalive) for one GET."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body, not r.will_close
    finally:
        conn.close()


def scrape(admin_port):
    """Prometheus text → {(name, ((label, value), ...)): float}."""
    status, _, body, _ = http_get(admin_port, "/metrics")
    if status != 200:
        raise BenchError(f"/metrics answered {status}")
    out = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$', line)
        if not m:
            continue
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or "")))
        try:
            out[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            pass
    return out


def msum(metrics, name, **want):
    total = 0.0
    for (n, labels), v in metrics.items():
        if n != name:
            continue
        d = dict(labels)
        if all(d.get(k) == val for k, val in want.items()):
            total += v
    return total


def resp_encode(args):
    """One command as RESP bytes (an array of bulk strings)."""
    payload = f"*{len(args)}\r\n".encode()
    for a in args:
        b = str(a).encode()
        payload += b"$%d\r\n%s\r\n" % (len(b), b)
    return payload


def redis_cmd(port, *args, timeout=5.0):
    """One command over a fresh RESP connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(resp_encode(args))
        f = s.makefile("rb")
        return _resp_read(f)


def _resp_read(f):
    line = f.readline()
    if not line:
        raise BenchError("redis closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise BenchError(f"redis error: {rest.decode()}")
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp_read(f) for _ in range(n)]
    raise BenchError(f"unexpected redis reply {line!r}")


def redis_info(port):
    """INFO all → flat dict; commandstats as cmdstat_<cmd> → {calls, usec, ...}."""
    text = redis_cmd(port, "INFO", "all")
    info = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        if k.startswith("cmdstat_"):
            info[k] = {kv.split("=")[0]: float(kv.split("=")[1]) for kv in v.split(",") if "=" in kv}
        else:
            try:
                info[k] = float(v) if "." in v else int(v)
            except ValueError:
                info[k] = v
    return info
