"""The soak's gRPC client: unary calls of `/demo.Echo/Unary` (the server of demo/grpc/server.py)
through the gateways, with grpcio's asyncio API (`grpc.aio`; bench/requirements.txt pins it).

One channel per gateway process, made again when the gateway was restarted (a channel to a killed
process would sit in grpcio's reconnect backoff); calls carry the tenant's key and the client
address as metadata. Retries inside grpcio are off, so that every call is one gateway decision.
"""

import asyncio

import grpc

from .sessions import GRPC_METHOD as METHOD

CHANNEL_OPTIONS = (("grpc.enable_retries", 0), ("grpc.max_reconnect_backoff_ms", 1000))


def _ident(b):
    return b


class Channels:
    """The open channels, one per gateway (`fleet.Gateway`), each tied to the process it was
    made for. A replaced channel is closed with a grace of `grace_s` for its calls in flight."""

    def __init__(self, grace_s):
        self.grace_s = grace_s
        self.by_gateway = {}  # gateway index -> (gateway process, channel, unary callable)
        self.closing = set()

    def _stub(self, gw):
        have = self.by_gateway.get(gw.index)
        if have is not None and have[0] is gw.current:
            return have
        if have is not None:
            task = asyncio.create_task(have[1].close(grace=self.grace_s))
            self.closing.add(task)
            task.add_done_callback(self.closing.discard)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}", options=CHANNEL_OPTIONS)
        fn = channel.unary_unary(METHOD, request_serializer=_ident, response_deserializer=_ident)
        have = (gw.current, channel, fn)
        self.by_gateway[gw.index] = have
        return have

    async def call(self, gw, key, xff, deadline_s):
        """One unary call through `gw`. Returns (gateway process it went to, status code name
        such as "OK" or "RESOURCE_EXHAUSTED", metadata as a dict: initial and trailing merged,
        lowercase names, text values, details text)."""
        life, _, fn = self._stub(gw)
        md = [("x-forwarded-for", xff)]
        if key is not None:
            md.append(("x-api-key", key))
        call = fn(b"soak", metadata=tuple(md), timeout=deadline_s)
        try:
            await call
            code, details = "OK", ""
            initial, trailing = await call.initial_metadata(), await call.trailing_metadata()
        except grpc.aio.AioRpcError as e:
            code, details = e.code().name, e.details() or ""
            initial, trailing = e.initial_metadata(), e.trailing_metadata()
        meta = {}
        for k, v in list(initial or ()) + list(trailing or ()):
            meta[k.lower()] = v if isinstance(v, str) else v.hex()
        return life, code, meta, details

    async def close(self):
        """Closes every channel (the calls have ended: the load waited for them)."""
        for h in self.by_gateway.values():
            await h[1].close()
        self.by_gateway = {}
        if self.closing:
            await asyncio.gather(*list(self.closing), return_exceptions=True)
