"""The checkers on hand-made run directories: clean data passes, and each injected anomaly is
named (and only that one), with its evidence. Here the single-process Python reader; the same
tests run on the Spark job in tests/integration/test_checkers_spark.py (Spark is a JVM, and unit
tests start none)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kchaos.verifier.pychecker as pychecker
from kchaos.verifier.checks import OBSERVATION_CHECKS
from kchaos.verifier.model import MAX_CASES
from kchaos.verifier.results import LIVENESS_CHECKS

ENGINE = {}

#: a test of a rule both engines share (the driver's checks, the evidence rules, the claims): it runs
#: on the Python reader only. Each anomaly is still named by the Spark job in at least one test of
#: tests/integration/test_checkers_spark.py; these vary a shared rule's inputs, and the Spark job
#: would run the same function on them (about 6 s a test there, for nothing new).
one_engine = pytest.mark.one_engine
#: a test whose Spark copy runs in the long tier only (tests/integration/conftest.py): a variant of
#: a query, or a rule the driver runs for both engines (the driver's checks, the evidence, exposure
#: and liveness rules) on data a Spark copy in `make test` already loads. `make test` keeps one
#: Spark copy per Spark query (verifier/spark/checks.py) and per source the job reads its own way;
#: the rest went to the long tier when CI passed 30 minutes (2026-12-02: 86 Spark copies, 1168 s)
spark_long = pytest.mark.spark_long


def use_spark_engine(spark) -> None:
    """Point ENGINE at the Spark job (tests/integration/test_checkers_spark.py)."""
    import kchaos.verifier.spark.checks as spark_checks  # pyspark: only where a Spark session exists

    ENGINE.update(name="spark", engine=spark_checks.SparkEngine, check=lambda run: spark_checks.check_run_spark(spark, run))


@pytest.fixture(autouse=True)
def engine():
    """The engine the tests of this module check with (ENGINE); the Python reader here."""
    ENGINE.update(name="python", engine=pychecker.PythonEngine, check=pychecker.check_run)
    yield "python"
    ENGINE.clear()

#: what a run records of its brokers at its end (harness/run.py): one broker, registered
BROKERS_AT_END = {"at": 200.0, "expected": [1], "registered": [1], "leaderless": [], "after_heal_s": 5.0}
WORKLOAD = {"input_topic": "in", "output_topics": ["a", "b"], "outputs_per_input": 2, "delivery": "exactly-once",
            "group_id": "g"}
STATUS = {"Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3, "CompleteCommit": 4, "CompleteAbort": 5,
          "Dead": 6, "PrepareEpochFence": 7}


def _s16(text: str) -> bytes:
    import struct

    return struct.pack(">h", len(text)) + text.encode()


def _pid_of(txid: str) -> int:
    """Each transactional id its own producer id, as a coordinator hands them out (tx-w0's is 7)."""
    import zlib

    return 7 if txid == "tx-w0" else 1000 + zlib.crc32(txid.encode()) % 1_000_000


def _uvarint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _txn_record(txid: str, status: str, epoch: int = 0, pid: int | None = None, partitions: dict | None = None,
                update_ms: int = 1, start_ms: int = 1, timeout_ms: int = 10000, client_tv: int = 0) -> tuple[bytes, bytes]:
    """A TransactionLogValue record, encoded by hand: v0 (the classic protocol), or with
    ``client_tv`` the flexible v1 with its client transaction version tag (KIP-890's TV2)."""
    import struct

    pid = _pid_of(txid) if pid is None else pid
    key = struct.pack(">h", 0) + _s16(txid)
    if client_tv:
        def compact(text: str) -> bytes:
            return _uvarint(len(text) + 1) + text.encode()

        parts = b"".join(compact(t) + _uvarint(len(ps) + 1) + b"".join(struct.pack(">i", x) for x in ps) + _uvarint(0)
                         for t, ps in (partitions or {}).items())
        tag = struct.pack(">h", client_tv)
        value = (struct.pack(">hqhib", 1, pid, epoch, timeout_ms, STATUS[status]) + _uvarint(len(partitions or {}) + 1)
                 + parts + struct.pack(">qq", update_ms, start_ms) + _uvarint(1) + _uvarint(2) + _uvarint(len(tag)) + tag)
        return key, value
    parts = b"".join(_s16(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", x) for x in ps)
                     for t, ps in (partitions or {}).items())
    value = (struct.pack(">hqhib", 0, pid, epoch, timeout_ms, STATUS[status]) + struct.pack(">i", len(partitions or {}))
             + parts + struct.pack(">qq", update_ms, start_ms))
    return key, value


def _cleaned(rows: list[tuple[int, int, bytes, bytes]], to: int | None) -> list[tuple[int, int, bytes, bytes]]:
    """What the log cleaner leaves of a compacted partition's records (partition, offset, key,
    value) cleaned up to offset ``to``: below it, only each key's last record there."""
    if to is None:
        return rows
    last = {key: offset for _, offset, key, _ in rows if offset < to}
    return [r for r in rows if r[1] >= to or last[r[2]] == r[1]]


def _sent_ms(lines: list[dict], partition: int, offset: int) -> int:
    """When the group coordinator stamps an offset commit: when the first operation of the history
    that carries it was invoked (the client's request), else 1 (nobody sent it)."""
    return next((round(l["time"] * 1000) for l in lines if l["type"] == "invoke"
                 and (l["value"].get("offsets") or {}).get(str(partition)) == offset), 1)


def _offset_record(group: str, topic: str, partition: int, offset: int, ts: int = 1) -> tuple[bytes, bytes]:
    """An OffsetCommitKey (type 1) / OffsetCommitValue v1 record, encoded by hand."""
    import struct

    key = struct.pack(">h", 1) + _s16(group) + _s16(topic) + struct.pack(">i", partition)
    value = struct.pack(">hq", 1, offset) + _s16("") + struct.pack(">qq", ts, -1)
    return key, value


def _write_topic(run: Path, topic: str, view: str, rows: list[tuple[int, int, bytes, bytes]]) -> None:
    (run / "topics").mkdir(exist_ok=True)
    table = pa.table({"partition": pa.array([r[0] for r in rows], pa.int32()),
                      "offset": pa.array([r[1] for r in rows], pa.int64()),
                      "timestamp": pa.array([0] * len(rows), pa.int64()),
                      "key": pa.array([r[2] for r in rows], pa.binary()),
                      "value": pa.array([r[3] for r in rows], pa.binary())})
    pq.write_table(table, run / "topics" / f"{topic}.{view}.parquet")


def _out(in_p, in_o, slot, worker="w0", inc=1, seq=1):
    return {"in_id": f"id-{in_p}-{in_o}", "in_topic": "in", "in_partition": in_p, "in_offset": in_o, "slot": slot,
            "slots": 2, "worker": worker, "incarnation": inc, "txid": f"tx-{worker}", "txn_seq": seq}


#: what a transaction of the hand-made runs holds at the coordinator (its outputs and its offsets)
TXN_PARTITIONS = {"a": [0, 1], "b": [0, 1], "__consumer_offsets": [0]}


class RunBuilder:
    """Inputs 0..n-1 on partition 0; transaction 1 of w0.1 turns all of them into 2 outputs each.

    The evidence is complete, as a real run's: the seeder's acknowledgements (its committed
    batch of the inputs, an aborted one of ``raw_only_inputs``), the coordinator's log of every
    client transaction (an Ongoing holding TXN_PARTITIONS 1 ms after its send, a Prepare 1 ms
    after its client asked to end it, then the Complete; ``coordinator`` overrides, per
    transaction), each commit's offsets in ``__consumer_offsets``, the compaction state.
    ``txn_states`` are records appended after the derived ones (state-machine tests)."""

    def __init__(self, n: int = 4):
        self.inputs = [(0, o) for o in range(n)]
        self.raw_only_inputs: list[tuple[int, int]] = []
        self.committed = {"a": [_out(0, o, 0) for o in range(n)], "b": [_out(0, o, 1) for o in range(n)]}
        self.raw_extra = {"a": [], "b": []}
        self.final_offsets = {"0": n}
        self.liveness = {"stable": True, "waited_s": 0.1, "pinned": {}}
        self.txn_states: list[tuple[str, str, int] | tuple[str, str, int, int]] = []
        #: (process, txn_seq) -> the coordinator's records for it instead of the derived ones:
        #: [(status, partitions, ms after the transaction's send, epoch or None)]; "Ongoing!" is an
        #: Ongoing with a new start time though nothing ended before it
        self.coordinator: dict[tuple[str, int], list[tuple]] = {}
        self.workload: dict = {}  # over WORKLOAD, read when written
        self.verifier: dict = {}  # the campaign's [verifier] table
        self.faults: dict | None = None  # the campaign's [faults] table
        self.schedule: list[dict] | None = None  # schedule.json's faults
        self.final_extra: dict = {}
        self.cluster: dict = {}  # the campaign's [cluster] table (default: local)
        self.broker_clock_ms = 0  # the coordinator's clock ahead of the history's
        self.client_tv = 0  # the coordinator's records: 0, the classic protocol (v0); 2, KIP-890's TV2 (v1)
        self.txn_timeout_ms = 10000  # the transaction timeout its coordinator records
        self.clock: dict | None = None  # clock.json (an external cluster's measured clocks)
        self.offset_commits: list[tuple[int, int]] | None = None  # None: one per commit op, from the history
        #: offset commits in the raw view of __consumer_offsets only, after the committed ones (past a
        #: committed view an open transaction pins)
        self.raw_only_offset_commits: list[tuple[int, int]] = []
        #: the log cleaner compacted __transaction_state-0 up to this offset (None: not at all): below
        #: it each transactional id keeps only its last record, and final.json says so
        self.txn_log_cleaned_to: int | None = None
        #: the same for __transaction_state-1, where the seeder's id (tx-seeder) keeps its records
        self.seeder_log_cleaned_to: int | None = None
        #: None: derived from inputs (committed) and raw_only_inputs (aborted); False: no seeder history
        self.seed_inputs: dict | bool | None = None
        self.input_ids: dict[tuple[int, int], str] = {}  # inputs whose id is not id-p-o
        #: observers of the run (a real default run has 1): None derives their reads, one
        #: observer reading every committed record in order; a list replaces them (observed())
        self.observers = 1
        self.observations: list[tuple] | None = None
        #: edits the derived reads (a list of (observer, topic, partition, offset, crc)) in place
        self.edit_observations: Any = None
        self.observers_caught_up = True
        self.ops = [
            ("init", "ok", {}),
            ("send", "ok", {"txn_seq": 1, "inputs": [[0, o] for o in range(n)], "outputs": 2 * n}),
            ("send_offsets", "ok", {"txn_seq": 1, "offsets": {"0": n}}),
            ("commit", "ok", {"txn_seq": 1, "offsets": {"0": n}}),
        ]

    def _lines(self) -> list[dict]:
        if self.seed_inputs is False:  # no seeder in the history
            return self._op_lines(list(self.ops))
        seeded = self.seed_inputs if self.seed_inputs is not None else {
            "ok": [[f"id-{p}-{o}", p, o] for p, o in self.inputs],
            "aborted": [[f"id-{p}-{o}", p, o] for p, o in self.raw_only_inputs]}
        ops = [("seed", "ok", {"first": 0, "last": 0, "aborted": True, "inputs": seeded["aborted"]}, "seeder", 0,
                "tx-seeder")] if seeded.get("aborted") else []
        ops += [("seed", "info", {"first": 0, "last": 0}, "seeder", 0, "tx-seeder")] if seeded.get("info") else []
        ops += [("seed", "ok", {"first": 0, "last": 0, "count": len(seeded["ok"]), "inputs": seeded["ok"]}, "seeder", 0,
                 "tx-seeder")] + list(self.ops)
        return self._op_lines(ops)

    #: the history's clock: the first line's time, and the time between two lines
    T0, STEP = 100.0, 0.01

    def _op_lines(self, ops: list[tuple]) -> list[dict]:
        lines, t = [], self.T0
        for op_id, op in enumerate(ops):
            f, outcome, value = op[:3]
            process, epoch = (op[3], op[4]) if len(op) > 3 else ("w0.1", 0)
            txid = op[5] if len(op) > 5 else "tx-w0"
            for kind in ("invoke", outcome) if outcome else ("invoke",):  # None: a call that never returned
                t += self.STEP
                lines.append({"time": round(t, 6), "process": process, "op": op_id, "type": kind, "f": f,
                              "value": value, "txid": txid, "pid": 7, "epoch": epoch})
        return lines

    def _coordinator_log(self, lines: list[dict]) -> list[tuple[bytes, bytes | None]]:
        """The derived __transaction_state: per client transaction its records, on the history's clock."""
        invokes = [l for l in lines if l["type"] == "invoke"]
        epochs: dict[str, int] = {}
        records = []
        for l in invokes:
            ms = round(l["time"] * 1000) + self.broker_clock_ms
            txid = l["txid"]
            if l["f"] == "init":
                epochs[txid] = max(epochs.get(txid, -1) + 1, l["epoch"])
                records.append((ms, _txn_record(txid, "Empty", epochs[txid], update_ms=ms, start_ms=-1,
                                                client_tv=self.client_tv)))
            elif l["f"] == "send" and l["process"] != "seeder":
                key = (l["process"], l["value"]["txn_seq"])
                end = next((e for e in invokes if e["process"] == l["process"] and e["f"] in ("commit", "abort")
                            and e["value"].get("txn_seq") == key[1]), None)
                epoch = max(epochs.get(txid, 0), l["epoch"])
                if key in self.coordinator:
                    steps = self.coordinator[key]
                else:
                    steps = [("Ongoing", TXN_PARTITIONS, 1, None)]
                    if end is not None:
                        done = "Commit" if end["f"] == "commit" and end["type"] != "fail" else "Abort"
                        at = round(end["time"] * 1000) + self.broker_clock_ms - ms
                        steps += [(f"Prepare{done}", TXN_PARTITIONS, at + 1, None), (f"Complete{done}", {}, at + 2, None)]
                start, open_ = ms + 1, False
                for status, parts, after, ep in steps:
                    if status == "Ongoing" and not open_:  # a coordinator transaction begins: its start time
                        start, open_ = ms + after, True
                    elif status == "Ongoing!":  # begun again with nothing ended (the coordinator forgot it)
                        status, start, open_ = "Ongoing", ms + after, True
                    open_ = open_ and not status.startswith("Complete")
                    records.append((ms + after, _txn_record(txid, status, epoch if ep is None else ep, partitions=parts,
                                                            update_ms=ms + after, start_ms=start,
                                                            timeout_ms=self.txn_timeout_ms, client_tv=self.client_tv)))
        return [kv for _, kv in sorted(records, key=lambda r: r[0])]

    def _seeder_log(self, lines: list[dict]) -> list[tuple[bytes, bytes | None]]:
        """The seeder's records on __transaction_state-1: per ``seed`` operation that ended for
        certain, an Ongoing 1 ms after its invoke and its Prepare and Complete (commit, or abort for
        a batch it aborted) just before its completion; ``coordinator`` overrides, keyed ("seeder", op)."""
        at = self.broker_clock_ms  # the coordinator's clock ahead of the history's
        records = [_txn_record("tx-seeder", "Empty", update_ms=round(self.T0 * 1000) + at, start_ms=-1,
                               client_tv=self.client_tv)]
        for l in (l for l in lines if l["f"] == "seed" and l["type"] == "invoke"):
            done = next(e for e in lines
                        if (e["op"], e["process"]) == (l["op"], l["process"]) and e["type"] != "invoke")
            ms, end_ms = round(l["time"] * 1000) + at, round(done["time"] * 1000) + at
            if ("seeder", l["op"]) in self.coordinator:
                steps = self.coordinator[("seeder", l["op"])]
            elif done["type"] == "info":  # it never reached the coordinator
                steps = []
            else:
                end = "Abort" if done["type"] == "fail" or done["value"].get("aborted") else "Commit"
                steps = [("Ongoing", {"in": [0]}, 1, None), (f"Prepare{end}", {"in": [0]}, end_ms - ms - 3, None),
                         (f"Complete{end}", {}, end_ms - ms - 2, None)]
            start = ms + steps[0][2] if steps else None  # its first partition added with its Ongoing
            records += [_txn_record("tx-seeder", status, 0 if ep is None else ep, partitions=parts,
                                    update_ms=ms + after, start_ms=start, timeout_ms=self.txn_timeout_ms,
                                    client_tv=self.client_tv) for status, parts, after, ep in steps]
        return records

    def observed(self, run: Path) -> list[tuple]:
        """The observers' reads as (observer, topic, partition, offset, crc): ``observations``, or
        by default observer 0 read every committed record of the run's topics once, in order."""
        if self.observations is not None:
            return self.observations
        rows = []
        for topic in ("in", "a", "b"):
            table = pq.read_table(run / "topics" / f"{topic}.committed.parquet").to_pylist()
            rows += [(0, topic, r["partition"], r["offset"], zlib.crc32(r["value"] or b""))
                     for r in sorted(table, key=lambda r: (r["partition"], r["offset"]))]
        if self.edit_observations is not None:
            self.edit_observations(rows)
        return rows

    def _write_observations(self, run: Path) -> None:
        rows = self.observed(run)
        (run / "observers").mkdir(exist_ok=True)
        seqs: dict[int, int] = {}
        columns: dict[str, list] = {k: [] for k in ("observer", "seq", "poll", "time", "topic", "partition", "offset",
                                                    "crc")}
        # the observers read after the history's last operation (a read before a transaction's
        # commit was requested is a case of its own: observed-aborted-read)
        start = getattr(self, "history_end", self.T0) + self.STEP
        for i, (observer, topic, partition, offset, crc) in enumerate(rows):
            seq = seqs[observer] = seqs.get(observer, -1) + 1
            for k, v in zip(columns, (observer, seq, seq // 2 + 1, start + self.STEP * i, topic, partition, offset,
                                      crc)):
                columns[k].append(v)
        schema = pa.schema([("observer", pa.int32()), ("seq", pa.int64()), ("poll", pa.int64()),
                            ("time", pa.float64()), ("topic", pa.string()), ("partition", pa.int32()),
                            ("offset", pa.int64()), ("crc", pa.int64())])
        pq.write_table(pa.table(columns, schema=schema), run / "observers" / "observations.parquet")

    def _observer_summary(self) -> dict:
        return {"count": self.observers, "isolation": "read_committed",
                "observers": [{"observer": i, "caught_up": self.observers_caught_up, "error": None}
                              for i in range(self.observers)]}

    def write(self, run: Path) -> Path:
        """The run directory: its evidence, then what the observers read of it."""
        self.write_evidence(run)
        if self.observers:
            self._write_observations(run)
        return run

    def write_evidence(self, run: Path) -> Path:
        run.mkdir(parents=True, exist_ok=True)
        (run / "campaign.json").write_text(json.dumps({"workload": {**WORKLOAD, **self.workload},
                                                       "observers": {"count": self.observers},
                                                       "verifier": self.verifier,
                                                       **({"cluster": self.cluster} if self.cluster else {}),
                                                       **({"faults": self.faults} if self.faults is not None else {})}))
        if self.clock is not None:
            (run / "clock.json").write_text(json.dumps(self.clock))
        if self.schedule is not None:
            (run / "schedule.json").write_text(json.dumps({"seed": 1, "faults": self.schedule}))
        (run / "final.json").write_text(json.dumps({"group_offsets": self.final_offsets, "drained": True,
                                                    **({"observers": self._observer_summary()}
                                                       if self.observers else {}),
                                                    "liveness": self.liveness,
                                                    "compaction": {"__consumer_offsets": {}, "__transaction_state": {
                                                        str(p): to for p, to in ((0, self.txn_log_cleaned_to),
                                                                                 (1, self.seeder_log_cleaned_to))
                                                        if to is not None}},
                                                    "brokers_at_end": BROKERS_AT_END,
                                                    **self.final_extra}))
        lines = self._lines()
        self.history_end = max((l["time"] for l in lines), default=self.T0)
        # (txid, status, epoch[, producer id]): the id's own producer id unless one is given
        log = self._coordinator_log(lines) + [_txn_record(*state) for state in self.txn_states]
        _write_topic(run, "__transaction_state", "raw",
                     _cleaned([(0, i, k, v) for i, (k, v) in enumerate(log)], self.txn_log_cleaned_to)
                     + _cleaned([(1, i, k, v) for i, (k, v) in enumerate(self._seeder_log(lines))],
                                self.seeder_log_cleaned_to))
        commits = self.offset_commits
        if commits is None:
            commits = [(int(p), o) for l in lines if l["f"] in ("commit", "commit_offsets") and l["type"] == "ok"
                       for p, o in (l["value"].get("offsets") or {}).items()]
        offsets = [(0, i, *_offset_record("g", "in", p, o, _sent_ms(lines, p, o) + self.broker_clock_ms))
                   for i, (p, o) in enumerate(commits)]
        _write_topic(run, "__consumer_offsets", "committed", offsets)
        _write_topic(run, "__consumer_offsets", "raw", offsets + [
            (0, len(offsets) + i, *_offset_record("g", "in", p, o, _sent_ms(lines, p, o) + self.broker_clock_ms))
            for i, (p, o) in enumerate(self.raw_only_offset_commits)])
        inputs = [(p, o, self.input_ids.get((p, o), f"id-{p}-{o}").encode(), b"{}") for p, o in self.inputs]
        _write_topic(run, "in", "committed", inputs)
        _write_topic(run, "in", "raw", inputs + [(p, o, f"id-{p}-{o}".encode(), b"{}") for p, o in self.raw_only_inputs])
        for topic in ("a", "b"):
            rows = [(0, i, r["in_id"].encode(), json.dumps(r).encode()) for i, r in enumerate(self.committed[topic])]
            extra = [(1, i, r["in_id"].encode(), json.dumps(r).encode()) for i, r in enumerate(self.raw_extra[topic])]
            _write_topic(run, topic, "committed", rows)
            _write_topic(run, topic, "raw", rows + extra)
        (run / "history.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
        return run


def _anomalies(run: Path) -> tuple[str, list[str], dict]:
    results = ENGINE["check"](run).to_json()
    return results["verdict"], results["anomaly_types"], results


def _safety(results: dict) -> tuple[str, list[str]]:
    """The safety verdict and its anomaly types, for a test about safety on a hand-made run that
    leaves an input the seeder committed unprocessed at the final reads (a transaction that did
    not commit it, and no later one): the final reads show that partition stalled, which
    stalled-pipeline names (liveness) whatever the drain's record says."""
    return results["safety"], [k for k in results["anomaly_types"] if k not in LIVENESS_CHECKS]


def test_clean_run_is_valid_with_facts(tmp_path):
    verdict, kinds, results = _anomalies(RunBuilder().write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", [])
    assert results["facts"]["inputs_committed"] == 4 and results["facts"]["outputs_committed"] == 8
    assert results["facts"]["transactions"] == {"committed": 1}
    assert results["not_checked"] == {} and results["checks"]["nonmonotonic"]["verdict"] == "valid"
    # each id: Empty (the init), Ongoing, PrepareCommit, CompleteCommit (the worker's and the seeder's)
    assert results["facts"]["transaction_log_records"] == 8
    # the protocol each committed transaction ran under, per transactional.id (v0 records: classic)
    assert results["facts"]["commits_by_client_tv_per_txid"] == {"tx-seeder": {"0": 1}, "tx-w0": {"0": 1}}


@spark_long  # its Spark copy: the duplicate query runs in make test through the test below (more cases than kept)
def test_duplicate(tmp_path):
    b = RunBuilder()
    b.committed["a"].append(_out(0, 2, 0))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["duplicate"])
    case = results["anomalies"]["duplicate"][0]
    assert len(case["records"]) == 2 and case["transactions"][0]["txid"] == "tx-w0"
    assert case["transactions"][0]["producer_id"] == 7


def test_every_case_of_a_check_beyond_the_ones_it_keeps_is_placed_by_its_own_evidence(tmp_path):
    """A check that finds more cases than it keeps records each one's place (case_places), and in
    both engines each place names the case's transactional id and worker: the certification counts
    every case in its row by it (the Spark engine once fetched records for the kept 50 only, and
    placed none of the others: certify-tv-flip-app-unsafe seed 45, 2026-12-02)."""
    b = RunBuilder(n=MAX_CASES + 10)
    b.committed["a"] += [_out(0, o, 0) for o in range(MAX_CASES + 10)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["duplicate"])
    places = results["case_places"]["duplicate"]
    assert len(places) == MAX_CASES + 10 and results["checks"]["duplicate"]["total"] == MAX_CASES + 10
    assert all(p["txids"] == ["tx-w0"] and p["slots"] == ["w0"] for p in places), places[-1]


def test_slots_beyond_a_64_bit_mask_are_still_counted_exactly(tmp_path):
    """Slots 0 and 64 share a bit of the Spark engine's 64-bit mask per input, which only flags
    inputs for an exact count: input 1 with slots {0, 64} is not torn, input 2 with slot 64
    twice is a duplicate, in both engines."""
    b = RunBuilder()
    b.committed["b"][1] = _out(0, 1, 64)
    b.committed["b"][2] = _out(0, 2, 64)
    b.committed["b"].append(_out(0, 2, 64))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["duplicate"])
    assert [(c["records"][0]["in_offset"], c["records"][0]["slot"], len(c["records"]))
            for c in results["anomalies"]["duplicate"]] == [(2, 64, 2)]


def test_lost_input(tmp_path):
    b = RunBuilder()
    b.committed["a"] = [o for o in b.committed["a"] if o["in_offset"] != 1]
    b.committed["b"] = [o for o in b.committed["b"] if o["in_offset"] != 1]
    b.ops[1] = ("send", "ok", {"txn_seq": 1, "inputs": [[0, o] for o in range(4)], "outputs": 6})
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["lost-input"])
    assert results["anomalies"]["lost-input"][0]["input"] == {"partition": 0, "offset": 1, "id": "id-0-1"}


def test_torn_transaction_across_output_topics(tmp_path):
    b = RunBuilder()
    dropped = b.committed["b"].pop(3)  # slot 1 of input 3: in the raw view only
    b.raw_extra["b"].append(dropped)
    b.ops[1] = ("send", "ok", {"txn_seq": 1, "inputs": [[0, o] for o in range(4)], "outputs": 8})
    b.ops[3] = ("commit", "info", {"txn_seq": 1})  # the client does not know: not a lost write
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["torn-transaction"])
    # the evidence: the input's visible half, and the transaction's record only the raw view holds
    # (both engines fetch records only for the cases they report)
    cases = {c["explanation"].split(":")[0]: c for c in results["anomalies"]["torn-transaction"]}
    assert [(r["in_offset"], r["slot"]) for r in cases["input 0@3"]["records"]] == [(3, 0)]
    hidden = cases["transaction 1 of w0.1"]["records"]
    assert [(r["topic"], r["in_offset"], r["slot"]) for r in hidden] == [("b", 3, 1)]


def test_aborted_read_of_an_aborted_transaction(tmp_path):
    b = RunBuilder()
    b.committed["a"].append(_out(0, 9, 0, seq=2))
    b.committed["b"].append(_out(0, 9, 1, seq=2))
    b.inputs.append((0, 9))
    b.final_offsets = {"0": 10}
    b.ops += [("send", "ok", {"txn_seq": 2, "inputs": [[0, 9]], "outputs": 2}), ("abort", "ok", {"txn_seq": 2})]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["aborted-read"])
    assert results["anomalies"]["aborted-read"][0]["transactions"][0]["outcome"] == "aborted"


@spark_long
def test_aborted_read_of_an_aborted_input(tmp_path):
    b = RunBuilder()
    b.raw_only_inputs.append((0, 4))  # an input from an aborted seeder transaction
    b.committed["a"].append(_out(0, 4, 0))
    b.committed["b"].append(_out(0, 4, 1))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["aborted-read"])
    assert results["anomalies"]["aborted-read"][0]["input"]["offset"] == 4


def test_lost_write(tmp_path):
    b = RunBuilder()
    b.ops[1] = ("send", "ok", {"txn_seq": 1, "inputs": [[0, o] for o in range(4)], "outputs": 10})  # 2 never appeared
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["lost-write"])
    assert "only 8 of its 10 outputs" in results["anomalies"]["lost-write"][0]["explanation"]
    # the evidence: what the raw view holds of that transaction, read again for the case
    records = results["anomalies"]["lost-write"][0]["records"]
    assert len(records) == 8 and {(r["worker"], r["txn_seq"]) for r in records} == {("w0", 1)}
    # the 2 missing are nowhere in the log: never written under the transaction
    assert results["anomalies"]["lost-write"][0]["outputs"] == {"expected": 10, "visible": 8, "in_raw_log": 8}
    # written, and not committed (a marker aborted them, say): the raw log holds them
    b.raw_extra["a"].append(_out(0, 4, 0))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r2"))
    assert results["anomalies"]["lost-write"][0]["outputs"] == {"expected": 10, "visible": 8, "in_raw_log": 9}


@spark_long
def test_a_lost_write_hidden_by_a_duplicate_is_still_named(tmp_path):
    """KafkaJS's seed-3 shape (docs/findings.md F15 and F12): one output never written, another
    written twice: the transaction holds as many records as it sent, but not every output."""
    b = RunBuilder()
    b.committed["a"] = [_out(0, o, 0) for o in (0, 1, 2)] + [_out(0, 0, 0)]  # input 3's slot 0 missing, input 0's twice
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert "lost-write" in kinds and "duplicate" in kinds, results["checks"]
    [case] = results["anomalies"]["lost-write"]
    assert "only 7 of its 8 outputs" in case["explanation"]
    assert case["outputs"] == {"expected": 8, "visible": 7, "in_raw_log": 7}


def test_offsets_behind(tmp_path):
    b = RunBuilder()
    b.final_offsets = {"0": 3}  # input 3 has committed outputs but the group would process it again
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert _safety(results) == ("invalid", ["offsets-behind"])


def test_vacuous_run_is_unknown(tmp_path):
    b = RunBuilder()
    b.committed = {"a": [], "b": []}
    b.final_offsets = {}
    b.ops = []
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (results["safety"], kinds) == ("unknown", ["stalled-pipeline"])  # nothing processed the inputs
    assert "vacuous" in results["checks"]["no-progress"]["note"]


def test_missing_dumps_make_the_verdict_unknown_not_valid(tmp_path):
    run = RunBuilder().write(tmp_path / "r")
    (run / "topics" / "a.committed.parquet").unlink()
    verdict, _, results = _anomalies(run)
    assert verdict == "unknown" and "final reads did not complete" in results["errors"][0]


@one_engine
def test_a_crashing_check_yields_unknown(tmp_path, monkeypatch):
    run = RunBuilder().write(tmp_path / "r")
    monkeypatch.setattr(ENGINE["engine"], "duplicate", staticmethod(lambda data: 1 / 0))
    verdict, _, results = _anomalies(run)
    assert verdict == "unknown"
    assert "ZeroDivisionError" in results["checks"]["duplicate"]["note"]


def test_offsets_ahead_when_no_operation_processed_the_input(tmp_path):
    b = RunBuilder()
    b.inputs.append((0, 4))      # committed input that no transaction included
    b.final_offsets = {"0": 5}   # ...yet the group's offset moved past it
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["offsets-ahead"])
    assert results["anomalies"]["offsets-ahead"][0]["input"]["offset"] == 4


@pytest.mark.parametrize("states, needle", [
    ([("tx-w0", "Ongoing", 0), ("tx-w0", "CompleteCommit", 0)], "Ongoing -> CompleteCommit"),
    # the same rule as the first, on other states: the Python reader only
    pytest.param([("tx-w0", "PrepareCommit", 0), ("tx-w0", "CompleteAbort", 0)], "PrepareCommit -> CompleteAbort",
                 marks=one_engine),
    ([("tx-w0", "Ongoing", 3), ("tx-w0", "PrepareCommit", 2)], "epoch went backwards (3 -> 2)"),
    # states with no or one successor: the Spark engine once rendered Dead's empty set as NULL
    ([("tx-w0", "CompleteCommit", 0), ("tx-w0", "Dead", 0), ("tx-w0", "Ongoing", 0)], "Dead -> Ongoing"),
    # a state with one successor: the same query as Dead's, its Spark copy in the long tier
    pytest.param([("tx-w0", "Ongoing", 0), ("tx-w0", "PrepareEpochFence", 0), ("tx-w0", "CompleteCommit", 0)],
                 "PrepareEpochFence -> CompleteCommit", marks=spark_long),
])
@spark_long
def test_invalid_transaction_transitions(tmp_path, states, needle):
    b = RunBuilder()
    b.txn_states = [("tx-w9", *state[1:]) for state in states]  # an id of its own: the pipeline's log stays clean
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["invalid-txn-transition"])
    assert needle in results["anomalies"]["invalid-txn-transition"][0]["explanation"]


@spark_long
def test_a_begin_the_coordinator_abandoned_is_judged_from_the_state_before_it(tmp_path):
    """The coordinator's append of an Ongoing timed out waiting for replicas; its memory went back
    to CompleteCommit, the record stayed in the log, and an InitProducerId then wrote Empty with the
    epoch bumped (Kafka 4.4.0, hunt-share's negative control, a coordinator's follower killed).
    The log reads Ongoing -> Empty: not an anomaly, counted in the note. The same step without a
    state before the Ongoing that explains it stays invalid."""
    b = RunBuilder()
    b.txn_states = [("tx-w9", "Empty", 0), ("tx-w9", "Ongoing", 0), ("tx-w9", "PrepareCommit", 0),
                    ("tx-w9", "CompleteCommit", 0), ("tx-w9", "Ongoing", 0), ("tx-w9", "Empty", 1),
                    ("tx-w9", "Ongoing", 1), ("tx-w9", "PrepareCommit", 1), ("tx-w9", "CompleteCommit", 1)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "valid", results["checks"]
    assert "1 record(s) whose append the coordinator abandoned" in results["checks"]["invalid-txn-transition"]["note"]
    b.txn_states = [("tx-w9", "PrepareCommit", 0), ("tx-w9", "Ongoing", 0), ("tx-w9", "Empty", 1)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r2"))
    assert (verdict, kinds) == ("invalid", ["invalid-txn-transition"]), results["checks"]
    b.txn_states = [("tx-w9", "CompleteCommit", 0), ("tx-w9", "Ongoing", 0), ("tx-w9", "CompleteCommit", 0)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r3"))  # a commit that skipped its prepare
    assert (verdict, kinds) == ("invalid", ["invalid-txn-transition"]), results["checks"]


@spark_long
def test_an_epoch_bump_the_coordinator_abandoned_is_judged_from_the_state_before_it(tmp_path):
    """hunt-coordinator-crash seed 6 (Kafka 4.4.0, TV2): a timed-out transaction's abort bumped the
    epoch (PrepareAbort at 1); its append waited for followers while partitions moved, the
    coordinator gave up ("failed to write an epoch fence transition") and went back to Ongoing at
    0, and its next abort wrote PrepareAbort at 0. The log's epoch goes 1 -> 0: set aside, in the
    note. The same going back where the next record is no step from the state before stays invalid."""
    b = RunBuilder()
    b.txn_states = [("tx-w9", "Empty", 0), ("tx-w9", "Ongoing", 0), ("tx-w9", "PrepareAbort", 1),
                    ("tx-w9", "PrepareAbort", 0), ("tx-w9", "CompleteAbort", 0), ("tx-w9", "Empty", 1)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "valid", results["checks"]
    assert "1 record(s) whose append the coordinator abandoned" in results["checks"]["invalid-txn-transition"]["note"]
    b.txn_states = [("tx-w9", "Empty", 0), ("tx-w9", "Ongoing", 0), ("tx-w9", "PrepareAbort", 1),
                    ("tx-w9", "CompleteAbort", 0)]  # a completion at the old epoch of a prepare never made
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r2"))
    assert (verdict, kinds) == ("invalid", ["invalid-txn-transition"]), results["checks"]
    assert "epoch went backwards (1 -> 0)" in results["anomalies"]["invalid-txn-transition"][0]["explanation"]
    b.txn_states = [("tx-w9", "Ongoing", 2), ("tx-w9", "PrepareAbort", 3), ("tx-w9", "PrepareAbort", 1)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r3"))  # below the state before it, too
    assert (verdict, kinds) == ("invalid", ["invalid-txn-transition"]), results["checks"]


@spark_long
def test_retried_appends_and_tv2_aborts_are_allowed(tmp_path):
    b = RunBuilder()
    b.txn_states = [("tx-w0", "Empty", 0), ("tx-w0", "Ongoing", 0), ("tx-w0", "Ongoing", 0),
                    ("tx-w0", "PrepareCommit", 0), ("tx-w0", "PrepareCommit", 0), ("tx-w0", "CompleteCommit", 0),
                    ("tx-w0", "PrepareAbort", 1), ("tx-w0", "CompleteAbort", 1)]
    assert _anomalies(b.write(tmp_path / "r"))[0] == "valid"


ROTATED = 424242  # the new producer id of a rotation in the tests below
EXHAUSTED = 32766  # Short.MAX_VALUE - 1


@pytest.mark.parametrize("states", [
    # TV2: the end of a transaction at the exhausted epoch prepares at 32767 and completes on a new id at 0
    [("tx-w9", "Ongoing", EXHAUSTED), ("tx-w9", "PrepareCommit", EXHAUSTED + 1),
     ("tx-w9", "CompleteCommit", 0, ROTATED), ("tx-w9", "Ongoing", 0, ROTATED)],
    # any version: InitProducerId at the exhausted epoch moves the id (Empty -> Empty)
    pytest.param([("tx-w9", "Empty", EXHAUSTED), ("tx-w9", "Empty", 0, ROTATED), ("tx-w9", "Empty", 1, ROTATED)],
                 marks=one_engine),  # the producer-id rules are one module both engines feed
], ids=["tv2-end", "init"])
@spark_long
def test_a_rotation_at_the_exhausted_epoch_is_legal_and_counted(tmp_path, states):
    b = RunBuilder()
    b.txn_states = states
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    facts = results["facts"]["producer_ids"]
    assert facts["epoch_rollovers"] == 1 and facts["rotated_ids"] == {"tx-w9": 1}
    assert facts["max_epoch"] == max(s[2] for s in states)


@one_engine
def test_an_abort_two_epochs_above_its_transaction_is_counted_not_judged(tmp_path):
    """KAFKA-19367's mechanism below the boundary (4.0.0 under an InitProducerId during a
    transaction): the fence and the abort both bumped the epoch. Harmless here, so a fact; at
    32766 it wraps, and the negative epoch is the case."""
    b = RunBuilder()
    b.txn_states = [("tx-w9", "Ongoing", 10), ("tx-w9", "PrepareAbort", 12), ("tx-w9", "CompleteAbort", 12),
                    ("tx-w9", "Ongoing", 12), ("tx-w9", "PrepareAbort", 13), ("tx-w9", "CompleteAbort", 13)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    facts = results["facts"]["producer_ids"]
    assert facts["bumped_twice"] == 1
    assert facts["bumped_twice_examples"][0] | {"log_partition": 0} == {
        "transactional_id": "tx-w9", "log_partition": 0, "offset": facts["bumped_twice_examples"][0]["offset"],
        "status": "PrepareAbort", "from_epoch": 10, "to_epoch": 12}


@pytest.mark.parametrize("states, needle", [
    # a new producer id from an epoch that was not exhausted (KAFKA-18660's shape)
    pytest.param([("tx-w9", "Empty", 5), ("tx-w9", "Empty", 0, ROTATED)], "only from an exhausted epoch",
                 marks=one_engine),
    # ... or to an epoch other than 0
    pytest.param([("tx-w9", "PrepareCommit", EXHAUSTED + 1), ("tx-w9", "CompleteCommit", 3, ROTATED)], "(epoch 3)",
                 marks=one_engine),
    # an epoch bumped past 32767 wraps (KAFKA-19367's shape)
    ([("tx-w9", "PrepareEpochFence", EXHAUSTED + 1), ("tx-w9", "PrepareAbort", -32768)], "negative epoch -32768"),
    # back to the producer id the id rotated away from
    pytest.param([("tx-w9", "Empty", EXHAUSTED), ("tx-w9", "Empty", 0, ROTATED), ("tx-w9", "Empty", EXHAUSTED, ROTATED),
                  ("tx-w9", "Empty", 0)], "again, after the id had moved away", marks=one_engine),
    # one producer id held by two transactional ids
    pytest.param([("tx-w8", "Empty", 0, ROTATED), ("tx-w9", "Empty", 0, ROTATED)],
                 "held by more than one transactional id", marks=one_engine),
], ids=["from-unexhausted", "to-nonzero", "negative", "reused", "shared"])
def test_producer_id_and_epoch_anomalies_in_the_coordinators_log(tmp_path, states, needle):
    b = RunBuilder()
    b.txn_states = states
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["invalid-txn-transition"]), results["checks"]
    explanations = [c["explanation"] for c in results["anomalies"]["invalid-txn-transition"]]
    assert any(needle in e for e in explanations), explanations
    # only the legal move counts as a rotation (the reuse case's first move is one)
    assert results["facts"]["producer_ids"]["epoch_rollovers"] == (1 if needle.startswith("again") else 0)


def test_hanging_transaction_when_the_lso_stays_pinned(tmp_path):
    b = RunBuilder()
    b.liveness = {"stable": False, "waited_s": 50.0, "pinned": {"a-0": {"lso": 3, "high": 9}}}
    b.txn_states = [("tx-w0", "Empty", 0), ("tx-w0", "Ongoing", 0)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["hanging-transaction"])
    assert (results["safety"], results["liveness"]) == ("valid", "invalid")  # a hang is a liveness failure
    case = results["anomalies"]["hanging-transaction"][0]
    assert case["lso"] == 3 and case["open_transactions"][0]["transactional_id"] == "tx-w0"


@pytest.mark.parametrize("pinned", [{}, {"a-0": {"lso": 3, "high": 9}}])
@spark_long
def test_an_offsets_partition_that_could_not_be_watched_is_no_stable_one(tmp_path, pinned):
    """The final reads' wait could not find the group's __consumer_offsets partition: what it did
    not watch is unknown, never stable (liveness unknown, with why); a user partition it saw
    pinned is still a case."""
    b = RunBuilder()
    b.liveness = {"stable": not pinned, "waited_s": 0.1 if not pinned else 50.0, "pinned": pinned,
                  "offsets_partition_error": "topic __consumer_offsets is not known to the cluster"}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    if pinned:
        assert (verdict, kinds, results["liveness"]) == ("invalid", ["hanging-transaction"], "invalid")
        return
    assert (verdict, results["safety"], results["liveness"]) == ("unknown", "valid", "unknown")
    assert "offsets partition was not watched (topic __consumer_offsets is not known" in \
        results["not_checked"]["hanging-transaction"]


@spark_long
def test_a_pinned_offsets_partition_is_a_hanging_transaction_that_stalls_the_group(tmp_path):
    b = RunBuilder()
    b.liveness = {"stable": False, "waited_s": 50.0, "pinned": {"__consumer_offsets-0": {"lso": 491, "high": 2978}}}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["hanging-transaction"])
    (case,) = results["anomalies"]["hanging-transaction"]
    assert case["partition"] == "__consumer_offsets-0" and "committed offsets cannot be read" in case["explanation"]


@pytest.mark.parametrize("state, hangs", [("PrepareCommit", True), ("CompleteCommit", False)])
@spark_long
def test_a_transaction_its_coordinator_still_holds_prepared_after_the_run_is_hanging(tmp_path, state, hangs):
    """KAFKA-19999's shape: every marker written (no partition pinned), but the coordinator never
    completed the transaction, so its id can begin nothing more."""
    b = RunBuilder()
    b.final_extra = {"broker_transactions": {"transactions": [
        {"Coordinator": "2", "ProducerId": "2000", "TransactionState": state, "TransactionalId": "tx-w0"}],
        "hanging": []}}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == (("invalid", ["hanging-transaction"]) if hangs else ("valid", [])), results["checks"]
    if hangs:
        assert f"still held the transaction of producer 2000 in {state}" in \
            results["anomalies"]["hanging-transaction"][0]["explanation"]
    else:
        assert "no coordinator holds a transaction prepared" in results["checks"]["hanging-transaction"]["note"]


@pytest.mark.parametrize("failed", [{"transactions": None, "list_error": "TimeoutException: Timed out waiting"},
                                    {"transactions": [], "hanging_errors": {"find-hanging:2": "NOT_LEADER"}}])
@spark_long
def test_a_brokers_query_that_failed_is_no_nothing_prepared(tmp_path, failed):
    """Every LSO at its high watermark, and the brokers' list (or one broker's find-hanging) failed:
    nothing says no coordinator holds a transaction prepared, so the check is not made and the
    run's liveness is unknown, with the query's error. In both engines."""
    b = RunBuilder()
    b.final_extra = {"broker_transactions": {"hanging": [], **failed}}
    verdict, _, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "unknown" and results["liveness"] == "unknown", results["checks"]
    reason = results["not_checked"]["hanging-transaction"]
    assert "could not be read" in reason and (failed.get("list_error") or "NOT_LEADER")[:20] in reason


def test_zombie_write(tmp_path):
    b = RunBuilder()
    # w0.2 initialises tx-w0 (epoch 1); afterwards the old w0.1 commits transaction 2 and it is visible
    b.ops += [("init", "ok", {}, "w0.2", 1),
              ("send", "ok", {"txn_seq": 2, "inputs": [[0, 4]], "outputs": 2}),
              ("commit", "ok", {"txn_seq": 2})]
    b.inputs.append((0, 4))
    b.final_offsets = {"0": 5}
    b.committed["a"].append(_out(0, 4, 0, seq=2))
    b.committed["b"].append(_out(0, 4, 1, seq=2))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["zombie-write"])
    case = results["anomalies"]["zombie-write"][0]
    assert case["successor"]["process"] == "w0.2" and case["transactions"][0]["process"] == "w0.1"


def test_nonmonotonic_first_appearance_out_of_input_order(tmp_path):
    b = RunBuilder()
    b.committed["a"][1], b.committed["a"][2] = b.committed["a"][2], b.committed["a"][1]  # input 2 before input 1
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["nonmonotonic"])
    case = results["anomalies"]["nonmonotonic"][0]
    assert [r["in_offset"] for r in case["records"]] == [2, 1]


@spark_long
def test_a_re_appearance_is_a_duplicate_not_an_order_violation(tmp_path):
    b = RunBuilder()
    b.committed["a"].append(_out(0, 0, 0))  # input 0 again, after input 3
    assert _anomalies(b.write(tmp_path / "r"))[1] == ["duplicate"]


@one_engine
def test_order_is_not_checked_under_at_least_once(tmp_path, monkeypatch):
    b = RunBuilder()
    b.committed["a"][1], b.committed["a"][2] = b.committed["a"][2], b.committed["a"][1]
    monkeypatch.setitem(WORKLOAD, "delivery", "at-least-once")
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert kinds == [] and "not promised" in results["not_checked"]["nonmonotonic"]


@spark_long
def test_a_replacement_after_the_old_commit_is_not_a_zombie_write(tmp_path):
    b = RunBuilder()
    b.ops += [("init", "ok", {}, "w0.2", 1)]  # the successor arrives after w0.1's last commit
    assert _anomalies(b.write(tmp_path / "r"))[0] == "valid"


def test_an_app_without_client_history_shows_progress_in_the_coordinators_log(tmp_path):
    """An external pipeline records no client operations: its committed transactions are counted
    in the decoded __transaction_state (a CompleteCommit written twice is one transaction; the
    seeder's are not the pipeline's), so a correct one can be valid."""
    b = RunBuilder()
    b.workload["external_command"] = ["the-app"]
    b.ops = [("seed", "ok", {}, "seeder", 0, "seeder-tx")]
    b.txn_states += [("tx-w0", "CompleteCommit", 0), ("seeder-tx", "Empty", 0), ("seeder-tx", "Ongoing", 0),
                     ("seeder-tx", "PrepareCommit", 0), ("seeder-tx", "CompleteCommit", 0)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    assert results["checks"]["no-progress"]["note"] == ("1 committed transactions (counted in the coordinator's log: "
                                                         "the pipeline left no client history)")
    # what needs a history is not checked, never passed, and an external app does not claim it
    assert {"zombie-write", "offsets-ahead", "lost-write", "split-transaction"} <= set(results["not_checked"])
    assert "external pipeline" in results["not_checked"]["zombie-write"]
    assert "zombie-write" not in results["required"] and results["required_not_checked"] == {}


# -- identity lineage: an unmodified app's outputs carry only their input's id -----------------

#: how the app writes input ``in_id`` to its outputs, per locator
IDENTITY_FORMS = {
    "key": lambda in_id: (in_id.encode(), b"opaque"),
    "value": lambda in_id: (None, in_id.encode()),
    "json:/payload/0/ref": lambda in_id: (None, json.dumps({"payload": [{"ref": in_id}]}).encode()),
    "regex:copy of (\\S+)!": lambda in_id: (None, f"copy of {in_id}!".encode()),
}


class IdentityRun(RunBuilder):
    """An external app with identity lineage: no client history; each input copied once to each
    output topic (a and b), its id where ``locator`` says; ``outputs[topic]``: the ids written."""

    def __init__(self, n: int = 4, locator: str = "json:/payload/0/ref"):
        super().__init__(n)
        self.workload.update(lineage="id", lineage_id=locator, external_command=["the-app"])
        self.ops = []
        self.txn_states += [("tx-w0", "Ongoing", 0), ("tx-w0", "PrepareCommit", 0), ("tx-w0", "CompleteCommit", 0)]
        self.outputs = {t: [f"id-0-{o}" for o in range(n)] for t in ("a", "b")}
        self.raw_ids: list[tuple[int, int, str]] = []  # inputs only in the raw view (aborted copies)
        self.input_ids: dict[tuple[int, int], str] = {}  # committed inputs whose id is not id-p-o

    def write_evidence(self, run: Path) -> Path:
        super().write_evidence(run)
        form = IDENTITY_FORMS[self.workload["lineage_id"]]
        inputs = [(p, o, self.input_ids.get((p, o), f"id-{p}-{o}").encode(), b"{}") for p, o in self.inputs]
        _write_topic(run, "in", "committed", inputs)
        _write_topic(run, "in", "raw", inputs + [(p, o, i.encode(), b"{}") for p, o, i in self.raw_ids])
        for topic, ids in self.outputs.items():
            rows = [(0, n, *form(i)) for n, i in enumerate(ids)]
            _write_topic(run, topic, "committed", rows)
            _write_topic(run, topic, "raw", rows)
        return run


# "value" reads its id the way "key" does (one column for the other): its Spark copy is long-tier
@pytest.mark.parametrize("locator", [pytest.param(f, marks=spark_long) if f == "value" else f for f in sorted(IDENTITY_FORMS)])
def test_identity_lineage_traces_outputs_by_their_input_id(tmp_path, locator):
    verdict, kinds, results = _anomalies(IdentityRun(locator=locator).write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    assert results["facts"]["outputs_committed"] == 8 and results["facts"]["outputs_without_lineage"]["committed"] == 0
    # what the full contract would add is said, not silently passed
    assert "torn-transaction (per transaction)" in results["not_checked"]
    # what needs a history is not checked, never passed, and an external app does not claim it
    assert {"zombie-write", "offsets-ahead", "lost-write", "split-transaction"} <= set(results["not_checked"])
    assert "external pipeline" in results["not_checked"]["zombie-write"]
    assert "zombie-write" not in results["required"] and results["required_not_checked"] == {}


@spark_long
def test_identity_lineage_names_a_duplicate_a_lost_input_and_a_torn_input(tmp_path):
    b = IdentityRun()
    b.outputs["a"].append("id-0-1")   # input 1 copied twice to a
    b.outputs["a"].remove("id-0-2")   # input 2 only in b
    b.outputs["a"].remove("id-0-3")
    b.outputs["b"].remove("id-0-3")   # input 3 in neither, below the committed offset
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "invalid" and kinds == ["duplicate", "lost-input", "torn-transaction"], kinds
    assert "input 0@1 slot 0 is visible 2 times" in results["anomalies"]["duplicate"][0]["explanation"]
    assert results["anomalies"]["torn-transaction"][0]["missing_slots"] == [0]
    assert results["anomalies"]["lost-input"][0]["input"] == {"partition": 0, "offset": 3, "id": "id-0-3"}


@spark_long
def test_identity_lineage_names_an_output_of_an_aborted_input_copy(tmp_path):
    b = IdentityRun()
    b.raw_ids = [(0, 9, "id-0-1~aborted1")]  # the seeder marks the copies it aborts on purpose
    b.outputs["a"].append("id-0-1~aborted1")
    b.outputs["b"].append("id-0-1~aborted1")
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert kinds == ["aborted-read"], kinds
    assert results["anomalies"]["aborted-read"][0]["input"] == {"partition": 0, "offset": 9, "id": "id-0-1~aborted1"}


@spark_long
def test_identity_lineage_sets_an_id_committed_twice_aside(tmp_path):
    """A seeder batch whose commit outcome was unknown and that committed after all is written
    again: its ids are then committed twice. Which output came from which copy cannot be told,
    so both inputs and their outputs are set aside and counted, never guessed."""
    b = IdentityRun()
    b.inputs.append((0, 4))
    b.input_ids[(0, 4)] = "id-0-1"
    b.seed_inputs = {"ok": [[f"id-0-{o}", 0, o] for o in range(4)], "info": True}  # the copy at 0@4: outcome unknown
    b.final_offsets = {"0": 5}
    b.outputs["a"].append("id-0-1")
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    assert results["facts"]["inputs_with_ambiguous_id"] == 2
    assert results["facts"]["outputs_without_lineage"]["committed"] == 3


# -- white box: the coordinator's log, the offsets log, the seeder's acknowledgements ----------
# (ops in these runs are 20 ms apart: send at S, send_offsets at S+20, the end at S+40)

OUTPUTS = {"a": [0, 1], "b": [0, 1]}
OFFSETS = {"__consumer_offsets": [0]}


def _second_transaction(b: RunBuilder, end: str = "commit", outcome: str = "ok") -> None:
    """Transaction 2 of w0.1: input 4, its two outputs committed (aborted: in the raw view only)."""
    b.inputs.append((0, 4))
    visible = end == "commit" and outcome == "ok"
    b.final_offsets = {"0": 5 if visible else 4}
    for topic, slot in (("a", 0), ("b", 1)):
        (b.committed if visible else b.raw_extra)[topic].append(_out(0, 4, slot, seq=2))
    b.ops += [("send", "ok", {"txn_seq": 2, "inputs": [[0, 4]], "outputs": 2}),
              ("send_offsets", "ok", {"txn_seq": 2, "offsets": {"0": 5}}),
              (end, outcome, {"txn_seq": 2, **({"offsets": {"0": 5}} if end == "commit" else {})})]


@spark_long
def test_a_client_transaction_split_across_two_coordinator_transactions(tmp_path):
    """KAFKA-17754's shape: a late abort ends the coordinator transaction holding the outputs
    before the client's offsets open a second one, which the client's own commit commits."""
    b = RunBuilder()
    b.coordinator[("w0.1", 1)] = [("Ongoing", OUTPUTS, 1, None), ("PrepareAbort", OUTPUTS, 5, None),
                                  ("CompleteAbort", {}, 6, None), ("Ongoing", OFFSETS, 25, None),
                                  ("PrepareCommit", OFFSETS, 41, None), ("CompleteCommit", {}, 42, None)]
    b.committed = {"a": [], "b": []}  # its outputs aborted
    b.raw_extra = {"a": [_out(0, o, 0) for o in range(4)], "b": [_out(0, o, 1) for o in range(4)]}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "invalid" and "split-transaction" in kinds, results["checks"]
    case = results["anomalies"]["split-transaction"][0]
    assert "transaction 1 of w0.1 (tx-w0) was carried by 2 coordinator transactions" in case["explanation"]
    assert [ct["outcome"] for ct in case["coordinator_transactions"]] == ["abort", "commit"]
    assert case["transactions"][0]["history_op"]["process"] == "w0.1"  # where certification and the report look
    assert results["facts"]["coordinator"]["attributed"] == 3  # and the seeder's


@spark_long
def test_a_transaction_begun_again_after_an_append_the_coordinator_gave_up_on_is_one_transaction(tmp_path):
    """Kafka 4.0.0, a follower killed (hunt-epoch-rollover seed 2): the Ongoing of the first
    partition timed out waiting for replicas, the coordinator reset its memory to Empty, and the
    record was committed later; the client's retries began the transaction again (a new start
    time, the offsets first) and added the partition again. One coordinator transaction, not a
    split: nothing was prepared or fenced between the two Ongoing records."""
    b = RunBuilder()
    b.coordinator[("w0.1", 1)] = [("Ongoing", {"a": [0]}, 1, None), ("Ongoing!", OFFSETS, 25, None),
                                  ("Ongoing", {**OUTPUTS, **OFFSETS}, 30, None),
                                  ("PrepareCommit", {**OUTPUTS, **OFFSETS}, 41, None), ("CompleteCommit", {}, 42, None)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    # ended in between, the same records are KAFKA-17754's split
    b.coordinator[("w0.1", 1)][1:1] = [("PrepareAbort", {"a": [0]}, 5, None), ("CompleteAbort", {}, 6, None)]
    b.coordinator[("w0.1", 1)][3] = ("Ongoing", OFFSETS, 25, None)
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r2"))
    assert "split-transaction" in kinds, results["checks"]


@one_engine
def test_coordinator_stamps_made_while_a_clock_fault_moved_the_clock_are_set_aside_not_judged(tmp_path):
    """A clock fault moved the coordinator's clock over the whole (short) run: its stamps cannot be
    placed in the client's windows, so the split above is not judged either way: unknown, said."""
    b = RunBuilder()
    b.coordinator[("w0.1", 1)] = [("Ongoing", OUTPUTS, 1, None), ("PrepareAbort", OUTPUTS, 5, None),
                                  ("CompleteAbort", {}, 6, None), ("Ongoing", OFFSETS, 25, None),
                                  ("PrepareCommit", OFFSETS, 41, None), ("CompleteCommit", {}, 42, None)]
    b.ops.insert(0, ("fault:clock-bump", "ok", {"resolved": {"nodes": [1], "detail": {"first_offset_s": 60.0}},
                                                 "heal": {"offset_range_s": [0.0, 60.0]}}, "harness", 0, None))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    check = results["checks"]["split-transaction"]
    assert "split-transaction" not in kinds and check["verdict"] == "unknown", results["checks"]
    assert "overlapped a clock fault's window" in check["note"]
    assert results["facts"]["coordinator"]["clock_skew_set_aside"]["coordinator_transactions"] == 3  # and the seeder's


@one_engine
def test_what_the_cleaner_may_have_removed_ends_at_the_ids_last_record_below_its_point():
    """The log cleaner removes a record only for a later one of the same key below its own point:
    what of a transactional id may be gone is what its last record below the cleaner's point was
    written after (its stamp), not what precedes the first record kept past the point. A stamp a
    clock fault may have moved (hunt-clock seed 6 on 4.4.0: a coordinator set 60 s back stamped a
    later transaction before the run began), or a tombstone's (it has none), is bounded by the
    next transaction of the id in log order that an unmoved clock stamped."""
    from types import SimpleNamespace

    from kchaos.verifier.coordinator_log import CoordinatorTxn
    from kchaos.verifier.driver_checks import superseded_bounds

    def ct(offset: int, start_ms: int) -> CoordinatorTxn:
        return CoordinatorTxn("tx", 1, 0, start_ms, 60_000, 2, log_partition=1, first_offset=offset)

    def data(below: dict | None, compaction: dict) -> SimpleNamespace:
        def latest(bounds: dict, txids: set) -> dict:
            assert bounds == {1: compaction["__transaction_state"].get("1")} and txids == {"tx"}
            return {"tx": below} if below else {}
        return SimpleNamespace(history=SimpleNamespace(txn_ops={1: {"txid": "tx"}}, seeder_txns={}), final={},
                               compaction=compaction, latest_txn_records_below=latest)

    compacted = {"__transaction_state": {"1": 263}}
    coordinator = [ct(262, 125_000), ct(267, 8 * 86_400_000), ct(280, 70_000), ct(300, 190_000)]
    last_below = {"partition": 1, "offset": 262, "status": "CompleteCommit", "last_update_ms": 125_400}
    assert superseded_bounds(data(last_below, compacted), coordinator) == {
        "tx": {"before_ms": 125_400, "clean": 263, "offset": 262}}
    # the stamp in a clock fault's window: bounded by the first later transaction an unmoved clock stamped
    skewed = [(120_000, 180_000, frozenset({1})), (8 * 86_400_000 - 5_000, 8 * 86_400_000 + 60_000, frozenset({1})),
              (60_000, 120_000, frozenset({1}))]
    assert superseded_bounds(data(last_below, compacted), coordinator, 0.0, skewed)["tx"]["before_ms"] == 190_000
    tombstone = {**last_below, "status": None, "last_update_ms": None}
    assert superseded_bounds(data(tombstone, compacted), coordinator)["tx"]["before_ms"] == 8 * 86_400_000
    assert superseded_bounds(data(tombstone, compacted), coordinator[:1])["tx"]["before_ms"] == float("inf")
    # a broker clock 1 s ahead of the harness's (an external cluster, measured)
    assert superseded_bounds(data(last_below, compacted), coordinator, 1000.0)["tx"]["before_ms"] == 124_400
    # nothing of the id below the point, or the partition not compacted: the id is judged whole
    assert superseded_bounds(data(None, compacted), coordinator) == {}
    assert superseded_bounds(data(None, {"__transaction_state": {"2": 900}}), coordinator) == {}


@spark_long
def test_clock_skew_windows_span_the_offsets_a_fault_applied():
    from types import SimpleNamespace

    from kchaos.verifier.coordinator_log import ClientTxn, CoordinatorTxn, outside_skew
    from kchaos.verifier.driver_checks import CLOCK_SKEW_MARGIN_MS, clock_skew_windows

    faults = [{"f": "fault:clock-strobe", "invoke_time": 100.0, "complete_time": 110.0,
               "value": {"resolved": {"detail": {"first_offset_s": -30.0}}, "heal": {"offset_range_s": [-30.0, 0.0]}}},
              {"f": "fault:clock-bump", "invoke_time": 200.0, "complete_time": None,  # never healed: to the end
               "value": {"resolved": {"detail": {"first_offset_s": 5.0}}}},
              {"f": "fault:kill", "invoke_time": 50.0, "complete_time": 51.0, "value": {}}]
    m = CLOCK_SKEW_MARGIN_MS
    assert clock_skew_windows(SimpleNamespace(faults=faults)) == [
        (100_000.0 - m, 110_000.0 + m, None), (70_000.0 - m, 110_000.0 + m, None),  # its time; its stamps 30 s back
        (200_000.0 - m, float("inf"), None), (200_000.0 - m, float("inf"), None)]   # never healed: to the end
    far = [{"f": "fault:clock-bump", "invoke_time": 100.0, "complete_time": 104.0,
            "value": {"resolved": {"detail": {"first_offset_s": 8 * 86400.0}}, "heal": {"offset_range_s": [8 * 86400.0, 8 * 86400.0]}}}]
    windows = clock_skew_windows(SimpleNamespace(faults=far))
    assert windows[1][0] > 7 * 86400_000  # 8 days ahead sets aside its own seconds, not the rest of the run

    def ct(start_ms):
        return CoordinatorTxn("tx", 1, 0, start_ms, 60_000, 2)

    def client(start_ms, end_ms):
        return ClientTxn("w0.1", 1, "tx", 0, start_ms, "commit", end_ms, end_ms, "committed")

    kept_ct, kept_c, aside = outside_skew(
        [ct(10_000.0), ct(102_000.0), ct(8 * 86400_000 + 101_000.0), ct(300_000.0)],
        [client(10_000.0, 11_000.0), client(98_000.0, 99_000.0), client(300_000.0, 301_000.0)], windows)
    assert [c.start_ms for c in kept_ct] == [10_000.0, 300_000.0]
    assert [c.start_ms for c in kept_c] == [10_000.0, 300_000.0]
    assert aside == {"coordinator_transactions": 2, "client_transactions": 1}
    assert outside_skew([ct(1.0)], [], []) == ([ct(1.0)], [], {})

    # the fault recorded the transaction-log partitions its target led when it resolved it and
    # at its heal: only their stamps, and the client transactions of their ids, are set aside;
    # the first alone (a run before the heal's record) leaves every partition's
    far[0]["value"]["resolved"]["detail"]["transaction_log_partitions"] = [1]
    assert clock_skew_windows(SimpleNamespace(faults=far))[0][2] is None
    far[0]["value"]["heal"]["transaction_log_partitions"] = [1]
    windows = clock_skew_windows(SimpleNamespace(faults=far))
    assert windows[0][2] == frozenset({1})
    other = CoordinatorTxn("ty", 2, 0, 102_000.0, 60_000, 2, log_partition=2)
    mine = CoordinatorTxn("tx", 1, 0, 102_000.0, 60_000, 2, log_partition=1)
    ty_client = ClientTxn("w1.1", 1, "ty", 0, 101_000.0, "commit", 103_000.0, 103_000.0, "committed")
    kept_ct, kept_c, aside = outside_skew([other, mine], [client(101_000.0, 103_000.0), ty_client], windows)
    assert kept_ct == [other] and kept_c == [ty_client]
    assert aside == {"coordinator_transactions": 1, "client_transactions": 1}


@one_engine
@pytest.mark.parametrize("jumped, bumped", [(True, True), ("failed part way", True), (False, True), (True, False)])
def test_an_abort_by_the_epoch_jump_faults_init_is_a_fence_not_a_split(tmp_path, jumped, bumped):
    """The epoch-jump fault's InitProducerId meets the id's open transaction: the coordinator
    fences and aborts it before its client asks to commit (the commit then fails). With the
    fault in the history that is the coordinator's fence, also when the fault failed part way
    (hunt-epoch-rollover seed 5 on 4.0.1: a jump that ran out of time had fenced the id, and the
    split it left was kchaos' false positive); without it, another request ended it. A fence
    bumps the epoch before it aborts (TV2 records, where a client's own end bumps it too): an
    abort at the transaction's own epoch is a request at that epoch, never the fault's fence."""
    b = RunBuilder()
    b.client_tv = 2
    _second_transaction(b, end="commit", outcome="fail")
    if jumped:  # between the send and the offsets: InitProducerIds for tx-w0 while it is open
        b.ops.insert(len(b.ops) - 2, ("fault:epoch-jump", "ok" if jumped is True else "fail",
                                      {"resolved": {"detail": {"transactional_id": "tx-w0"}}}, "harness", 0, None))
    epoch = 1 if bumped else 0
    b.coordinator[("w0.1", 2)] = [("Ongoing", OUTPUTS, 1, None), ("PrepareAbort", OUTPUTS, 25, epoch),
                                  ("CompleteAbort", {}, 26, epoch)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    if jumped and bumped:
        assert _safety(results) == ("valid", []), results["checks"]
    else:
        assert "split-transaction" in kinds, results["checks"]
        assert "a request of another transaction ended it" in results["anomalies"]["split-transaction"][0]["explanation"]


@one_engine
def test_a_transaction_ended_by_a_request_that_was_not_its_own(tmp_path):
    """One coordinator transaction, prepared to commit before its client asked to end it (the
    client then aborted): a late commit of an earlier transaction ended it, whatever follows."""
    b = RunBuilder()
    _second_transaction(b, end="abort")
    both = {**OUTPUTS, **OFFSETS}
    b.coordinator[("w0.1", 2)] = [("Ongoing", both, 1, None), ("PrepareCommit", both, 30, None),
                                  ("CompleteCommit", {}, 31, None)]
    for topic in ("a", "b"):  # so its outputs are visible, which aborted-read names too
        b.committed[topic] += b.raw_extra[topic]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert "split-transaction" in kinds, results["checks"]
    assert ("transaction 2 of w0.1 (tx-w0): the coordinator prepared to commit it before the client asked to abort"
            in results["anomalies"]["split-transaction"][0]["explanation"])


@spark_long
def test_visible_outputs_of_a_transaction_the_coordinator_aborted_while_its_client_waited(tmp_path):
    """F6's shape (docs/findings.md): the client asked to commit and never learned the end (its
    commit is ``info``); the coordinator's log aborted the transaction; its outputs are visible
    all the same (markers from a coordinator that acted on a record its log later lost)."""
    b = RunBuilder()
    b.ops[-1] = ("commit", "info", {"txn_seq": 1, "offsets": {"0": 4}})
    b.coordinator[("w0.1", 1)] = [("Ongoing", OUTPUTS, 1, None), ("Ongoing", {**OUTPUTS, **OFFSETS}, 21, None),
                                  ("PrepareAbort", {**OUTPUTS, **OFFSETS}, 90, 1), ("CompleteAbort", {}, 91, 1)]
    b.offset_commits = []  # the offsets went with the abort
    b.final_offsets = {"0": 0}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert "aborted-read" in kinds, results["checks"]
    explanations = {c["explanation"] for c in results["anomalies"]["aborted-read"]}
    assert explanations == {"committed output of transaction 1 of w0.1, whose end its client never learned and which "
                            "the coordinator's log shows aborted"}
    assert results["facts"]["coordinator"]["outcomes_the_client_did_not_know"] == {"unknown": {"coordinator abort": 1}}


@pytest.mark.parametrize("records, what", [
    ([("PrepareAbort", 41), ("CompleteAbort", 42)], "aborted it"),
    # a PrepareCommit the coordinator abandoned (its append timed out) is excused in the log's
    # shape (invalid-txn-transition), never when the client was told the commit succeeded
    pytest.param([("PrepareCommit", 41), ("PrepareAbort", 43), ("CompleteAbort", 44)],
                 "prepared to commit it, then aborted it", marks=spark_long)])
@spark_long
def test_a_commit_the_client_saw_succeed_that_the_coordinators_log_aborted(tmp_path, records, what):
    """The client saw transaction 1 commit and its outputs are visible, but the coordinator's own
    log ended it with an abort: the client's word, the data and the brokers' record disagree."""
    b = RunBuilder()
    both = {**OUTPUTS, **OFFSETS}
    b.coordinator[("w0.1", 1)] = [("Ongoing", both, 1, None)] + [(status, both if status.startswith("Prepare") else {},
                                                                  at, None) for status, at in records]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["aborted-read", "split-transaction"]), results["checks"]
    assert [c["explanation"] for c in results["anomalies"]["split-transaction"]] == [
        f"the client saw transaction 1 of w0.1 (tx-w0) commit, but the coordinator's log {what}"]
    assert {c["explanation"] for c in results["anomalies"]["aborted-read"]} == {
        "committed output of transaction 1 of w0.1, which its client saw commit but the coordinator's log shows "
        "aborted"}


@spark_long
def test_a_commit_its_client_never_asked_for(tmp_path):
    """The client asked to abort transaction 2; the coordinator prepared to commit it after that
    request: nothing but a request of another transaction (or no request at all) commits it."""
    b = RunBuilder()
    _second_transaction(b, end="abort")
    both = {**OUTPUTS, **OFFSETS}
    b.coordinator[("w0.1", 2)] = [("Ongoing", both, 1, None), ("PrepareCommit", both, 50, None),
                                  ("CompleteCommit", {}, 51, None)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    # its outputs are in the raw view only: by the coordinator's record, a committed transaction's writes are lost
    assert _safety(results) == ("invalid", ["lost-write", "split-transaction"]), results["checks"]
    assert [c["explanation"] for c in results["anomalies"]["split-transaction"]] == [
        "transaction 2 of w0.1 (tx-w0): the coordinator prepared to commit it, which its client never asked for"]
    assert "(its client aborted it), but only 0 of its 2 outputs are visible" in \
        results["anomalies"]["lost-write"][0]["explanation"]


@pytest.mark.parametrize("visible", [True, pytest.param(False, marks=spark_long)])
def test_visible_outputs_of_an_end_the_client_never_learned_that_the_coordinator_never_recorded(tmp_path, visible):
    """The client's process was killed inside its commit (no answer): whatever the coordinator did
    is in its log. Here its log holds no transaction of it at all, yet its outputs are visible: a
    transactional write is visible only through a coordinator transaction. Not visible (the
    client died before it wrote anything the coordinator records), nothing is amiss."""
    b = RunBuilder()
    _second_transaction(b)
    b.ops[-1] = ("commit", "info", {"txn_seq": 2, "offsets": {"0": 5}})
    b.coordinator[("w0.1", 2)] = []
    b.offset_commits = [(0, 4)]
    if not visible:
        for topic in ("a", "b"):
            b.committed[topic] = [o for o in b.committed[topic] if o["txn_seq"] == 1]
        b.final_offsets = {"0": 4}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    if not visible:
        assert _safety(results) == ("valid", []), results["checks"]
        return
    assert "split-transaction" in kinds, results["checks"]
    assert [c["explanation"] for c in results["anomalies"]["split-transaction"]] == [
        "outputs of transaction 2 of w0.1 (tx-w0) are visible, though its client never learned its end and the "
        "coordinator's log holds no transaction of it"]
    assert results["facts"]["coordinator"]["unresolved_with_visible_outputs"] == 1


def test_outputs_of_a_transaction_the_coordinator_committed_that_are_not_visible(tmp_path):
    """The client never learned the end of transaction 2; the coordinator's log committed it; its
    outputs are not visible: by the brokers' own record, a committed transaction lost its writes."""
    b = RunBuilder()
    _second_transaction(b, end="commit", outcome="info")
    both = {**OUTPUTS, **OFFSETS}
    b.coordinator[("w0.1", 2)] = [("Ongoing", both, 1, None), ("PrepareCommit", both, 41, None),
                                  ("CompleteCommit", {}, 42, None)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert _safety(results) == ("invalid", ["lost-write"]), results["checks"]
    assert [c["explanation"] for c in results["anomalies"]["lost-write"]] == [
        "the coordinator's log shows transaction 2 of w0.1 committed (its client never learned the end), but only 0 "
        "of its 2 outputs are visible"]


def test_a_history_with_a_hole_where_its_process_ran_on_and_committed_is_unknown(tmp_path):
    """w0.1's history lost transaction 2 (its lines are gone) though the process ran on and
    committed it: its outputs name a transaction the history does not hold. What it did is not
    known; the verdict cannot be valid."""
    b = RunBuilder()
    _second_transaction(b)
    b.ops = [op for op in b.ops if (op[2] or {}).get("txn_seq") != 2]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "unknown" and kinds == [], results["checks"]
    assert any("committed outputs name 1 transaction(s) that the history of their process does not hold (w0.1: 2)"
               in e for e in results["errors"]), results["errors"]


def _read_early(run: Path, topic: str, f: str) -> float:
    """Stamp the observer's reads up to its first of ``topic`` 30 ms (and more, the earlier ones:
    times stay in read order) before the history's first ``f`` operation was invoked; that time."""
    path = run / "observers" / "observations.parquet"
    table = pq.read_table(path).to_pylist()
    at = next(l for l in (json.loads(x) for x in (run / "history.jsonl").read_text().splitlines())
              if l["f"] == f and l["type"] == "invoke")["time"]
    first = next(r["seq"] for r in table if r["topic"] == topic)
    for r in table:
        if r["seq"] <= first:
            r["time"] = at - 0.030 - 0.0001 * (first - r["seq"])
    pq.write_table(pa.Table.from_pylist(table, schema=pq.read_schema(path)), path)
    return at


@pytest.mark.parametrize("topic, f, read, process, stamp", [
    ("a", "commit", "a-0@0 (poll 3), an output of transaction 1 of w0.1, 30 ms before its client asked to commit it",
     "w0.1", "commit_requested"),
    ("in", "seed", "in-0@0 (poll 1), an input of transaction 0 of seeder, 30 ms before the seeder began it",
     "seeder", "seed_invoked")])
def test_an_observer_that_read_a_record_before_its_transaction_could_have_committed(tmp_path, topic, f, read, process,
                                                                                     stamp):
    """The observer read transaction 1's outputs 30 ms before its client asked to commit it (and
    the final log holds them committed): a read of data not yet committed, which only a
    read_committed reader's timing shows. Or it read input 0@0 30 ms before the seeder began the
    transaction that wrote it (its ``seed`` invoke; the seeder records no commit request of its
    own): a record that did not exist yet."""
    run = RunBuilder().write(tmp_path / "r")
    at = _read_early(run, topic, f)
    verdict, kinds, results = _anomalies(run)
    assert (verdict, kinds) == ("invalid", ["observed-aborted-read"]), results["checks"]
    cases = results["anomalies"]["observed-aborted-read"]
    assert [c["explanation"] for c in cases] == [f"observer 0 read {read}"]
    assert cases[0]["transactions"][0]["process"] == process and cases[0][stamp] == at


def _two_seeder_batches(b: RunBuilder) -> None:
    """The seeder commits inputs 0-1 (op 0), then 2-3 (op 1): its log on __transaction_state-1 is
    Empty 0, op 0's Ongoing 1, PrepareCommit 2, CompleteCommit 3, op 1's 4 to 6."""
    b.seed_inputs = False
    b.ops = [("seed", "ok", {"first": f, "last": f + 1, "count": 2,
                             "inputs": [[f"id-0-{o}", 0, o] for o in (f, f + 1)]}, "seeder", 0, "tx-seeder")
             for f in (0, 2)] + b.ops


@one_engine
@pytest.mark.parametrize("cleaned_to, drop, set_aside", [(None, (), 0), (6, (), 1), (6, (5,), 0), (7, "all", 0)])
def test_a_seeder_transaction_the_coordinators_log_lacks_is_named_unless_the_cleaner_removed_it(
        tmp_path, cleaned_to, drop, set_aside):
    """The seeder's transactions are client transactions too. Cleaned up to 6 as the cleaner does
    (of the id's records below it, only its last, offset 5, op 1's PrepareCommit, is left), op 0's
    records are gone and set aside: valid. Not cleaned and op 0 gone; or cleaned to 6 with that
    last record below the point gone too (nothing below it then follows op 0); or cleaned to the
    end with every record of the id gone (x2's shape): each batch the log lacks is a case."""
    from pyarrow import compute as pc

    b = RunBuilder()
    _two_seeder_batches(b)
    b.seeder_log_cleaned_to = cleaned_to
    if cleaned_to is None:
        b.coordinator[("seeder", 0)] = []
    run = b.write(tmp_path / "r")
    path = run / "topics" / "__transaction_state.raw.parquet"
    table = pq.read_table(path)
    gone = (pc.field("partition") == 1) if drop == "all" else \
        (pc.field("partition") == 1) & pc.field("offset").isin(list(drop))
    pq.write_table(table.filter(~gone), path)
    verdict, kinds, results = _anomalies(run)
    facts = results["facts"]["coordinator"]
    assert facts["unrecorded_set_aside"] == ({"tx-seeder": set_aside} if set_aside else {}), facts
    if set_aside:
        assert (verdict, kinds) == ("valid", []), results["checks"]
        return
    assert (verdict, kinds) == ("invalid", ["split-transaction"]), results["checks"]
    lacking = [0] if cleaned_to is None else [0, 1]
    assert sorted(c["explanation"] for c in results["anomalies"]["split-transaction"]) == [
        f"the client saw transaction {op} of seeder (tx-seeder) commit, but the coordinator's log holds no transaction "
        "of it" for op in lacking]


@one_engine
def test_a_seeder_batch_its_history_stops_inside_is_not_judged(tmp_path):
    """The seeder's history stops inside op 1 (y3's shape: the lines after it lost): when its
    transaction ended, and which coordinator transaction is its, is not known (the coordinator's
    began 5 ms after the invoke, after the history's last moment): nothing of it is judged; the
    gap is the evidence rules' to name."""
    from kchaos.workloads.lineage import input_id

    b = RunBuilder()
    _two_seeder_batches(b)
    ids = {o: input_id(5, o) for o in range(4)}  # the run's seed names its inputs
    b.ops[:2] = [(f, outcome, {**value, "inputs": [[ids[o], p, o] for _, p, o in value["inputs"]]}, *rest)
                 for f, outcome, value, *rest in b.ops[:2]]
    b.input_ids = ids_at = {(0, o): ids[o] for o in range(4)}
    for topic in ("a", "b"):
        for out in b.committed[topic]:
            out["in_id"] = ids_at[(0, out["in_offset"])]
    both = {"in": [0]}
    b.coordinator[("seeder", 1)] = [("Ongoing", both, 5, None), ("PrepareCommit", both, 7, None),
                                    ("CompleteCommit", {}, 8, None)]
    run = b.write(tmp_path / "r")
    (run / "seed").write_text("5\n")
    lines = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    lines = [l for l in lines if l["process"] != "seeder" or l["op"] == 0 or (l["op"] == 1 and l["type"] == "invoke")]
    (run / "history.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    verdict, kinds, results = _anomalies(run)
    assert "split-transaction" not in kinds and results["checks"]["split-transaction"]["verdict"] == "valid", \
        results["checks"]


@one_engine
@pytest.mark.parametrize("visible", [True, False])
def test_visible_inputs_of_a_seeder_batch_whose_end_it_never_learned_and_the_coordinator_never_recorded(
        tmp_path, visible):
    """The seeder's batch of inputs 4-5 (its ids from the run's seed) ended unknown (killed inside
    its commit) and the coordinator's log holds nothing of it. Its ids in the committed input log
    at positions no committed batch was acknowledged at are its writes made visible (x10's shape):
    a case. Written again by the next batch and acknowledged there, they say nothing of it."""
    from kchaos.workloads.lineage import input_id

    b = RunBuilder()
    b.seed_inputs = False
    ids = {o: input_id(5, o) for o in range(6)}
    unknown = ("seed", "info", {"first": 4, "last": 5}, "seeder", 0, "tx-seeder")
    if visible:  # the batch committed, unacknowledged, at 0@4 and 0@5
        b.inputs += [(0, 4), (0, 5)]
        acked = [[ids[o], 0, o] for o in range(4)]
        b.ops = [("seed", "ok", {"first": 0, "last": 3, "count": 4, "inputs": acked}, "seeder", 0, "tx-seeder"),
                 unknown, *b.ops]
    else:  # the next batch wrote inputs 0-3 again and was acknowledged
        acked = [[ids[o], 0, o] for o in range(4)]
        unknown = ("seed", "info", {"first": 0, "last": 3}, "seeder", 0, "tx-seeder")
        b.ops = [unknown, ("seed", "ok", {"first": 0, "last": 3, "count": 4, "inputs": acked}, "seeder", 0,
                           "tx-seeder"), *b.ops]
    b.input_ids = {(0, o): ids[o] for o in range(6)}
    for topic in ("a", "b"):
        for out in b.committed[topic]:
            out["in_id"] = ids[out["in_offset"]]
    run = b.write(tmp_path / "r")
    (run / "seed").write_text("5\n")
    verdict, kinds, results = _anomalies(run)
    if not visible:
        assert (verdict, kinds) == ("valid", []), results["checks"]
        return
    assert (verdict, kinds) == ("invalid", ["split-transaction"]), results["checks"]
    assert [c["explanation"] for c in results["anomalies"]["split-transaction"]] == [
        "outputs of transaction 1 of seeder (tx-seeder) are visible, though its client never learned its end and the "
        "coordinator's log holds no transaction of it"]


@spark_long
def test_a_committed_transaction_the_coordinator_never_recorded(tmp_path):
    b = RunBuilder()
    _second_transaction(b)
    b.coordinator[("w0.1", 2)] = []
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["split-transaction"]), results["checks"]
    assert "coordinator's log holds no transaction of it" in results["anomalies"]["split-transaction"][0]["explanation"]


@one_engine
def test_aborts_the_coordinator_starts_itself_are_not_split_transactions(tmp_path):
    """A transaction aborted by a fence (another process initialised its id), one timed out, and
    one its client gave up on (a failed send_offsets, then the process exited: closing the
    producer aborts) are the coordinator's or the client's own doing."""
    b = RunBuilder()
    _second_transaction(b, end="abort")
    both = {**OUTPUTS, **OFFSETS}
    b.ops.insert(len(b.ops) - 1, ("init", "ok", {}, "w0.2", 1))  # a successor, before transaction 2's abort
    b.coordinator[("w0.1", 2)] = [("Ongoing", both, 1, None), ("PrepareAbort", both, 30, 1),
                                  ("CompleteAbort", {}, 31, 1)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert _safety(results) == ("valid", []), results["checks"]

    b = RunBuilder()
    _second_transaction(b, end="abort")
    b.ops[-2] = ("send_offsets", "fail", {"txn_seq": 2, "offsets": {"0": 5}})
    b.ops.insert(len(b.ops) - 1, ("fatal", "info", {"reason": "error state"}))
    b.coordinator[("w0.1", 2)] = [("Ongoing", both, 1, None), ("PrepareAbort", both, 35, None),
                                  ("CompleteAbort", {}, 36, None)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r2"))
    assert _safety(results) == ("valid", []), results["checks"]


@one_engine
@pytest.mark.parametrize("exit, after_s, split", [("fatal", 1, False), ("fatal", 45, True), ("fenced", 1, True)])
def test_an_abort_after_its_client_gave_up_is_its_own_only_while_it_could_send_one(tmp_path, exit, after_s, split):
    """w0.1 gave transaction 2 up (its send_offsets failed) and its process stopped (fatal): a
    closing producer aborts what is open, so an abort after that is its own request, but only
    while a request of its could still arrive (its last moment and a request's timeout: 30 s).
    Told it was fenced, its requests are refused: an abort after that is the coordinator's own
    (a fence bumps the epoch; a timeout is a timeout) or another request's. The transaction
    timeout here is 5 minutes, so neither abort timed out."""
    b = RunBuilder()
    b.txn_timeout_ms = 300_000
    _second_transaction(b, end="abort")
    both = {**OUTPUTS, **OFFSETS}
    b.ops[-2] = ("send_offsets", "fail", {"txn_seq": 2, "offsets": {"0": 5}})
    b.ops[-1] = (exit, "info", {"reason": "error state"})
    b.coordinator[("w0.1", 2)] = [("Ongoing", both, 1, None), ("PrepareAbort", both, after_s * 1000, None),
                                  ("CompleteAbort", {}, after_s * 1000 + 1, None)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert ("split-transaction" in kinds) == split, results["checks"]


@spark_long
def test_an_init_retried_across_a_transaction_is_its_fence_not_a_split():
    """A successor's init_transactions sent before the old instance's transaction began (the
    coordinator answered CONCURRENT_TRANSACTIONS while the previous one completed) and retried
    until it aborted it: the coordinator's own fence (seen in CI, a TV2 takeover). An init that
    ended before the transaction began fences nothing."""
    from kchaos.verifier.coordinator_log import CoordinatorTxn, _coordinator_initiated

    ct = CoordinatorTxn("tx-w1", 7004, 0, start_ms=1_000_050, timeout_ms=10_000, client_tv=2,
                        prepared="abort", prepare_ms=1_000_100, prepare_epoch=1)
    across = {"process": "w1.2", "invoke_time": 999.9, "complete_time": 1000.2}
    before = {"process": "w1.2", "invoke_time": 999.9, "complete_time": 1000.0}
    assert _coordinator_initiated(ct, {"tx-w1": [across]}) == "fenced by w1.2's init"
    assert _coordinator_initiated(ct, {"tx-w1": [before]}) is None
    # an init whose process stopped mid-call acted until its process's last moment and a request's
    # timeout (acted_until_ms, coordinator_log.judge), not for the rest of the run
    stopped = {**across, "complete_time": None}
    assert _coordinator_initiated(ct, {"tx-w1": [{**stopped, "acted_until_ms": 1_000_060}]}) == "fenced by w1.2's init"
    assert _coordinator_initiated(ct, {"tx-w1": [{**stopped, "acted_until_ms": 1_000_000}]}) is None


@one_engine
def test_an_init_whose_process_died_mid_call_excuses_aborts_only_while_it_could_act(tmp_path):
    """w0.1's init never completed (its process was killed mid-call). A minute later the
    coordinator aborts w0.2's transaction before w0.2 asked to end it: w0.1's init cannot have
    done that, so it is a case (ended early), not excused for the rest of the run."""
    b = RunBuilder()
    b.ops = [("init", "info", {}, "w0.1", 0)] + [(f, o, v, "w0.2", 1) for f, o, v in b.ops]
    b.coordinator[("w0.2", 1)] = [("Ongoing", TXN_PARTITIONS, 1, None), ("PrepareAbort", TXN_PARTITIONS, 2, None),
                                  ("CompleteAbort", {}, 3, None)]
    lines = b._lines
    # w0.1's init has no completion (the process died in it); w0.2 runs a minute later
    b._lines = lambda: [{**l, "time": l["time"] + (60.0 if l["process"] == "w0.2" else 0)} for l in lines()
                        if l["process"] != "w0.1" or l["type"] == "invoke"]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert "split-transaction" in kinds, results["checks"]
    assert "the coordinator prepared to abort it before the client asked to commit" in \
        results["anomalies"]["split-transaction"][0]["explanation"]


@one_engine
def test_a_client_transaction_without_a_recorded_end_closes_at_its_process_last_moment(tmp_path):
    """w0.1's transaction 1 has no recorded end (its process stopped after the send). A coordinator
    transaction of its id a minute later is not its: left open for ever, the window would own it
    (one run blamed one client transaction for 692), and call the two a split."""
    b = RunBuilder()
    b.ops = b.ops[:2]  # init, send: nothing after
    b.committed = {"a": [], "b": []}
    b.raw_extra = {"a": [_out(0, o, 0) for o in range(4)], "b": [_out(0, o, 1) for o in range(4)]}
    b.final_offsets = {"0": 0}
    b.coordinator[("w0.1", 1)] = [("Ongoing", TXN_PARTITIONS, 1, None), ("PrepareAbort", TXN_PARTITIONS, 10_000, None),
                                  ("CompleteAbort", {}, 10_001, None), ("Ongoing!", TXN_PARTITIONS, 60_000, None),
                                  ("PrepareAbort", TXN_PARTITIONS, 70_000, None), ("CompleteAbort", {}, 70_001, None)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert "split-transaction" not in kinds and results["checks"]["split-transaction"]["verdict"] == "valid", \
        results["checks"]
    # one of w0.1 (its two records of one transaction), and the seeder's
    facts = results["facts"]["coordinator"]
    assert facts["attributed"] == 2 and facts["with_partitions"] == 3


@one_engine
@pytest.mark.parametrize("zombie", ["aborting", "aborting at the fenced epoch", "aborting as another producer",
                                    "none"])
def test_a_zombie_resumed_inside_its_abort_fences_its_successor_it_does_not_split_it(tmp_path, zombie):
    """w0.1 was paused inside an abort (its commit had failed) while w0.2 took the id over. Resumed,
    librdkafka's abort asks for a new epoch (InitProducerId, KIP-360): the coordinator aborts
    w0.2's open transaction and then fences w0.1. A fence, seen in a default run (seed 5): not a
    request of another transaction of w0.2's. Without the zombie's abort in flight, the same
    early abort is a case; so it is when the abort is at w0.2's own epoch (a fence bumps the
    epoch before it aborts, so that abort was a request at w0.2's epoch, which the fenced zombie
    does not hold), or when the zombie's producer id is not the one w0.2's transaction runs
    under (the coordinator answers it PRODUCER_FENCED and touches nothing)."""
    b = RunBuilder()
    b.client_tv = 2
    ops = [(f, o, v, "w0.2", 1) for f, o, v in b.ops[:3]]  # init, send, send_offsets: then fenced
    b.ops = ([("abort", "info", {"txn_seq": 9}, "w0.1", 0)] if zombie != "none" else []) + ops
    epoch = 1 if zombie == "aborting at the fenced epoch" else 2
    b.coordinator[("w0.2", 1)] = [("Ongoing", TXN_PARTITIONS, 1, None), ("PrepareAbort", TXN_PARTITIONS, 2, epoch),
                                  ("CompleteAbort", {}, 3, epoch)]
    b.committed = {"a": [], "b": []}
    b.final_offsets = {"0": 0}
    lines = b._lines
    # the zombie's abort: invoked before w0.2 began, answered (fenced) after the coordinator's abort
    b._lines = lambda: [{**l, "time": l["time"] + (0.5 if l["process"] == "w0.1" and l["type"] != "invoke" else 0),
                         **({"pid": 8} if l["process"] == "w0.1" and zombie == "aborting as another producer" else {})}
                        for l in lines()]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    if zombie == "aborting":  # (no transaction committed: the run is vacuous, its checks valid)
        assert _safety(results)[1] == [] and results["checks"]["split-transaction"]["verdict"] == "valid", \
            results["checks"]
    else:
        assert "split-transaction" in kinds, results["checks"]
        assert "the coordinator prepared to abort it before the client ended it" in \
            results["anomalies"]["split-transaction"][0]["explanation"]


@spark_long
def test_nothing_matched_is_unknown_not_valid(tmp_path):
    b = RunBuilder()
    b.coordinator[("w0.1", 1)] = b.coordinator[("seeder", 0)] = [
        ("Ongoing", {}, 1, None), ("PrepareCommit", {}, 41, None), ("CompleteCommit", {}, 42, None)]
    verdict, _, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "unknown" and results["checks"]["split-transaction"]["verdict"] == "unknown"
    assert "nothing was judged" in results["checks"]["split-transaction"]["note"]


@spark_long
def test_a_committed_transactions_offset_commit_missing_from_the_offsets_log(tmp_path):
    b = RunBuilder()
    _second_transaction(b)
    b.offset_commits = [(0, 5)]  # transaction 1's commit (0 -> 4) is gone, hidden by the next
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["lost-offset-commit"]), results["checks"]
    case = results["anomalies"]["lost-offset-commit"][0]
    assert "transaction 1 of w0.1 committed, but its offset commit (in 0 -> 4)" in case["explanation"]
    assert case["offset_commits_around"]["0"][0]["offset"] == 5


@one_engine
def test_offset_commits_the_cleaner_may_have_replaced_are_set_aside_the_rest_judged(tmp_path):
    """Compaction of the group's own partition: a missing commit with a later one of its partition,
    below the cleaned point, may have been replaced (set aside, counted in the note); the last
    commit of a partition is always kept, so its loss is a case even on a compacted partition, and
    even when the cluster cannot say what the cleaner did."""
    def run(name, compaction, commits):
        b = RunBuilder()
        _second_transaction(b)
        b.offset_commits = commits
        b.final_extra = {"compaction": compaction}
        return _anomalies(b.write(tmp_path / name))

    verdict, _, results = run("aside", {"__consumer_offsets": {"0": 12}, "__transaction_state": {}}, [(0, 5)])
    assert verdict == "valid" and "lost-offset-commit" not in results["not_checked"], results["checks"]
    assert "1 below where the log cleaner compacted __consumer_offsets-0 (up to offset 12)" in \
        results["checks"]["lost-offset-commit"]["note"]
    verdict, kinds, results = run("last", {"__consumer_offsets": {"0": 12}, "__transaction_state": {}}, [(0, 4)])
    assert (verdict, kinds) == ("invalid", ["lost-offset-commit"]), results["checks"]
    verdict, kinds, results = run("unknown", None, [(0, 4)])  # an external cluster: nobody can tell
    assert (verdict, kinds) == ("invalid", ["lost-offset-commit"]), results["checks"]


@pytest.mark.parametrize("cleaned_to, set_aside", [(5, 2), pytest.param(4, 1, marks=spark_long),
                                                    pytest.param(3, 0, marks=spark_long),
                                                    pytest.param(None, 0, marks=spark_long)])
def test_a_commit_the_log_lacks_is_set_aside_only_where_a_later_record_of_its_id_lies_below_the_cleaners_point(
        tmp_path, cleaned_to, set_aside):
    """Transaction 2 of w0.1 committed and the coordinator's log holds no record of it; then w0.2
    initialised the id and committed a transaction (the log: Empty 0, transaction 1's Ongoing 1,
    PrepareCommit 2 and CompleteCommit 3, w0.2's Empty 4, its transaction 5 to 7). The log
    cleaner, cleaned up to 5, keeps only the id's last record below it, the Empty, which would
    supersede both of w0.1's transactions' records: both set aside. Cleaned up to 4, the last
    record below it is transaction 1's CompleteCommit, which follows transaction 1's own records
    (set aside) but not transaction 2's: a case. Cleaned up to 3 (transaction 1 holds its
    Prepare and Complete) or not at all: a case."""
    b = RunBuilder()
    _second_transaction(b)
    b.coordinator[("w0.1", 2)] = []  # the coordinator's log holds nothing of transaction 2
    b.ops += [("init", "ok", {}, "w0.2", 1), ("send", "ok", {"txn_seq": 1, "inputs": [], "outputs": 0}, "w0.2", 1),
              ("commit", "ok", {"txn_seq": 1}, "w0.2", 1)]
    b.txn_log_cleaned_to = cleaned_to
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    facts = results["facts"]["coordinator"]
    assert sum(facts["unrecorded_set_aside"].values()) == set_aside, (facts, results["checks"]["split-transaction"])
    if cleaned_to == 5:
        assert (verdict, kinds) == ("valid", []), results["checks"]
        assert ("2 client transactions of tx-w0 that the log holds no record of, each followed by a record of its id "
                "below where the log cleaner compacted its partition (tx-w0: its last record below offset 5 is offset "
                "4") in results["checks"]["split-transaction"]["note"]
    else:
        assert (verdict, kinds) == ("invalid", ["split-transaction"]), results["checks"]
        assert {c["explanation"] for c in results["anomalies"]["split-transaction"]} == {
            "the client saw transaction 2 of w0.1 (tx-w0) commit, but the coordinator's log holds no transaction of it"}


@spark_long
def test_the_last_transaction_of_an_id_is_never_set_aside_as_compacted(tmp_path):
    """A transaction the coordinator's log lacks that no record of its id follows (the id's last)
    could not have been removed by the cleaner, however far it cleaned: w0.1's transaction 2, with
    w0.2's transaction of another id after it."""
    b = RunBuilder()
    _second_transaction(b)
    b.coordinator[("w0.1", 2)] = []
    b.ops += [("init", "ok", {}, "w1.1", 0, "tx-w1"),
              ("send", "ok", {"txn_seq": 1, "inputs": [], "outputs": 0}, "w1.1", 0, "tx-w1"),
              ("commit", "ok", {"txn_seq": 1}, "w1.1", 0, "tx-w1")]
    b.txn_log_cleaned_to = 4  # every record of tx-w0 (offsets 0 to 3) but its last, transaction 1's CompleteCommit
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["split-transaction"]), results["checks"]
    assert "transaction 2 of w0.1 (tx-w0) commit, but the coordinator's log holds no transaction of it" in \
        results["anomalies"]["split-transaction"][0]["explanation"]
    assert results["facts"]["coordinator"]["unrecorded_set_aside"] == {"tx-w0": 1}  # transaction 1: its own Complete


@one_engine
def test_another_groups_compaction_does_not_hide_a_lost_offset_commit(tmp_path):
    """Only the group's own __consumer_offsets partition speaks for its commits: partition 7 of
    another group compacted, or pinned by another application's open transaction, hides nothing."""
    for name, extra in (("compacted", {"compaction": {"__consumer_offsets": {"7": 900}, "__transaction_state": {}}}),
                        ("pinned", {"topics": [
                            {"topic": "__consumer_offsets", "view": "committed", "end_offsets": {"0": 2, "7": 1}},
                            {"topic": "__consumer_offsets", "view": "raw", "end_offsets": {"0": 2, "7": 9}}]})):
        b = RunBuilder()
        _second_transaction(b)
        b.offset_commits = [(0, 5)]  # transaction 1's commit is gone, hidden by transaction 2's
        b.final_extra = extra
        verdict, kinds, results = _anomalies(b.write(tmp_path / name))
        assert (verdict, kinds) == ("invalid", ["lost-offset-commit"]), (name, results["checks"])


@one_engine
def test_offset_commits_behind_a_pinned_offsets_partition_are_set_aside_where_the_raw_view_holds_them(tmp_path):
    """A transaction left open in the group's __consumer_offsets partition stops its committed view
    at the open transaction's first record (1 of 3 here); a commit with no later one in the view may
    lie past that end: set aside and counted where the raw view holds it there, not lost. One the
    raw view does not hold either was lost, however the view is pinned; one with a later commit in
    the view lay before the end: judged."""
    pinned = {"topics": [{"topic": "__consumer_offsets", "view": "committed", "end_offsets": {"0": 1}},
                         {"topic": "__consumer_offsets", "view": "raw", "end_offsets": {"0": 3}}]}
    b = RunBuilder()
    _second_transaction(b)
    b.offset_commits = [(0, 4)]  # transaction 2's commit is not in the committed view
    b.raw_only_offset_commits = [(0, 2), (0, 5)]  # the open transaction's, then transaction 2's, past the view
    b.final_extra = pinned
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    assert "1 past the end of __consumer_offsets-0's committed view (1 of 3" in \
        results["checks"]["lost-offset-commit"]["note"]
    b.raw_only_offset_commits = [(0, 2)]  # nowhere in the log: lost, whatever pins the view
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r2"))
    assert (verdict, kinds) == ("invalid", ["lost-offset-commit"]), results["checks"]
    assert "transaction 2 of w0.1 committed, but its offset commit (in 0 -> 5)" in \
        results["anomalies"]["lost-offset-commit"][0]["explanation"]
    b.offset_commits, b.raw_only_offset_commits = [(0, 5)], []  # transaction 1's commit is gone from before the end
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r3"))
    assert (verdict, kinds) == ("invalid", ["lost-offset-commit"]), results["checks"]
    # without the raw view nothing places transaction 2's commit: not judged, so never valid
    b.offset_commits, b.raw_only_offset_commits = [(0, 4)], [(0, 2), (0, 5)]
    run = b.write(tmp_path / "r4")
    (run / "topics" / "__consumer_offsets.raw.parquet").unlink()
    verdict, kinds, results = _anomalies(run)
    check = results["checks"]["lost-offset-commit"]
    assert (verdict, check["verdict"]) == ("unknown", "unknown") and "its raw view, which would show them" in \
        check["note"], results["checks"]


@one_engine
def test_an_offset_commit_lost_past_the_cleaners_point_is_a_case(tmp_path):
    """The cleaner removes a commit only for a later one of its input partition below its own
    point. Transaction 1's commit (0 -> 4) is missing; the commit after it, transaction 2's
    (0 -> 5), is at log offset 1. Cleaned up to 2, that commit is below the point: set aside.
    Cleaned up to 1, it is not (only an older commit, 0 -> 2, lies below): transaction 1's commit
    was never removable, and its loss is a case, though the commit before it was cleaned."""
    def run(name: str, clean: int):
        b = RunBuilder()
        _second_transaction(b)
        b.offset_commits = [(0, 2), (0, 5)]  # an older commit, then transaction 2's; transaction 1's is gone
        b.ops[:0] = [("send_offsets", "ok", {"txn_seq": 0, "offsets": {"0": 2}}),  # the older commit's
                     ("commit", "ok", {"txn_seq": 0, "offsets": {"0": 2}})]
        b.final_extra = {"compaction": {"__consumer_offsets": {"0": clean}, "__transaction_state": {}}}
        return _anomalies(b.write(tmp_path / name))

    verdict, kinds, results = run("below", 2)
    assert (verdict, kinds) == ("valid", []), results["checks"]
    assert "1 below where the log cleaner compacted __consumer_offsets-0 (up to offset 2)" in \
        results["checks"]["lost-offset-commit"]["note"]
    verdict, kinds, results = run("past", 1)
    assert (verdict, kinds) == ("invalid", ["lost-offset-commit"]), results["checks"]


def test_a_committed_offset_that_moves_back(tmp_path):
    b = RunBuilder()
    _second_transaction(b)
    b.offset_commits = [(0, 4), (0, 2), (0, 5)]  # a commit back to 2 between two, hidden by the next
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    # no transaction sent 2: it is a stray commit too (offsets_log.stray_offset_commit_cases)
    assert (verdict, kinds) == ("invalid", ["offsets-backwards", "stray-offset-commit"]), results["checks"]
    assert "in/0 moved back from 4 to 2" in results["anomalies"]["offsets-backwards"][0]["explanation"]
    assert "in/0 at 2, an offset no transaction" in results["anomalies"]["stray-offset-commit"][0]["explanation"]


def test_an_acknowledged_input_lost_or_replaced(tmp_path):
    """What the seeder was acknowledged to commit: an input nobody consumed is gone from the log
    (no output and no history names it), another replaced by a different record."""
    b = RunBuilder()
    b.seed_inputs = {"ok": [[f"id-0-{o}", 0, o] for o in range(4)] + [["id-0-9", 0, 9]], "aborted": []}
    b.seed_inputs["ok"][2] = ["id-other", 0, 2]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert "lost-acknowledged-input" in kinds, results["checks"]
    texts = sorted(c["explanation"] for c in results["anomalies"]["lost-acknowledged-input"])
    assert texts == ["input id-0-9, which the seeder's committed transaction wrote at in/0@9, is not in the committed "
                     "input log",
                     "input id-other, which the seeder's committed transaction wrote at in/0@2, is replaced there by "
                     "id-0-2"]


def test_an_output_whose_input_reference_names_another_record(tmp_path):
    b = RunBuilder()
    for topic in ("a", "b"):
        b.committed[topic][1] = {**b.committed[topic][1], "in_id": "id-elsewhere"}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["input-mismatch"]), results["checks"]
    assert ("was made from input id-elsewhere at 0@1, but the input log holds input id-0-1 there"
            in results["anomalies"]["input-mismatch"][0]["explanation"])


@spark_long
def test_outputs_of_a_commit_the_client_saw_fail(tmp_path):
    b = RunBuilder()
    b.ops[-1] = ("commit", "fail", {"txn_seq": 1, "offsets": {"0": 4}})
    b.coordinator[("w0.1", 1)] = [("Ongoing", {**OUTPUTS, **OFFSETS}, 1, None),
                                  ("PrepareCommit", {**OUTPUTS, **OFFSETS}, 41, None), ("CompleteCommit", {}, 42, None)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "invalid" and "aborted-read" in kinds, results["checks"]
    assert any("whose commit the client saw fail" in c["explanation"] for c in results["anomalies"]["aborted-read"])


def test_an_input_the_seeder_aborted_visible_and_processed(tmp_path):
    """The final read and the pipeline read the input topic alike, so they agree; the seeder's
    record says the input at 0@2 belongs to a transaction it aborted."""
    b = RunBuilder()
    b.seed_inputs = {"ok": [[f"id-0-{o}", 0, o] for o in (0, 1, 3)], "aborted": [["id-0-2", 0, 2]]}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["aborted-read"]), results["checks"]
    texts = sorted(c["explanation"] for c in results["anomalies"]["aborted-read"])
    assert "input id-0-2 at in/0@2, which the seeder's transaction aborted, is visible to read_committed readers" in texts
    assert texts.count("committed output derived from input 0@2, which belongs to an aborted input transaction "
                       "(read with read_uncommitted)") == 2


@spark_long
def test_an_earlier_runs_seeder_record_is_checked_by_id(tmp_path):
    """A run recorded before the seeder kept its acknowledgements: each batch's index range names
    its ids (workloads.lineage.input_id with the run's seed). An id gone from the log is lost; an
    id committed once but visible twice shows its aborted copy."""
    from kchaos.workloads.lineage import input_id

    b = RunBuilder()
    ids = {o: input_id(5, o) for o in range(6)}
    b.seed_inputs = False
    b.ops = [("seed", "ok", {"first": 0, "last": 4, "count": 5}, "seeder", 0, "tx-seeder"), *b.ops]
    b.input_ids = {(0, 0): ids[2], (0, 1): ids[0], (0, 2): ids[1], (0, 3): ids[2]}  # ids[2] twice; 3 and 4 gone
    for topic in ("a", "b"):
        for out in b.committed[topic]:
            out["in_id"] = b.input_ids[(0, out["in_offset"])]
    run = b.write(tmp_path / "r")
    (run / "seed").write_text("5\n")
    verdict, kinds, results = _anomalies(run)
    assert {"aborted-read", "lost-acknowledged-input"} <= set(kinds), results["checks"]
    assert sorted(c["input"]["id"] for c in results["anomalies"]["lost-acknowledged-input"]) == [ids[3], ids[4]]
    exposed = [c for c in results["anomalies"]["aborted-read"] if "seeder's transaction aborted" in c["explanation"]]
    assert [(c["input"]["id"], c["input"]["offset"]) for c in exposed] == [(ids[2], 0)]


@spark_long
def test_every_transactional_id_of_the_pipeline_is_checked(tmp_path):
    """Kafka Streams names its own transactional ids (application.id-based): they go through the
    coordinator's state machine although they do not carry the run's prefix."""
    b = RunBuilder()
    b.ops.insert(0, ("setup", "ok", {"txid_prefix": "kchaos-run"}, "harness", 0, None))
    b.txn_states = [("kchaos-ctp-4711-1", "Ongoing", 0), ("kchaos-ctp-4711-1", "CompleteCommit", 0)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["invalid-txn-transition"]), results["checks"]


# -- missing evidence is never valid ----------------------------------------------------------

# The gaps read from final.json, the history, the schedule and the observers' summary are found by
# verifier/evidence.py and verifier/verdict.py for both engines alike: one_engine. The Spark job
# reads its own way an empty transaction log, a dump cut short, outputs without lineage and the
# processes that wrote the outputs, so those run on both engines.
@pytest.mark.parametrize("gap, blinded, needle", [
    pytest.param("group-offsets", "lost-input", "final offsets could not be read", marks=one_engine),
    ("empty-transaction-log", "split-transaction", "__transaction_state holds no record"),
    ("partial-dump", "duplicate", "stopped before the end of partitions 0"),
    pytest.param("no-history", "lost-write", "recorded no client history", marks=one_engine),
    ("silent-process", None, "process(es) with no history (w7.1)"),
    ("no-lineage", None, "1 committed output records carry no lineage"),
    pytest.param("no-fault-injected", None, "planned 1 faults and the history shows none injected", marks=one_engine),
    pytest.param("a-kind-never-injected", None, "message-hold 0 of 1 (planned 2, attempted 2) (KeyError('delay_ms'))",
                 marks=one_engine),
    pytest.param("no-seeder", "lost-acknowledged-input", "the input seeder left no history", marks=one_engine),
    pytest.param("no-observations", "unseen",
                 "the campaign asked for 1 observers, but their reads are not in the run directory", marks=one_engine),
    pytest.param("acl-denied-transaction-log", "split-transaction",
                 "__transaction_state could not be read: the cluster denies", marks=one_engine),
    pytest.param("acl-denied-offsets-log", "lost-offset-commit", "__consumer_offsets could not be read: the cluster denies",
                 marks=one_engine),
])
@spark_long
def test_missing_evidence_makes_the_verdict_unknown(tmp_path, gap, blinded, needle):
    b = RunBuilder()
    if gap == "group-offsets":
        b.final_extra = {"group_offsets_error": "KafkaException('timed out')"}
    elif gap == "partial-dump":
        b.final_extra = {"topics": [{"topic": "a", "view": "committed", "incomplete_partitions": [0]}]}
    elif gap == "no-history":
        b.ops = []
    elif gap == "silent-process":
        b.inputs.append((0, 4))
        b.final_offsets = {"0": 5}
        b.committed["a"].append(_out(0, 4, 0, worker="w7", seq=9))
        b.committed["b"].append(_out(0, 4, 1, worker="w7", seq=9))
    elif gap == "no-seeder":
        b.seed_inputs = False
    elif gap.startswith("acl-denied"):  # a staging cluster's ACLs: the dump never saw the topic
        topic = "__transaction_state" if "transaction" in gap else "__consumer_offsets"
        b.final_extra = {"unreadable_topics": {
            topic: "the cluster denies this client access to it (TOPIC_AUTHORIZATION_FAILED: an ACL)"}}
    run = b.write(tmp_path / "r")
    if gap == "empty-transaction-log":
        _write_topic(run, "__transaction_state", "raw", [])
    elif gap == "no-lineage":
        rows = pq.read_table(run / "topics" / "a.committed.parquet").to_pylist()
        foreign = [(r["partition"], r["offset"], r["key"], r["value"]) for r in rows] + [(0, len(rows), b"k", b"not lineage")]
        _write_topic(run, "a", "committed", foreign)
        _write_topic(run, "a", "raw", foreign)
        b._write_observations(run)  # the observer read it too
    elif gap == "no-observations":
        (run / "observers" / "observations.parquet").unlink()
    elif gap == "no-fault-injected":
        (run / "schedule.json").write_text(json.dumps({"seed": 1, "faults": [{"index": 0, "kind": "kill"}]}))
    elif gap == "a-kind-never-injected":  # the kills took, every message fault failed
        (run / "schedule.json").write_text(json.dumps({"seed": 1, "faults": [
            {"index": 0, "kind": "kill"}, {"index": 1, "kind": "message-hold"}, {"index": 2, "kind": "message-hold"}]}))
        lines = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
        for op, (kind, outcome) in enumerate([("kill", "ok"), ("message-hold", "fail"), ("message-hold", "fail")]):
            lines += [{"time": 100.0 + op, "process": "harness", "op": 900 + op, "type": "invoke", "f": f"fault:{kind}",
                       "value": {}},
                      {"time": 100.5 + op, "process": "harness", "op": 900 + op, "type": outcome, "f": f"fault:{kind}",
                       "value": {}, **({"error": "KeyError('delay_ms')"} if outcome == "fail" else {})}]
        (run / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    verdict, _, results = _anomalies(run)
    assert verdict == "unknown", results["checks"]
    assert any(needle in e for e in results["errors"]), results["errors"]
    if blinded:
        assert needle in results["not_checked"][blinded]


@one_engine
def test_a_fault_kind_never_tried_is_a_gap_unless_the_run_was_stopped_early(tmp_path):
    """The kill was injected, the message hold planned after it never tried. A run that went to its
    end says nothing about message holds: unknown, naming the kind. An interrupted run stopped its
    schedule, says so itself, and is judged on what ran (valid)."""
    for name, extra, expected in (("completed", {}, "unknown"),
                                  ("interrupted", {"interrupted": {"phase": "faults", "at_s": 12.0}}, "valid")):
        b = RunBuilder()
        b.final_extra = extra
        run = b.write(tmp_path / name)
        (run / "schedule.json").write_text(json.dumps({"seed": 1, "faults": [
            {"index": 0, "kind": "kill"}, {"index": 1, "kind": "message-hold"}]}))
        lines = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
        lines += [{"time": 100.0, "process": "harness", "op": 900, "type": "invoke", "f": "fault:kill", "value": {}},
                  {"time": 100.5, "process": "harness", "op": 900, "type": "ok", "f": "fault:kill", "value": {}}]
        (run / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        verdict, _, results = _anomalies(run)
        assert verdict == expected, (name, results["errors"])
        if expected == "unknown":
            assert any("message-hold 0 of 1 (planned 1, attempted 0)" in e for e in results["errors"])


# -- read-side: what the observers read during the run (verifier/observations.py) --------------

def _drop(topic: str, offset: int, observer: int = 0):
    def edit(rows: list) -> None:
        rows[:] = [r for r in rows if (r[0], r[1], r[3]) != (observer, topic, offset)]
    return edit


@spark_long
def test_an_observer_read_a_record_the_final_log_replaced_or_does_not_hold(tmp_path):
    """A record read at a@1 whose bytes differ from what the final log holds there, and one read
    at a@9, past the final log's end (read, then truncated)."""
    def edit(rows: list) -> None:
        i = next(i for i, r in enumerate(rows) if r[1:4] == ("a", 0, 1))
        rows[i] = (*rows[i][:4], rows[i][4] ^ 1)
        rows.append((0, "a", 0, 9, 12345))

    b = RunBuilder()
    b.edit_observations = edit
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["inconsistent-offsets"]), results["checks"]
    explanations = sorted(c["explanation"] for c in results["anomalies"]["inconsistent-offsets"])
    assert explanations == [
        "observer 0 read a-0@1 (poll 3), but the final log holds another record at that offset",
        "observer 0 read a-0@9 (poll 7), but the final log holds no record at that offset: it was truncated after it "
        "was read"]


def test_an_observer_read_a_record_of_an_aborted_transaction(tmp_path):
    """The record at a-1@0 is in the raw view only (its transaction aborted), and the observer got it."""
    b = RunBuilder()
    b.raw_extra["a"].append(_out(0, 9, 0, seq=2))
    value = json.dumps(b.raw_extra["a"][0]).encode()
    b.edit_observations = lambda rows: rows.append((0, "a", 1, 0, zlib.crc32(value)))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["observed-aborted-read"]), results["checks"]
    case = results["anomalies"]["observed-aborted-read"][0]
    assert case["explanation"].startswith("observer 0 read a-1@0 (poll 7) read_committed, a record the final log "
                                          "holds only in its uncommitted view")
    assert case["observation"]["observed_at"] > 0 and "faults_active" in case


def test_an_observer_that_skipped_committed_records(tmp_path):
    """Observer 0 never got a@0 (where it began) nor a@2 (between a@1 and a@3); observer 1 read
    everything, so nothing is unseen."""
    def edit(rows: list) -> None:
        everything = [(1, *r[1:]) for r in rows]
        _drop("a", 0)(rows)
        _drop("a", 2)(rows)
        rows += everything

    b = RunBuilder()
    b.observers = 2
    b.edit_observations = edit
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["poll-skip"]), results["checks"]
    assert sorted(c["explanation"] for c in results["anomalies"]["poll-skip"]) == [
        "observer 0 began a-0 at @1 (poll 3), skipping 1 committed records from @0",
        "observer 0 read a-0@3 (poll 3) right after @1, skipping 1 committed records from @2"]


@spark_long
def test_an_observer_whose_reads_went_back(tmp_path):
    def edit(rows: list) -> None:
        i = next(i for i, r in enumerate(rows) if r[1:4] == ("b", 0, 3))
        rows.insert(i + 1, rows[i - 1])  # b@2 again, after b@3

    b = RunBuilder()
    b.edit_observations = edit
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["nonmonotonic-poll"]), results["checks"]
    assert [c["explanation"] for c in results["anomalies"]["nonmonotonic-poll"]] == [
        "observer 0 read b-0@2 (poll 7) after @3: its reads of the partition went back"]


@spark_long
def test_a_committed_record_no_observer_read(tmp_path):
    b = RunBuilder()
    b.edit_observations = _drop("b", 3)  # the partition's last record: no later read skips it
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["unseen"]), results["checks"]
    assert results["anomalies"]["unseen"][0]["explanation"] == (
        "1 committed records of b-0 (@3 to @3) were read by no observer, though every observer reached the end of the "
        "partition")


@one_engine
def test_unseen_is_not_checked_when_an_observer_stopped_short(tmp_path):
    """unseen is claimed by a run with observers: not checked, the verdict is unknown with the reason."""
    b = RunBuilder()
    b.edit_observations = _drop("b", 3)
    b.observers_caught_up = False
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("unknown", []), results["checks"]
    assert results["not_checked"]["unseen"] == "observer 0 did not reach the end of the topics"
    assert results["required_not_checked"] == {"unseen": "observer 0 did not reach the end of the topics"}


@one_engine
def test_a_run_without_observers_says_so(tmp_path):
    b = RunBuilder()
    b.observers = 0
    verdict, _, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "valid"
    assert {results["not_checked"][name] for name in OBSERVATION_CHECKS} == {
        "the run had no observers ([observers] count = 0)"}


# -- claimed checks on partial evidence: judged where they can be, unknown where they cannot ----

def test_the_seeders_own_count_against_the_input_log(tmp_path):
    """final.json says the seeder committed 5 inputs; the committed input log holds 4 (its history
    records 4 as well): an input is missing, whatever the history kept."""
    b = RunBuilder()
    b.final_extra = {"seeder": {"committed": 5, "aborted_batches": 0}}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert "lost-acknowledged-input" in kinds, results["checks"]
    assert any("the seeder committed 5 inputs by its own count, but the committed log of in holds 4" in c["explanation"]
               for c in results["anomalies"]["lost-acknowledged-input"])
    b.final_extra = {"seeder": {"committed": 4, "aborted_batches": 0}}  # as counted: valid
    assert _anomalies(b.write(tmp_path / "r2"))[0] == "valid"


@one_engine
def test_a_seeder_history_that_stops_early_is_unknown(tmp_path):
    """The seeder committed 4 inputs, but its history stops after its init (no acknowledgement):
    the input log is held against the seeder's own count only (4 of 4), and the history is
    partial: unknown. Without even that count, lost-acknowledged-input, claimed, is not checked."""
    b = RunBuilder()
    b.seed_inputs = {"ok": [], "aborted": []}
    b.final_extra = {"seeder": {"committed": 4, "aborted_batches": 0}}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("unknown", []), results["checks"]
    assert results["checks"]["lost-acknowledged-input"]["verdict"] == "valid"
    assert any("its history records the acknowledgements of 0" in e for e in results["errors"]), results["errors"]
    b.final_extra = {}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r2"))
    assert verdict == "unknown" and "lost-acknowledged-input" in results["required_not_checked"]


@spark_long
def test_a_failed_observer_is_judged_on_what_it_read_and_says_so(tmp_path):
    """An observer that failed mid-run: what it read is still judged (a rewritten record is named),
    the read-side checks say they cover its reads before the failure, and unseen (what nobody
    read) cannot be told: not checked and, claimed, unknown when nothing else is wrong."""
    b = RunBuilder()
    b.edit_observations = _drop("b", 3)
    summary = b._observer_summary
    b._observer_summary = lambda: {**summary(), "observers": [{"observer": 0, "caught_up": True, "records": 11,
                                                               "error": "KafkaException(_TRANSPORT)"}]}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("unknown", []), results["checks"]
    assert "observer 0 failed (KafkaException(_TRANSPORT)) after 11 records" in results["not_checked"]["unseen"]
    assert "unseen" in results["required_not_checked"]
    assert "judged on the reads made before the failure only" in results["checks"]["poll-skip"]["note"]
    b.edit_observations = lambda rows: rows.__setitem__(0, (*rows[0][:4], rows[0][4] + 1))  # a read rewritten since
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r2"))
    assert (verdict, kinds) == ("invalid", ["inconsistent-offsets"]), results["checks"]


@one_engine
def test_a_campaign_may_waive_or_require_a_check(tmp_path):
    """[verifier] waive takes a claimed check out of the verdict (not checked, said, not required);
    require claims one the workload does not (nonmonotonic under at-least-once: not promised, so
    not checked, so unknown)."""
    b = RunBuilder()
    b.edit_observations = _drop("b", 3)
    b.observers_caught_up = False
    b.verifier = {"waive": ["unseen"]}
    verdict, _, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "valid" and "unseen" in results["not_checked"] and "unseen" not in results["required"]
    b = RunBuilder()
    b.workload["delivery"] = "at-least-once"
    b.verifier = {"require": ["nonmonotonic"]}
    verdict, _, results = _anomalies(b.write(tmp_path / "r3"))
    assert verdict == "unknown" and "not promised" in results["required_not_checked"]["nonmonotonic"]


def _scheduled(kinds: list[str]) -> list[dict]:
    return [{"index": i, "at_s": 5.0 + 10 * i, "kind": k, "target": "txn-coordinator", "hold_s": 4.0, "seed": 1,
             "params": {}} for i, k in enumerate(kinds)]


@one_engine
def test_fault_coverage_below_what_the_campaign_requires_is_unknown(tmp_path):
    """Planned: a kill and a partition. Only the kill ran (the partition was never attempted): the
    run says nothing about partitions, so by default (each planned kind once) it is unknown; a
    campaign that requires only kills (faults.coverage) is valid. The coverage is in the facts."""
    b = RunBuilder()
    b.schedule = _scheduled(["kill", "partition"])
    # while the run's one transaction is under way: the kill meets the default exposure floor
    b.ops.insert(2, ("fault:kill", "ok", {"index": 0, "kind": "kill"}, "harness", 0, None))
    verdict, _, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "unknown", results["checks"]
    assert any("partition 0 of 1 (planned 1, attempted 0)" in e for e in results["errors"]), results["errors"]
    coverage = results["facts"]["fault_coverage"]
    assert (coverage["planned"], coverage["executed"], list(coverage["short"])) == (
        {"kill": 1, "partition": 1}, {"kill": 1}, ["partition"])
    b.faults = {"coverage": {"kill": 1}}
    assert _anomalies(b.write(tmp_path / "r2"))[0] == "valid"
    b.faults = {"coverage": {"kill": 2}}  # two kills required, one ran
    verdict, _, results = _anomalies(b.write(tmp_path / "r3"))
    assert verdict == "unknown" and any("kill 1 of 2" in e for e in results["errors"]), results["errors"]


@spark_long
def test_faults_that_hit_less_work_than_the_campaign_requires_make_the_run_unknown(tmp_path):
    """The campaign requires one committed transaction under a kill ([faults.exposure]). A kill
    injected while the run's one transaction was under way (between its send and its commit)
    meets it: valid, and the exposure is in the facts. The same kill before the transaction
    began hit nothing: unknown, naming the kind and the figure. In both engines."""
    for name, at, expected in (("hit", 2, "valid"), ("missed", 1, "unknown")):
        b = RunBuilder()
        b.schedule = _scheduled(["kill"])
        b.faults = {"exposure": {"committed": {"kill": 1}}}
        b.ops.insert(at, ("fault:kill", "ok", {"index": 0, "kind": "kill", "target": "txn-coordinator"}, "harness", 0,
                          None))
        verdict, _, results = _anomalies(b.write(tmp_path / name))
        assert verdict == expected, (name, results["errors"])
        assert results["facts"]["exposure"]["kinds"]["kill"]["committed"] == (1 if name == "hit" else 0)
        if expected == "unknown":
            assert any("kill: 0 committed transactions overlapped its 1 windows, 1 required" in e
                       for e in results["errors"]), results["errors"]


@spark_long
def test_a_fault_the_recorded_cluster_could_not_run_is_a_record_the_run_cannot_have(tmp_path):
    """A clock fault in the history of a cluster started without libfaketime (cluster.clock_control
    false): no broker's clock can have moved, so its record opens no set-aside; the run is unknown,
    naming the fault and the setting. With clock control the same record raises no such error (its
    moved stamps are judged as any clock fault's). In both engines."""
    for name, cluster in (("impossible", {}), ("possible", {"clock_control": True})):
        b = RunBuilder()
        b.cluster = cluster
        b.ops.insert(2, ("fault:clock-bump", "ok", {"index": 3, "kind": "clock-bump", "target": "txn-coordinator"},
                         "harness", 0, None))
        verdict, _, results = _anomalies(b.write(tmp_path / name))
        said = any("fault 3 clock-bump needs cluster.clock_control, which the run's cluster did not have" in e
                   for e in results["errors"])
        assert said == (name == "impossible"), (name, results["errors"])
        if name == "impossible":
            assert verdict == "unknown"


@spark_long
def test_a_campaign_that_requires_no_exposure_still_has_a_floor_lowered_only_by_saying_so(tmp_path):
    """No [faults.exposure] table, a kill before the run's one transaction began: it hit nothing,
    so the floor (one committed transaction per fault of a kind) makes the run unknown, naming the
    kind and the figure; `floor = 0` in the campaign lowers it, and the run is valid. In both engines."""
    b = RunBuilder()
    b.schedule = _scheduled(["kill"])
    b.ops.insert(1, ("fault:kill", "ok", {"index": 0, "kind": "kill", "target": "txn-coordinator"}, "harness", 0, None))
    verdict, _, results = _anomalies(b.write(tmp_path / "floor"))
    assert verdict == "unknown" and any(
        "the faults hit next to no work" in e and "kill: 0 committed transactions under its 1 windows, 1 required" in e
        for e in results["errors"]), results["errors"]
    b.faults = {"exposure": {"share": 0.1}}  # a share alone requires no kind: the floor still holds
    assert _anomalies(b.write(tmp_path / "share"))[0] == "unknown"
    b.faults = {"exposure": {"floor": 0}}
    assert _anomalies(b.write(tmp_path / "lowered"))[0] == "valid"


@one_engine
def test_on_an_external_cluster_the_coordinators_clock_is_measured_shifted_and_widened(tmp_path):
    """The brokers' clocks run 4 s ahead of the harness's. Unmeasured, a coordinator transaction
    cannot be placed in its client's window: split-transaction is not checked and, claimed, the
    verdict is unknown. Measured (clock.json), the coordinator's times are shifted onto the
    harness's clock and the run is valid; a wrong measurement (no offset) is the control: nothing
    lines up, and the check says so rather than judge."""
    b = RunBuilder()
    b.cluster = {"backend": "external", "external": {"bootstrap_servers": "staging:9092"}}
    b.broker_clock_ms = 4000
    verdict, kinds, results = _anomalies(b.write(tmp_path / "unmeasured"))
    assert verdict == "unknown" and "clocks were not measured" in results["not_checked"]["split-transaction"]
    assert "split-transaction" in results["required_not_checked"]
    b.clock = {"measurements": [{"brokers": {"1": {"offset_ms": 3999.0, "bound_ms": 2.0},
                                             "2": {"offset_ms": 4001.0, "bound_ms": 3.0}}}]}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "measured"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    clock = results["facts"]["coordinator"]["clock"]
    assert clock["shift_ms"] == 4001.0 and clock["tolerance_ms"] == 4.0 and clock["how"].startswith("measured")
    b.clock = {"measurements": [{"brokers": {"1": {"offset_ms": 0.0, "bound_ms": 1.0}}}]}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "wrong"))
    assert (verdict, kinds) == ("unknown", []), results["checks"]
    assert "could be matched" in results["checks"]["split-transaction"]["note"]


@spark_long
def test_the_clock_shift_is_the_median_offset_and_the_tolerance_covers_every_broker():
    from kchaos.clusters.clock_probe import shift_and_tolerance

    start = {"brokers": {"1": {"offset_ms": -12.0, "bound_ms": 1.5}, "2": {"offset_ms": -10.0, "bound_ms": 2.0},
                         "3": {"offset_ms": 30.0, "bound_ms": 1.0}}}
    end = {"brokers": {"1": {"offset_ms": -8.0, "bound_ms": 1.0}}, "not_measured": [2]}
    shift, tolerance = shift_and_tolerance([start, end])
    assert shift == -8.0 and tolerance == 39.0  # broker 3, 38 ms from the shift, within 1
    assert shift_and_tolerance([{"error": "timed out"}]) is None


# -- liveness (verifier/liveness.py): what the run did after the final heal ----------------------

def _stalled(client: str = "streams", holds: list[int] | None = None, view: dict | None = None) -> RunBuilder:
    """Inputs 0-3 processed; inputs 4 and 5, committed by the seeder after them, never: the
    drain's bound ran out with the group's offset at 4. w0.1 (``client``) is the one instance;
    it says it holds ``holds`` at the end; ``view``: the group coordinator's, at the drain's end."""
    b = RunBuilder()
    b.inputs += [(0, 4), (0, 5)]
    start = ("worker-start", "ok", {"slot": "w0", "incarnation": 1, "client": client}, "harness", 0, None)
    b.ops = [start, *b.ops, ("assign", "ok", {"partitions": holds or []})]
    if client == "streams":
        b.ops.append(("streams-state", "ok", {"from": "REBALANCING", "to": "RUNNING"}))
    b.final_extra = {"drained": False,
                     "progress": {"sample_s": 2.0, "drain": {"started": 150.0, "ended": 270.0, "timeout_s": 120.0,
                                                             "drained": False},
                                  "samples": [[100.0, {}], [110.0, {"0": 4}], [200.0, {"0": 4}], [270.0, {"0": 4}]]},
                     "group": {"protocol": "streams", "views": {"drain_end": view} if view else {}}}
    return b


@spark_long
def test_an_assignment_the_coordinator_holds_and_its_instance_never_runs_is_named(tmp_path):
    """F10's shape: the instance is RUNNING with no task while the group coordinator, STABLE,
    assigns it the input partition; its inputs are never processed. Two liveness anomalies,
    with the group's view, the member's own and the partition's progress; safety holds."""
    view = {"at": 270.0, "state": "Stable",
            "members": [{"member_id": "m-0", "client_id": "kchaos-w0-StreamThread-1-consumer", "partitions": [0]}]}
    verdict, kinds, results = _anomalies(_stalled(view=view).write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["stalled-pipeline", "unprocessed-assignment"])
    assert (results["safety"], results["liveness"]) == ("valid", "invalid")
    stalled = results["anomalies"]["stalled-pipeline"][0]
    assert stalled["explanation"] == ("2 committed inputs of in/0 (offsets 4 to 5) were never processed: the group's "
                                      "committed offset there stayed at 4 from 160 s before the drain's end, through "
                                      "the drain's 120 s after the final heal")
    assert [p["committed_offset"] for p in stalled["progress"]] == [None, 4, 4, 4]
    case = results["anomalies"]["unprocessed-assignment"][0]
    assert case["explanation"] == ("in/0: the group coordinator assigns it to kchaos-w0-StreamThread-1-consumer (Stable "
                                   "group), but that instance holds [] and is RUNNING: nobody processes it")
    assert case["instances"][0]["process"] == "w0.1" and case["group_view"]["state"] == "Stable"
    assert "drain timed out" not in " ".join(results["errors"])


@one_engine
def test_a_partition_no_running_instance_holds_is_named_without_the_coordinators_view(tmp_path):
    """A run recorded before the group's view was kept (or whose describe failed): the members'
    own account alone, and the note says so."""
    verdict, kinds, results = _anomalies(_stalled().write(tmp_path / "r"))
    assert kinds == ["stalled-pipeline", "unprocessed-assignment"]
    case = results["anomalies"]["unprocessed-assignment"][0]
    assert case["explanation"] == ("in/0: no running instance holds it at the drain's end (w0.1 holds [] (RUNNING)), so "
                                   "nobody processes it")
    assert "judged on the members' own account" in results["checks"]["unprocessed-assignment"]["note"]


@one_engine
def test_a_partition_held_by_a_stuck_owner_is_a_stalled_pipeline_only(tmp_path):
    """F8's shape: the owner holds the partition by both accounts but cannot end a transaction:
    the pipeline stalled, no assignment is wrong."""
    view = {"at": 270.0, "state": "Stable",
            "members": [{"member_id": "m-0", "client_id": "kchaos-w0-consumer", "partitions": [0]}]}
    verdict, kinds, results = _anomalies(_stalled("confluent", holds=[0], view=view).write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["stalled-pipeline"])
    assert results["checks"]["unprocessed-assignment"]["verdict"] == "valid"
    assert results["anomalies"]["stalled-pipeline"][0]["held_by"][0]["process"] == "w0.1"
    assert "blocked_in" not in results["anomalies"]["stalled-pipeline"][0]["held_by"][0]


@one_engine
def test_an_owner_blocked_in_a_call_that_never_returned_is_named_with_it(tmp_path):
    """F16's shape: kafka-python's send_offsets_to_transaction waits without a bound for a request
    its sender dropped; the owner holds the partition and its last operation never completed."""
    b = _stalled("kafka-python", holds=[0])
    b.ops.append(("send_offsets", None, {"txn_seq": 2, "offsets": {"0": 6}}))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (results["liveness"], "stalled-pipeline" in kinds) == ("invalid", True), results["checks"]
    [held] = results["anomalies"]["stalled-pipeline"][0]["held_by"]
    assert held["blocked_in"]["f"] == "send_offsets" and held["blocked_in"]["txn_seq"] == 2
    assert "w0.1 held it, blocked in a client call that never returned (w0.1 in send_offsets for" in \
        results["anomalies"]["stalled-pipeline"][0]["explanation"]


@one_engine
@pytest.mark.parametrize("last_sample, wording", [
    (265.0, "(last seen moving, to 4, 5 s before the drain's end): too slow to catch up, not stuck"),
    # the final sample is read after the drain's end: a move it first sees is said to be after it
    (286.0, "(last seen moving, to 4, 16 s after the drain's end, at the sample that first saw it)"),
])
def test_a_partition_still_moving_when_the_drain_ran_out_is_slow_not_stuck(tmp_path, last_sample, wording):
    """KafkaJS with its own retry backoff (2026-11-29): the drain's bound ran out while the group's
    offset was still moving. Still a stall (the bound is the claim), worded as slow, not stuck."""
    b = _stalled("confluent", holds=[0])
    b.final_extra["progress"]["samples"] = [[100.0, {}], [110.0, {"0": 2}], [last_sample, {"0": 4}]]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    case = results["anomalies"]["stalled-pipeline"][0]
    assert case["still_moving"] is True
    assert f"the group's committed offset there was still moving {wording}" in case["explanation"]


def _aborted_at_the_end(b: RunBuilder, then: list[tuple]) -> RunBuilder:
    """The owner reads inputs 4 and 5, aborts their transaction and resets the offset it would
    commit as sarama's example does (``rewinds_claim`` false); ``then``: what it does after."""
    b.ops += [("poll", "ok", {"count": 2, "positions": {"0": [4, 5]}}),
              ("send", "ok", {"txn_seq": 2, "inputs": [[0, 4], [0, 5]], "outputs": 4}),
              ("send_offsets", "ok", {"txn_seq": 2, "offsets": {"0": 6}}),
              ("abort", "ok", {"txn_seq": 2, "reason": "intentional"}),
              ("reset-offset", "ok", {"partition": 0, "offset": 4, "rewinds_claim": False}), *then]
    return b


@one_engine
def test_inputs_an_owner_aborted_and_never_read_again_are_left_behind_by_its_recovery(tmp_path):
    """sarama's default-campaign stall (F13's end of a partition): the last transaction of the
    partition was aborted, and the client's recovery does not move the consumer, which has no
    later input to read: the owner holds the partition and reads nothing of it again. The case
    names the abort and the reset; the same owner reading the inputs again is not left behind."""
    verdict, kinds, results = _anomalies(_aborted_at_the_end(_stalled("sarama", holds=[0]), []).write(tmp_path / "r"))
    assert (results["liveness"], "stalled-pipeline" in kinds) == ("invalid", True), results["checks"]
    case = results["anomalies"]["stalled-pipeline"][0]
    assert case["left_behind"]["process"] == "w0.1" and case["left_behind"]["aborted_txn_seq"] == 2
    assert case["left_behind"]["reset_offset"] == {"offset": 4, "rewinds_claim": False}
    assert ("; w0.1 aborted transaction 2, which held offset 4, 170 s before the drain's end, and read nothing of the "
            "partition after it, with no rebalance, its recovery a reset of the offset to commit to 4 that does not "
            "move the consumer: its own recovery left the inputs behind") in case["explanation"]
    again = _aborted_at_the_end(_stalled("sarama", holds=[0]), [("poll", "ok", {"count": 2, "positions": {"0": [4, 5]}})])
    verdict, kinds, results = _anomalies(again.write(tmp_path / "again"))
    case = results["anomalies"]["stalled-pipeline"][0]
    assert "left_behind" not in case and "left the inputs behind" not in case["explanation"]
    # an abort less than half the drain's bound before its end explains nothing: a slow pipeline's
    # drain can run out just after one (KafkaJS with its default backoff, 2026-11-29)
    late = _aborted_at_the_end(_stalled("sarama", holds=[0]), [])
    late.final_extra["progress"]["drain"].update(started=130.0, ended=140.0)
    verdict, kinds, results = _anomalies(late.write(tmp_path / "late"))
    assert "left_behind" not in results["anomalies"]["stalled-pipeline"][0]


def _with_a_second_worker(then: list[tuple]) -> RunBuilder:
    """A clean run with a second worker, w1.1 (kafka-python), whose operations are ``then`` (a
    call with outcome None never returned), all at about t=100. The drain: 150 s to 270 s, a
    bound of 120 s, drained."""
    b = RunBuilder()
    start = ("worker-start", "ok", {"slot": "w1", "incarnation": 1, "client": "kafka-python"}, "harness", 0, None)
    b.ops = [start, *b.ops, *then]
    b.final_extra = {"progress": {"drain": {"started": 150.0, "ended": 270.0, "timeout_s": 120.0, "drained": True}}}
    return b


@spark_long
def test_a_worker_stuck_in_a_client_call_is_named_though_the_pipeline_drained(tmp_path):
    """F16 where the pipeline drained without the stuck member (kafka-python default seed 2): its
    commit never returned, for longer than the drain's bound, while the other members took its
    partitions. Liveness is invalid, safety holds; a call that returned is no case."""
    hung = ("commit", None, {"txn_seq": 9, "offsets": {"0": 4}}, "w1.1", 0, "tx-w1")
    verdict, kinds, results = _anomalies(_with_a_second_worker([hung]).write(tmp_path / "r"))
    assert (verdict, kinds, results["safety"], results["liveness"]) == ("invalid", ["hung-client-call"], "valid",
                                                                        "invalid"), results["checks"]
    [case] = results["anomalies"]["hung-client-call"]
    assert case["process"] == "w1.1" and case["blocked_in"]["f"] == "commit" and case["blocked_in"]["txn_seq"] == 9
    assert case["explanation"].startswith("w1.1 (kafka-python) invoked commit (transaction 9) and it never returned in "
                                          "the 170 s the process lived after (the drain's bound: 120 s)")
    returned = ("commit", "ok", {"txn_seq": 9, "offsets": {"0": 4}}, "w1.1", 0, "tx-w1")
    verdict, kinds, results = _anomalies(_with_a_second_worker([returned]).write(tmp_path / "ok"))
    assert "hung-client-call" not in kinds and results["checks"]["hung-client-call"]["verdict"] == "valid"
    # a process that ended before the drain (a crash, a fence) is not stuck in the client
    crashed = ("worker-exit", "info", {"slot": "w1", "incarnation": 1, "exit_code": -9, "meaning": "killed"}, "harness", 0,
               None)
    verdict, kinds, results = _anomalies(_with_a_second_worker([hung, crashed]).write(tmp_path / "crashed"))
    assert "hung-client-call" not in kinds


@one_engine
def test_a_drain_that_finished_or_caught_up_by_the_final_reads_is_live(tmp_path):
    b = _stalled()
    b.final_offsets = {"0": 6}  # moved past inputs 4 and 5 by the final reads (unprocessed: offsets-ahead, safety's)
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (kinds, results["safety"], results["liveness"]) == (["offsets-ahead"], "invalid", "valid")
    assert "ran out, but by the final reads" in results["checks"]["stalled-pipeline"]["note"]


@one_engine
def test_a_drain_recorded_as_drained_is_held_to_the_final_reads(tmp_path):
    """The drain's record says every input was processed, while the final reads show inputs 4 and
    5 at or past the group's committed offset (x8's shape): the evidence, not the flag, decides."""
    b = _stalled()
    b.final_extra["drained"] = True
    b.final_extra["progress"]["drain"]["drained"] = True
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds, results["liveness"]) == ("invalid", ["stalled-pipeline", "unprocessed-assignment"],
                                                     "invalid")
    assert results["anomalies"]["stalled-pipeline"][0]["explanation"].endswith(
        "through the drain's 120 s after the final heal, though the drain's record says every input was processed")


@one_engine
@pytest.mark.parametrize("drain, live", [
    ({"started": 150.0, "ended": 270.0, "timeout_s": 120.0, "drained": True}, "valid"),
    ({"started": 150.0, "ended": 450.0, "timeout_s": 120.0, "drained": True}, "unknown"),
    ({"started": 150.0, "ended": 270.0, "timeout_s": 120.0, "drained": False}, "unknown")])
def test_a_drain_its_own_record_has_past_its_bound_is_no_drain_in_time(tmp_path, drain, live):
    """final.json's drained says the drain ended in time and every input is processed by the final
    reads, while the drain's own record has it run 300 s of a 120 s bound, or end not drained: the
    records disagree, so whether the pipeline resumed within its bound is not known (liveness
    unknown, naming both). A drain every record has in time is live."""
    b = RunBuilder()
    b.final_extra = {"drained": True, "progress": {"sample_s": 2.0, "drain": drain}}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (kinds, results["safety"], results["liveness"]) == ([], "valid", live), results["checks"]
    if live == "unknown":
        reason = results["required_not_checked"]["stalled-pipeline"]
        assert reason.startswith("final.json's drained says every input was processed within the drain's bound, but "
                                 "the drain's record ")
        assert ("end 300 s after its start, past its bound of 120 s" in reason) == (drain["ended"] == 450.0)


@one_engine
@pytest.mark.parametrize("samples, live, said", [
    ([[110.0, {"0": 2}], [270.0, {"0": 4}]], "valid", None),
    # the samples have the group past inputs 4 and 5, where its log holds no commit past 4: a stall hidden
    ([[110.0, {"0": 4}], [270.0, {"0": 6}]], "unknown", "partition 0 sampled at offset 6 (at 270.000), where the log "
                                                       "holds no commit past 4"),
    # the log's commit of 4, 170 s before the last sample, which read 2
    ([[110.0, {"0": 2}], [270.0, {"0": 2}]], "unknown", "the log holds a commit of partition 0 at offset 4, stamped "
                                                       "170 s before the last sample (at 270.000), which read offset 2")])
def test_progress_samples_that_contradict_the_groups_log_leave_liveness_unknown(tmp_path, samples, live, said):
    """The drain ran out and the final reads show nothing stalled only because the harness's samples
    of the group's offsets say so: held against the group's own record (__consumer_offsets),
    samples it contradicts decide nothing (liveness unknown, naming both); agreeing ones are live."""
    b = RunBuilder()
    b.final_extra = {"drained": False, "progress": {"sample_s": 2.0, "samples": samples, "drain": {
        "started": 150.0, "ended": 270.0, "timeout_s": 120.0, "drained": False}}}
    if said and "sampled at offset 6" in said:
        b.inputs += [(0, 4), (0, 5)]  # committed by the seeder after transaction 1, never processed
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (results["liveness"], [k for k in kinds if k in LIVENESS_CHECKS]) == (live, []), results["checks"]
    if said:
        reason = results["required_not_checked"]["stalled-pipeline"]
        assert reason.startswith("the harness's samples of the group's offsets (final.json progress.samples) and the "
                                 "group's own log (__consumer_offsets) disagree: ") and said in reason, reason
    else:
        assert "ran out, but by the final reads" in results["checks"]["stalled-pipeline"]["note"]


@one_engine
@pytest.mark.parametrize("watched, verdict", [(None, "unknown"), ("brokers [2] not registered", "invalid")])
def test_leaders_at_the_end_are_never_judged_on_the_heals_watch_of_registration(tmp_path, watched, verdict):
    """The metadata read at the run's end failed (x7's shape): the heal's watch still says which
    brokers registered, but it never read a partition's leader, so leadership is not known: the
    check is not made (liveness unknown; invalid where a broker is missing), never valid."""
    b = RunBuilder()
    b.final_extra = {"brokers_at_end": {"error": "metadata read timed out"},
                     "heal": {"healthy": True, "at_end": watched}}
    _, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert results["liveness"] == verdict, results["checks"]
    if watched is None:  # registration judged, leadership not: not checked
        why = results["required_not_checked"]["broker-not-rejoined"]
        assert "leaders at the run's end were not read (metadata read timed out)" in why
        assert "every partition" not in why
    else:
        assert [c["broker"] for c in results["anomalies"]["broker-not-rejoined"]] == [2]


@spark_long
def test_a_broker_fenced_at_the_end_is_named(tmp_path):
    """F9's shape: every safety check valid, a broker missing from the metadata at the end."""
    b = RunBuilder()
    b.final_extra = {"brokers_at_end": {"at": 300.0, "expected": [1, 2], "registered": [1], "leaderless": [],
                                        "after_heal_s": 40.0}}
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds, results["safety"], results["liveness"]) == ("invalid", ["broker-not-rejoined"], "valid",
                                                                        "invalid")
    assert results["anomalies"]["broker-not-rejoined"][0]["broker"] == 2


@pytest.mark.parametrize("lines, verdict", [
    ([(290.0, 2, "1")], "unknown"),                    # fenced before the read, never unfenced: the sources disagree
    ([(290.0, 2, "1"), (295.0, 2, "-1")], "valid"),   # fenced, then unfenced before the read
    ([(310.0, 2, "1")], "valid"),                      # fenced after the read (the cluster's stop)
    ([(290.0, 2, "1"), (305.0, 2, "-1")], "valid"),   # unfenced while the read was being answered
])
@spark_long
def test_every_broker_rejoined_is_held_against_the_controllers_own_record(tmp_path, lines, verdict):
    """The metadata read at the run's end has brokers 1 and 2 registered; the controller's replay
    of its metadata log (a node's server.log) is the second source: a broker it had fenced at the
    moment of the read makes the check not made, the run's liveness unknown. In both engines."""
    from datetime import datetime

    b = RunBuilder()
    b.final_extra = {"brokers_at_end": {"at": 300.0, "expected": [1, 2], "registered": [1, 2], "leaderless": [],
                                        "after_heal_s": 40.0}}
    run = b.write(tmp_path / "r")
    log = run / "cluster" / "node-1" / "logs" / "server.log"
    log.parent.mkdir(parents=True)

    def stamp(t: float) -> str:
        return datetime.fromtimestamp(t).strftime("[%Y-%m-%dT%H:%M:%S,%f")[:-3] + "]"

    log.write_text("".join(f"{stamp(t)} INFO [QuorumController id=1] Replayed BrokerRegistrationChangeRecord modifying "
                           f"the registration for broker {n}: BrokerRegistrationChangeRecord(brokerId={n}, brokerEpoch=7, "
                           f"fenced={f}, inControlledShutdown=0, logDirs=[])\n" for t, n, f in lines))
    got, kinds, results = _anomalies(run)
    assert (got, kinds) == (verdict, []), results["not_checked"]
    if verdict == "unknown":
        assert "broker 2 fenced (10 s before the read)" in results["not_checked"]["broker-not-rejoined"]
        assert results["liveness"] == "unknown" and results["safety"] == "valid"


@spark_long
def test_a_coordinator_transaction_right_after_a_history_hole_is_not_a_split(tmp_path):
    """w0.1's history stops after transaction 1, though it ran on: transaction 2's outputs are
    committed, and its coordinator transaction began 1 ms after transaction 1 ended (within the
    clocks' tolerance of transaction 1's window). That transaction belongs to the history's hole,
    not to transaction 1: no split is judged there (CI, 2026-11-29: a corruption that cut a real
    history made split-transaction INVALID). The hole makes the verdict unknown."""
    b = RunBuilder()
    b.inputs.append((0, 4))
    b.final_offsets = {"0": 5}
    for topic, slot in (("a", 0), ("b", 1)):
        b.committed[topic].append(_out(0, 4, slot, seq=2))
    # transaction 1 was sent at 0 ms, asked to commit at 40 and returned at 50 (RunBuilder's clock)
    b.coordinator[("w0.1", 1)] = [("Ongoing", TXN_PARTITIONS, 1, None), ("PrepareCommit", TXN_PARTITIONS, 41, None),
                                  ("CompleteCommit", {}, 42, None), ("Ongoing", TXN_PARTITIONS, 51, None),
                                  ("PrepareCommit", TXN_PARTITIONS, 80, None), ("CompleteCommit", {}, 81, None)]
    b.offset_commits = [(0, 4), (0, 5)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "unknown" and kinds == [], (kinds, results["checks"]["split-transaction"])
    assert any("does not hold (w0.1: 2)" in e for e in results["errors"]), results["errors"]
    split = results["checks"]["split-transaction"]
    assert split["verdict"] == "unknown" and "history has a hole" in split["note"], split


@spark_long
def test_a_duplicate_read_again_after_an_assignment_during_its_commit_says_so(tmp_path):
    """w0.1 is assigned partition 0 again while transaction 1's offsets are being committed (a
    client that rebalances beside the application: aiokafka), and its transaction 2 reads input 3
    again: the consumer fetched the committed offset while 1's offset commit was pending. The
    duplicate names it (``reread``), and attribution makes it the client's."""
    b = RunBuilder()
    b.ops.insert(3, ("assign", "ok", {"partitions": [0]}))  # after 1's send_offsets, before its commit
    b.ops += [("send", "ok", {"txn_seq": 2, "inputs": [[0, 3]], "outputs": 2}),
              ("send_offsets", "ok", {"txn_seq": 2, "offsets": {"0": 4}}),
              ("commit", "ok", {"txn_seq": 2, "offsets": {"0": 4}})]
    for topic, slot in (("a", 0), ("b", 1)):
        b.committed[topic].append(_out(0, 3, slot, seq=2))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["duplicate"]), results["checks"]
    case = results["anomalies"]["duplicate"][0]
    assert (case["reread"]["process"], case["reread"]["txn_seq"]) == ("w0.1", 1), case
    from kchaos.verifier.attribution import attribute

    assert all(c["label"] == "candidate" for c in attribute(results)["cases"]["duplicate"])
    # assigned before the transaction began sending its offsets: nothing says it read again
    b.ops.insert(1, b.ops.pop(3))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "s"))
    assert kinds == ["duplicate"] and "reread" not in results["anomalies"]["duplicate"][0]
