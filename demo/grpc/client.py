"""A real gRPC client (grpcio + grpcio-status) for tollgate's gRPC tests and demo: makes calls
to the `demo.Echo` service of server.py through a target and prints one JSON line per call, as
the client sees it:

  {"call": "Unary", "code": "OK" | "RESOURCE_EXHAUSTED" | ..., "details": "<status message>",
   "retry_delay_s": <RetryInfo delay in seconds, from grpc-status-details-bin> | null,
   "rich_status": <code of the decoded google.rpc.Status> | null,
   "trailing": {<trailing metadata>}, "initial": {<initial metadata>},
   "replies": [<reply messages as text>]}

Usage:
  python client.py TARGET [--tls CA_FILE] [--metadata k=v ...] unary [--n N] [--request TEXT]
  python client.py TARGET ... stream --count N
  python client.py TARGET ... fail
  python client.py TARGET ... slow --seconds S
  python client.py TARGET ... hold
      opens /demo.Echo/Hold, prints {"event": "open", "reply": <first message>}, then cancels the
      call when a line "cancel" arrives on stdin and prints the call's line.
Exit status 0 (the outcomes are in the output).
"""

import argparse
import json
import sys

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

ident = lambda b: b  # noqa: E731  raw bytes in and out


def text(md):
    return {k: (v if isinstance(v, str) else v.hex()) for k, v in (md or ())}


def report(call, code, details, trailing, initial, replies, error=None):
    delay, rich = None, None
    if error is not None:
        status = rpc_status.from_call(error)
        if status is not None:
            rich = status.code
            for detail in status.details:
                if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                    info = error_details_pb2.RetryInfo()
                    detail.Unpack(info)
                    delay = info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    line = {
        "call": call,
        "code": code.name,
        "details": details,
        "retry_delay_s": delay,
        "rich_status": rich,
        "trailing": text(trailing),
        "initial": text(initial),
        "replies": replies,
    }
    print(json.dumps(line, sort_keys=True), flush=True)


def unary(channel, metadata, request, name="Unary"):
    fn = channel.unary_unary(f"/demo.Echo/{name}", request_serializer=ident, response_deserializer=ident)
    try:
        reply, call = fn.with_call(request.encode(), metadata=metadata, timeout=30)
        report(name, call.code(), call.details(), call.trailing_metadata(), call.initial_metadata(), [reply.decode()])
    except grpc.RpcError as e:
        report(name, e.code(), e.details(), e.trailing_metadata(), e.initial_metadata(), [], e)


def stream(channel, metadata, name, request, on_first=None):
    fn = channel.unary_stream(f"/demo.Echo/{name}", request_serializer=ident, response_deserializer=ident)
    call = fn(request.encode(), metadata=metadata, timeout=60)
    replies = []
    try:
        for reply in call:
            replies.append(reply.decode())
            if on_first is not None and len(replies) == 1:
                on_first(call, replies[0])
        report(name, call.code(), call.details(), call.trailing_metadata(), call.initial_metadata(), replies)
    except grpc.RpcError as e:
        err = e if e.code() != grpc.StatusCode.CANCELLED else None
        report(name, e.code(), e.details(), e.trailing_metadata(), e.initial_metadata(), replies, err)


def hold_until_cancel(call, first):
    print(json.dumps({"event": "open", "reply": first}), flush=True)
    for line in sys.stdin:
        if line.strip() == "cancel":
            break
    call.cancel()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("--tls", metavar="CA_FILE")
    ap.add_argument("--server-name", default="localhost")
    ap.add_argument("--metadata", action="append", default=[])
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("unary")
    u.add_argument("--n", type=int, default=1)
    u.add_argument("--request", default="hello")
    s = sub.add_parser("stream")
    s.add_argument("--count", type=int, default=3)
    sub.add_parser("fail")
    sl = sub.add_parser("slow")
    sl.add_argument("--seconds", default="5")
    sub.add_parser("hold")
    args = ap.parse_args()
    metadata = tuple(tuple(kv.split("=", 1)) for kv in args.metadata)
    if args.tls:
        with open(args.tls, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        options = (("grpc.ssl_target_name_override", args.server_name),)
        channel = grpc.secure_channel(args.target, creds, options)
    else:
        channel = grpc.insecure_channel(args.target)
    with channel:
        if args.cmd == "unary":
            for _ in range(args.n):
                unary(channel, metadata, args.request)
        elif args.cmd == "stream":
            stream(channel, metadata, "Stream", str(args.count))
        elif args.cmd == "slow":
            unary(channel, metadata, args.seconds, name="Slow")
        elif args.cmd == "fail":
            unary(channel, metadata, "", name="Fail")
        elif args.cmd == "hold":
            stream(channel, metadata, "Hold", "", on_first=hold_until_cancel)


if __name__ == "__main__":
    main()
