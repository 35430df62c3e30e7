"""The pipeline's work as it happens, read from the workers' histories while they are written.

Every history line is one ``os.write`` of a whole line (workloads/history.py), so a reader that
keeps a partial last line for the next read sees each record once and whole. The monitor keeps
the moments commits succeeded and the operations under way (a send, send_offsets, commit or abort
invoked and not yet answered); the nemesis paces its faults by them (faults/pacing.py). Only kchaos'
own workers keep such a history; for a pipeline without one (Kafka Streams, an outside app) the
monitor sees nothing, and says so (``has_history``).
"""

from __future__ import annotations

import bisect
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the operations whose being under way matters to a fault aimed at work in flight
TRACKED = ("send", "send_offsets", "commit", "abort", "commit_offsets")
#: a commit that succeeded (the negative controls commit offsets instead)
COMMITS = ("commit", "commit_offsets")


@dataclass(frozen=True)
class InFlight:
    process: str
    f: str
    txid: str | None
    txn_seq: int | None
    invoked: float


class WorkMonitor:
    """Follows ``RUN_DIR/history/w*.jsonl`` (the workers' histories, every incarnation)."""

    def __init__(self, history_dir: Path, own_workers: bool = False):
        self.dir = Path(history_dir)
        #: kchaos' own workers always write a history; only its first lines may not be there yet
        self.own_workers = own_workers
        self._read: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._commits: list[float] = []
        self._open: dict[tuple[str, int], InFlight] = {}
        self._lock = threading.Lock()

    @property
    def has_history(self) -> bool:
        """Whether the pipeline keeps a history: kchaos' own workers do, even before their first
        line (a fault paced before it waits for their work); another pipeline does once a file is there."""
        return self.own_workers or any(self.dir.glob("w*.jsonl"))

    def refresh(self) -> None:
        """Read what the workers wrote since the last call."""
        with self._lock:
            for path in sorted(self.dir.glob("w*.jsonl")):
                try:
                    with open(path, "rb") as fh:
                        fh.seek(self._read.get(path, 0))
                        data = fh.read()
                except FileNotFoundError:
                    continue
                if not data:
                    continue
                self._read[path] = self._read.get(path, 0) + len(data)
                data = self._partial.pop(path, b"") + data
                lines = data.split(b"\n")
                if lines[-1]:
                    self._partial[path] = lines[-1]
                for line in lines[:-1]:
                    if line:
                        self._take(json.loads(line))

    def _take(self, record: dict[str, Any]) -> None:
        f = record.get("f")
        if f not in TRACKED:
            return
        key = (record["process"], record["op"])
        if record["type"] == "invoke":
            self._open[key] = InFlight(record["process"], f, record.get("txid"),
                                       (record.get("value") or {}).get("txn_seq"), record["time"])
            return
        self._open.pop(key, None)
        if f in COMMITS and record["type"] == "ok":
            bisect.insort(self._commits, record["time"])

    def commits_between(self, start: float, end: float) -> int:
        """Commits that succeeded in [start, end] (harness clock: the histories' ``time``)."""
        with self._lock:
            return bisect.bisect_right(self._commits, end) - bisect.bisect_left(self._commits, start)

    def commit_rate(self, start: float, end: float) -> float:
        return self.commits_between(start, end) / max(end - start, 1e-9)

    def in_flight(self, *functions: str) -> list[InFlight]:
        """The operations invoked and not yet answered (of ``functions``, all tracked ones when none)."""
        with self._lock:
            return sorted((o for o in self._open.values() if not functions or o.f in functions),
                          key=lambda o: o.invoked)
