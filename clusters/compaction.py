"""What the log cleaner removed from the internal topics whose records are evidence: read from each
node's ``cleaner-offset-checkpoint`` (the offset each partition was cleaned up to)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the internal topics whose compaction the verifier must know about (their records are evidence)
COMPACTED_EVIDENCE = ("__consumer_offsets", "__transaction_state")


def cleaned_offsets(work_dir: Path) -> dict[str, Any] | None:
    """What the log cleaner compacted on a local cluster's nodes, from each data directory's
    ``cleaner-offset-checkpoint`` (version, count, then ``topic partition offset`` lines): per
    internal topic and partition the highest offset any replica was cleaned up to. None when
    ``work_dir`` holds no node data (nothing can be told)."""
    checkpoints = sorted(Path(work_dir).glob("node-*/data/cleaner-offset-checkpoint"))
    if not any(Path(work_dir).glob("node-*/data")):
        return None
    return merge_cleaner_checkpoints([path.read_text() for path in checkpoints])


def merge_cleaner_checkpoints(texts: list[str]) -> dict[str, Any]:
    """Per internal topic and partition, the highest offset any replica's
    ``cleaner-offset-checkpoint`` (version, count, then ``topic partition offset`` lines) names."""
    out: dict[str, Any] = {topic: {} for topic in COMPACTED_EVIDENCE}
    for text in texts:
        for line in text.splitlines()[2:]:
            parts = line.split()
            if len(parts) == 3 and parts[0] in out and parts[2].lstrip("-").isdigit():
                partition, offset = int(parts[1]), int(parts[2])
                out[parts[0]][partition] = max(out[parts[0]].get(partition, 0), offset)
    return out
