"""Record batches as a broker stored them: its own log segment files (``<topic>-<partition>/*.log``).

A consumer never sees a transaction marker, so what a coordinator actually wrote to a partition
(COMMIT or ABORT, and the coordinator epoch it wrote it at) is read here, from the segments a
kchaos-started cluster leaves in the run directory. Only the batch headers are decoded, the one
record of a control batch (control batches are never compressed), and on request the first
record's value of an uncompressed data batch; the rest of a data batch is not.

The layout, from Kafka's DefaultRecordBatch and EndTransactionMarker (magic 2): a batch is
baseOffset int64, batchLength int32 (the bytes after it), partitionLeaderEpoch int32, magic int8,
crc uint32, attributes int16 (0x07 compression, 0x10 transactional, 0x20 control), lastOffsetDelta int32,
baseTimestamp int64, maxTimestamp int64, producerId int64, producerEpoch int16, baseSequence
int32, recordsCount int32, then the records. A control record's key is version int16 + type int16
(0 ABORT, 1 COMMIT); its value is version int16 + coordinatorEpoch int32.
tests/integration/test_decoders.py holds this reader to Kafka's DumpLogSegments.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kchaos.protocol.wire import DecodeError, Reader

HEADER = struct.Struct(">qiibIhiqqqhii")
#: the bytes of a batch that batchLength does not count (baseOffset, batchLength)
LENGTH_PREFIX = 12
TRANSACTIONAL, CONTROL, COMPRESSION = 0x10, 0x20, 0x07
#: a control record's type: its key's second int16
MARKER_TYPES = {0: False, 1: True}  # committed?


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int
    #: the batch's largest timestamp (a marker's: when the partition leader appended it)
    max_timestamp: int
    transactional: bool
    control: bool
    #: a transaction marker's kind (True: COMMIT) and its coordinator epoch; None for data batches
    #: and other control records (a leader change, a snapshot header)
    committed: bool | None = None
    coordinator_epoch: int | None = None
    #: the first record's value of an uncompressed data batch, when read with ``values``
    first_value: bytes | None = None


def _first_record(body: bytes) -> tuple[bytes | None, bytes | None]:
    """(key, value) of the first record of an uncompressed batch's records."""
    r = Reader(body)
    r.varint()  # the record's length
    r.int8()  # attributes
    r.varint()  # timestamp delta
    r.varint()  # offset delta
    fields = []
    for _ in range(2):
        length = r.varint()
        fields.append(r.take(length) if length >= 0 else None)
    return fields[0], fields[1]


def _marker(body: bytes) -> tuple[bool, int] | None:
    """(committed, coordinator epoch) of a control batch's record, None if it is no marker."""
    key, value = _first_record(body)
    if key is None or value is None or len(key) < 4 or len(value) < 6:
        return None
    kind = struct.unpack_from(">h", key, 2)[0]
    if kind not in MARKER_TYPES:
        return None
    return MARKER_TYPES[kind], struct.unpack_from(">i", value, 2)[0]


def read_segment(data: bytes, values: bool = False) -> Iterator[Batch]:
    """The batches of one segment file's bytes, in order (``values``: with each uncompressed data
    batch's first record value). Stops at a batch cut short (a broker killed mid-write leaves
    one; recovery truncates it on the next start) or at a zero tail."""
    return (batch for batch, _ in _batches(data, values))


def _batches(data: bytes, values: bool) -> Iterator[tuple[Batch, int]]:
    """read_segment's batches, each with the byte it ends at."""
    at = 0
    while at + HEADER.size <= len(data):
        (base, length, leader_epoch, magic, _crc, attributes, last_delta, _base_ts, max_ts, producer_id,
         producer_epoch, base_sequence, count) = HEADER.unpack_from(data, at)
        end = at + LENGTH_PREFIX + length
        if length <= 0 or end > len(data) or magic != 2:
            return
        marker = value = None
        try:
            if attributes & CONTROL:
                marker = _marker(data[at + HEADER.size:end])
            elif values and not attributes & COMPRESSION:
                value = _first_record(data[at + HEADER.size:end])[1]
        except DecodeError:
            pass
        yield (Batch(base, base + last_delta, leader_epoch, producer_id, producer_epoch, base_sequence, count, max_ts,
                     bool(attributes & TRANSACTIONAL), bool(attributes & CONTROL),
                     marker[0] if marker else None, marker[1] if marker else None, value), end)
        at = end


def read_partition(directory: Path, values: bool = False) -> list[Batch]:
    """Every batch of one partition replica's directory, its segments in offset order (a segment's
    file name is its base offset)."""
    return read_replica(directory, values)[0]


def read_replica(directory: Path, values: bool = False) -> tuple[list[Batch], list[str]]:
    """read_partition's batches, and what of the replica they miss, each as a phrase: a segment
    file that could not be read, or one that stops before its end (bytes past its last whole
    batch that are no zero tail) with a later segment after it; the last segment's tail is what a
    killed broker leaves, and only the node's own record of its end can tell (segments.py)."""
    batches: list[Batch] = []
    missing: list[str] = []
    segments = sorted(Path(directory).glob("*.log"), key=lambda p: int(p.stem))
    for i, segment in enumerate(segments):
        try:
            data = segment.read_bytes()
        except OSError as exc:
            missing.append(f"segment {segment.name} could not be read ({exc.strerror or exc})")
            continue
        end = 0
        for batch, end in _batches(data, values):
            batches.append(batch)
        if i < len(segments) - 1 and data[end:].strip(b"\0"):
            missing.append(f"segment {segment.name} stops at byte {end} of {len(data)}")
    return batches, missing


def read_checkpoint(path: Path) -> dict[tuple[str, int], int] | None:
    """A broker's offset checkpoint file (``replication-offset-checkpoint`` and its kin: version,
    count, then ``topic partition offset`` lines) as (topic, partition) -> offset; None when the
    file is missing or unreadable."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    out = {}
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


def partition_dirs(data_dir: Path) -> Iterator[tuple[str, int, Path]]:
    """(topic, partition, directory) of every partition replica in one node's log directory;
    directories a deletion renamed (``-delete``) or a move left (``-future``) are skipped."""
    for entry in sorted(Path(data_dir).iterdir()) if Path(data_dir).is_dir() else ():
        topic, _, partition = entry.name.rpartition("-")
        if entry.is_dir() and topic and partition.isdigit():
            yield topic, int(partition), entry
