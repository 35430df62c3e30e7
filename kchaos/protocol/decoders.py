"""Decoders for Kafka's internal coordinator records, from the raw key/value bytes.

Spark's Kafka source skips internal topics, so kchaos reads them with a client consumer (see
workloads/dump.py) and decodes them here. Formats, from the message schemas in apache/kafka:

* key = int16 record type + key struct (never flexible); value = int16 version + value struct;
  a null value is a tombstone.
* ``__consumer_offsets``: type 0/1 OffsetCommitKey{group, topic, partition} with
  OffsetCommitValue v0-v4 (v4 flexible); type 2 GroupMetadataKey{group} (value kept raw here).
* ``__transaction_state``: type 0 TransactionLogKey{transactionalId} with TransactionLogValue
  v0 (classic) or v1 (flexible: compact strings and arrays, tagged fields
  0 PreviousProducerId, 1 NextProducerId, 2 ClientTransactionVersion).

* ``__share_group_state`` (KIP-932, decoded in kchaos/protocol/share_state.py): type 0 ShareSnapshotKey / type 1 ShareUpdateKey, both
  {groupId, topicId (uuid), partition}; ShareSnapshotValue v0 (flexible: snapshotEpoch,
  stateEpoch, leaderEpoch, startOffset, createTimestamp, writeTimestamp, stateBatches) and
  ShareUpdateValue v0 (flexible: snapshotEpoch, leaderEpoch, startOffset, stateBatches; tag 0
  deliveryCompleteCount); a state batch is {firstOffset, lastOffset, deliveryState (0 available,
  2 acknowledged, 4 archived), deliveryCount}. Layout as Kafka 4.2's DumpLogSegments
  ``--share-group-state-decoder`` prints it (tests/integration/test_decoders.py compares them).

Flexible structs end with a tagged-field section (unsigned varint count, then tag, size,
bytes per field); unknown tags are skipped, so newer brokers' additions do not break decoding.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from kchaos.protocol.wire import DecodeError, Reader

TXN_STATUS = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
              5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


@dataclass(frozen=True)
class OffsetCommit:
    group: str
    topic: str
    partition: int
    offset: int | None          # None: tombstone (offset deleted)
    leader_epoch: int = -1
    metadata: str | None = None
    commit_timestamp: int = -1
    version: int = -1


@dataclass(frozen=True)
class TransactionLogEntry:
    transactional_id: str
    producer_id: int | None        # None: tombstone (transactional id expired)
    producer_epoch: int = -1
    timeout_ms: int = -1
    status: str = ""
    partitions: dict[str, list[int]] = field(default_factory=dict)
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    version: int = -1


def decode_offsets_record(key: bytes, value: bytes | None) -> OffsetCommit | dict[str, Any] | None:
    """An OffsetCommit, ``{"group_metadata": group}`` for a group record, None for unknown types."""
    r = Reader(key)
    kind = r.int16()
    if kind in (0, 1):
        group, topic, partition = r.string() or "", r.string() or "", r.int32()
        if value is None:
            return OffsetCommit(group, topic, partition, None)
        v = Reader(value)
        version = v.int16()
        if version > 4:
            raise DecodeError(f"OffsetCommitValue version {version} is newer than this decoder (0-4)")
        offset = v.int64()
        leader_epoch = v.int32() if version >= 3 else -1
        metadata = v.compact_string() if version >= 4 else v.string()
        commit_ts = v.int64()
        if version == 1:
            v.int64()  # expireTimestamp
        if version >= 4:
            v.tagged_fields()
        return OffsetCommit(group, topic, partition, offset, leader_epoch, metadata, commit_ts, version)
    if kind == 2:
        return {"group_metadata": r.string(), "tombstone": value is None}
    return None


def decode_transaction_record(key: bytes, value: bytes | None) -> TransactionLogEntry | None:
    r = Reader(key)
    kind = r.int16()
    if kind != 0:
        return None
    txid = r.string() or ""
    if value is None:
        return TransactionLogEntry(txid, None)
    v = Reader(value)
    version = v.int16()
    if version > 1:
        raise DecodeError(f"TransactionLogValue version {version} is newer than this decoder (0-1)")
    flexible = version >= 1
    producer_id = v.int64()
    epoch = v.int16()
    timeout = v.int32()
    status = v.int8()
    partitions: dict[str, list[int]] = {}
    count = (v.uvarint() - 1) if flexible else v.int32()
    for _ in range(max(count, 0)):
        topic = (v.compact_string() if flexible else v.string()) or ""
        n = (v.uvarint() - 1) if flexible else v.int32()
        partitions[topic] = [v.int32() for _ in range(max(n, 0))]
        if flexible:
            v.tagged_fields()
    last_update = v.int64()
    start = v.int64()
    previous_pid = next_pid = -1
    client_tv = 0
    if flexible:
        tags = v.tagged_fields()
        if 0 in tags:
            previous_pid = struct.unpack(">q", tags[0])[0]
        if 1 in tags:
            next_pid = struct.unpack(">q", tags[1])[0]
        if 2 in tags:
            client_tv = struct.unpack(">h", tags[2])[0]
    return TransactionLogEntry(txid, producer_id, epoch, timeout, TXN_STATUS.get(status, f"Unknown({status})"),
                               partitions, last_update, start, previous_pid, next_pid, client_tv, version)
