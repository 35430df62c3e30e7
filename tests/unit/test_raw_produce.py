"""The orphan-transaction fault's encoding (kchaos/protocol/raw_produce.py), on hand-made data: CRC-32C
against its published check value, the record batch read back by the message proxy's decoder,
and the Produce v3 frame's header."""

from __future__ import annotations

import struct

from kchaos.protocol.api import _batch_producer, parse_request_header
from kchaos.protocol.raw_produce import crc32c, produce_request, record_batch


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C (Castagnoli) check value
    assert crc32c(b"") == 0


def test_a_transactional_batch_reads_back_with_its_producer_and_a_valid_crc():
    batch = record_batch(producer_id=(1 << 48) + 7, producer_epoch=0, base_sequence=0,
                         records=[(b"k1", b"v1"), (None, b"v2")])
    assert _batch_producer(batch) == {"producer_id": (1 << 48) + 7, "producer_epoch": 0, "base_sequence": 0,
                                      "records": 2, "transactional": True}
    (length,) = struct.unpack(">i", batch[8:12])
    assert length == len(batch) - 12
    (crc,) = struct.unpack(">I", batch[17:21])
    assert crc == crc32c(batch[21:])  # over everything from the attributes on


def test_the_produce_frame_is_v3_with_the_batch_inside():
    batch = record_batch(5, 0, 0, [(b"k", b"v")])
    frame = produce_request(42, "txid", "topic", 3, batch)
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    header = parse_request_header(frame[4:])
    assert (header.api, header.api_version, header.correlation_id, header.client_id) == ("Produce", 3, 42,
                                                                                        "kchaos-orphan")
    assert frame.endswith(batch)
