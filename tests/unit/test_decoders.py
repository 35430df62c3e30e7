"""Decoders on hand-built records: classic and flexible versions, tagged fields, tombstones."""

import struct

import pytest

from kchaos.protocol.decoders import DecodeError, decode_offsets_record, decode_transaction_record


def s16(text):  # classic string
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def cs(text):  # compact string
    b = text.encode()
    return bytes([len(b) + 1]) + b


def test_transaction_log_v1_with_tagged_fields():
    key = struct.pack(">h", 0) + s16("tx-1")
    value = (struct.pack(">hqhib", 1, 1000, 3, 60000, 2)          # v1, pid, epoch, timeout, PrepareCommit
             + bytes([2]) + cs("out") + bytes([3]) + struct.pack(">ii", 0, 2) + bytes([0])  # [{out: [0, 2]}]
             + struct.pack(">qq", 111, 100)
             + bytes([2]) + bytes([1, 8]) + struct.pack(">q", 1001) + bytes([2, 2]) + struct.pack(">h", 2))
    entry = decode_transaction_record(key, value)
    assert (entry.transactional_id, entry.producer_id, entry.producer_epoch, entry.status) == ("tx-1", 1000, 3, "PrepareCommit")
    assert entry.partitions == {"out": [0, 2]}
    assert (entry.last_update_ms, entry.start_ms) == (111, 100)
    assert (entry.next_producer_id, entry.client_transaction_version, entry.previous_producer_id) == (1001, 2, -1)


def test_transaction_log_v0_and_tombstone():
    key = struct.pack(">h", 0) + s16("tx-0")
    value = (struct.pack(">hqhib", 0, 5, 0, 1000, 4) + struct.pack(">i", 1) + s16("t") + struct.pack(">ii", 1, 7)
             + struct.pack(">qq", 2, 1))
    entry = decode_transaction_record(key, value)
    assert entry.status == "CompleteCommit" and entry.partitions == {"t": [7]} and entry.version == 0
    assert decode_transaction_record(key, None).producer_id is None


def test_offset_commit_versions():
    key = struct.pack(">h", 1) + s16("g") + s16("t") + struct.pack(">i", 3)
    v1 = struct.pack(">hq", 1, 42) + s16("m") + struct.pack(">qq", 9, -1)
    v3 = struct.pack(">hqi", 3, 43, 5) + s16("") + struct.pack(">q", 10)
    v4 = struct.pack(">hqi", 4, 44, 6) + cs("x") + struct.pack(">q", 11) + bytes([0])
    assert decode_offsets_record(key, v1).offset == 42
    c3 = decode_offsets_record(key, v3)
    assert (c3.offset, c3.leader_epoch, c3.commit_timestamp) == (43, 5, 10)
    c4 = decode_offsets_record(key, v4)
    assert (c4.group, c4.topic, c4.partition, c4.offset, c4.metadata) == ("g", "t", 3, 44, "x")
    assert decode_offsets_record(key, None).offset is None
    assert decode_offsets_record(struct.pack(">h", 2) + s16("g"), b"...")["group_metadata"] == "g"


def test_truncated_and_future_records_are_clear_errors():
    key = struct.pack(">h", 0) + s16("tx")
    with pytest.raises(DecodeError, match="too short"):
        decode_transaction_record(key, struct.pack(">hq", 1, 5))
    with pytest.raises(DecodeError, match="newer than this decoder"):
        decode_transaction_record(key, struct.pack(">h", 9) + b"\0" * 40)
