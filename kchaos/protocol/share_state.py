"""KIP-932's share-group state, as the share coordinator writes it to ``__share_group_state``:
the record decoder and the replay of one share partition's snapshot and updates. The layout is
described in kchaos/protocol/decoders.py, which decodes Kafka's other coordinator records. It lives
below workloads and the verifier, both of which read it: the share workload's drain reads it too
(an acknowledgement applied by the broker but never answered to its worker is done, not pending)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kchaos.protocol.wire import DecodeError, Reader


SHARE_STATE_TOPIC = "__share_group_state"
SHARE_DELIVERY_STATE = {0: "available", 1: "acquired", 2: "acknowledged", 4: "archived"}
#: delivery states a record never leaves: acknowledged, archived
SHARE_FINAL_STATES = (2, 4)


@dataclass(frozen=True)
class ShareStateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class ShareStateRecord:
    kind: str                      # "snapshot" | "update" | "tombstone"
    group: str
    topic_id: str
    partition: int
    snapshot_epoch: int = -1
    state_epoch: int = -1
    leader_epoch: int = -1
    start_offset: int = -1
    batches: tuple[ShareStateBatch, ...] = ()
    delivery_complete_count: int = -1


def decode_share_state_record(key: bytes, value: bytes | None) -> ShareStateRecord | None:
    r = Reader(key)
    kind = r.int16()
    if kind not in (0, 1):
        return None
    group, topic_id, partition = r.string() or "", r.uuid(), r.int32()
    name = "snapshot" if kind == 0 else "update"
    if value is None:
        return ShareStateRecord("tombstone", group, topic_id, partition)
    v = Reader(value)
    version = v.int16()
    if version != 0:
        raise DecodeError(f"Share{name.capitalize()}Value version {version} is newer than this decoder (0)")
    snapshot_epoch = v.int32()
    state_epoch = v.int32() if kind == 0 else -1
    leader_epoch = v.int32()
    start_offset = v.int64()
    if kind == 0:
        v.int64()  # createTimestamp
        v.int64()  # writeTimestamp
    batches = []
    for _ in range(max(v.uvarint() - 1, 0)):
        batches.append(ShareStateBatch(v.int64(), v.int64(), v.int8(), v.int16()))
        v.tagged_fields()
    tags = v.tagged_fields()
    complete = struct.unpack(">i", tags[0])[0] if 0 in tags and len(tags[0]) == 4 else -1
    return ShareStateRecord(name, group, topic_id, partition, snapshot_epoch, state_epoch, leader_epoch, start_offset,
                            tuple(batches), complete)


def share_partition_state(records: list[ShareStateRecord]) -> dict[str, Any]:
    """Replay one share-partition's snapshot and updates (in log order) into its final state:
    ``start_offset`` (everything below is complete) and per offset ``(state, delivery_count)``."""
    start = -1
    offsets: dict[int, tuple[int, int]] = {}
    for rec in records:
        if rec.kind == "tombstone":
            start, offsets = -1, {}
            continue
        start, offsets = apply_write(start, offsets, rec)
    return {"start_offset": start, "offsets": offsets}


def apply_write(start: int, offsets: dict[int, tuple[int, int]], rec: ShareStateRecord
                ) -> tuple[int, dict[int, tuple[int, int]]]:
    """One snapshot or update applied to a replayed state: a snapshot replaces the offsets, an
    update overlays its batches; a start offset given moves the start, and offsets below it drop."""
    offsets = {} if rec.kind == "snapshot" else dict(offsets)
    if rec.start_offset >= 0:
        start = rec.start_offset
    for b in rec.batches:
        for o in range(b.first_offset, b.last_offset + 1):
            offsets[o] = (b.delivery_state, b.delivery_count)
    return start, {o: v for o, v in offsets.items() if o >= start}


#: what a record's persisted state says of it: done for the share group
DONE_LABELS = ("complete", "acknowledged", "archived")


def persisted_label(state: dict[str, Any] | None, offset: int) -> str:
    """What a replayed partition state (share_partition_state) says of one offset: ``complete``
    (below the start offset), ``acknowledged``, ``archived``, ``available``, ``never-delivered``
    (at or above the start offset and in no batch: Kafka reads that as available, delivered 0
    times) or ``unknown`` (no state for its partition)."""
    if state is None:
        return "unknown"
    if 0 <= state["start_offset"] and offset < state["start_offset"]:
        return "complete"
    value = state["offsets"].get(offset)
    if value is None:
        return "never-delivered" if state["start_offset"] >= 0 else "unknown"
    return "available" if value[0] not in SHARE_FINAL_STATES else SHARE_DELIVERY_STATE[value[0]]


def positions_done(states: dict[int, dict[str, Any]], positions: Any) -> set[tuple[int, int]]:
    """Of ``positions`` (partition, offset), those replayed ``states`` (share_partition_state by
    partition) hold as done: below the start offset, acknowledged or archived."""
    return {(p, o) for p, o in positions if persisted_label(states.get(p), o) in DONE_LABELS}
