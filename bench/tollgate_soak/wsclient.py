"""The soak's WebSocket client: an HTTP/1.1 Upgrade through a gateway with a tenant's key, then a
few echoed messages, then a close handshake or (a client gone mid-way) a bare hang-up.

Two steps, so that the load can tell an unanswered upgrade (lost), a refusal (429, 401: an
ordinary answer) and a session that broke after its 101:

- `open_ws`: (reader, writer, answer, key); the answer is read like any HTTP/1.1 response;
- `exchange`: the messages, on a 101'd connection.
"""

import asyncio

from . import wsproto
from .clients import read_response


class WsBroken(Exception):
    """A session that went wrong after its 101: a wrong accept value, an echo that differs from
    the message sent, an unexpected frame, or the connection closed early."""


def upgrade_bytes(path, key, xff, ws_key):
    lines = [f"GET {path} HTTP/1.1", "Host: soak.local", "Upgrade: websocket",
             "Connection: Upgrade", f"Sec-WebSocket-Key: {ws_key}",
             "Sec-WebSocket-Version: 13", f"X-Forwarded-For: {xff}"]
    if key is not None:
        lines.append(f"X-API-Key: {key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def open_ws(port, path, key, xff, deadline_s):
    """Connects to 127.0.0.1:`port` (5 s) and sends the upgrade; returns (reader, writer,
    (status, headers, body), ws key) once the answer's head (and body, when not a 101) is in.

    Raises asyncio.TimeoutError when no answer comes within `deadline_s`; OSError,
    clients.TransportError, asyncio.IncompleteReadError or ValueError when the connection
    fails first. The caller closes the writer.
    """
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    ws_key = wsproto.new_key()
    try:
        writer.write(upgrade_bytes(path, key, xff, ws_key))
        answer = await asyncio.wait_for(read_response(reader), deadline_s)
    except BaseException:
        writer.close()
        raise
    return reader, writer, answer, ws_key


async def exchange(reader, writer, headers, ws_key, messages, drop_after, pause_s, deadline_s):
    """Sends `messages` text messages one at a time, each echoed before the next (`pause_s`
    between them); with `drop_after` set, hangs up without a close frame after that many echoes.
    Otherwise ends with a close handshake. Returns ("closed" | "dropped", echoes received).

    Raises WsBroken (see the class), asyncio.TimeoutError when an echo or the close answer does
    not come within `deadline_s`, OSError or asyncio.IncompleteReadError when the connection
    fails.
    """
    if headers.get("sec-websocket-accept") != wsproto.accept_for(ws_key):
        raise WsBroken(f"Sec-WebSocket-Accept {headers.get('sec-websocket-accept')!r}")
    echoed = 0
    for i in range(messages):
        if drop_after is not None and echoed >= drop_after:
            return "dropped", echoed
        if i:
            await asyncio.sleep(pause_s)
        msg = f"soak message {i} of {messages}".encode()
        writer.write(wsproto.client_frame(wsproto.OP_TEXT, msg))
        opcode, payload = await asyncio.wait_for(wsproto.read_frame(reader), deadline_s)
        if (opcode, payload) != (wsproto.OP_TEXT, msg):
            raise WsBroken(f"echo {opcode}:{payload[:40]!r} for {msg!r}")
        echoed += 1
    if drop_after is not None:
        return "dropped", echoed
    writer.write(wsproto.client_frame(wsproto.OP_CLOSE, wsproto.CLOSE_NORMAL))
    opcode, payload = await asyncio.wait_for(wsproto.read_frame(reader), deadline_s)
    if opcode != wsproto.OP_CLOSE:
        raise WsBroken(f"frame {opcode} where the close answer was due")
    return "closed", echoed
