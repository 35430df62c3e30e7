"""What the nodes' server logs in a run directory say of the cluster: the controller's replay of
its metadata log (brokers registered, fenced and unfenced) and the partition leaders' ISR changes.

The cluster's own record, beside the harness's: verifier/fault_effects.py reads a fault's effect
from it, verifier/driver_checks.py the brokers' state at the run's end. Lines are stamped on the
node's clock, local time; each node's log is read in its own order (a node that restarts replays
the metadata log again, so an earlier record can appear late in one node's log, never out of
order within it).
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterable

#: log4j2's stamp (Kafka 4.x: ``2026-12-02T03:00:40,123``) or reload4j's (3.x: a space for the T)
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d,\d{3})\] ")
_REGISTER = re.compile(r"Replayed (?:initial )?RegisterBrokerRecord .*?brokerId=(\d+), .*?incarnationId=([\w-]+)"
                       r"(?:.*?, fenced=(true|false))?")
_CHANGE = re.compile(r"Replayed BrokerRegistrationChangeRecord .*?brokerId=(\d+), brokerEpoch=\d+, fenced=(-?\d+)")
_ISR = re.compile(r"\[Partition (\S+) broker=(\d+)\] ISR updated to ([\d,]+)")


class ClusterRecord:
    """What the nodes' server logs say of registrations, fences and ISR changes, in time order;
    ``logs``: each node's lines (one iterable per node, in the node's order)."""

    def __init__(self, lines: Iterable[str], *more: Iterable[str], utc_offset_s: float | None = None):
        #: the nodes' local time's offset from UTC (the run's environment.json); None: this machine's
        self.zone = None if utc_offset_s is None else timezone(timedelta(seconds=utc_offset_s))
        first_seen: dict[tuple[int, str], float] = {}
        self.fences: list[tuple[float, int]] = []
        #: per node's log, each broker's registration states in its order: (when, broker, "fenced" or "unfenced")
        self.states: list[list[tuple[float, int, str]]] = []
        #: (when, partition, the leader that logged it, the new ISR)
        self.isr_updates: list[tuple[float, str, int, frozenset[int]]] = []
        for log in (lines, *more):
            states: list[tuple[float, int, str]] = []
            self.states.append(states)
            for line in log:
                self._read(line, first_seen, states)
        #: (when the controller first recorded it, broker) for every incarnation
        self.incarnations = sorted((t, broker) for (broker, _), t in first_seen.items())
        self.fences.sort()
        self.isr_updates.sort()

    def _read(self, line: str, first_seen: dict[tuple[int, str], float], states: list[tuple[float, int, str]]) -> None:
        stamp = _STAMP.match(line)
        if stamp is None:
            return
        local = datetime.strptime(f"{stamp.group(1)}T{stamp.group(2)}", "%Y-%m-%dT%H:%M:%S,%f")
        t = (local if self.zone is None else local.replace(tzinfo=self.zone)).timestamp()
        if (m := _REGISTER.search(line)) is not None:
            key = (int(m.group(1)), m.group(2))
            first_seen[key] = min(t, first_seen.get(key, t))
            # a new incarnation registers fenced, until the controller unfences it; a snapshot's
            # replay ("initial") carries the state the broker was in
            if m.group(3) is not None:
                states.append((t, key[0], "unfenced" if m.group(3) == "false" else "fenced"))
        elif (m := _CHANGE.search(line)) is not None:
            broker, fenced = int(m.group(1)), int(m.group(2))
            if fenced == 1:
                self.fences.append((t, broker))
                states.append((t, broker, "fenced"))
            elif fenced == -1:
                states.append((t, broker, "unfenced"))
        elif (m := _ISR.search(line)) is not None:
            self.isr_updates.append((t, m.group(1), int(m.group(2)),
                                     frozenset(int(x) for x in m.group(3).split(",") if x)))

    def fenced_at(self, when: float, brokers: Iterable[int]) -> dict[int, float]:
        """The brokers whose last state in some controller's log before ``when`` is fenced, with
        since when (the latest such record): that controller had them fenced then."""
        wanted, out = set(brokers), {}
        for states in self.states:
            last: dict[int, tuple[float, str]] = {}
            for t, b, state in states:
                if t <= when and b in wanted:
                    last[b] = (t, state)
            for b, (t, state) in last.items():
                if state == "fenced":
                    out[b] = max(out.get(b, 0.0), t)
        return out

    @property
    def brokers(self) -> set[int]:
        """Every broker the controller's record registered."""
        return {b for _, b in self.incarnations}

    @classmethod
    def of_run(cls, run: Path) -> "ClusterRecord | None":
        """The run directory's node logs (``cluster/node-*/logs/server.log``), their stamps read in
        the run's recorded UTC offset (``environment.json``; this machine's where a run did not
        record one); None when it has none. Read once per state of the files: the fault effects,
        the certification and the liveness check of both engines ask for the same record."""
        logs = sorted(Path(run).glob("cluster/node-*/logs/server.log"))
        if not logs:
            return None
        return _read_run(str(Path(run).resolve()), tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in logs))

    @classmethod
    def _from_files(cls, run: Path, logs: list[Path]) -> "ClusterRecord":
        try:
            offset = json.loads((Path(run) / "environment.json").read_text()).get("utc_offset_s")
        except (OSError, ValueError):
            offset = None

        def lines(path: Path) -> Iterable[str]:
            with path.open(errors="replace") as f:
                yield from f

        return cls(*(lines(path) for path in logs), utc_offset_s=offset)


@functools.lru_cache(maxsize=4)
def _read_run(run: str, files: tuple[tuple[str, int, int], ...]) -> ClusterRecord:
    """ClusterRecord.of_run's parse, keyed by the run and each log's path, size and mtime."""
    return ClusterRecord._from_files(Path(run), [Path(f) for f, _, _ in files])
