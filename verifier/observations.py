"""The read-side checks over what the observers read during the run (workloads/observer.py), as
the Python reference computes them; the Spark job's queries are in verifier/spark/checks.py and
every explanation in verifier/checks.py.

An observation is (observer, seq, poll, time, topic, partition, offset, crc): the record an
observer got, where it got it, and the CRC-32 of its value. The final log is the run's dumps of
the same topics: the raw view (every data record, with its value) and the committed view (what
read_committed readers get). Both views are read again here, only for the observed topics, and
only as positions and CRCs.
"""

from __future__ import annotations

import bisect
import json
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

from kchaos.verifier.checks import before_commit_text, before_seed_text, explain, result
from kchaos.verifier.coordinator_log import CLOCK_EPS_MS
from kchaos.verifier.results import CheckResult

OBSERVATIONS = Path("observers") / "observations.parquet"
SUMMARY = Path("observers") / "summary.json"

Key = tuple[str, int, int]  # topic, partition, offset


def observer_summary(run: Path, final: dict[str, Any]) -> dict[str, Any] | None:
    """What the observers recorded about themselves (final.json, else observers/summary.json),
    or None when the run has no observations to check."""
    if not (run / OBSERVATIONS).exists():
        return None
    summary = final.get("observers")
    if summary is None and (run / SUMMARY).exists():
        summary = json.loads((run / SUMMARY).read_text())
    return summary or {"observers": []}


class ObservedRun:
    """The observations in read order, and the final log's positions and CRCs of their topics."""

    def __init__(self, run: Path, isolation: str, topics: list[str]):
        import pyarrow.parquet as pq

        self.isolation = isolation
        table = pq.read_table(run / OBSERVATIONS)
        self.rows = sorted(table.to_pylist(), key=lambda r: (r["observer"], r["seq"]))
        self.topics = sorted(topics)  # what the observers were assigned, read by them or not
        self.raw_crc: dict[Key, int] = {}
        self.committed: dict[tuple[str, int], list[int]] = defaultdict(list)
        for topic in self.topics:
            for batch in pq.ParquetFile(run / "topics" / f"{topic}.raw.parquet").iter_batches(
                    columns=["partition", "offset", "value"]):
                for p, o, v in zip(*(batch.column(c).to_pylist() for c in ("partition", "offset", "value"))):
                    self.raw_crc[(topic, p, o)] = zlib.crc32(v or b"")
            for batch in pq.ParquetFile(run / "topics" / f"{topic}.committed.parquet").iter_batches(
                    columns=["partition", "offset"]):
                for p, o in zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist()):
                    self.committed[(topic, p)].append(o)
        for offsets in self.committed.values():
            offsets.sort()
        self.committed_keys = {(t, p, o) for (t, p), offsets in self.committed.items() for o in offsets}

    def fields(self, row: dict[str, Any]) -> dict[str, Any]:
        return {k: row[k] for k in ("observer", "topic", "partition", "offset", "poll")}

    def evidence(self, row: dict[str, Any], faults_at: Any) -> dict[str, Any]:
        return {"observation": {**self.fields(row), "observed_at": row["time"], "crc": row["crc"]},
                "faults_active": faults_at(row["time"])}

    def between(self, topic: str, partition: int, low: int, high: int) -> list[int]:
        """Committed offsets strictly between ``low`` and ``high``."""
        offsets = self.committed.get((topic, partition), [])
        return offsets[bisect.bisect_right(offsets, low):bisect.bisect_left(offsets, high)]


def _case(observed: ObservedRun, kind: str, row: dict[str, Any], faults_at: Any, **extra: Any) -> dict[str, Any]:
    return {"explanation": explain(kind, **observed.fields(row), **extra), **observed.evidence(row, faults_at),
            **{k: v for k, v in extra.items() if k != "isolation"}}


def inconsistent_offsets(observed: ObservedRun, faults_at: Any) -> CheckResult:
    cases = []
    for row in observed.rows:
        crc = observed.raw_crc.get((row["topic"], row["partition"], row["offset"]))
        if crc is None:
            cases.append(_case(observed, "inconsistent-offsets.truncated", row, faults_at, final_crc=None))
        elif crc != row["crc"]:
            cases.append(_case(observed, "inconsistent-offsets.replaced", row, faults_at, final_crc=crc))
    return result("inconsistent-offsets", cases)


def observed_aborted_reads(observed: ObservedRun, faults_at: Any, early: list[dict[str, Any]] | None = None) -> CheckResult:
    """Reads of a record the final log holds only in its uncommitted view; then ``early``: reads
    of an output before its transaction's commit was requested (:func:`before_commit_case`)."""
    cases = [_case(observed, "observed-aborted-read", row, faults_at, isolation=observed.isolation)
             for row in observed.rows
             if (key := (row["topic"], row["partition"], row["offset"])) in observed.raw_crc
             and key not in observed.committed_keys]
    return result("observed-aborted-read", cases + (early or []))


#: the history's invoke times and the observers' read times are one machine's clock (seconds)
READ_EPS_S = CLOCK_EPS_MS / 1000


def judges_reads_before_commit(workload: Any, history: Any) -> bool:
    """Whether a read can be held against its transaction's commit request: an exactly-once
    pipeline whose outputs name their transaction (full lineage), with a client history."""
    return workload.delivery == "exactly-once" and workload.lineage == "full" and bool(history.has_history)


def read_before_commit(observed_at: float, commit_requested: float | None) -> bool:
    """A read_committed reader gets a record only once its transaction's markers are written,
    which follows the coordinator's PrepareCommit, which follows the client's EndTxn: a read
    stamped (after it returned) before the client asked to commit is a read of data not yet
    committed. ``commit_requested``: the first commit operation's invoke time, written before the
    call. A transaction whose client never asked to commit has no committed output in a sound
    run, and the end state names one (aborted-read, split-transaction): not judged here."""
    return commit_requested is not None and observed_at < commit_requested - READ_EPS_S


def before_commit_case(row: Any, txn: tuple[str, int], commit_requested: float | None, faults: list[dict[str, Any]],
                       transaction: dict[str, Any]) -> dict[str, Any]:
    """An observed-aborted-read case: an output read before its transaction's commit was
    requested (both engines build it from the same fields)."""
    fields = {k: row[k] for k in ("observer", "topic", "partition", "offset", "poll")}
    return {"explanation": explain("observed-aborted-read.before-commit", **fields, seq=txn[1], process=txn[0],
                                   when=before_commit_text(row["time"], commit_requested)),
            "observation": {**fields, "observed_at": row["time"], "crc": row["crc"]},
            "commit_requested": commit_requested, "transactions": [transaction], "faults_active": faults}


def _reads_of_final_records(observed: ObservedRun, of: dict[Key, Any]) -> Iterator[tuple[dict[str, Any], Any]]:
    """Each read of a record ``of`` names that is the record the final log holds there (its CRC),
    with what ``of`` says of it."""
    for row in observed.rows:
        key = (row["topic"], row["partition"], row["offset"])
        if key in of and observed.raw_crc.get(key) == row["crc"]:
            yield row, of[key]


def reads_before_commit(observed: ObservedRun, owner: dict[Key, tuple[str, int]], history: Any,
                        faults_at: Any) -> list[dict[str, Any]]:
    """Reads of a committed output (the record read, by its CRC) before its transaction's commit
    was requested; ``owner``: the observed committed outputs' transactions the history holds."""
    return [before_commit_case(row, txn, commit, faults_at(row["time"]), history.txn_evidence(txn))
            for row, txn in _reads_of_final_records(observed, owner)
            if read_before_commit(row["time"], commit := history.commit_requested(txn))]


def seeded_inputs(history: Any, topic: str) -> dict[Key, tuple[tuple[str, int], float]]:
    """Each input a committed seeder transaction was acknowledged to write: its position -> (its
    transaction ("seeder", op), when the seeder began it: its ``seed`` invoke)."""
    out = {}
    for key, op in history.seeder_txns.items():
        if history.seeder_outcome(key) == "committed":
            for _, p, o in op["value"].get("inputs") or []:
                out[(topic, int(p), int(o))] = (key, op["invoke_time"])
    return out


def read_before_seed(observed_at: float, seed_invoked: float) -> bool:
    """A read of an input stamped before the seeder began the transaction that wrote it: the
    record did not exist yet. The seeder records no mark before its ``commit_transaction`` (a
    worker's ``commit`` invoke), so its transaction is judged against its begin, not its commit
    request: a read between the two is not seen here."""
    return observed_at < seed_invoked - READ_EPS_S


def before_seed_case(row: Any, txn: tuple[str, int], seed_invoked: float, faults: list[dict[str, Any]],
                     transaction: dict[str, Any]) -> dict[str, Any]:
    """An observed-aborted-read case: an input read before its seeder transaction began (both
    engines build it from the same fields)."""
    fields = {k: row[k] for k in ("observer", "topic", "partition", "offset", "poll")}
    return {"explanation": explain("observed-aborted-read.before-seed", **fields, seq=txn[1], process=txn[0],
                                   when=before_seed_text(row["time"], seed_invoked)),
            "observation": {**fields, "observed_at": row["time"], "crc": row["crc"]},
            "seed_invoked": seed_invoked, "transactions": [transaction], "faults_active": faults}


def reads_before_seed(observed: ObservedRun, seeded: dict[Key, tuple[tuple[str, int], float]], history: Any,
                      faults_at: Any) -> list[dict[str, Any]]:
    """Reads of a committed input (the record read, by its CRC) before the seeder began its
    transaction; ``seeded``: :func:`seeded_inputs`."""
    return [before_seed_case(row, txn, seed_invoked, faults_at(row["time"]), history.txn_evidence(txn))
            for row, (txn, seed_invoked) in _reads_of_final_records(observed, seeded)
            if read_before_seed(row["time"], seed_invoked)]


def _walks(observed: ObservedRun) -> dict[tuple[int, str, int], list[dict[str, Any]]]:
    """Each observer's reads of each partition, in the order it got them."""
    walks: dict[tuple[int, str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in observed.rows:
        walks[(row["observer"], row["topic"], row["partition"])].append(row)
    return walks


def poll_skips(observed: ObservedRun, faults_at: Any) -> CheckResult:
    cases = []
    for (_, topic, partition), rows in sorted(_walks(observed).items()):
        previous = -1
        for row in rows:
            if row["offset"] > previous:
                skipped = observed.between(topic, partition, previous, row["offset"])
                if skipped:
                    kind = "poll-skip.start" if previous < 0 else "poll-skip"
                    cases.append(_case(observed, kind, row, faults_at, previous=previous, skipped=len(skipped),
                                       first_skipped=skipped[0]))
            previous = row["offset"]
    return result("poll-skip", cases)


def nonmonotonic_polls(observed: ObservedRun, faults_at: Any) -> CheckResult:
    cases = []
    for _, rows in sorted(_walks(observed).items()):
        for before, row in zip(rows, rows[1:]):
            if row["offset"] <= before["offset"]:
                cases.append(_case(observed, "nonmonotonic-poll", row, faults_at, previous=before["offset"]))
    return result("nonmonotonic-poll", cases)


def unseen(observed: ObservedRun) -> CheckResult:
    seen = {(r["topic"], r["partition"], r["offset"]) for r in observed.rows}
    cases = []
    for (topic, partition), offsets in sorted(observed.committed.items()):
        missed = [o for o in offsets if (topic, partition, o) not in seen]
        if missed:
            cases.append({"explanation": explain("unseen", topic=topic, partition=partition, count=len(missed),
                                                 first=missed[0], last=missed[-1]),
                          "offsets": missed[:20]})
    return result("unseen", cases)
