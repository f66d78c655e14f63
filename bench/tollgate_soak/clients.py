"""The soak's protocol clients: HTTP/1.1 answers read off a stream, and h2c connections (prior
knowledge) with many concurrent streams. Used by `traffic`; the WebSocket client is `wsclient`,
the gRPC one `grpcload`."""

import asyncio


class TransportError(Exception):
    """The connection failed before a whole answer arrived."""


async def read_response(reader):
    """Reads one HTTP/1.1 response from an asyncio StreamReader: (status, headers with lowercase
    names, body text). Raises TransportError, asyncio.IncompleteReadError or ValueError when the
    stream ends early or the response is malformed."""
    line = await reader.readline()
    if not line:
        raise TransportError("connection closed before the status line")
    parts = line.split(b" ", 2)
    status = int(parts[1])
    headers = {}
    while True:
        h = await reader.readline()
        if not h:
            raise TransportError("connection closed in the headers")
        if h in (b"\r\n", b"\n"):
            break
        k, _, v = h.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    if status in (101, 204, 304):  # no body (a 101's connection now carries the new protocol)
        body = b""
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, bytes(body).decode("utf-8", "replace")


def request_bytes(path, key, xff, close=False):
    lines = [f"GET {path} HTTP/1.1", "Host: soak.local", f"X-Forwarded-For: {xff}"]
    if key is not None:
        lines.append(f"X-API-Key: {key}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class H2Conn:
    """One h2c connection (prior knowledge) to a gateway, many concurrent streams."""

    def __init__(self, port, life):
        self.port = port
        self.life = life  # the gateway process it connects to (fleet.GatewayProcess)
        self.conn = None
        self.writer = None
        self.streams = {}  # id -> [future, status, headers, body bytearray]
        self.dead = False
        # Retired: takes no new stream, closes when its last stream has ended.
        self.retired = False
        self.used = 0
        # Done when open() has finished: streams started meanwhile wait for it (or its error).
        self.opened = asyncio.get_running_loop().create_future()

    async def open(self):
        import h2.config
        import h2.connection

        try:
            reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            self.conn = h2.connection.H2Connection(
                config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
            )
            self.conn.initiate_connection()
            self.writer.write(self.conn.data_to_send())
            self._task = asyncio.create_task(self._read(reader))
        except BaseException as e:
            self.dead = True
            self.opened.set_exception(TransportError(f"h2 connection not opened: {e!r}"))
            self.opened.exception()  # retrieved here: waiting streams get it, nobody else must
            raise
        self.opened.set_result(None)

    async def _read(self, reader):
        import h2.events

        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for ev in self.conn.receive_data(data):
                    s = self.streams.get(getattr(ev, "stream_id", None))
                    if isinstance(ev, h2.events.ResponseReceived) and s:
                        hs = {k.lower(): v for k, v in ev.headers}
                        s[1] = int(hs.pop(":status"))
                        s[2] = hs
                    elif isinstance(ev, h2.events.DataReceived):
                        if s:
                            s[3] += ev.data
                        self.conn.acknowledge_received_data(
                            ev.flow_controlled_length, ev.stream_id
                        )
                    elif isinstance(ev, h2.events.StreamEnded) and s:
                        self.streams.pop(ev.stream_id)
                        if not s[0].done():
                            s[0].set_result((s[1], s[2], s[3].decode("utf-8", "replace")))
                    elif isinstance(ev, h2.events.StreamReset) and s:
                        self.streams.pop(ev.stream_id)
                        if not s[0].done():
                            s[0].set_exception(TransportError(f"stream reset {ev.error_code}"))
                    elif isinstance(ev, h2.events.ConnectionTerminated):
                        break
                self.writer.write(self.conn.data_to_send())
        except Exception:  # noqa: BLE001 - any failure ends every stream of the connection
            pass
        self.dead = True
        for s in self.streams.values():
            if not s[0].done():
                s[0].set_exception(TransportError("h2 connection closed"))
        self.streams.clear()
        self.writer.close()

    async def get(self, path, key, xff):
        await self.opened
        if self.dead:
            raise TransportError("h2 connection closed")
        sid = self.conn.get_next_available_stream_id()
        fut = asyncio.get_running_loop().create_future()
        self.streams[sid] = [fut, 0, {}, bytearray()]
        hdrs = [(":method", "GET"), (":scheme", "http"), (":authority", "soak.local"),
                (":path", path), ("x-forwarded-for", xff)]
        if key is not None:
            hdrs.append(("x-api-key", key))
        self.conn.send_headers(sid, hdrs, end_stream=True)
        self.writer.write(self.conn.data_to_send())
        self.used += 1
        try:
            return await fut
        finally:
            if self.retired and not self.streams:
                self.close()

    def retire(self):
        """Takes no new stream; closes once the streams in flight have ended (closing at once
        would fail them: a client's own doing, not the gateway's)."""
        self.retired = True
        if not self.streams:
            self.close()

    def close(self):
        self.dead = True
        if self.writer:
            self.writer.close()
