"""The load's WebSocket sessions and gRPC calls (`traffic.Load` spawns them; each holds one of
the load's semaphores and releases it when done).

A WebSocket: an upgrade through a gateway with a tenant's key (its answer is tallied like any
request: a 101 is an admission), then 2-4 echoed messages and a close handshake, or, for one
session in four, a hang-up after the first echo. An upgrade that meets a transport error is
retried once on another gateway; a session broken after its 101 cannot be, and counts as broken
by a SIGKILL when its gateway process was killed, else as failed.

A gRPC call: one unary `/demo.Echo/Unary` call with the tenant's key (`grpcload`), tallied by
`account.classify_grpc`; a failure no gateway answered is retried once on another gateway.
"""

import asyncio

from . import account, wsclient, wsproto
from .clients import TransportError

WS_MESSAGES = (2, 4)
WS_DROP_SHARE = 0.25
WS_PAUSE_S = (0.1, 0.3)
GRPC_METHOD = "/demo.Echo/Unary"
CONNECT_ERRORS = (OSError, TransportError, asyncio.IncompleteReadError, ValueError)


def ws_script(rng):
    """(messages, drop_after or None, pause between messages in s) of one session, drawn from
    `rng` (a random.Random)."""
    messages = rng.randint(*WS_MESSAGES)
    drop_after = 1 if rng.random() < WS_DROP_SHARE else None
    return messages, drop_after, rng.uniform(*WS_PAUSE_S)


def channels(grace_s):
    """The load's gRPC channels (imports grpcio only when the load runs)."""
    from .grpcload import Channels

    return Channels(grace_s)


async def websocket(load, path, key, tenant, xff, script, deadline_s):
    """One session (`ws_script`'s `script`) through the load's next gateway; every outcome goes
    to `load.stats` (`ws` counters, the tenant's tally, `lost`, `events`)."""
    st = load.stats
    st.ws["attempted"] += 1
    try:
        await _websocket(load, path, key, tenant, xff, script, deadline_s)
    except Exception as e:  # noqa: BLE001 - a client bug must show in the account, not vanish
        st.ws["failed"] += 1
        st.events.append((load.clock(), "ws failed", -1, f"client {type(e).__name__}: {e}"))
    finally:
        load.ws_sem.release()


async def _upgrade(load, path, key, xff, deadline_s):
    """The upgrade, retried once on another gateway after a transport error: (gateway, its
    process, reader, writer, answer, ws key), or None when lost (recorded)."""
    st = load.stats
    gw = load.pick_gateway()
    life = gw.current
    try:
        return (gw, life) + await wsclient.open_ws(gw.port, path, key, xff, deadline_s)
    except asyncio.TimeoutError:
        st.lost.append((load.clock(), "ws", f"no upgrade answer in {deadline_s:g}s from "
                        f"gateway {gw.index}"))
        return None
    except CONNECT_ERRORS as e:
        gw = load.transport_error(gw, life, e)
        life = gw.current
    try:
        return (gw, life) + await wsclient.open_ws(gw.port, path, key, xff, deadline_s)
    except (asyncio.TimeoutError, *CONNECT_ERRORS) as e:
        st.lost.append((load.clock(), "ws", f"retry on gateway {gw.index}: "
                        f"{type(e).__name__}: {e}"))
        return None


async def _websocket(load, path, key, tenant, xff, script, deadline_s):
    st = load.stats
    ws = st.ws
    sent = load.clock()
    opened = await _upgrade(load, path, key, xff, deadline_s)
    if opened is None:
        ws["lost"] += 1
        return
    gw, life, r, w, answer, ws_key = opened
    try:
        load.record("ws", tenant, xff, gw, sent, answer)
        status, headers, _ = answer
        if status == 429:
            ws["refused"] += 1
            ws["refused_concurrency"] += account.concurrency_refusal(headers)
            return
        if status != 101:
            ws["other_answer"] += 1
            return
        ws["opened"] += 1
        messages, drop_after, pause = script
        try:
            ended, echoes = await wsclient.exchange(r, w, headers, ws_key, messages,
                                                    drop_after, pause, deadline_s)
            ws[ended] += 1
            ws["echoes"] += echoes
        except asyncio.TimeoutError:
            ws["lost"] += 1
            st.lost.append((load.clock(), "ws", f"an echo not back in {deadline_s:g}s "
                            f"through gateway {gw.index}"))
        except (OSError, asyncio.IncompleteReadError, wsclient.WsBroken,
                wsproto.FrameError) as e:
            if life is not None and life.killed_at is not None:
                ws["broken_by_kill"] += 1
            else:
                ws["failed"] += 1
                st.events.append((load.clock(), "ws failed", gw.index,
                                  f"{type(e).__name__}: {e}"))
    finally:
        w.close()


async def grpc_call(load, key, tenant, xff, deadline_s):
    """One unary call through the load's next gateway; the outcome goes to `load.stats` (`grpc`
    counts, the tenant's tally, `lost`, `events`)."""
    st = load.stats
    try:
        gw = load.pick_gateway()
        sent = load.clock()
        life, code, meta, details = await load.grpc.call(gw, key, xff, deadline_s)
        cls = account.classify_grpc(code, meta)
        retried = ""
        if cls == account.GRPC_TRANSPORT:
            gw = load.transport_error(gw, life, TransportError(f"{code}: {details}"))
            life, code, meta, details = await load.grpc.call(gw, key, xff, deadline_s)
            cls = account.classify_grpc(code, meta)
            retried = "retry on "
        if cls in (account.GRPC_TRANSPORT, account.GRPC_NO_ANSWER):
            st.lost.append((load.clock(), "grpc", f"{retried}gateway {gw.index}: {code} "
                            f"{details[:200]}"))
            return
        st.grpc[cls] = st.grpc.get(cls, 0) + 1
        done = load.tally("grpc", tenant, xff, gw, sent, cls)
        if cls == account.GRPC_UNAVAILABLE:
            st.grpc_unavailable_at.append(done)
            st.events.append((done, "grpc UNAVAILABLE", gw.index, details[:200]))
        elif cls == account.OTHER:
            st.events.append((done, f"grpc unexpected {code}", gw.index, details[:200]))
    except Exception as e:  # noqa: BLE001 - a client bug must show in the account, not vanish
        st.lost.append((load.clock(), "grpc", f"client {type(e).__name__}: {e}"))
    finally:
        load.grpc_sem.release()
