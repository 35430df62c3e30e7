"""The heal journal: what kchaos did to nodes it does not own, written (and synced to disk) before
each act, with the commands that undo it; and the healing of each, appended when done.

A normal run and Ctrl-C heal as they always did, and mark the journal. After a crash or a SIGKILL
of the harness, ``kchaos heal RUN_DIR`` runs the undo commands of every entry not marked healed,
newest first, and marks them. Undo commands are idempotent (starting a running node, resuming
one that runs, removing a chain that is gone), so healing twice is harmless. The journal holds
rendered commands only: secrets never reach them (clusters/spec.py refuses ``${ENV:...}`` in a
command template).

Most acts are a node's (a kill, a pause, a partition's rules on its source node). A change of a
finalised feature level (a ``[[steps]]`` flip of ``transaction.version``) is the whole cluster's:
its entry's node is :data:`CLUSTER_WIDE`, and its undo puts the level the cluster had before the
run's first change back (FeatureCommand, from any level: kchaos/runtime/kafka_tools.py)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

JOURNAL_NAME = "heal-journal.jsonl"
#: the node of an act on the whole cluster (a feature level), not on one node
CLUSTER_WIDE = -1


def where(node: int) -> str:
    """How a report names an entry's node."""
    return "the cluster" if node == CLUSTER_WIDE else f"node {node}"


@dataclass
class Entry:
    id: int
    node: int
    action: str
    command: str
    undo: list[dict[str, Any]]  # [{"action": ..., "node": ..., "shell": ...}]
    time: float
    healed: bool = False
    failed: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class HealJournal:
    """One run's journal (``path``), appended to only."""

    def __init__(self, path: Path):
        self.path = path

    def _append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            torn = False
            if f.tell():  # a line torn by a SIGKILL mid-write is closed, not continued
                f.seek(-1, os.SEEK_END)
                torn = f.read(1) != b"\n"
            f.write((("\n" if torn else "") + json.dumps(record, sort_keys=True) + "\n").encode())
            f.flush()
            os.fsync(f.fileno())

    def entries(self) -> list[Entry]:
        """Every act, with whether it was healed (a torn last line, from a SIGKILL mid-write, is skipped:
        the act it began was not yet done)."""
        if not self.path.exists():
            return []
        acts: dict[int, Entry] = {}
        for line in self.path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if "act" in record:
                a = record["act"]
                acts[a["id"]] = Entry(a["id"], a["node"], a["action"], a["command"], a["undo"], a["time"],
                                      detail=a.get("detail", {}))
            elif "healed" in record and record["healed"] in acts:
                acts[record["healed"]].healed = True
            elif "failed" in record and record["failed"] in acts:
                acts[record["failed"]].failed = record.get("error")
        return sorted(acts.values(), key=lambda e: e.id)

    def pending(self, node: int | None = None, actions: tuple[str, ...] | None = None) -> list[Entry]:
        return [e for e in self.entries() if not e.healed and (node is None or e.node == node)
                and (actions is None or e.action in actions)]

    def acting(self, node: int, action: str, command: str, undo: list[dict[str, Any]],
               detail: dict[str, Any] | None = None) -> int:
        """Record an act before it is done; returns its id."""
        entries = self.entries()
        entry_id = (entries[-1].id + 1) if entries else 1
        self._append({"act": {"id": entry_id, "node": node, "action": action, "command": command, "undo": undo,
                              "time": time.time(), "detail": detail or {}}})
        return entry_id

    def failed(self, entry_id: int, error: str) -> None:
        """The act's command failed: it may have done part of its work, so it stays to be undone."""
        self._append({"failed": entry_id, "error": error[-500:], "time": time.time()})

    def healed(self, entry_id: int, how: str) -> None:
        self._append({"healed": entry_id, "how": how, "time": time.time()})


def heal_pending(journal: HealJournal, run: Callable[[dict[str, Any]], tuple[bool, str]], how: str,
                 entries: list[Entry] | None = None) -> list[dict[str, Any]]:
    """Undo every act not yet healed (or only ``entries`` of them), newest first: ``run(undo)``
    executes one undo command and says whether it worked and what it printed. An entry is marked
    healed once all its undo commands worked; one that failed stays pending (for the next heal)
    and is reported."""
    report = []
    done: set[str] = set()  # one undo command (say, a node's chain removal) once per heal
    for entry in reversed(journal.pending() if entries is None else entries):
        results = []
        for undo in entry.undo:
            key = undo["shell"]
            if key in done:
                results.append({"action": undo["action"], "ok": True, "said": "(done above)"})
                continue
            ok, said = run(undo)
            if ok:
                done.add(key)
            results.append({"action": undo["action"], "ok": ok, "said": said[-300:]})
        ok = all(r["ok"] for r in results)
        if ok:
            journal.healed(entry.id, how)
        report.append({"id": entry.id, "node": entry.node, "action": entry.action, "healed": ok, "undo": results})
    return report
