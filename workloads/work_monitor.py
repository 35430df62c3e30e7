"""The pipeline's work as it happens, read from the workers' histories while they are written.

Every history line is one ``os.write`` of a whole line (workloads/history.py), so a reader that
keeps a partial last line for the next read sees each record once and whole. The monitor keeps
the moments commits succeeded and the operations under way (a send, send_offsets, commit or abort
invoked and not yet answered); the nemesis paces its faults by them (faults/pacing.py). Only kchaos'
own workers keep such a history. For a pipeline without one (Kafka Streams, an outside app) the
monitor reads the group's committed offsets instead (``offsets_reader``), at most once a second:
a transactional pipeline's offsets advance with its commits, so their rate says whether it is
committing again (``signal``); what is under way cannot be seen that way (nothing to aim at).
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

#: the operations whose being under way matters to a fault aimed at work in flight
TRACKED = ("send", "send_offsets", "commit", "abort", "commit_offsets")
#: a commit that succeeded (the negative controls commit offsets instead)
COMMITS = ("commit", "commit_offsets")
#: the group's offsets are read at most this often for a pipeline without a history
OFFSETS_SAMPLE_S = 1.0


@dataclass(frozen=True)
class InFlight:
    process: str
    f: str
    txid: str | None
    txn_seq: int | None
    invoked: float


class WorkMonitor:
    """Follows ``RUN_DIR/history/w*.jsonl`` (the workers' histories, every incarnation)."""

    def __init__(self, history_dir: Path, own_workers: bool = False,
                 offsets_reader: Callable[[], dict[int, int]] | None = None):
        self.dir = Path(history_dir)
        #: kchaos' own workers always write a history; only its first lines may not be there yet
        self.own_workers = own_workers
        #: the group's committed offsets per input partition (raises while they cannot be read)
        self.offsets_reader = offsets_reader
        self._read: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._commits: list[float] = []
        self._open: dict[tuple[str, int], InFlight] = {}
        #: (time, the group's committed offsets summed) for a pipeline without a history
        self._offsets: list[tuple[float, int]] = []
        self._offsets_read_at = 0.0
        self._lock = threading.Lock()

    @property
    def has_history(self) -> bool:
        """Whether the pipeline keeps a history: kchaos' own workers do, even before their first
        line (a fault paced before it waits for their work); another pipeline does once a file is there."""
        return self.own_workers or any(self.dir.glob("w*.jsonl"))

    @property
    def signal(self) -> str | None:
        """What the commit rate is read from: ``commits`` (the history), ``group offsets`` (no
        history, the group's committed offsets), or None (no progress signal at all)."""
        if self.has_history:
            return "commits"
        return "group offsets" if self.offsets_reader is not None else None

    def refresh(self) -> None:
        """Read what the workers wrote since the last call (or, without a history, the group's offsets)."""
        if not self.has_history and self.offsets_reader is not None:
            self._sample_offsets()
            return
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

    def _sample_offsets(self) -> None:
        now = time.time()
        if now - self._offsets_read_at < OFFSETS_SAMPLE_S:
            return
        self._offsets_read_at = now
        try:
            total = sum(max(0, o) for o in self.offsets_reader().values())  # type: ignore[misc]
        except Exception:  # the group's coordinator is down: no sample, and no progress seen
            return
        with self._lock:
            self._offsets.append((now, total))

    def commits_between(self, start: float, end: float) -> int:
        """Commits that succeeded in [start, end] (harness clock: the histories' ``time``)."""
        with self._lock:
            return bisect.bisect_right(self._commits, end) - bisect.bisect_left(self._commits, start)

    def commit_rate(self, start: float, end: float) -> float:
        """Commits a second in [start, end]; without a history, the group's committed input
        offsets a second between the first and last samples in it (0 with fewer than two)."""
        if self.signal == "group offsets":
            with self._lock:
                inside = [(t, n) for t, n in self._offsets if start <= t <= end]
            if len(inside) < 2:
                return 0.0
            (t0, n0), (t1, n1) = inside[0], inside[-1]
            return max(0, n1 - n0) / max(t1 - t0, 1e-9)
        return self.commits_between(start, end) / max(end - start, 1e-9)

    def in_flight(self, *functions: str) -> list[InFlight]:
        """The operations invoked and not yet answered (of ``functions``, all tracked ones when none)."""
        with self._lock:
            return sorted((o for o in self._open.values() if not functions or o.f in functions),
                          key=lambda o: o.invoked)
