"""The soak's WebSocket pieces (bench/tollgate_soak/): the frame codec, and its backend and client
talking to each other over a real loopback socket (no gateway in between)."""

import asyncio
import json
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tollgate_soak import wsbackend, wsclient, wsproto  # noqa: E402
from tollgate_soak.clients import read_response  # noqa: E402


def reader_of(data):
    r = asyncio.StreamReader()
    r.feed_data(data)
    r.feed_eof()
    return r


class Codec(unittest.TestCase):
    def test_accept_value_of_the_rfc_example(self):
        # RFC 6455 1.3's sample key and its accept value.
        self.assertEqual(wsproto.accept_for("dGhlIHNhbXBsZSBub25jZQ=="),
                         "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")

    def test_frames_round_trip_at_every_length_form_masked_or_not(self):
        async def go():
            for n in (0, 1, 125, 126, 65535, 65536):
                payload = bytes(i % 251 for i in range(n))
                for mask in (None, b"\x01\x02\x03\x04"):
                    frame = wsproto.encode(wsproto.OP_BINARY, payload, mask)
                    got = await wsproto.read_frame(reader_of(frame))
                    self.assertEqual(got, (wsproto.OP_BINARY, payload), (n, mask))

        asyncio.run(go())

    def test_masking_is_its_own_inverse_and_a_client_frame_is_masked(self):
        m = b"\xaa\x55\x0f\xf0"
        self.assertEqual(wsproto.apply_mask(wsproto.apply_mask(b"hello!", m), m), b"hello!")
        frame = wsproto.client_frame(wsproto.OP_TEXT, b"hi")
        self.assertEqual((frame[0], frame[1]), (0x81, 0x82))

    def test_unsupported_frames_are_refused(self):
        async def go(frame):
            return await wsproto.read_frame(reader_of(frame))

        with self.assertRaises(wsproto.FrameError):  # not final (fragmented)
            asyncio.run(go(b"\x01\x00"))
        with self.assertRaises(wsproto.FrameError):  # over MAX_PAYLOAD
            asyncio.run(go(b"\x82\x7f" + (wsproto.MAX_PAYLOAD + 1).to_bytes(8, "big")))
        with self.assertRaises(asyncio.IncompleteReadError):
            asyncio.run(go(b"\x81\x05hi"))

    def test_a_wrong_accept_value_breaks_the_session_before_any_message(self):
        with self.assertRaises(wsclient.WsBroken):
            asyncio.run(wsclient.exchange(None, None, {"sec-websocket-accept": "x"}, "k", 2,
                                          None, 0, 1))


class BackendAndClient(unittest.TestCase):
    def setUp(self):
        for k in wsbackend.STATS:
            wsbackend.STATS[k] = 0

    async def until(self, cond, timeout=10.0):
        deadline = asyncio.get_running_loop().time() + timeout
        while not cond():
            self.assertLess(asyncio.get_running_loop().time(), deadline, wsbackend.STATS)
            await asyncio.sleep(0.01)

    def test_sessions_closed_and_dropped_are_echoed_and_counted(self):
        async def go():
            server = await asyncio.start_server(wsbackend.handle, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            async with server:
                r, w, answer, key = await wsclient.open_ws(port, "/ws/x", "k", "10.0.0.1", 5)
                self.assertEqual(answer[0], 101)
                got = await wsclient.exchange(r, w, answer[1], key, 3, None, 0, 5)
                self.assertEqual(got, ("closed", 3))
                w.close()
                r, w, answer, key = await wsclient.open_ws(port, "/ws/y", None, "10.0.0.2", 5)
                got = await wsclient.exchange(r, w, answer[1], key, 4, 1, 0, 5)
                self.assertEqual(got, ("dropped", 1))
                w.close()
                await self.until(lambda: wsbackend.STATS["open"] == 0
                                 and wsbackend.STATS["dropped"] == 1)
                self.assertEqual(wsbackend.STATS,
                                 {"opened": 2, "open": 0, "closed": 1, "dropped": 1})
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
                status, _, body = await read_response(r)
                w.close()
                self.assertEqual((status, json.loads(body)["opened"]), (200, 2))
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual((await read_response(r))[0], 400)
                w.close()

        asyncio.run(go())


if __name__ == "__main__":
    unittest.main()
