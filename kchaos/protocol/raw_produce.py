"""A transactional record batch written straight to a partition leader, with no coordinator told:
the state a late Produce leaves behind in KIP-664 / KAFKA-9144 (a batch that reaches the leader
after its transaction ended opens a transaction there that no coordinator will ever end, so the
partition's last stable offset stops). kchaos' ``orphan-transaction`` fault uses it to put a
hanging transaction on a real broker on purpose, so that the hanging-transaction check and the
KIP-664 recovery can be shown to work; the hunt for the real cause is a separate matter.

A broker with partition verification on (KIP-890 part 1, ``transaction.partition.verification.enable``,
the default since 3.6) asks the coordinator before appending, and refuses the batch: the answer
is recorded either way.

The encoding: Produce v3 (the oldest version Kafka 4 accepts, not flexible) carrying one
RecordBatch v2 (magic 2) with the transactional attribute set, CRC-32C over the batch from its
attributes on, as clients/src/main/resources/common/message/ProduceRequest.json and Kafka's
DefaultRecordBatch describe.
"""

from __future__ import annotations

import socket
import struct
import time

from kchaos.protocol.api import ERROR_NAMES
from kchaos.protocol.wire import Reader, Writer, read_frame

PRODUCE_V3 = (0, 3)
TRANSACTIONAL = 0x10


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _record(offset_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = Writer().int8(0).varint(0).varint(offset_delta)  # attributes, timestamp and offset deltas
    for field in (key, value):
        if field is None:
            body.varint(-1)
        else:
            body.varint(len(field)).raw(field)
    encoded = body.varint(0).bytes()  # no headers
    return Writer().varint(len(encoded)).raw(encoded).bytes()


def record_batch(producer_id: int, producer_epoch: int, base_sequence: int,
                 records: list[tuple[bytes | None, bytes | None]], transactional: bool = True) -> bytes:
    now = int(time.time() * 1000)
    tail = (struct.pack(">hiqqqhii", TRANSACTIONAL if transactional else 0, len(records) - 1, now, now, producer_id,
                        producer_epoch, base_sequence, len(records))
            + b"".join(_record(i, k, v) for i, (k, v) in enumerate(records)))
    after_length = struct.pack(">ib", 0, 2) + struct.pack(">I", crc32c(tail)) + tail  # leader epoch, magic, crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


def produce_request(correlation_id: int, transactional_id: str | None, topic: str, partition: int,
                    batch: bytes, client_id: str = "kchaos-orphan") -> bytes:
    frame = (Writer().int16(PRODUCE_V3[0]).int16(PRODUCE_V3[1]).int32(correlation_id).string(client_id)
             .string(transactional_id).int16(-1).int32(30000)  # acks all, timeout
             .int32(1).string(topic).int32(1).int32(partition).int32(len(batch)).raw(batch).bytes())
    return struct.pack(">i", len(frame)) + frame


def write_orphan_batch(host: str, port: int, topic: str, partition: int, producer_id: int,
                       transactional_id: str, records: list[tuple[bytes | None, bytes | None]],
                       timeout_s: float = 30.0) -> dict[str, object]:
    """Write one transactional batch (epoch 0, sequence 0) to the leader at ``host:port``; return
    the broker's answer: its error name and the offset it appended at (-1 when refused)."""
    batch = record_batch(producer_id, 0, 0, records)
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(produce_request(1, transactional_id, topic, partition, batch))
        frame = read_frame(sock)
    r = Reader(frame)
    r.int32()  # correlation id
    for _ in range(r.int32()):  # topics
        r.string()
        for _ in range(r.int32()):  # partitions
            r.int32()
            error, base_offset = r.int16(), r.int64()
            return {"error": ERROR_NAMES.get(error, str(error)), "base_offset": base_offset if error == 0 else -1}
    return {"error": "no partition in the response", "base_offset": -1}
