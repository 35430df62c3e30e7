"""Record batches as a broker's segment file stores them, built by hand for the segment reader's tests."""

import struct

from kchaos.protocol.raw_produce import crc32c, record_batch
from kchaos.protocol.wire import Writer


def data_batch(base_offset: int, producer_id: int, epoch: int, base_sequence: int, values: list[bytes],
               leader_epoch: int = 0) -> bytes:
    """A transactional data batch at its place in the log (base offset and leader epoch set; the
    CRC does not cover them)."""
    batch = record_batch(producer_id, epoch, base_sequence, [(None, v) for v in values])
    return struct.pack(">q", base_offset) + batch[8:12] + struct.pack(">i", leader_epoch) + batch[16:]


def control_batch(base_offset: int, producer_id: int, epoch: int, kind: int, coordinator_epoch: int,
                  leader_epoch: int = 0, ts: int = 1000) -> bytes:
    """A control batch of one record: ``kind`` 0 ABORT, 1 COMMIT (2: a leader change)."""
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = Writer().int8(0).varint(0).varint(0).varint(len(key)).raw(key).varint(len(value)).raw(value).varint(0).bytes()
    record = Writer().varint(len(body)).raw(body).bytes()
    tail = struct.pack(">hiqqqhii", 0x30, 0, ts, ts, producer_id, epoch, -1, 1) + record
    after_length = struct.pack(">ib", leader_epoch, 2) + struct.pack(">I", crc32c(tail)) + tail
    return struct.pack(">qi", base_offset, len(after_length)) + after_length
