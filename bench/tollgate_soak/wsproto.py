"""The WebSocket wire format (RFC 6455) as far as the soak needs it, for its backend
(`wsbackend`) and its client (`wsclient`): the handshake's accept value, and single-frame
messages (FIN set, no extensions). Standard library only.

A frame is (opcode, payload bytes). Client frames are masked with a 4-byte key, server frames are
not (RFC 6455 5.1); `read_frame` unmasks whatever it reads.
"""

import base64
import hashlib
import os
import struct

# RFC 6455 1.3: appended to Sec-WebSocket-Key before the SHA-1 of Sec-WebSocket-Accept.
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x1, 0x2, 0x8, 0x9, 0xA
# A close frame's payload: status 1000 (normal closure), big-endian.
CLOSE_NORMAL = struct.pack("!H", 1000)
MAX_PAYLOAD = 1 << 20


class FrameError(Exception):
    """A frame the soak does not speak: fragmented, reserved bits, or over `MAX_PAYLOAD`."""


def new_key():
    """A fresh Sec-WebSocket-Key: 16 random bytes, base64."""
    return base64.b64encode(os.urandom(16)).decode()


def accept_for(key):
    """The Sec-WebSocket-Accept that answers Sec-WebSocket-Key `key`: base64 of the SHA-1 of
    the key followed by `GUID`."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def encode(opcode, payload, mask=None):
    """One final frame of `opcode` carrying `payload` (bytes); masked with the 4-byte `mask`
    when given (a client's frame), else unmasked (a server's)."""
    head = bytearray([0x80 | opcode])
    mbit = 0x80 if mask is not None else 0
    n = len(payload)
    if n < 126:
        head.append(mbit | n)
    elif n < 1 << 16:
        head.append(mbit | 126)
        head += struct.pack("!H", n)
    else:
        head.append(mbit | 127)
        head += struct.pack("!Q", n)
    if mask is None:
        return bytes(head) + payload
    return bytes(head) + mask + apply_mask(payload, mask)


def client_frame(opcode, payload):
    """`encode` with a fresh random mask, as a client must send it."""
    return encode(opcode, payload, os.urandom(4))


def apply_mask(payload, mask):
    """`payload` XOR the repeating 4-byte `mask` (masking and unmasking are the same)."""
    n = len(payload)
    if n == 0:
        return b""
    key = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(payload, "big") ^ key).to_bytes(n, "big")


async def read_frame(reader):
    """Reads one frame from an asyncio StreamReader: (opcode, payload bytes), unmasked.

    Raises asyncio.IncompleteReadError when the stream ends mid-frame (or before one) and
    FrameError for a fragmented frame, reserved bits or a payload over `MAX_PAYLOAD`.
    """
    b0, b1 = await reader.readexactly(2)
    if not b0 & 0x80 or b0 & 0x70:
        raise FrameError(f"unsupported frame head 0x{b0:02x}")
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    if n > MAX_PAYLOAD:
        raise FrameError(f"payload of {n} bytes")
    mask = await reader.readexactly(4) if b1 & 0x80 else None
    payload = await reader.readexactly(n)
    return b0 & 0x0F, apply_mask(payload, mask) if mask else payload
