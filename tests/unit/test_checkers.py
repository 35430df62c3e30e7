"""The checkers on hand-made run directories: clean data passes, and each injected anomaly is
named (and only that one), with its evidence. Here the single-process Python reader; the same
tests run on the Spark job in tests/integration/test_checkers_spark.py (Spark is a JVM, and unit
tests start none)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kchaos.verifier.pychecker as pychecker
import kchaos.verifier.spark_job as spark_job

ENGINE = {}


def use_spark_engine(spark) -> None:
    """Point ENGINE at the Spark job (tests/integration/test_checkers_spark.py)."""
    ENGINE.update(name="spark", module=spark_job, check=lambda run: spark_job.check_run_spark(spark, run))


@pytest.fixture(autouse=True)
def engine():
    """The engine the tests of this module check with (ENGINE); the Python reader here."""
    ENGINE.update(name="python", module=pychecker, check=pychecker.check_run)
    yield "python"
    ENGINE.clear()

WORKLOAD = {"input_topic": "in", "output_topics": ["a", "b"], "outputs_per_input": 2, "delivery": "exactly-once",
            "group_id": "g"}
STATUS = {"Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3, "CompleteCommit": 4, "CompleteAbort": 5,
          "Dead": 6, "PrepareEpochFence": 7}


def _txn_record(txid: str, status: str, epoch: int = 0, pid: int = 7) -> tuple[bytes, bytes]:
    """A TransactionLogValue v0 record, encoded by hand."""
    import struct

    def s16(text):
        return struct.pack(">h", len(text)) + text.encode()

    key = struct.pack(">h", 0) + s16(txid)
    value = struct.pack(">hqhib", 0, pid, epoch, 10000, STATUS[status]) + struct.pack(">i", 0) + struct.pack(">qq", 1, 1)
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


class RunBuilder:
    """Inputs 0..n-1 on partition 0; transaction 1 of w0.1 turns all of them into 2 outputs each."""

    def __init__(self, n: int = 4):
        self.inputs = [(0, o) for o in range(n)]
        self.raw_only_inputs: list[tuple[int, int]] = []
        self.committed = {"a": [_out(0, o, 0) for o in range(n)], "b": [_out(0, o, 1) for o in range(n)]}
        self.raw_extra = {"a": [], "b": []}
        self.final_offsets = {"0": n}
        self.liveness = {"stable": True, "waited_s": 0.1, "pinned": {}}
        self.txn_states = [("tx-w0", "Empty", 0), ("tx-w0", "Ongoing", 0), ("tx-w0", "PrepareCommit", 0),
                           ("tx-w0", "CompleteCommit", 0)]
        self.workload: dict = {}  # over WORKLOAD, read when written
        self.ops = [
            ("init", "ok", {}),
            ("send", "ok", {"txn_seq": 1, "inputs": [[0, o] for o in range(n)], "outputs": 2 * n}),
            ("send_offsets", "ok", {"txn_seq": 1, "offsets": {"0": n}}),
            ("commit", "ok", {"txn_seq": 1}),
        ]

    def write(self, run: Path) -> Path:
        run.mkdir(parents=True, exist_ok=True)
        (run / "campaign.json").write_text(json.dumps({"workload": {**WORKLOAD, **self.workload}}))
        (run / "final.json").write_text(json.dumps({"group_offsets": self.final_offsets, "drained": True,
                                                    "liveness": self.liveness}))
        _write_topic(run, "__transaction_state", "raw",
                     [(0, i, *_txn_record(t, st, ep)) for i, (t, st, ep) in enumerate(self.txn_states)])
        inputs = [(p, o, f"id-{p}-{o}".encode(), b"{}") for p, o in self.inputs]
        _write_topic(run, "in", "committed", inputs)
        _write_topic(run, "in", "raw", inputs + [(p, o, f"id-{p}-{o}".encode(), b"{}") for p, o in self.raw_only_inputs])
        for topic in ("a", "b"):
            rows = [(0, i, r["in_id"].encode(), json.dumps(r).encode()) for i, r in enumerate(self.committed[topic])]
            extra = [(1, i, r["in_id"].encode(), json.dumps(r).encode()) for i, r in enumerate(self.raw_extra[topic])]
            _write_topic(run, topic, "committed", rows)
            _write_topic(run, topic, "raw", rows + extra)
        lines, t = [], 100.0
        for op_id, op in enumerate(self.ops):
            f, outcome, value = op[:3]
            process, epoch = (op[3], op[4]) if len(op) > 3 else ("w0.1", 0)
            txid = op[5] if len(op) > 5 else "tx-w0"
            for kind in ("invoke", outcome):
                t += 0.01
                lines.append({"time": t, "process": process, "op": op_id, "type": kind, "f": f, "value": value,
                              "txid": txid, "pid": 7, "epoch": epoch})
        (run / "history.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
        return run


def _anomalies(run: Path) -> tuple[str, list[str], dict]:
    results = ENGINE["check"](run).to_json()
    return results["verdict"], results["anomaly_types"], results


def test_clean_run_is_valid_with_facts(tmp_path):
    verdict, kinds, results = _anomalies(RunBuilder().write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", [])
    assert results["facts"]["inputs_committed"] == 4 and results["facts"]["outputs_committed"] == 8
    assert results["facts"]["transactions"] == {"committed": 1}
    assert results["not_checked"] == {} and results["checks"]["nonmonotonic"]["verdict"] == "valid"
    assert results["facts"]["transaction_log_records"] == 4
    # the protocol each committed transaction ran under, per transactional.id (v0 records: classic)
    assert results["facts"]["commits_by_client_tv_per_txid"] == {"tx-w0": {"0": 1}}


def test_duplicate(tmp_path):
    b = RunBuilder()
    b.committed["a"].append(_out(0, 2, 0))
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["duplicate"])
    case = results["anomalies"]["duplicate"][0]
    assert len(case["records"]) == 2 and case["transactions"][0]["txid"] == "tx-w0"
    assert case["transactions"][0]["producer_id"] == 7


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


def test_offsets_behind(tmp_path):
    b = RunBuilder()
    b.final_offsets = {"0": 3}  # input 3 has committed outputs but the group would process it again
    verdict, kinds, _ = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["offsets-behind"])


def test_vacuous_run_is_unknown(tmp_path):
    b = RunBuilder()
    b.committed = {"a": [], "b": []}
    b.final_offsets = {}
    b.ops = []
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert verdict == "unknown" and kinds == []
    assert "vacuous" in results["checks"]["no-progress"]["note"]


def test_missing_dumps_make_the_verdict_unknown_not_valid(tmp_path):
    run = RunBuilder().write(tmp_path / "r")
    (run / "topics" / "a.committed.parquet").unlink()
    verdict, _, results = _anomalies(run)
    assert verdict == "unknown" and "final reads did not complete" in results["errors"][0]


def test_a_crashing_check_yields_unknown(tmp_path, monkeypatch):
    run = RunBuilder().write(tmp_path / "r")
    monkeypatch.setattr(ENGINE["module"], "check_duplicates", lambda data: 1 / 0)
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
    ([("tx-w0", "PrepareCommit", 0), ("tx-w0", "CompleteAbort", 0)], "PrepareCommit -> CompleteAbort"),
    ([("tx-w0", "Ongoing", 3), ("tx-w0", "PrepareCommit", 2)], "epoch went backwards (3 -> 2)"),
    # states with no or one successor: the Spark engine once rendered Dead's empty set as NULL
    ([("tx-w0", "CompleteCommit", 0), ("tx-w0", "Dead", 0), ("tx-w0", "Ongoing", 0)], "Dead -> Ongoing"),
    ([("tx-w0", "Ongoing", 0), ("tx-w0", "PrepareEpochFence", 0), ("tx-w0", "CompleteCommit", 0)],
     "PrepareEpochFence -> CompleteCommit"),
])
def test_invalid_transaction_transitions(tmp_path, states, needle):
    b = RunBuilder()
    b.txn_states = states
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["invalid-txn-transition"])
    assert needle in results["anomalies"]["invalid-txn-transition"][0]["explanation"]


def test_retried_appends_and_tv2_aborts_are_allowed(tmp_path):
    b = RunBuilder()
    b.txn_states = [("tx-w0", "Empty", 0), ("tx-w0", "Ongoing", 0), ("tx-w0", "Ongoing", 0),
                    ("tx-w0", "PrepareCommit", 0), ("tx-w0", "PrepareCommit", 0), ("tx-w0", "CompleteCommit", 0),
                    ("tx-w0", "PrepareAbort", 1), ("tx-w0", "CompleteAbort", 1)]
    assert _anomalies(b.write(tmp_path / "r"))[0] == "valid"


def test_hanging_transaction_when_the_lso_stays_pinned(tmp_path):
    b = RunBuilder()
    b.liveness = {"stable": False, "waited_s": 50.0, "pinned": {"a-0": {"lso": 3, "high": 9}}}
    b.txn_states = [("tx-w0", "Empty", 0), ("tx-w0", "Ongoing", 0)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("invalid", ["hanging-transaction"])
    case = results["anomalies"]["hanging-transaction"][0]
    assert case["lso"] == 3 and case["open_transactions"][0]["transactional_id"] == "tx-w0"


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


def test_a_re_appearance_is_a_duplicate_not_an_order_violation(tmp_path):
    b = RunBuilder()
    b.committed["a"].append(_out(0, 0, 0))  # input 0 again, after input 3
    assert _anomalies(b.write(tmp_path / "r"))[1] == ["duplicate"]


def test_order_is_not_checked_under_at_least_once(tmp_path, monkeypatch):
    b = RunBuilder()
    b.committed["a"][1], b.committed["a"][2] = b.committed["a"][2], b.committed["a"][1]
    monkeypatch.setitem(WORKLOAD, "delivery", "at-least-once")
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert kinds == [] and "not promised" in results["not_checked"]["nonmonotonic"]


def test_a_replacement_after_the_old_commit_is_not_a_zombie_write(tmp_path):
    b = RunBuilder()
    b.ops += [("init", "ok", {}, "w0.2", 1)]  # the successor arrives after w0.1's last commit
    assert _anomalies(b.write(tmp_path / "r"))[0] == "valid"


def test_an_app_without_client_history_shows_progress_in_the_coordinators_log(tmp_path):
    """An external pipeline records no client operations: its committed transactions are counted
    in the decoded __transaction_state (a CompleteCommit written twice is one transaction; the
    seeder's are not the pipeline's), so a correct one can be valid."""
    b = RunBuilder()
    b.ops = [("seed", "ok", {}, "seeder", 0, "seeder-tx")]
    b.txn_states += [("tx-w0", "CompleteCommit", 0), ("seeder-tx", "Empty", 0), ("seeder-tx", "Ongoing", 0),
                     ("seeder-tx", "PrepareCommit", 0), ("seeder-tx", "CompleteCommit", 0)]
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    assert results["checks"]["no-progress"]["note"] == ("1 committed transactions (counted in the coordinator's log: "
                                                         "the pipeline left no client history)")
    assert "external pipeline" in results["checks"]["zombie-write"]["note"]


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
        self.workload.update(lineage="id", lineage_id=locator)
        self.ops = []
        self.txn_states += [("tx-w0", "Ongoing", 0), ("tx-w0", "PrepareCommit", 0), ("tx-w0", "CompleteCommit", 0)]
        self.outputs = {t: [f"id-0-{o}" for o in range(n)] for t in ("a", "b")}
        self.raw_ids: list[tuple[int, int, str]] = []  # inputs only in the raw view (aborted copies)
        self.input_ids: dict[tuple[int, int], str] = {}  # committed inputs whose id is not id-p-o

    def write(self, run: Path) -> Path:
        super().write(run)
        form = IDENTITY_FORMS[self.workload["lineage_id"]]
        inputs = [(p, o, self.input_ids.get((p, o), f"id-{p}-{o}").encode(), b"{}") for p, o in self.inputs]
        _write_topic(run, "in", "committed", inputs)
        _write_topic(run, "in", "raw", inputs + [(p, o, i.encode(), b"{}") for p, o, i in self.raw_ids])
        for topic, ids in self.outputs.items():
            rows = [(0, n, *form(i)) for n, i in enumerate(ids)]
            _write_topic(run, topic, "committed", rows)
            _write_topic(run, topic, "raw", rows)
        return run


@pytest.mark.parametrize("locator", sorted(IDENTITY_FORMS))
def test_identity_lineage_traces_outputs_by_their_input_id(tmp_path, locator):
    verdict, kinds, results = _anomalies(IdentityRun(locator=locator).write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    assert results["facts"]["outputs_committed"] == 8 and results["facts"]["outputs_without_lineage"]["committed"] == 0
    # what the full contract would add is said, not silently passed
    assert "torn-transaction (per transaction)" in results["not_checked"]
    assert "external pipeline" in results["checks"]["zombie-write"]["note"]


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


def test_identity_lineage_names_an_output_of_an_aborted_input_copy(tmp_path):
    b = IdentityRun()
    b.raw_ids = [(0, 9, "id-0-1~aborted1")]  # the seeder marks the copies it aborts on purpose
    b.outputs["a"].append("id-0-1~aborted1")
    b.outputs["b"].append("id-0-1~aborted1")
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert kinds == ["aborted-read"], kinds
    assert results["anomalies"]["aborted-read"][0]["input"] == {"partition": 0, "offset": 9, "id": "id-0-1~aborted1"}


def test_identity_lineage_sets_an_id_committed_twice_aside(tmp_path):
    """A seeder batch whose commit outcome was unknown and that committed after all is written
    again: its ids are then committed twice. Which output came from which copy cannot be told,
    so both inputs and their outputs are set aside and counted, never guessed."""
    b = IdentityRun()
    b.inputs.append((0, 4))
    b.input_ids[(0, 4)] = "id-0-1"
    b.final_offsets = {"0": 5}
    b.outputs["a"].append("id-0-1")
    verdict, kinds, results = _anomalies(b.write(tmp_path / "r"))
    assert (verdict, kinds) == ("valid", []), results["checks"]
    assert results["facts"]["inputs_with_ambiguous_id"] == 2
    assert results["facts"]["outputs_without_lineage"]["committed"] == 3
