"""Share-group ledger on hand-made run directories: decoding of __share_group_state records,
replay into a final state, and each share anomaly injected and named (by both engines)."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest

from kchaos.protocol.share_state import ShareStateBatch, decode_share_state_record, share_partition_state
from kchaos.workloads.share_worker import is_poison, seeded_fraction
from tests.clocks import module_time

from .test_checkers import ENGINE, RunBuilder, _out, _write_topic, engine, one_engine  # noqa: F401  (engine: autouse fixture)

# The share ledger is the driver's, one function for both engines (verifier/share_checks.py): the
# Spark copies of these tests (tests/integration/test_share_checks_spark.py) add only that the
# Spark job's own checks stand aside on a share run and that its results carry the ledger's. So a
# test that varies a ledger rule's inputs is ``one_engine``; every share anomaly is still named by
# the Spark job in one test (share-lost, share-stuck-acquired, share-redelivered-after-accept,
# share-delivery-limit, share-state-regressed, share-ack-not-persisted, and the share duplicate).

TOPIC_ID_BYTES = bytes(range(16))
TOPIC_ID = base64.urlsafe_b64encode(TOPIC_ID_BYTES).decode().rstrip("=")
SHARE_WORKLOAD = {"kind": "share", "share_poison_fraction": 0.0, "share_delivery_count_limit": 5}


def share_key(kind: int, group: str = "g", partition: int = 0) -> bytes:
    return struct.pack(">hh", kind, len(group)) + group.encode() + TOPIC_ID_BYTES + struct.pack(">i", partition)


def share_update(start: int, batches: list[tuple[int, int, int, int]], snapshot: bool = False,
                 leader_epoch: int = 0, state_epoch: int = 1) -> bytes:
    out = struct.pack(">h", 0) + struct.pack(">i", 0)
    if snapshot:
        out += struct.pack(">i", state_epoch)
    out += struct.pack(">iq", leader_epoch, start)
    if snapshot:
        out += struct.pack(">qq", 1, 2)       # create/write timestamps
    out += bytes([len(batches) + 1])
    for first, last, state, count in batches:
        out += struct.pack(">qqbh", first, last, state, count) + b"\x00"
    if snapshot:
        return out + b"\x00"
    return out + b"\x01" + b"\x00" + b"\x04" + struct.pack(">i", 3)  # tag 0: deliveryCompleteCount 3


@one_engine
def test_decode_snapshot_and_update_and_replay():
    snap = decode_share_state_record(share_key(0), share_update(-1, [], snapshot=True))
    assert (snap.kind, snap.group, snap.topic_id, snap.partition, snap.state_epoch) == ("snapshot", "g", TOPIC_ID, 0, 1)
    upd = decode_share_state_record(share_key(1), share_update(0, [(0, 1, 2, 1), (2, 2, 0, 1), (3, 3, 4, 5)]))
    assert upd.kind == "update" and upd.delivery_complete_count == 3
    assert upd.batches[2] == ShareStateBatch(3, 3, 4, 5)
    later = decode_share_state_record(share_key(1), share_update(2, [(2, 2, 2, 2)]))
    state = share_partition_state([snap, upd, later])
    assert state == {"start_offset": 2, "offsets": {2: (2, 2), 3: (4, 5)}}
    assert decode_share_state_record(share_key(1), None).kind == "tombstone"
    assert decode_share_state_record(struct.pack(">h", 5) + b"xx", b"") is None


@one_engine
def test_seeded_decisions_are_stable_and_spread():
    assert seeded_fraction(1, "a") == seeded_fraction(1, "a") != seeded_fraction(2, "a")
    share = sum(is_poison(7, f"in-{i}", 0.1) for i in range(2000)) / 2000
    assert 0.07 < share < 0.13


class ShareRunBuilder(RunBuilder):
    """Inputs 0..3, each acquired once by w0.1, processed in transaction 1, ACCEPTed."""

    def __init__(self, n: int = 4):
        super().__init__(n)
        self.ops = [("init", "ok", {}),
                    ("acquire", "ok", {"records": [[0, o, 1] for o in range(n)]}),
                    ("send", "ok", {"txn_seq": 1, "inputs": [[0, o] for o in range(n)], "outputs": 2 * n}),
                    ("commit", "ok", {"txn_seq": 1}),
                    ("ack", "ok", {"acks": [[0, o, "accept"] for o in range(n)], "txn_seq": 1})]
        self.share_records = [(0, share_update(-1, [], snapshot=True)), (1, share_update(n, []))]
        self.workload_extra = dict(SHARE_WORKLOAD)

    def write_evidence(self, run: Path) -> Path:
        super().write_evidence(run)
        campaign = json.loads((run / "campaign.json").read_text())
        campaign["workload"] = {**campaign["workload"], **self.workload_extra}
        (run / "campaign.json").write_text(json.dumps(campaign))
        final = json.loads((run / "final.json").read_text())
        final.pop("group_offsets")
        final["share"] = {"input_topic_id": TOPIC_ID, "delivery_count_limit": 5, "kip1289": {"mode": "at-least-once"}}
        (run / "final.json").write_text(json.dumps(final))
        (run / "seed").write_text("3\n")
        fraction = self.workload_extra.get("share_poison_fraction", 0.0)
        ids = [f"id-{p}-{o}" for p, o in self.inputs]
        (run / "share_poison.json").write_text(json.dumps(
            {"seed": 3, "fraction": fraction, "poison_ids": [i for i in ids if is_poison(3, i, fraction)]}))
        _write_topic(run, "__share_group_state", "raw",
                     [(0, i, share_key(kind), value) for i, (kind, value) in enumerate(self.share_records)])
        return run


def _check(run: Path) -> dict:
    return ENGINE["check"](run).to_json()


def test_clean_share_run_is_valid_with_share_facts(tmp_path):
    results = _check(ShareRunBuilder().write(tmp_path / "r"))
    assert (results["verdict"], results["anomaly_types"]) == ("valid", []), results["checks"]
    assert {"lost-input", "offsets-ahead", "offsets-behind", "nonmonotonic"} <= set(results["not_checked"])
    assert results["facts"]["share"]["inputs_delivered"] == 4 and results["facts"]["share"]["mode"] == "at-least-once"
    assert results["facts"]["share"]["state_writes"] == 2


def test_share_lost_when_an_accepted_record_has_no_outputs(tmp_path):
    b = ShareRunBuilder()
    b.committed["a"] = [o for o in b.committed["a"] if o["in_offset"] != 2]
    b.committed["b"] = [o for o in b.committed["b"] if o["in_offset"] != 2]
    b.ops[2] = ("send", "ok", {"txn_seq": 1, "inputs": [[0, o] for o in range(4)], "outputs": 6})
    results = _check(b.write(tmp_path / "r"))
    assert results["anomaly_types"] == ["share-lost"], results["checks"]
    assert results["anomalies"]["share-lost"][0]["input"]["offset"] == 2


def test_share_stuck_when_a_record_never_completes(tmp_path):
    b = ShareRunBuilder()
    b.inputs.append((0, 4))  # seeded, never acknowledged, persisted state stops at 4
    results = _check(b.write(tmp_path / "r"))
    assert results["anomaly_types"] == ["share-stuck-acquired"], results["checks"]


def test_redelivery_after_a_committed_accept(tmp_path):
    b = ShareRunBuilder()
    b.ops.append(("acquire", "ok", {"records": [[0, 1, 2]]}))
    results = _check(b.write(tmp_path / "r"))
    assert results["anomaly_types"] == ["share-redelivered-after-accept"], results["checks"]


@one_engine
def test_an_accept_sent_after_the_record_was_delivered_again_is_stale_not_a_case(tmp_path):
    """w0.1's lock on input 1 expired while it committed: w1.1 was given it (delivery 2) and
    ACCEPTed it, and only then did w0.1 send its ACCEPT of delivery 1. Kafka answers that
    acknowledgement without error (the record is below the start offset by then), so its answer
    proves nothing; the note counts it (hunt-share-stale-write seed 8 on 4.4.0)."""
    b = ShareRunBuilder()
    b.ops.insert(4, ("acquire", "ok", {"records": [[0, 1, 2]]}, "w1.1", 0))
    b.ops.insert(5, ("ack", "ok", {"acks": [[0, 1, "accept"]]}, "w1.1", 0))
    results = _check(b.write(tmp_path / "r"))
    check = results["checks"]["share-redelivered-after-accept"]
    assert results["verdict"] == "valid" and check["verdict"] == "valid", results["checks"]
    assert "set aside, as a stale acknowledgement's answer says nothing" in check["note"], check
    assert check["note"].endswith("1 ACCEPTs sent after the record had been delivered again"), check


@one_engine
def test_a_first_delivery_recorded_late_is_not_a_redelivery(tmp_path):
    """A worker stopped between the broker's answer and its bookkeeping records delivery 1 after
    another worker's delivery 2 was accepted: the delivery counts order them, not the clock."""
    b = ShareRunBuilder()
    b.ops[1] = ("acquire", "ok", {"records": [[0, o, 1] for o in range(4) if o != 1] + [[0, 1, 2]]})
    b.ops.append(("acquire", "ok", {"records": [[0, 1, 1]]}, "w1.1", 0))  # recorded late, after the accept
    b.ops.append(("ack", "fail", {"acks": [[0, 1, "accept"]]}, "w1.1", 0))  # its lock had expired
    results = _check(b.write(tmp_path / "r"))
    assert results["verdict"] == "valid", results["checks"]


def test_delivery_count_above_the_limit(tmp_path):
    b = ShareRunBuilder()
    b.ops[1] = ("acquire", "ok", {"records": [[0, o, 1] for o in range(3)] + [[0, 3, 6]]})  # limit 5
    results = _check(b.write(tmp_path / "r"))
    assert results["anomaly_types"] == ["share-delivery-limit"], results["checks"]


def test_duplicate_outputs_allowed_only_with_a_redelivery(tmp_path):
    b = ShareRunBuilder()
    b.committed["a"].append(_out(0, 2, 0, seq=2))
    b.committed["b"].append(_out(0, 2, 1, seq=2))
    b.ops += [("send", "ok", {"txn_seq": 2, "inputs": [[0, 2]], "outputs": 2}), ("commit", "ok", {"txn_seq": 2})]
    results = _check(b.write(tmp_path / "r1"))
    assert results["anomaly_types"] == ["duplicate"], results["checks"]
    # the same outputs, but the history shows why: the first ACCEPT of input 2 failed (its lock
    # had expired), input 2 was delivered again and processed again: allowed at-least-once
    b.ops = b.ops[:4] + [("ack", "ok", {"acks": [[0, o, "accept"] for o in (0, 1, 3)], "txn_seq": 1}),
                         ("ack", "fail", {"acks": [[0, 2, "accept"]], "txn_seq": 1}),
                         ("acquire", "ok", {"records": [[0, 2, 2]]}),
                         ("send", "ok", {"txn_seq": 2, "inputs": [[0, 2]], "outputs": 2}),
                         ("commit", "ok", {"txn_seq": 2}),
                         ("ack", "ok", {"acks": [[0, 2, "accept"]], "txn_seq": 2})]
    results = _check(b.write(tmp_path / "r2"))
    assert results["verdict"] == "valid", results["checks"]
    assert "explained by a redelivery" in results["checks"]["duplicate"]["note"]


@one_engine
def test_poison_records_rejected_are_fine_and_counted(tmp_path):
    b = ShareRunBuilder()
    b.workload_extra["share_poison_fraction"] = 0.5
    poison = [o for o in range(4) if is_poison(3, f"id-0-{o}", 0.5)]
    assert poison and len(poison) < 4
    for topic in ("a", "b"):
        b.committed[topic] = [r for r in b.committed[topic] if r["in_offset"] not in poison]
    b.ops[2] = ("send", "ok", {"txn_seq": 1, "inputs": [[0, o] for o in range(4) if o not in poison],
                               "outputs": 2 * (4 - len(poison))})
    b.ops[4] = ("ack", "ok", {"acks": [[0, o, "reject" if o in poison else "accept"] for o in range(4)], "txn_seq": 1})
    results = _check(b.write(tmp_path / "r"))
    assert results["verdict"] == "valid", results["checks"]
    assert results["facts"]["share"]["poison_inputs"] == len(poison) == results["facts"]["share"]["rejected"]


def test_missing_poison_ground_truth_makes_the_share_checks_unknown(tmp_path):
    """The checker reads which inputs are poison from the run directory; without it, it cannot
    tell a rejected poison input from a lost one, and says so."""
    run = ShareRunBuilder().write(tmp_path / "r")
    (run / "share_poison.json").unlink()
    results = _check(run)
    assert results["verdict"] == "unknown" and "share_poison.json" in results["checks"]["share-lost"]["note"]


ACKED, AVAILABLE = 2, 0


@one_engine
def test_a_write_that_undoes_an_acknowledgement_is_named_even_when_covered_up(tmp_path):
    """Every write is judged, not only the replayed end state: input 1 acknowledged, made
    available again by a later write, then acknowledged once more (the end state is clean)."""
    b = ShareRunBuilder()
    b.share_records = [(0, share_update(-1, [], snapshot=True)), (1, share_update(0, [(0, 3, ACKED, 1)])),
                       (1, share_update(0, [(1, 1, AVAILABLE, 1)])), (1, share_update(4, []))]
    results = _check(b.write(tmp_path / "r"))
    assert results["anomaly_types"] == ["share-state-regressed"], results["checks"]
    case = results["anomalies"]["share-state-regressed"][0]
    assert case["write"]["log_offset"] == 2 and "deliverable again" in case["explanation"]


def test_a_write_from_an_older_leader_or_moving_the_start_back_is_named(tmp_path):
    b = ShareRunBuilder()
    b.share_records = [(0, share_update(-1, [], snapshot=True)), (1, share_update(2, [], leader_epoch=3)),
                       (1, share_update(2, [], leader_epoch=2)), (1, share_update(1, [], leader_epoch=3)),
                       (1, share_update(4, [], leader_epoch=3))]
    results = _check(b.write(tmp_path / "r"))
    assert results["anomaly_types"] == ["share-state-regressed"], results["checks"]
    whys = [c["why"] for c in results["anomalies"]["share-state-regressed"]]
    assert len(whys) == 2 and "epoch 2 after one of epoch 3" in whys[0] and "back from 2 to 1" in whys[1]


@one_engine
def test_a_new_state_epoch_starts_the_judgement_afresh(tmp_path):
    """A snapshot of a new state epoch (the group's offsets reset) may move the start back."""
    b = ShareRunBuilder()
    b.share_records = [(0, share_update(-1, [], snapshot=True)), (1, share_update(4, [], leader_epoch=3)),
                       (0, share_update(0, [(0, 3, ACKED, 1)], snapshot=True, leader_epoch=0, state_epoch=2)),
                       (1, share_update(4, []))]
    results = _check(b.write(tmp_path / "r"))
    assert results["verdict"] == "valid", results["checks"]


def test_an_answered_acknowledgement_the_state_does_not_hold(tmp_path):
    b = ShareRunBuilder()
    b.share_records = [(0, share_update(-1, [], snapshot=True)), (1, share_update(0, [(0, 3, ACKED, 1)])),
                       (1, share_update(0, [(1, 1, ACKED, 1)])), (1, share_update(2, [(3, 3, ACKED, 1)]))]
    results = _check(b.write(tmp_path / "r"))
    assert results["verdict"] == "valid", results["checks"]
    b.share_records[1] = (1, share_update(0, [(0, 0, ACKED, 1), (1, 1, AVAILABLE, 1)]))
    b.share_records[3] = (1, share_update(1, []))  # 2 and 3 never written as acknowledged
    results = _check(b.write(tmp_path / "r2"))
    assert results["anomaly_types"] == ["share-ack-not-persisted"], results["checks"]
    cases = results["anomalies"]["share-ack-not-persisted"]
    assert [c["input"]["offset"] for c in cases] == [2, 3] and "never-delivered" in cases[0]["explanation"]


@one_engine
def test_state_writes_before_any_snapshot_are_not_judged(tmp_path):
    """The coordinator prunes the log below its latest snapshot: an update without its base
    cannot be judged. With nothing else, the check is unknown, not valid."""
    b = ShareRunBuilder()
    b.share_records = [(1, share_update(4, [], leader_epoch=3)), (1, share_update(4, [], leader_epoch=1))]
    results = _check(b.write(tmp_path / "r"))
    assert results["checks"]["share-state-regressed"]["verdict"] == "unknown", results["checks"]
    assert "before any snapshot" in results["checks"]["share-state-regressed"]["note"]
    assert results["verdict"] == "unknown"


@one_engine
def test_the_drain_counts_an_unanswered_acknowledgement_the_state_holds(tmp_path):
    """The drain's two sources: acknowledgements answered ok (the history), and for delivered
    inputs whose acknowledgement was never answered, the replayed persisted state."""
    from kchaos.protocol.share_state import positions_done
    from kchaos.workloads.share import AckTracker

    history = tmp_path / "history"
    history.mkdir()
    lines = [{"f": "acquire", "type": "invoke", "process": "w0.0", "op": 1, "value": {"records": [[0, o, 1] for o in range(4)]}},
             {"f": "ack", "type": "invoke", "process": "w0.0", "op": 2, "value": {"acks": [[0, 0, "accept"], [0, 1, "reject"]]}},
             {"f": "ack", "type": "ok", "process": "w0.0", "op": 2, "value": {}},
             {"f": "ack", "type": "invoke", "process": "w0.0", "op": 3, "value": {"acks": [[0, 2, "accept"], [0, 3, "accept"]]}},
             {"f": "ack", "type": "info", "process": "w0.0", "op": 3, "value": {}}]
    (history / "w0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"f": "ack", "ty')
    acks = AckTracker(history)
    assert acks.update() == 2 and acks.delivered == {(0, o) for o in range(4)}
    unanswered = acks.delivered - acks.done
    snap = decode_share_state_record(share_key(0), share_update(-1, [], snapshot=True))
    upd = decode_share_state_record(share_key(1), share_update(1, [(2, 2, ACKED, 1), (3, 3, AVAILABLE, 2)]))
    states = {0: share_partition_state([snap, upd])}
    assert positions_done(states, unanswered) == {(0, 2)}  # 3 is deliverable again: not done
    assert positions_done({}, unanswered) == set()


@one_engine
def test_a_share_worker_records_what_its_polls_returned_instead_of_records(monkeypatch):
    """Deliveries that stall leave evidence: each distinct poll error once per interval, with
    how many repeats went unrecorded."""
    from kchaos.workloads import share_worker

    events = []

    class History:
        def event(self, f, value, outcome, **fields):
            events.append((f, value, outcome))

    clock = [100.0]
    monkeypatch.setattr(share_worker, "time", module_time(monotonic=lambda: clock[0]))
    worker = share_worker.ShareWorker.__new__(share_worker.ShareWorker)
    worker.history, worker._fields = History(), lambda txid: {}
    said: dict = {}
    worker._record_poll_errors(["SESSION_RESET", "SESSION_RESET", "NOT_LEADER"], said, "t")
    clock[0] += share_worker.POLL_ERROR_EVERY_S
    worker._record_poll_errors(["SESSION_RESET"], said, "t")
    assert events == [("poll-error", {"error": "SESSION_RESET", "repeats_not_recorded": 0}, "info"),
                      ("poll-error", {"error": "NOT_LEADER", "repeats_not_recorded": 0}, "info"),
                      ("poll-error", {"error": "SESSION_RESET", "repeats_not_recorded": 1}, "info")]


@one_engine
def test_an_offset_without_a_record_made_available_again_is_set_aside(tmp_path):
    """Kafka's share partition acquires the offsets of transaction markers too, and a write was
    seen taking one from archived back to available (Kafka 4.4.0, hunt-share's negative control):
    nothing can be delivered from it, so it is noted, not judged. Input 1, a record, is judged."""
    b = ShareRunBuilder()
    b.share_records = [(0, share_update(-1, [], snapshot=True)), (1, share_update(0, [(0, 3, ACKED, 1), (4, 4, 4, 3)])),
                       (1, share_update(0, [(4, 4, AVAILABLE, 1)])), (1, share_update(5, []))]
    results = _check(b.write(tmp_path / "r"))
    assert results["verdict"] == "valid", results["checks"]
    assert "input partition 0: 4" in results["checks"]["share-state-regressed"]["note"]
    b.share_records[2] = (1, share_update(0, [(4, 4, AVAILABLE, 1), (1, 1, AVAILABLE, 2)]))
    results = _check(b.write(tmp_path / "r2"))
    assert results["anomaly_types"] == ["share-state-regressed"], results["checks"]
    assert "offsets 1)" in results["anomalies"]["share-state-regressed"][0]["explanation"]
