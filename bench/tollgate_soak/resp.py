"""Redis over RESP for the soak: the benchmark driver's one-command client, plus a pipeline for
the final key scan (one connection for thousands of `PTTL`s)."""

import socket

from tollgate_bench.clients import _resp_read, redis_cmd, resp_encode
from tollgate_bench.common import BenchError

# An error reply or a closed connection (the driver's BenchError).
RedisError = BenchError


def command(port, *args, timeout=3.0):
    """Runs one command on 127.0.0.1:`port` over a fresh connection; returns the decoded reply."""
    return redis_cmd(port, *args, timeout=timeout)


def pipeline(port, commands, timeout=10.0):
    """Sends every command of `commands` (lists of arguments) on one connection, in order, and
    returns their replies; an error reply raises RedisError."""
    out = b"".join(resp_encode(args) for args in commands)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(out)
        f = s.makefile("rb")
        return [_resp_read(f) for _ in commands]
