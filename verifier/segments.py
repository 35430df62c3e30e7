"""The brokers' own record batches of a run, merged across replicas: what the verifier reads from
the segment files a kchaos-started cluster leaves in the run directory
(kchaos/protocol/log_segments.py decodes them). The facts built on them (markers.py: COMMIT
markers the coordinator's log never prepared; sequences.py: sequence numbers used again after an
abort) read one merged copy, so a partition's history is read once for both engines.

A batch at a base offset is taken in the form most nodes hold (a replica truncated and not yet
caught up may differ); the nodes holding that form are kept with it.

What was not read is said, never passed over (``Segments.partial``): a node of the run without
its log directory, a partition its ``replication-offset-checkpoint`` lists with no directory, or
whose batches end below the high watermark that file records, a segment file unreadable or
stopping before its end, and offsets missing between the batches of a partition that is not
compacted. A fact read from partial segments carries the reasons (``partial_field``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.protocol.log_segments import Batch, partition_dirs, read_checkpoint, read_replica
from kchaos.rundir import NODE_DIR, RunDir

#: topics that hold no transactional batches
NOT_TRANSACTIONAL = ("__cluster_metadata", "__transaction_state")
#: topics the log cleaner compacts: offsets missing between their batches are its work
COMPACTED = ("__consumer_offsets",)
#: the node's record of each partition replica it holds, with its high watermark
HIGH_WATERMARKS = "replication-offset-checkpoint"

#: (topic, partition) -> its batches in offset order, each with the nodes that hold it so
Replicas = dict[tuple[str, int], list[tuple[Batch, list[str]]]]


@dataclass(frozen=True)
class Segments:
    replicas: Replicas
    #: what the merged batches may miss, each a phrase naming the node and partition; () when
    #: every replica was read whole
    partial: tuple[str, ...] = ()


def read_segments(data_dirs: dict[str, Path], values: bool = False, without_data: tuple[str, ...] = ()) -> Segments:
    """Every batch of the nodes' log directories (by node name), merged by base offset, and what
    was not read (``without_data``: the run's nodes with no log directory); ``values``: with each
    uncompressed data batch's first record value."""
    copies: dict[tuple[str, int, int], Counter[Batch]] = defaultdict(Counter)
    holders: dict[tuple[str, int, Batch], list[str]] = defaultdict(list)
    partial = [f"{node} has no log directory" for node in without_data]
    for node, data_dir in sorted(data_dirs.items()):
        held = read_checkpoint(Path(data_dir) / HIGH_WATERMARKS)
        found = set()
        for topic, partition, directory in partition_dirs(data_dir):
            if topic in NOT_TRANSACTIONAL:
                continue
            found.add((topic, partition))
            batches, missing = read_replica(directory, values)
            partial += [f"{node}: {topic}-{partition}: {why}" for why in missing]
            partial += _unread_offsets(node, topic, partition, batches, (held or {}).get((topic, partition)))
            for batch in batches:
                copies[(topic, partition, batch.base_offset)][batch] += 1
                holders[(topic, partition, batch)].append(node)
        if held is None and found:
            partial.append(f"{node} has no readable {HIGH_WATERMARKS}: whether it holds every replica whole is not known")
        partial += [f"{node}: no log directory of {t}-{p}, which its {HIGH_WATERMARKS} lists"
                    for t, p in sorted(set(held or {}) - found) if t not in NOT_TRANSACTIONAL]
    merged: Replicas = defaultdict(list)
    for (topic, partition, _), counted in copies.items():
        batch = counted.most_common(1)[0][0]
        merged[(topic, partition)].append((batch, holders[(topic, partition, batch)]))
    return Segments({key: sorted(batches, key=lambda b: b[0].base_offset) for key, batches in sorted(merged.items())},
                    tuple(partial))


def _unread_offsets(node: str, topic: str, partition: int, batches: list[Batch], high: int | None) -> list[str]:
    """Where one replica's batches miss offsets: a batch's end short of the high watermark its
    node recorded, and, where the cleaner does not compact the topic, offsets between batches."""
    out = []
    end = max((b.last_offset + 1 for b in batches), default=None)
    if high is not None and high > 0 and (end is None or end < high):
        out.append(f"{node}: {topic}-{partition} ends at offset {end or 0}, below the high watermark {high} its "
                   f"{HIGH_WATERMARKS} records")
    if topic not in COMPACTED:
        ordered = sorted(batches, key=lambda b: b.base_offset)
        out += [f"{node}: {topic}-{partition} has no batch of offsets {a.last_offset + 1} to {b.base_offset - 1}"
                for a, b in zip(ordered, ordered[1:]) if b.base_offset > a.last_offset + 1]
    return out


def read_replicas(data_dirs: dict[str, Path], values: bool = False) -> Replicas:
    """The merged batches alone (read_segments)."""
    return read_segments(data_dirs, values).replicas


def run_segments(run: Path) -> Segments | None:
    """The run's merged batches, with values, and what was not read; None when the run holds no
    broker segments (a cluster kchaos did not start, or the docker backend)."""
    record = RunDir(run)
    data_dirs = record.node_data_dirs()
    if not data_dirs:
        return None
    nodes = sorted(d.name for d in record.cluster_dir.glob(NODE_DIR.format("*")) if d.is_dir())
    return read_segments(data_dirs, values=True, without_data=tuple(n for n in nodes if n not in data_dirs))


def as_segments(read: Segments | Replicas | None) -> Segments | None:
    """Merged batches as Segments (bare Replicas: read whole, as a test or a benchmark builds them)."""
    return read if read is None or isinstance(read, Segments) else Segments(read)


def partial_field(segments: Segments | None) -> dict[str, Any]:
    """A segment fact's ``partial`` (segments.partial, in full), {} where it read every replica whole."""
    return {"partial": list(segments.partial)} if segments is not None and segments.partial else {}
