"""The soak's WebSocket backend, one asyncio process (`fleet` starts it):

    python -m tollgate_soak.wsbackend --port P      (with bench/ on PYTHONPATH)

- a GET with `Upgrade: websocket` and a `Sec-WebSocket-Key`: 101 with the matching
  `Sec-WebSocket-Accept`, then every text or binary message is echoed back as it came, a ping is
  answered with a pong, and a close is answered with a close (same payload) before the connection
  ends;
- `GET /healthz`: 200 `ok`; `GET /stats`: 200 with JSON {"opened": n, "open": n, "closed": n,
  "dropped": n}: sessions upgraded, still open, ended by a close handshake, ended without one
  (the peer vanished);
- anything else: 400.

Every plain answer closes its connection. Prints "listening P" once serving; stops on SIGTERM.
"""

import argparse
import asyncio
import json
import signal

from tollgate_soak import wsproto

STATS = {"opened": 0, "open": 0, "closed": 0, "dropped": 0}


def parse_head(head):
    """(method, path, headers with lowercase names) of a request head (bytes up to the blank
    line)."""
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
    headers = {}
    for line in lines[1:]:
        k, sep, v = line.partition(":")
        if sep:
            headers[k.strip().lower()] = v.strip()
    return method, path, headers


def plain(status, body, ctype="text/plain"):
    return (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


async def echo(reader, writer):
    """Echoes frames until a close (answered) or the end of the stream; True after a close."""
    while True:
        opcode, payload = await wsproto.read_frame(reader)
        if opcode == wsproto.OP_CLOSE:
            writer.write(wsproto.encode(wsproto.OP_CLOSE, payload[:2]))
            await writer.drain()
            return True
        if opcode == wsproto.OP_PING:
            writer.write(wsproto.encode(wsproto.OP_PONG, payload))
        elif opcode in (wsproto.OP_TEXT, wsproto.OP_BINARY):
            writer.write(wsproto.encode(opcode, payload))
        await writer.drain()


async def handle(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        method, path, headers = parse_head(head)
        key = headers.get("sec-websocket-key")
        if method == "GET" and headers.get("upgrade", "").lower() == "websocket" and key:
            writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Accept: "
                          f"{wsproto.accept_for(key)}\r\n\r\n").encode())
            await writer.drain()
            STATS["opened"] += 1
            STATS["open"] += 1
            closed = False
            try:
                closed = await echo(reader, writer)
            except (asyncio.IncompleteReadError, ConnectionError, wsproto.FrameError):
                pass
            finally:
                STATS["open"] -= 1
                STATS["closed" if closed else "dropped"] += 1
        elif path == "/healthz":
            writer.write(plain("200 OK", b"ok"))
        elif path == "/stats":
            writer.write(plain("200 OK", json.dumps(STATS).encode(), "application/json"))
        else:
            writer.write(plain("400 Bad Request", b"not a WebSocket upgrade"))
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port):
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print(f"listening {port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    asyncio.run(serve(ap.parse_args().port))


if __name__ == "__main__":
    main()
