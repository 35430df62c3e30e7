"""An offset moved back by a member the group had moved on from (offsets_backwards_cases with the
history, HistoryIndex.partition_moved) and its label. Hand-made histories on the shape of
aiokafka's zombie commit (docs/findings.md F14): w1 is assigned p1 and begins transaction 7
(p1@35-39); it is paused, the group gives p1 to w2, which commits p1 up to 50; w1 resumes and
commits its transaction, whose TxnOffsetCommit carries no generation: the offset goes back to 40."""

from __future__ import annotations

from typing import Any

from kchaos.verifier.attribution import label_case
from kchaos.verifier.model import HistoryIndex
from kchaos.verifier.offsets_log import offsets_backwards_cases
from kchaos.workloads.history import pair_operations

PER_TXID = {"run-w1": {"0": 4}, "run-w2": {"0": 3}}


def _history(w2_assigned: bool = True, w1_reassigned: bool = False) -> HistoryIndex:
    lines: list[dict[str, Any]] = []
    ops = {"w1.1": 0, "w2.1": 0}
    clock = 0.0

    def add(process: str, f: str, value: dict[str, Any]) -> None:
        nonlocal clock
        ops[process] += 1
        clock += 1.0
        slot = process.split(".")[0]
        base = {"process": process, "op": ops[process], "f": f, "txid": f"run-{slot}", "pid": 1000, "epoch": 0}
        lines.append({**base, "time": clock, "type": "invoke", "value": value})
        lines.append({**base, "time": clock + 0.1, "type": "ok", "value": value})

    add("w1.1", "assign", {"partitions": [1]})
    add("w1.1", "send", {"txn_seq": 7, "inputs": [[1, o] for o in range(35, 40)], "outputs": 10})
    add("w1.1", "send_offsets", {"txn_seq": 7, "offsets": {"1": 40}})
    if w2_assigned:
        add("w2.1", "assign", {"partitions": [1]})
    add("w2.1", "send", {"txn_seq": 3, "inputs": [[1, o] for o in range(35, 50)], "outputs": 30})
    add("w2.1", "send_offsets", {"txn_seq": 3, "offsets": {"1": 50}})
    add("w2.1", "commit", {"txn_seq": 3, "offsets": {"1": 50}})
    if w1_reassigned:
        add("w1.1", "assign", {"partitions": [1]})
    add("w1.1", "commit", {"txn_seq": 7, "offsets": {"1": 40}})
    return HistoryIndex(pair_operations(lines))


OFFSET_LOG = [{"log_partition": 2, "log_offset": 10, "partition": 1, "offset": 50, "commit_timestamp": 1},
              {"log_partition": 2, "log_offset": 11, "partition": 1, "offset": 40, "commit_timestamp": 2}]


def test_the_case_names_the_transaction_that_committed_the_lower_offset_and_whom_the_group_had_moved_to():
    [case] = offsets_backwards_cases(OFFSET_LOG, "in", _history())
    [writer] = case["written_by"]
    assert (writer["process"], writer["txn_seq"], writer["txid"]) == ("w1.1", 7, "run-w1")
    assert writer["partition_moved_to"]["process"] == "w2.1"
    # without the history the case is the log's alone, as before
    [bare] = offsets_backwards_cases(OFFSET_LOG, "in")
    assert "written_by" not in bare and bare["explanation"] == case["explanation"]


def test_a_member_that_still_held_the_partition_is_no_zombie():
    # nobody else was assigned p1, or w1 was assigned it again before its commit
    for history in (_history(w2_assigned=False), _history(w1_reassigned=True)):
        [case] = offsets_backwards_cases(OFFSET_LOG, "in", history)
        assert [w["process"] for w in case["written_by"]] == ["w1.1"]
        assert "partition_moved_to" not in case["written_by"][0]
    assert _history().partition_moved("w2.1", 1, 99.0) is None  # never moved from w2
    assert _history().partition_moved("w1.1", 0, 99.0) is None  # w1 never held p0


def test_a_zombie_commit_is_a_candidate_against_the_client():
    [case] = offsets_backwards_cases(OFFSET_LOG, "in", _history())
    got = label_case("offsets-backwards", case, PER_TXID, {"run-w1"})
    assert got["label"] == "candidate" and "had given the partition to w2.1" in got["why"]
    [plain] = offsets_backwards_cases(OFFSET_LOG, "in", _history(w2_assigned=False))
    got = label_case("offsets-backwards", plain, PER_TXID, set())
    assert got["label"] == "candidate" and "does not make offsets-backwards" in got["why"]
    # without a writer the case names no id: unattributed, as before
    [bare] = offsets_backwards_cases(OFFSET_LOG, "in")
    assert label_case("offsets-backwards", bare, PER_TXID, set())["label"] == "unattributed"
