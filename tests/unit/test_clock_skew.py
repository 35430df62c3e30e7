"""The coordinator's log under clock faults (verifier/coordinator_log.py ``place``): what a moved
clock stamped on a ``__transaction_state`` partition its fault did not name, matched by producer
epoch under TV2 and judged; what the epoch does not place stays a case. Hand-made histories and
coordinator transactions, on the shape of hunt-clock seed 1 (Kafka 4.4.0, Java, TV2): a clock
bump of -60 s on the group coordinator's node, which led __transaction_state-2 when the fault
resolved it and __transaction_state-1 too while it lasted."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kchaos.verifier.coordinator_log import CoordinatorTxn, clock_moves, coordinator_decisions, judge
from kchaos.verifier.driver_checks import clock_skew_windows
from kchaos.verifier.model import HistoryIndex
from kchaos.workloads.history import pair_operations

PID = 2000
OFFSET_S = -60.0


def _history(heal_partitions: list[int] | None = None, txn_v2: bool | None = True) -> HistoryIndex:
    """w0.1: transaction 1 at 10 s, before any fault; transaction 2 at 104 s, committed while a
    clock bump of -60 s (100 s to 108 s) held the clock of the node leading its id's partition."""
    lines: list[dict[str, Any]] = []
    op = 0

    def add(process: str, f: str, start: float, end: float, value: dict[str, Any], **fields: Any) -> None:
        nonlocal op
        op += 1
        base = {"process": process, "op": op, "f": f, **fields}
        lines.append({**base, "time": start, "type": "invoke", "value": value})
        lines.append({**base, "time": end, "type": "ok", "value": value})

    for seq, at, epoch in ((1, 10.0, 4), (2, 104.0, 5)):
        fields = {"txid": "tx-w0", "pid": PID, "epoch": epoch, "client": "java", "txn_v2": txn_v2}
        add("w0.1", "send", at, at + 0.01, {"txn_seq": seq, "inputs": [[0, seq]], "outputs": 2}, **fields)
        add("w0.1", "send_offsets", at + 0.02, at + 0.03, {"txn_seq": seq}, **fields)
        add("w0.1", "commit", at + 0.04, at + 0.05, {"txn_seq": seq}, **fields)
    heal: dict[str, Any] = {"nodes": [3], "offset_range_s": [OFFSET_S, OFFSET_S]}
    if heal_partitions is not None:
        heal["transaction_log_partitions"] = heal_partitions
    add("harness", "fault:clock-bump", 100.0, 108.0, {
        "index": 5, "kind": "clock-bump",
        "resolved": {"nodes": [3], "detail": {"first_offset_s": OFFSET_S, "transaction_log_partitions": [2]}},
        "heal": heal})
    return HistoryIndex(pair_operations(sorted(lines, key=lambda line: line["time"])))


def _ct(epoch: int, start_ms: float, end: str = "commit") -> CoordinatorTxn:
    """A coordinator transaction of tx-w0 on __transaction_state-1 (TV2: prepared one epoch up)."""
    return CoordinatorTxn("tx-w0", PID, epoch, int(start_ms), 10_000, 2, partitions=["a-0", "b-0", "offsets-2"],
                          prepared=end, prepare_ms=int(start_ms) + 40, prepare_epoch=epoch + 1, completed=end,
                          complete_ms=int(start_ms) + 43, log_partition=1, first_offset=epoch * 4,
                          records=[[epoch * 4, "Ongoing", epoch, int(start_ms)]])


#: transaction 1 on the true clock; transaction 2 stamped 60 s behind it, by the moved clock
ON_TIME = _ct(4, 10_005)
MOVED = _ct(5, 104_005 + OFFSET_S * 1000)


def _judge(coordinator: list[CoordinatorTxn], history: HistoryIndex) -> tuple[list[dict], dict]:
    return judge(coordinator, history, skewed=clock_skew_windows(history))


@pytest.mark.parametrize("heal_partitions", [None, [2]], ids=["run before the heal's record", "led 1 between"])
def test_a_transaction_a_moved_clock_stamped_off_the_faults_partitions_is_matched_by_epoch_and_judged(
        heal_partitions):
    """hunt-clock seed 1's false positive: the client saw transaction 2 commit, and the log holds
    it (same id, producer id and epoch, CompleteCommit) stamped 60 s behind, on a partition the
    fault's detail did not list. Before, "the coordinator's log holds no transaction of it"; now
    matched by its epoch, judged (no case) and not set aside. Also when the heal says the node led
    only partition 2 again (it led 1 in between): time alone would miss it."""
    history = _history(heal_partitions)
    cases, facts = _judge([ON_TIME, MOVED], history)
    assert cases == [], [c["explanation"] for c in cases]
    assert facts["matched_by_epoch"] == 1 and facts["committed_without_coordinator_record"] == 0
    assert facts["clock_skew_set_aside"].get("client_transactions", 0) == 0
    assert coordinator_decisions([ON_TIME, MOVED], history, skewed=clock_skew_windows(history)) == {
        ("w0.1", 1): ("committed", "commit"), ("w0.1", 2): ("committed", "commit")}


def test_the_windows_cover_the_partitions_led_at_the_heal_and_every_one_where_it_was_not_recorded():
    assert clock_moves(_history([1, 2]))[0].partitions == frozenset({1, 2})
    assert clock_moves(_history([1]))[0].partitions == frozenset({1, 2})
    assert clock_moves(_history(None))[0].partitions is None  # a run before the heal's record: every partition
    assert {w[2] for w in clock_skew_windows(_history(None))} == {None}


@pytest.mark.parametrize("heal_partitions", [None, [2]], ids=["run before the heal's record", "led 1 between"])
@pytest.mark.parametrize("coordinator, needle", [
    # no coordinator transaction at the client's epoch: the one at 6 is not its own
    ([ON_TIME, _ct(6, 104_005 + OFFSET_S * 1000)], "the coordinator's log holds no transaction of it"),
    ([ON_TIME], "the coordinator's log holds no transaction of it"),
    # its own epoch, moved by the fault's offset, aborted: the client saw it commit
    ([ON_TIME, _ct(5, 104_005 + OFFSET_S * 1000, "abort")], "aborted it"),
], ids=["another epoch", "none", "aborted"])
def test_a_real_mismatch_under_the_same_moved_clock_is_still_a_case(heal_partitions, coordinator, needle):
    cases, facts = _judge(coordinator, _history(heal_partitions))
    assert [c["client_transaction"]["txn_seq"] for c in cases] == [2], [c["explanation"] for c in cases]
    assert needle in cases[0]["explanation"]


def test_the_epoch_places_nothing_without_the_protocols_guarantee_or_the_faults_offset():
    """Not matched by epoch: a client that did not report TV2 itself (its epoch may be stale), a
    second coordinator transaction at the same epoch, a stamp no offset of the fault explains."""
    cases, facts = _judge([ON_TIME, MOVED], _history([2], txn_v2=None))
    assert facts["matched_by_epoch"] == 0 and len(cases) == 1
    twice = _ct(5, 104_005 + OFFSET_S * 1000 + 200)
    cases, facts = _judge([ON_TIME, MOVED, twice], _history([2]))
    assert facts["matched_by_epoch"] == 0 and len(cases) == 1
    cases, facts = _judge([ON_TIME, _ct(5, 104_005 - 30_000)], _history([2]))  # 30 s off: not this fault's -60 s
    assert facts["matched_by_epoch"] == 0 and len(cases) == 1
    # a classic (TV1) coordinator record: the epoch is not bumped per transaction
    tv1 = replace(MOVED, client_tv=0)
    cases, facts = _judge([ON_TIME, tv1], _history([2]))
    assert facts["matched_by_epoch"] == 0 and len(cases) == 1


def test_without_a_clock_fault_nothing_is_matched_by_epoch():
    history = _history([2])
    history.faults = []
    cases, facts = judge([ON_TIME, MOVED], history, skewed=[])
    assert facts["matched_by_epoch"] == 0 and len(cases) == 1
