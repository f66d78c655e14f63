"""A small real gRPC server (grpcio, no generated code) behind tollgate in the gRPC tests and demo.

Service `demo.Echo`, messages as raw bytes:
  /demo.Echo/Unary   unary: replies with JSON {"metadata": {...}, "request": "<text>",
                     "peer": "ipv4:127.0.0.1:<port>"}: the invocation metadata the server received,
                     the request and the connection it came on.
  /demo.Echo/Stream  server streaming: the request is a count N; replies N messages "0".."N-1".
  /demo.Echo/Hold    server streaming: one message (the peer, as in Unary), then holds the
                     call open until the client cancels it (or 120 s pass).
  /demo.Echo/Slow    unary: the request is a number of seconds; replies "slept" after them.
  /demo.Echo/Fail    unary: fails with NOT_FOUND "no such thing" and trailing metadata
                     x-backend-trailer: kept (a backend's own status and trailers).

Usage: python server.py [--port P] [--tls CERT KEY]   (port 0 = any free port)
Prints "listening <port>" on stdout once serving, then "hold-ended <n>" each time a held call
ends (n = held calls ended so far). Stops on SIGTERM/SIGINT.
"""

import argparse
import json
import signal
import sys
import threading
import time
from concurrent import futures

import grpc

SERVICE = "demo.Echo"
lock = threading.Lock()
held_ended = 0


def say(line):
    print(line, flush=True)


def unary(request, context):
    metadata = {k: v for k, v in context.invocation_metadata() if not k.endswith("-bin")}
    reply = {"metadata": metadata, "request": request.decode(), "peer": context.peer()}
    return json.dumps(reply).encode()


def stream(request, context):
    for i in range(int(request.decode() or "0")):
        yield str(i).encode()


def hold(request, context):
    global held_ended
    ended = threading.Event()
    context.add_callback(ended.set)
    try:
        yield context.peer().encode()
        ended.wait(120)
    finally:
        with lock:
            held_ended += 1
            n = held_ended
        say(f"hold-ended {n}")


def slow(request, context):
    time.sleep(float(request.decode() or "0"))
    return b"slept"


def fail(request, context):
    context.set_trailing_metadata((("x-backend-trailer", "kept"),))
    context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    args = ap.parse_args()
    ident = lambda b: b  # noqa: E731  raw bytes in and out
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
        "Stream": grpc.unary_stream_rpc_method_handler(stream, ident, ident),
        "Hold": grpc.unary_stream_rpc_method_handler(hold, ident, ident),
        "Slow": grpc.unary_unary_rpc_method_handler(slow, ident, ident),
        "Fail": grpc.unary_unary_rpc_method_handler(fail, ident, ident),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    addr = f"127.0.0.1:{args.port}"
    if args.tls:
        with open(args.tls[0], "rb") as c, open(args.tls[1], "rb") as k:
            creds = grpc.ssl_server_credentials(((k.read(), c.read()),))
        port = server.add_secure_port(addr, creds)
    else:
        port = server.add_insecure_port(addr)
    server.start()
    say(f"listening {port}")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop(0)
    sys.exit(0)


if __name__ == "__main__":
    main()
