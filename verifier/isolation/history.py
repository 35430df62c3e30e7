"""A ``txn`` run read as the isolation checker's inputs: its transactions (:class:`~.cycles.Txn`)
from the history, its final raw log (:class:`~.cycles.LogRecord` per key) from the topic dumps.

**The transactions.** One ``txn`` operation per transaction (workloads/txn_worker.py; paired by
workloads/history.py's ``pair_operations``): the invoke holds the plan, the completion the
micro-operations as they were made and how it ended. A transaction's id is ``<process>#<txn_seq>``
(process ``w<i>.<incarnation>``), its process the worker process. The outcomes map as Jepsen's:

* ``ok`` -> ``committed``: its commit returned;
* ``fail`` -> ``aborted``: its abort returned, or it ended without asking to commit (or its request
  was refused as abortable): it cannot have committed. A log that holds its sends committed
  contradicts that, and the checker says so (``outcome-contradicts-log``);
* ``info``, and an operation with no completion (the process was killed or its watchdog ended it)
  -> ``unknown``: the checker settles it by the log. Without a completion the micro-operations
  made are not known: the plan's sends stand for them (a send planned and never made names the
  writer of a value that is nowhere, which draws no edge), its polls are left out.

A poll is one :class:`~.cycles.Poll` per partition it returned records of, in the order they
first appear, each with its (offset, value) pairs in the order returned; a poll that returned
nothing makes none (the checker's ``empty_polls`` does not count it).

**The log.** The run directory keeps each topic's final dumps (workloads/dump.py):
``topics/<topic>.raw.parquet`` at read_uncommitted (to the high watermark) and
``topics/<topic>.committed.parquet`` at read_committed (to the last stable offset). The raw view
does not say whether a record's transaction committed, so that is derived: a raw record is
committed when the committed dump holds the same (partition, offset), aborted when it does not
and its offset is below where the committed view ended (its ``end_offsets`` in ``final.json``,
else ``topics/stable_offsets.json``'s LSO). A raw record at or past that end was undecided when
the topic was read (a transaction still open): it is left out, and said (``undecided``). A record
only the committed dump holds is taken as committed. A partition that either dump did not read to
its end (``incomplete_partitions``) is left out whole, and said (``incomplete``): the checker then
reports its sends and polls as ``key-absent-from-log``, never judges them on half a log.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Hashable, Iterable, Mapping

import pyarrow.parquet as pq

from kchaos.rundir import FINAL_FILE, HISTORY_FILE, RunDir
from kchaos.verifier.isolation.cycles import Key, LogRecord, Poll, Send, Txn
from kchaos.workloads.history import pair_operations, read_lines

#: the history operation of one transaction of the txn workload
TXN_F = "txn"
#: the history's outcome -> cycles.py's (None: no completion)
OUTCOME_OF = {"ok": "committed", "fail": "aborted", "info": "unknown", None: "unknown"}
#: the views of a topic the run directory keeps (workloads/dump.py)
RAW, COMMITTED = "raw", "committed"


def txn_id(process: str, seq: Any) -> str:
    return f"{process}#{seq}"


def _micro_ops(topic: str, steps: Iterable[Mapping[str, Any]], polls: bool = True) -> list[Send | Poll]:
    out: list[Send | Poll] = []
    for step in steps:
        if step.get("f") == "send":
            out.append(Send((topic, int(step["partition"])), step["value"]))
        elif step.get("f") == "poll" and polls:
            by_key: dict[int, list[tuple[int, Hashable]]] = {}
            for partition, offset, value in step.get("records") or ():
                by_key.setdefault(int(partition), []).append((int(offset), value))
            out.extend(Poll((topic, p), tuple(records)) for p, records in by_key.items())
    return out


def txns_from_history(ops: Iterable[Mapping[str, Any]], topic: str | None = None) -> list[Txn]:
    """The transactions of paired history operations (``pair_operations``), ``txn`` ones only,
    in history order. ``topic``: the keys' topic where an operation does not name it (the worker
    names it in every invoke)."""
    out = []
    for op in ops:
        if op.get("f") != TXN_F:
            continue
        value = op.get("value") or {}
        where = value.get("topic") or topic
        if where is None:
            raise ValueError(f"transaction {op.get('process')} #{value.get('txn_seq')} names no topic, and none "
                             "was given")
        done = value.get("ops")
        completed = op.get("outcome") is not None and done is not None
        micro = _micro_ops(where, done) if completed else _micro_ops(where, value.get("plan") or (), polls=False)
        invoked = float(op["invoke_time"])
        ended = op.get("complete_time")
        out.append(Txn(txn_id(op["process"], value.get("txn_seq")), op["process"], OUTCOME_OF[op.get("outcome")],
                       invoked, invoked if ended is None else max(float(ended), invoked), tuple(micro)))
    return out


@dataclass(frozen=True)
class DumpedLog:
    """One topic's final raw log as the checker reads it, and what was left out of it, and why."""

    topic: str
    log: dict[Key, list[LogRecord]]
    #: per key, the offsets of raw records past the committed view's end (their transactions open)
    undecided: dict[Key, list[int]] = field(default_factory=dict)
    #: keys a dump did not read to their end: left out whole
    incomplete: tuple[Key, ...] = ()
    #: how the committed view's end per partition was known: "final.json", "stable_offsets.json" or None
    end_from: str | None = None


def _read_view(run: Path, topic: str, view: str) -> list[tuple[int, int, Hashable]]:
    path = dump_path(run, topic, view)
    table = pq.read_table(path, columns=["partition", "offset", "value"]).to_pydict()
    return [(int(p), int(o), None if v is None else bytes(v).decode(errors="replace"))
            for p, o, v in zip(table["partition"], table["offset"], table["value"])]


def _summaries(run: Path, topic: str) -> dict[str, dict[str, Any]]:
    """final.json's dump summary of each view of ``topic`` (empty when the run has none)."""
    final = RunDir(run).read(FINAL_FILE, {}) or {}
    return {s.get("view"): s for s in final.get("topics") or [] if s.get("topic") == topic}


def _committed_ends(run: Path, topic: str, summaries: Mapping[str, Mapping[str, Any]]) -> tuple[dict[int, int], str | None]:
    ends = (summaries.get(COMMITTED) or {}).get("end_offsets")
    if ends:
        return {int(p): int(o) for p, o in ends.items()}, FINAL_FILE
    path = run / "topics" / "stable_offsets.json"
    if path.exists():
        parts = json.loads(path.read_text()).get(topic) or {}
        if parts:
            return {int(p): int(v["lso"]) for p, v in parts.items()}, "stable_offsets.json"
    return {}, None


def _partitions(run: Path, topic: str, summaries: Mapping[str, Mapping[str, Any]]) -> set[int]:
    """Every partition the dumps read, records or not: an empty partition is a key with no versions."""
    out: set[int] = set()
    marks = run / "topics" / "watermarks.json"
    if marks.exists():
        out.update(int(p) for p in (json.loads(marks.read_text()).get(topic) or {}))
    counted = (summaries.get(RAW) or {}).get("partitions")
    if isinstance(counted, int):
        out.update(range(counted))
    return out


@dataclass(frozen=True)
class LogBounds:
    """What the run's small records say about ``topic``'s dumps (both engines read them so): the
    committed view's end per partition and where it was known, the partitions a dump did not read
    to their end, and every partition the dumps read (records or not)."""

    ends: dict[int, int]
    end_from: str | None
    incomplete: frozenset[int]
    partitions: frozenset[int]


def log_bounds(run_path: Path | str, topic: str) -> LogBounds:
    """``topic``'s :class:`LogBounds`, from ``final.json`` and the topics' JSON files."""
    run = Path(run_path)
    summaries = _summaries(run, topic)
    ends, end_from = _committed_ends(run, topic, summaries)
    incomplete = {int(p) for view in (RAW, COMMITTED) for p in (summaries.get(view) or {}).get("incomplete_partitions") or ()}
    return LogBounds(ends, end_from, frozenset(incomplete), frozenset(_partitions(run, topic, summaries)))


def dump_path(run_path: Path | str, topic: str, view: str) -> Path:
    """Where the run directory keeps ``topic``'s ``view`` dump (an error saying so when it does not)."""
    path = Path(run_path) / "topics" / f"{topic}.{view}.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path}: the {view} dump of {topic} is not in the run directory")
    return path


def read_dumped_log(run_path: Path | str, topic: str) -> DumpedLog:
    """``topic``'s final raw log with each record's fate (the module's docstring)."""
    run = Path(run_path)
    raw, committed = _read_view(run, topic, RAW), _read_view(run, topic, COMMITTED)
    bounds = log_bounds(run, topic)
    ends, end_from, incomplete = bounds.ends, bounds.end_from, bounds.incomplete
    visible = {(p, o): v for p, o, v in committed}
    records: dict[int, dict[int, LogRecord]] = defaultdict(dict)
    undecided: dict[int, list[int]] = defaultdict(list)
    for p, o, v in raw:
        if (p, o) in visible:
            records[p][o] = LogRecord(o, v, True)
        elif p in ends and o >= ends[p]:
            undecided[p].append(o)
        else:
            records[p][o] = LogRecord(o, v, False)
    for (p, o), v in visible.items():
        records[p].setdefault(o, LogRecord(o, v, True))
    partitions = (bounds.partitions | set(records) | set(undecided)) - incomplete
    log = {(topic, p): [records[p][o] for o in sorted(records[p])] for p in sorted(partitions)}
    return DumpedLog(topic, log, {(topic, p): sorted(os) for p, os in sorted(undecided.items()) if p not in incomplete},
                     tuple((topic, p) for p in sorted(incomplete)), end_from)


def log_from_dump(run_path: Path | str, topic: str) -> dict[Key, list[LogRecord]]:
    """``topic``'s final raw log, per key, as :func:`~.cycles.check` reads it (read_dumped_log's ``log``)."""
    return read_dumped_log(run_path, topic).log


def read_txns(run_path: Path | str, ops: list[dict[str, Any]] | None = None) -> tuple[str, list[Txn]]:
    """A stored txn run's topic (``workload.txn_topic``, as the recorded campaign names it) and its
    transactions (``history.jsonl`` paired, or ``ops`` where the caller has read it): what both
    engines read of the history."""
    run = Path(run_path)
    campaign = RunDir(run).campaign_data()
    topic = (campaign.get("workload") or {}).get("txn_topic")
    if not topic:
        raise ValueError(f"{run}: the recorded campaign names no workload.txn_topic (not a txn run)")
    if ops is None:
        ops = pair_operations(list(read_lines(run / HISTORY_FILE)))
    return topic, txns_from_history(ops, topic)


def read_txn_run(run_path: Path | str, ops: list[dict[str, Any]] | None = None) -> tuple[list[Txn], DumpedLog]:
    """A stored txn run's transactions and final log (:func:`read_txns`, :func:`read_dumped_log`)."""
    topic, txns = read_txns(run_path, ops)
    return txns, read_dumped_log(run_path, topic)
