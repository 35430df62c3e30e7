"""The brokers' own record batches of a run, merged across replicas: what the verifier reads from
the segment files a kchaos-started cluster leaves in the run directory
(kchaos/protocol/log_segments.py decodes them). The facts built on them (markers.py: COMMIT
markers the coordinator's log never prepared; sequences.py: sequence numbers used again after an
abort) read one merged copy, so a partition's history is read once for both engines.

A batch at a base offset is taken in the form most nodes hold (a replica truncated and not yet
caught up may differ); the nodes holding that form are kept with it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from kchaos.protocol.log_segments import Batch, partition_dirs, read_partition
from kchaos.rundir import RunDir

#: topics that hold no transactional batches
NOT_TRANSACTIONAL = ("__cluster_metadata", "__transaction_state")

#: (topic, partition) -> its batches in offset order, each with the nodes that hold it so
Replicas = dict[tuple[str, int], list[tuple[Batch, list[str]]]]


def read_replicas(data_dirs: dict[str, Path], values: bool = False) -> Replicas:
    """Every batch of the nodes' log directories (by node name), merged by base offset; ``values``:
    with each uncompressed data batch's first record value."""
    copies: dict[tuple[str, int, int], Counter[Batch]] = defaultdict(Counter)
    holders: dict[tuple[str, int, Batch], list[str]] = defaultdict(list)
    for node, data_dir in sorted(data_dirs.items()):
        for topic, partition, directory in partition_dirs(data_dir):
            if topic in NOT_TRANSACTIONAL:
                continue
            for batch in read_partition(directory, values):
                copies[(topic, partition, batch.base_offset)][batch] += 1
                holders[(topic, partition, batch)].append(node)
    merged: Replicas = defaultdict(list)
    for (topic, partition, _), counted in copies.items():
        batch = counted.most_common(1)[0][0]
        merged[(topic, partition)].append((batch, holders[(topic, partition, batch)]))
    return {key: sorted(batches, key=lambda b: b[0].base_offset) for key, batches in sorted(merged.items())}


def run_replicas(run: Path) -> Replicas | None:
    """The run's merged batches, with values; None when the run holds no broker segments (a
    cluster kchaos did not start, or the docker backend)."""
    data_dirs = RunDir(run).node_data_dirs()
    return read_replicas(data_dirs, values=True) if data_dirs else None
