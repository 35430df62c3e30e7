"""The operation history: every client operation and fault event, on one clock.

Each process appends to its own JSON-lines file (``history/<process>.jsonl``). An operation is
two lines, as in Jepsen: an ``invoke`` line written *before* the call and a completion line
(``ok``, ``fail`` or ``info`` = outcome unknown) written after it, paired by ``(process, op)``.
Events that are not calls (a crash seen by the harness, a fence) are single ``info`` lines.
Each line is one ``write(2)`` on an ``O_APPEND`` descriptor, so a killed process leaves whole
lines behind; a reader skips a torn last line. Times are wall-clock seconds (``time.time()``),
shared by every process on the machine.

At the end of a run :func:`merge_history` writes ``history.jsonl`` (all processes, by time) and
``history.parquet``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from kchaos.files import atomic_target

OUTCOMES = ("ok", "fail", "info")


class HistoryWriter:
    def __init__(self, path: Path, process: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.process = process
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._next_op = 0
        self._lock = threading.Lock()

    def _write(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
        # Under the lock, so that no write races close(): a descriptor number is reused by the
        # next open() or socket() anywhere in the process, and a late write would land there.
        with self._lock:
            if self._fd is None:
                raise RuntimeError(f"the history of {self.process} ({self.path}) is closed")
            os.write(self._fd, line)

    def invoke(self, f: str, value: dict[str, Any] | None = None, **fields: Any) -> int:
        with self._lock:
            op = self._next_op
            self._next_op += 1
        self._write({"time": time.time(), "process": self.process, "op": op, "type": "invoke", "f": f,
                     "value": value or {}, **fields})
        return op

    def complete(self, op: int, f: str, outcome: str, value: dict[str, Any] | None = None,
                 error: str | None = None, **fields: Any) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
        record = {"time": time.time(), "process": self.process, "op": op, "type": outcome, "f": f,
                  "value": value or {}, **fields}
        if error is not None:
            record["error"] = error
        self._write(record)

    def event(self, f: str, value: dict[str, Any] | None = None, outcome: str = "info", **fields: Any) -> None:
        """A single-line operation (invoke and completion at once)."""
        op = self.invoke(f, value, **fields)
        self.complete(op, f, outcome, value, **fields)

    def close(self) -> None:
        """Idempotent. A second ``os.close`` of the same number would close whatever the process
        opened with it since (CI saw a dump's Parquet file and a client's socket closed under them)."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                return  # torn last line of a killed process
            try:
                yield json.loads(raw)
            except ValueError:
                continue


def read_history(history_dir: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for path in sorted(Path(history_dir).glob("*.jsonl")):
        records.extend(read_lines(path))
    records.sort(key=lambda r: (r["time"], r["process"], r["op"], r["type"] != "invoke"))
    for index, record in enumerate(records):
        record["index"] = index
    return records


def pair_operations(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per operation: invoke time, completion time and outcome (``None`` when the process
    died before completing it: the outcome is unknown, exactly like ``info``)."""
    open_ops: dict[tuple[str, int], dict[str, Any]] = {}
    ops: list[dict[str, Any]] = []
    for r in records:
        key = (r["process"], r["op"])
        if r["type"] == "invoke":
            row = {"process": r["process"], "op": r["op"], "f": r["f"], "invoke_time": r["time"],
                   "complete_time": None, "outcome": None, "value": r.get("value", {}), "error": None}
            for k in ("txid", "pid", "epoch", "generation", "worker", "incarnation", "client", "txn_v2"):
                if k in r:
                    row[k] = r[k]
            open_ops[key] = row
            ops.append(row)
        else:
            row = open_ops.pop(key, None)
            if row is None:
                continue
            row["complete_time"] = r["time"]
            row["outcome"] = r["type"]
            row["value"] = {**row["value"], **(r.get("value") or {})}
            row["error"] = r.get("error")
            for k in ("pid", "epoch", "generation", "txn_v2"):
                if r.get(k) is not None:
                    row[k] = r[k]
    return ops


def merge_history(history_dir: Path, out_dir: Path) -> int:
    """Write ``history.jsonl`` and ``history.parquet`` into ``out_dir``; return the line count."""
    records = read_history(history_dir)
    with atomic_target(out_dir / "history.jsonl") as tmp, open(tmp, "w") as fh:
        for r in records:
            fh.write(json.dumps(r, separators=(",", ":"), default=str) + "\n")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return len(records)
    columns: dict[str, list[Any]] = {k: [] for k in (
        "index", "time", "process", "op", "type", "f", "txid", "pid", "epoch", "generation", "client", "txn_v2",
        "value", "error")}
    for r in records:
        for k in columns:
            v = r.get(k)
            columns[k].append(json.dumps(v, default=str) if k == "value" else v)
    table = pa.table({
        "index": pa.array(columns["index"], pa.int64()),
        "time": pa.array(columns["time"], pa.float64()),
        "process": pa.array(columns["process"], pa.string()),
        "op": pa.array(columns["op"], pa.int64()),
        "type": pa.array(columns["type"], pa.string()),
        "f": pa.array(columns["f"], pa.string()),
        "txid": pa.array([None if v is None else str(v) for v in columns["txid"]], pa.string()),
        "pid": pa.array(columns["pid"], pa.int64()),
        "epoch": pa.array(columns["epoch"], pa.int64()),
        "generation": pa.array(columns["generation"], pa.int64()),
        "client": pa.array(columns["client"], pa.string()),
        "txn_v2": pa.array(columns["txn_v2"], pa.bool_()),
        "value": pa.array(columns["value"], pa.string()),
        "error": pa.array([None if v is None else str(v) for v in columns["error"]], pa.string()),
    })
    with atomic_target(out_dir / "history.parquet") as tmp:
        pq.write_table(table, tmp)
    return len(records)
