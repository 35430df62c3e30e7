"""Kafka's wire primitives: big-endian integers, unsigned varints, classic and compact strings,
uuids and tagged fields (the encodings of the message schemas in apache/kafka). The verifier
decodes coordinator records with them, the message proxy requests and responses.
"""

from __future__ import annotations

import base64
import struct


#: MaxWaitMs of a final read's Fetch requests (the client dumps' librdkafka consumers and the Spark
#: ingest's Kafka source): how long a broker may hold a fetch that finds nothing new. A final read
#: finds a partition's end by such a fetch (its last records are often transaction markers), so
#: the consumers' default of 500 ms is paid once per partition read (docs/benchmarks.md)
END_OF_LOG_FETCH_WAIT_MS = 10


class DecodeError(ValueError):
    pass


class Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise DecodeError(f"record too short: wanted {n} bytes at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def take(self, n: int) -> bytes:
        """``n`` raw bytes (a record's key or value)."""
        return self._take(n)

    def int8(self) -> int:
        return struct.unpack(">b", self._take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def uvarint(self, max_shift: int = 35) -> int:
        """An unsigned varint (``max_shift`` 63: a varlong)."""
        shift = result = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > max_shift:
                raise DecodeError("unsigned varint too long")

    def varint(self) -> int:
        """A signed zig-zag varint or varlong (record fields in a RecordBatch v2)."""
        unsigned = self.uvarint(max_shift=63)
        return (unsigned >> 1) ^ -(unsigned & 1)

    def string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._take(n).decode()

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._take(n).decode()

    def uuid(self) -> str:
        """Kafka prints topic ids as URL-safe base64 without padding."""
        return base64.urlsafe_b64encode(self._take(16)).decode().rstrip("=")

    def tagged_fields(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self._take(self.uvarint())
        return out

    def done(self) -> bool:
        return self.pos == len(self.data)

    def rest(self) -> bytes:
        chunk = self.data[self.pos:]
        self.pos = len(self.data)
        return chunk


class Writer:
    """The inverse of :class:`Reader`, for the few structs kchaos encodes (synthetic responses)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int8(self, v: int) -> "Writer":
        self.parts.append(struct.pack(">b", v))
        return self

    def int16(self, v: int) -> "Writer":
        self.parts.append(struct.pack(">h", v))
        return self

    def int32(self, v: int) -> "Writer":
        self.parts.append(struct.pack(">i", v))
        return self

    def int64(self, v: int) -> "Writer":
        self.parts.append(struct.pack(">q", v))
        return self

    def uvarint(self, v: int) -> "Writer":
        out = bytearray()
        while True:
            byte = v & 0x7F
            v >>= 7
            if v:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                break
        self.parts.append(bytes(out))
        return self

    def varint(self, v: int) -> "Writer":
        """A signed zig-zag varint (record fields in a RecordBatch v2)."""
        return self.uvarint((v << 1) ^ (v >> 63))

    def string(self, s: str | None) -> "Writer":
        if s is None:
            return self.int16(-1)
        raw = s.encode()
        return self.int16(len(raw)).raw(raw)

    def compact_string(self, s: str | None) -> "Writer":
        if s is None:
            return self.uvarint(0)
        raw = s.encode()
        return self.uvarint(len(raw) + 1).raw(raw)

    def uuid(self, printed: str) -> "Writer":
        """A uuid as :meth:`Reader.uuid` prints it (URL-safe base64 without padding)."""
        raw = base64.urlsafe_b64decode(printed + "=" * (-len(printed) % 4))
        if len(raw) != 16:
            raise ValueError(f"not a uuid: {printed!r}")
        return self.raw(raw)

    def no_tagged_fields(self) -> "Writer":
        return self.uvarint(0)

    def raw(self, data: bytes) -> "Writer":
        self.parts.append(data)
        return self

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def read_frame(sock) -> bytes:
    """One size-prefixed frame (a Kafka response) from a blocking socket."""
    def take(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data

    (size,) = struct.unpack(">i", take(4))
    return take(size)
