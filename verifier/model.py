"""What both checkers share: the lineage fields, Kafka's transaction state machine, the client
history indexed by transaction, and the evidence built from it.

The Python checker (verifier/pychecker.py) and the Spark job (verifier/spark/checks.py) must name
the same anomalies on the same run; keeping these in one place keeps them honest.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from kchaos.workloads.history import pair_operations, read_lines

MAX_CASES = 50  # per anomaly type; the note on each check carries the exact count
#: up to this many cases of a check, every case's explanation is digested for the cross-check
#: (both engines build them all; evidence only for the MAX_CASES kept)
DIGEST_MAX_CASES = 20_000

#: fields an output record's value must have to follow the lineage contract (workloads/lineage.py)
LINEAGE_FIELDS = ("in_id", "in_partition", "in_offset", "slot", "worker", "incarnation", "txn_seq")

#: an output record as evidence: where it is, and its lineage (both engines report these fields)
RECORD_COLUMNS = ("topic", "partition", "offset", "in_id", "in_topic", "in_partition", "in_offset", "slot", "slots",
                  "worker", "incarnation", "txid", "txn_seq")


class Output:
    """One output record and its lineage, held by the Python reference. Slots, not a dict: a
    run holds millions (a 13-key dict costs about 4 times the memory; measured in
    bench/verifier_scale.py). Read like a dict (``out["slot"]``, ``out.get("txid")``);
    ``as_dict()`` for evidence."""

    __slots__ = RECORD_COLUMNS

    def __init__(self, values: dict[str, Any]):
        for name in RECORD_COLUMNS:
            setattr(self, name, values.get(name))

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        value = getattr(self, name, None)
        return default if value is None else value

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in RECORD_COLUMNS}


def as_evidence(records: list[Any]) -> list[dict[str, Any]]:
    return [r.as_dict() if isinstance(r, Output) else r for r in records]


#: Kafka's transaction state machine (TransactionState): state -> states it may move to.
#: A state written again (the coordinator retried an append) is allowed.
TXN_NEXT = {
    "Empty": {"Ongoing", "PrepareAbort", "PrepareEpochFence", "Dead"},
    "Ongoing": {"PrepareCommit", "PrepareAbort", "PrepareEpochFence"},
    "PrepareCommit": {"CompleteCommit"},
    "PrepareAbort": {"CompleteAbort"},
    "CompleteCommit": {"Empty", "Ongoing", "PrepareAbort", "PrepareEpochFence", "Dead"},
    "CompleteAbort": {"Empty", "Ongoing", "PrepareAbort", "PrepareEpochFence", "Dead"},
    "PrepareEpochFence": {"PrepareAbort"},
    "Dead": set(),
}
OPEN_TXN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
#: A record whose append timed out waiting for replicas is abandoned by the coordinator
#: ("transition failed due to COORDINATOR_NOT_AVAILABLE, resetting pending state"; "failed to write
#: an epoch fence transition"): its memory goes back to the state before, yet the record stays in
#: the log and is committed later, the hazard KAFKA-9666's review named. The log then reads a step
#: Kafka's state machine does not have (a begin abandoned, then an InitProducerId from the state
#: before it: Ongoing -> Empty; a timed-out transaction's epoch-bumping abort abandoned, then its
#: abort at the old epoch: PrepareAbort at epoch 1 -> PrepareAbort at epoch 0), which Kafka's log
#: legitimately holds. What such a record could still do (a coordinator that loads the log between
#: it and the next acts on it) shows in the other checks, as F8's stranded markers do.


def _step_from(before: tuple[str, Any, int], status: str, pid: Any, epoch: int) -> bool:
    """Whether (status, pid, epoch) is a step the coordinator takes from ``before``: a legal
    transition, or the same state again with the epoch bumped (an InitProducerId on Empty)."""
    b_status, b_pid, b_epoch = before
    if pid == b_pid and epoch not in (b_epoch, b_epoch + 1):  # one step bumps the epoch by one at most
        return False
    return status in TXN_NEXT.get(b_status, set()) or (status == b_status and pid == b_pid and epoch > b_epoch)


def abandoned_append(before: tuple[str, Any, int], abandoned: tuple[str, Any, int], after: tuple[str, Any, int]) -> bool:
    """Whether ``abandoned`` (status, producer id, epoch) is a record whose append the coordinator
    gave up on: it is a step from ``before`` on the same producer id, and the record ``after`` it
    is a step from ``before`` too, not from it. The Spark engine's ``_abandoned_append_sql`` is
    this, as SQL."""
    b_status, b_pid, b_epoch = before
    o_status, o_pid, o_epoch = abandoned
    # Dead is never abandoned: Kafka writes an expiry as a tombstone, not a Dead record
    return (o_status != "Dead" and (o_status, o_epoch) != (b_status, b_epoch)
            and _step_from(before, o_status, o_pid, o_epoch) and o_pid == b_pid and _step_from(before, *after))


def abandoned_note(count: int) -> str:
    return (f"{count} record(s) whose append the coordinator abandoned (timed out waiting for replicas, kept in the "
            "log): the record after each was judged from the state before it")

#: Which anomalies a pipeline configuration promises to avoid. Under at-least-once delivery a
#: restart may re-process inputs, so order within an output partition is not promised (the
#: duplicates themselves are still reported as ``duplicate``).
ORDER_PROMISED_DELIVERY = ("exactly-once",)


def identity_positions(committed: dict[tuple[int, int], str],
                       raw: dict[tuple[int, int], str]) -> tuple[dict[str, tuple[int, int]], set[str]]:
    """Identity lineage (``workload.lineage = "id"``): where each input id is, so that an output
    carrying only the id can be traced. An id committed once maps to its committed position; an
    id never committed (a copy the seeder aborted on purpose carries ABORTED_MARK) to its first
    raw position. An id committed more than once (a seeder batch whose commit outcome was
    unknown and that was written again) is *ambiguous*: returned apart, its inputs and outputs
    are set aside, never guessed. ``committed``/``raw``: position -> id. The Spark job builds the
    same map with joins (spark.run.SparkRun)."""
    from collections import Counter

    times = Counter(committed.values())
    ambiguous = {i for i, n in times.items() if n > 1}
    where: dict[str, tuple[int, int]] = {i: pos for pos, i in committed.items() if i not in ambiguous}
    for pos, i in sorted(raw.items()):
        if i not in times:
            where.setdefault(i, pos)
    return where, ambiguous


class NotApplicable(Exception):
    """Raised by a check whose guarantee this configuration does not promise."""


def read_ops(run: Path) -> list[dict[str, Any]]:
    path = run / "history.jsonl"
    return pair_operations(list(read_lines(path))) if path.exists() else []


class HistoryIndex:
    """The paired client history, indexed by transaction ``(process, txn_seq)`` and by input."""

    def __init__(self, ops: list[dict[str, Any]]):
        self.ops = ops
        self.faults = [op for op in ops if op["f"].startswith("fault:")]
        setup = next((op for op in ops if op["f"] == "setup"), None)
        self.txid_prefix = (setup or {}).get("value", {}).get("txid_prefix")
        # the pipeline's own account: its transactions, or (a pipeline that processed nothing,
        # F10) the operations and events its processes recorded; the harness's and the seeder's
        # say nothing about the pipeline, and an external app records none
        self.has_history = any(op["f"] == "send" or worker_slot(op["process"]) for op in ops)
        #: the input seeder's transactional ids: its commits are not the pipeline's progress
        self.seeder_txids = {op["txid"] for op in ops if op["process"] == "seeder" and op.get("txid")}
        #: the seeder's transactions, one ``seed`` operation each (it records no txn_seq), keyed
        #: ("seeder", op): client transactions for the coordinator's log, never the pipeline's
        self.seeder_txns: dict[tuple[str, int], dict[str, Any]] = {
            ("seeder", op["op"]): op for op in ops if op["process"] == "seeder" and op["f"] == "seed"}
        self.txn_ops: dict[tuple[str, int], dict[str, Any]] = {}
        #: last outcome-defining operation wins, in history order
        self.txn_outcome: dict[tuple[str, int], str] = {}
        #: a transaction's commit and abort operations, in history order (an abort may follow a failed commit)
        self.txn_ends: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        #: when a transaction's client first failed in it (an operation of it failed or ended unknown)
        self.txn_failed: dict[tuple[str, int], float] = {}
        #: when each process gave up for good (fatal, fenced, exit-unknown), in history order
        self.process_exits: dict[str, list[float]] = defaultdict(list)
        #: each process's ``fenced`` events (it was told another producer had taken its id over)
        self.fenced_ops: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.input_ops: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
        #: each process's last recorded moment (an invocation or a completion): after it, it did nothing
        self.process_last: dict[str, float] = {}
        #: each transaction's life: its first operation's invocation, its last operation's last moment
        self.txn_life: dict[tuple[str, int], tuple[float, float]] = {}
        #: each process's operations, in history order
        self.process_ops: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for op in ops:
            self.process_ops[op["process"]].append(op)
            last = max(t for t in (op["invoke_time"], op["complete_time"]) if t is not None)
            if last > self.process_last.get(op["process"], float("-inf")):
                self.process_last[op["process"]] = last
            txn = op["value"].get("txn_seq")
            if txn is not None and op["process"] != "harness":
                began, ended = self.txn_life.get((op["process"], txn), (op["invoke_time"], last))
                self.txn_life[(op["process"], txn)] = (min(began, op["invoke_time"]), max(ended, last))
            if op["f"] in ("fatal", "fenced", "exit-unknown"):
                self.process_exits[op["process"]].append(op["invoke_time"])
            if op["f"] == "fenced":
                self.fenced_ops[op["process"]].append(op)
            seq = op["value"].get("txn_seq")
            if seq is None:
                continue
            key = (op["process"], seq)
            if op["outcome"] in ("fail", "info") and op["f"] != "abort":
                self.txn_failed.setdefault(key, op["complete_time"] or op["invoke_time"])
            if op["f"] == "send":
                self.txn_ops[key] = op
                for p, o in op["value"].get("inputs", []):
                    self.input_ops[(p, o)].append(op)
            elif op["f"] == "commit":
                self.txn_ends[key].append(op)
                self.txn_outcome[key] = {"ok": "committed", "fail": "commit-failed"}.get(op["outcome"], "unknown")
            elif op["f"] == "abort":
                self.txn_ends[key].append(op)
                if op["outcome"] == "ok":
                    self.txn_outcome[key] = "aborted"
            elif op["f"] == "commit_offsets":
                self.txn_outcome[key] = "offsets-" + (op["outcome"] or "unknown")

    def seeder_outcome(self, key: tuple[str, int]) -> str:
        """What the seeder saw of its transaction ``key``, as ``txn_outcome`` words it: ``ok``
        committed (or aborted, a batch it aborted on purpose), ``fail`` its commit failed (then
        aborted), ``info`` unknown."""
        op = self.seeder_txns[key]
        if op["outcome"] == "ok":
            return "aborted" if op["value"].get("aborted") else "committed"
        return "commit-failed" if op["outcome"] == "fail" else "unknown"

    def commit_requested(self, key: tuple[str, int]) -> float | None:
        """When the client of a transaction first asked to commit it (None: it never did)."""
        return next((op["invoke_time"] for op in self.txn_ends.get(key, ()) if op["f"] == "commit"), None)

    def committed_transactions(self) -> int:
        return sum(1 for o in self.txn_outcome.values() if o in ("committed", "offsets-ok"))

    def faults_at(self, t: float | None) -> list[dict[str, Any]]:
        if t is None:
            return []
        return self.faults_during(t, t)

    def faults_during(self, start: float, end: float) -> list[dict[str, Any]]:
        """The faults whose window (invoke to heal) overlaps [start, end]."""
        return [{"fault": f["f"], "value": f["value"]} for f in self.faults
                if f["invoke_time"] <= end and start <= (f["complete_time"] or float("inf"))]

    def txn_evidence(self, key: tuple[str, int]) -> dict[str, Any]:
        op = self.txn_ops.get(key) or self.seeder_txns.get(key)
        seeded = key in self.seeder_txns
        ev: dict[str, Any] = {"process": key[0], "txn_seq": key[1], "outcome": (
            self.seeder_outcome(key) if seeded else self.txn_outcome.get(key, "unknown"))}
        if op:
            life = (op["invoke_time"], op["complete_time"] or op["invoke_time"]) if seeded else \
                self.txn_life.get(key, (op["invoke_time"],) * 2)
            ev.update({"txid": op.get("txid"), "producer_id": op.get("pid"), "epoch": op.get("epoch"),
                       "history_op": {"process": op["process"], "op": op["op"], "f": op["f"],
                                      "invoke_time": op["invoke_time"], "outcome": op["outcome"]},
                       # over the transaction's whole life: the kill that hit its commit counts
                       "faults_active": self.faults_during(*life)})
        return ev

    def _last_abort_of(self, p: int, o: int) -> tuple[tuple[str, int], float] | None:
        """The last transaction that held input ``p@o`` and when it ended, when every transaction
        that held it ended in its client's abort; None otherwise (or when none held it)."""
        keys = [(op["process"], op["value"]["txn_seq"]) for op in self.input_ops.get((p, o), [])]
        if not keys or any(self.txn_outcome.get(k) != "aborted" for k in keys):
            return None
        last = max(keys, key=lambda k: self.txn_life.get(k, (0.0, 0.0))[1])
        return last, self.txn_life.get(last, (0.0, 0.0))[1]

    def passed_over(self, p: int, o: int) -> dict[str, Any] | None:
        """How a consumer itself passed over input ``p@o``: every transaction that held it ended in
        its client's abort, and the process of the last one went on with partition ``p`` past it
        until a transaction of it committed, with no rebalance between and no rewind of ``p`` to an
        offset above ``o`` (a rewind reads the committed offset: one already past ``o`` may be a
        late EndTxn's doing, so it is not counted). None when the history does not show that.
        A late EndTxn ends a transaction; it does not move a consumer's position."""
        aborted = self._last_abort_of(p, o)
        if aborted is None:
            return None
        last, aborted_at = aborted
        for op in self.process_ops.get(last[0], ()):
            if op["invoke_time"] <= aborted_at:
                continue
            if op["f"] in ("assign", "revoke"):
                return None
            if op["f"] == "rewind":
                rewound_to = (op["value"].get("offsets") or {}).get(str(p))
                if rewound_to is not None and rewound_to > o:
                    return None
            elif op["f"] == "send":
                mine = [q for pp, q in op["value"].get("inputs", []) if pp == p]
                if mine and min(mine) <= o:
                    return None  # it went back
                if mine and self.txn_outcome.get((op["process"], op["value"]["txn_seq"])) == "committed":
                    return {"process": last[0], "aborted_txn_seq": last[1], "next_txn_seq": op["value"]["txn_seq"],
                            "next_first_offset": min(mine)}
        return None

    def left_behind(self, p: int, o: int, until: float) -> dict[str, Any] | None:
        """How a consumer left input ``p@o`` unread: every transaction that held it ended in its
        client's abort, and the process of the last one, whose reads of ``p`` the history records,
        then read nothing of ``p`` until ``until``: no poll, no send, no rewind of ``p``, no
        rebalance. Its own reset of the offset to commit (``reset-offset``, which may not move the
        consumer) is given. None when the history does not show that. Kafka does not keep a
        consumer from reading its own partition's committed records; its recovery does."""
        aborted = self._last_abort_of(p, o)
        if aborted is None:
            return None
        (process, seq), aborted_at = aborted
        reads_recorded, reset = False, None
        for op in self.process_ops.get(process, ()):
            value = op.get("value") or {}
            if op["invoke_time"] <= aborted_at:
                reads_recorded = reads_recorded or (op["f"] == "poll" and str(p) in (value.get("positions") or {}))
                continue
            if op["invoke_time"] > until:
                break
            if op["f"] in ("assign", "revoke") or (op["f"] == "rewind" and str(p) in (value.get("offsets") or {})) \
                    or (op["f"] == "poll" and str(p) in (value.get("positions") or {})) \
                    or (op["f"] == "send" and any(pp == p for pp, _ in value.get("inputs") or [])):
                return None
            if op["f"] == "reset-offset" and value.get("partition") == p:
                reset = {"offset": value.get("offset"), "rewinds_claim": value.get("rewinds_claim")}
        if not reads_recorded:
            return None
        return {"process": process, "aborted_txn_seq": seq, "aborted_at": aborted_at,
                **({"reset_offset": reset} if reset else {})}

    def zombie_inputs(self) -> tuple[dict[str, list[dict[str, Any]]], dict[tuple[str, int], dict[str, Any]]]:
        """Successful inits per transactional.id and commit operations per transaction."""
        inits: dict[str, list[dict[str, Any]]] = defaultdict(list)
        commits: dict[tuple[str, int], dict[str, Any]] = {}
        for op in self.ops:
            if op["f"] == "init" and op["outcome"] == "ok" and op.get("txid"):
                inits[op["txid"]].append(op)
            elif op["f"] == "commit":
                commits[(op["process"], op["value"].get("txn_seq"))] = op
        return inits, commits

    def partition_moved(self, process: str, p: int, before: float) -> dict[str, Any] | None:
        """Whether the group had given input partition ``p`` to another member after ``process``
        was last assigned it and before ``before``: that member's ``assign`` event (process and
        time), or None. A member paused past its session hears of no revoke; this is the group's
        side of it, from the other members' own events."""
        since = None
        for op in self.process_ops.get(process, ()):
            if op["invoke_time"] > before:
                break
            if op["f"] == "assign" and p in ((op.get("value") or {}).get("partitions") or []):
                since = op["invoke_time"]
        if since is None:
            return None
        for op in self.ops:
            if (op["f"] == "assign" and op["process"] != process and since < op["invoke_time"] < before
                    and p in ((op.get("value") or {}).get("partitions") or [])):
                return {"process": op["process"], "invoke_time": op["invoke_time"]}
        return None

    def assigned_during_commit(self, key: tuple[str, int], p: int, process: str) -> dict[str, Any] | None:
        """Whether ``process`` was assigned input partition ``p`` while transaction ``key``'s
        offsets were being committed: after it began sending them and before its commit returned.
        That consumer then fetched ``p``'s committed offset while the transaction's offset commit
        was pending, and without KIP-447's require_stable the group coordinator answers with the
        offset before it: it reads the transaction's inputs again. The ``assign`` event and the
        commit's return, or None."""
        commit = next((op for op in reversed(self.txn_ends.get(key, ())) if op["f"] == "commit" and op["outcome"] == "ok"),
                      None)
        sent = next((op for op in self.process_ops.get(key[0], ())
                     if op["f"] == "send_offsets" and op["value"].get("txn_seq") == key[1]), None)
        if commit is None or sent is None:
            return None
        returned = commit["complete_time"] or commit["invoke_time"]
        for op in self.process_ops.get(process, ()):
            if (op["f"] == "assign" and sent["invoke_time"] <= op["invoke_time"] <= returned
                    and p in ((op.get("value") or {}).get("partitions") or [])):
                return {"process": key[0], "txn_seq": key[1], "assigned": process, "assigned_at": op["invoke_time"],
                        "commit_returned": returned}
        return None

    def per_txid_outcomes(self) -> dict[str, dict[str, int]]:
        per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for key, outcome in self.txn_outcome.items():
            op = self.txn_ops.get(key)
            per[str(op.get("txid") if op else None)][outcome] += 1
        return {k: dict(v) for k, v in sorted(per.items())}


def zombie_successor(inits: dict[str, list[dict[str, Any]]], process: str, txid: str,
                     commit: dict[str, Any]) -> dict[str, Any] | None:
    """The first other process that finished ``init_transactions`` on ``txid`` (at an epoch no lower)
    after ``process`` first initialised it and before ``process`` invoked ``commit``."""
    own_first = min((o["invoke_time"] for o in inits.get(txid, []) if o["process"] == process), default=0.0)
    for op in inits.get(txid, []):
        if (op["process"] != process and op["complete_time"] is not None
                and op["complete_time"] < commit["invoke_time"]
                and (op.get("epoch") or 0) >= (commit.get("epoch") or 0) and op["invoke_time"] > own_first):
            return op
    return None


def worker_slot(process: str | None) -> str | None:
    """The worker slot (``w1``) of a history process (``w1.3``); None for the harness, seeder..."""
    if not process or not process.startswith("w"):
        return None
    return process.split(".")[0]


#: evidence keys that carry a history time (``invoke_time`` of an operation; the commit's
#: invoke time copied into offsets cases)
CASE_TIME_KEYS = ("invoke_time", "commit_invoked", "observed_at")


#: evidence keys that describe the case's surroundings, not its own transactions: the faults
#: active over its life name every client their messages touched (a held EndTxn of all four
#: workers put one worker's case in every client's row: certify-tv-flip seed 30, 2026-12-02)
CASE_CONTEXT_KEYS = ("faults_active",)


def case_names(case: dict[str, Any]) -> tuple[list[float], set[str], set[str]]:
    """What an anomaly case's evidence names, wherever it is nested (its context aside: the
    faults active over it): the history times, the worker slots and the transactional ids."""
    times: list[float] = []
    slots: set[str] = set()
    txids: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k in CASE_CONTEXT_KEYS:
                    continue
                if k in CASE_TIME_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool):
                    times.append(float(v))
                elif k in ("process", "worker") and isinstance(v, str) and worker_slot(v):
                    slots.add(worker_slot(v))  # type: ignore[arg-type]
                elif k in ("txid", "transactional_id") and isinstance(v, str):
                    txids.add(v)
                else:
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(case)
    return times, slots, txids


def record_refs(case: dict[str, Any]) -> set[tuple[str, int, int]]:
    """The records an anomaly case names, wherever nested: (topic, partition, offset)."""
    refs: set[tuple[str, int, int]] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            topic, partition, offset = value.get("topic"), value.get("partition"), value.get("offset")
            if isinstance(topic, str) and isinstance(partition, int) and isinstance(offset, int):
                refs.add((topic, partition, offset))
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(case)
    return refs


#: a case's place keeps at most this many of the records it names (enough to stamp it in time)
PLACE_REFS = 4


def case_place(case: dict[str, Any]) -> dict[str, Any]:
    """What places an anomaly case in a phase and client, compactly: the earliest history time
    it names, the worker slots and transactional ids, and (for a case with no history time) a
    few of the records it names. Kept for every case of a check that found more than it keeps."""
    times, slots, txids = case_names(case)
    place: dict[str, Any] = {"t": min(times) if times else None, "slots": sorted(slots), "txids": sorted(txids)}
    if not times:
        place["refs"] = [list(ref) for ref in sorted(record_refs(case))[:PLACE_REFS]]
    return place


def case_time_and_slots(case: dict[str, Any]) -> tuple[float | None, set[str]]:
    """When an anomaly case happened (the earliest history time its evidence names) and the
    worker slots it names: how the report finds broker log lines and certification a phase."""
    times, slots, _ = case_names(case)
    return (min(times) if times else None), slots


def coordinator_commits(log: Any, excluded_txids: set[str]) -> int:
    """Transactions the coordinator completed as committed, from its log: per transactional.id
    in log order, a ``CompleteCommit`` record that does not repeat the one before it (the
    coordinator may write a state again). ``log``: (transactional_id, status or None for a
    tombstone) in log order. How a pipeline with no client history (an external app) shows it
    made progress; the Spark job counts the same with a window (spark.checks.coordinator_commits)."""
    last: dict[str, str | None] = {}
    n = 0
    for txid, status in log:
        if status == "CompleteCommit" and last.get(txid) != "CompleteCommit" and txid not in excluded_txids:
            n += 1
        last[txid] = status
    return n


def commits_by_client_tv(rows: Any, txid_prefix: str | None) -> dict[str, dict[str, int]]:
    """Per transactional.id of this run, the transactions the coordinator completed as committed,
    by the client transaction version it recorded for them (``"2"``: KIP-890, ``"0"``: classic).
    ``rows``: (transactional_id, status, client_transaction_version, how many such records) from
    the decoded log."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for txid, status, ctv, n in rows:
        if status == "CompleteCommit" and txid and (not txid_prefix or txid.startswith(txid_prefix)):
            out[txid][str(ctv if ctv is not None else 0)] += n
    return {txid: dict(sorted(v.items())) for txid, v in sorted(out.items())}


def run_seed(run: Path, campaign: Any) -> int | None:
    """The run's seed: the resolved campaign's (verifier.campaign.Campaign), else the ``seed`` file."""
    seed = campaign.run.seed
    if seed is None and (Path(run) / "seed").exists():
        seed = int((Path(run) / "seed").read_text().strip())
    return seed


def pipeline_txids(campaign: Any, history: "HistoryIndex") -> set[str] | None:
    """The transactional ids whose coordinator records a run checks: every one, when the run
    started its own cluster (every id in its log is the run's: its workers', the seeder's, Kafka
    Streams' own ids); on a cluster others share (external), the ids the run's history names and
    those with its prefix, each returned (None: all)."""
    if campaign.cluster.backend != "external":
        return None
    ids = {op["txid"] for op in history.ops if op.get("txid")}
    return ids | ({f"{history.txid_prefix}-"} if history.txid_prefix else set())


def in_scope(txid: str, scope: set[str] | None) -> bool:
    return scope is None or txid in scope or any(txid.startswith(s) for s in scope if s.endswith("-"))


#: coordinator states a transaction must not stay in once its clients stopped and the cluster healed
STUCK_PREPARED = ("PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def hanging_cases(workload: Any, final: dict[str, Any], open_txns: list[dict[str, Any]],
                  scope: set[str] | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Hanging transactions after heal and drain: partitions whose LSO stayed behind the high
    watermark (with the transactions the log shows open there, and the brokers' own list), and
    transactions ``find-hanging`` reports on the run's topics, and transactions a coordinator
    still holds prepared (``list``; the ids in ``scope``, :func:`pipeline_txids`). Returns (cases,
    note when none). With no case, a brokers' query that failed (``list``, a broker's
    ``find-hanging``) raises NotApplicable: a list never read is no "nothing prepared"."""
    liveness = final.get("liveness") or {}
    recovery = final.get("recovery")  # KIP-664's abort at the final reads (faults.recover_hanging)
    ours = {workload.input_topic, *workload.output_topics}
    # the brokers' view of the hang: before a recovery aborted it, else after heal
    broker = (recovery or {}).get("before") or final.get("broker_transactions") or {}
    reported = [row for row in broker.get("hanging") or [] if row.get("Topic") in ours]
    # a transaction its coordinator still holds prepared after heal, drain and the workers'
    # stop: its markers never completed, and its id can begin nothing more (KAFKA-19999's shape:
    # a marker retried with the epoch it already wrote, refused under TV2)
    prepared = [t for t in broker.get("transactions") or [] if t.get("TransactionState") in STUCK_PREPARED
                and in_scope(str(t.get("TransactionalId", "")), scope)]
    if liveness.get("stable") and not reported and not prepared:
        failed = ([f"the query: {broker['error']}"] if broker.get("error") else []) + (
            [f"list: {broker['list_error']}"] if broker.get("list_error") else []) + [
            f"{name}: {error}" for name, error in sorted((broker.get("hanging_errors") or {}).items())]
        if failed:
            raise NotApplicable("every partition's LSO reached its high watermark, but the brokers' own account of "
                                "transactions could not be read (" + "; ".join(failed)[:300] + "): a coordinator may "
                                "still hold one prepared")
        if liveness.get("offsets_partition_error"):  # the wait never looked at it: unseen is not stable
            raise NotApplicable("every user partition's LSO reached its high watermark, but the group's offsets "
                                f"partition was not watched ({liveness['offsets_partition_error']}): a transaction "
                                "left open there, which stalls the group, would not have been seen")
        return [], (f"every partition's LSO reached its high watermark {liveness.get('waited_s')}s after the drain"
                    + ("; find-hanging reports none" if "hanging" in broker else "")
                    + ("; no coordinator holds a transaction prepared" if "transactions" in broker else ""))
    still_open = [t for t in broker.get("transactions") or []
                  if t.get("TransactionState") not in ("Empty", "CompleteCommit", "CompleteAbort", "Dead")]
    cases = [{"explanation": f"{name}: the last stable offset {v['lso']} stayed behind the high watermark {v['high']} "
                             f"for {liveness.get('waited_s')}s after faults healed and the workload stopped"
                             + (" (the group's offsets partition: while it is pinned the group's committed offsets "
                                "cannot be read, UNSTABLE_OFFSET_COMMIT, and its consumers stall)"
                                if name.startswith("__consumer_offsets-") else ""),
              "partition": name, "lso": v["lso"], "high": v["high"],
              "open_transactions": [t for t in open_txns
                                    if any(f"{topic}-{p}" == name for topic, ps in t["partitions"].items() for p in ps)]
              or open_txns,
              "broker_transactions": still_open,
              "partition_producers": (broker.get("producers_of_pinned_partitions") or {}).get(name),
              **({"recovery": [a for a in recovery.get("aborted") or [] if a.get("partition") == name],
                  "recovered": (recovery.get("liveness_after") or {}).get("pinned", {}).get(name) is None
                  and not recovery.get("error")} if recovery else {})}
             for name, v in sorted(liveness.get("pinned", {}).items())]
    for t in prepared:
        cases.append({"explanation": f"{t.get('TransactionalId')}: its coordinator (broker {t.get('Coordinator')}) still "
                                     f"held the transaction of producer {t.get('ProducerId')} in "
                                     f"{t.get('TransactionState')} at the final reads, after heal, drain and the "
                                     "workers' stop: its markers never completed",
                      "transactional_id": t.get("TransactionalId"), "broker_transaction": t})
    for row in reported:
        cases.append({"explanation": f"find-hanging on broker {row.get('broker')} reports producer {row.get('ProducerId')} "
                                     f"open on {row.get('Topic')}-{row.get('Partition')} since offset {row.get('StartOffset')}",
                      "partition": f"{row.get('Topic')}-{row.get('Partition')}", "find_hanging": row})
    return cases, None
