"""A lost input its own consumer went on past (HistoryIndex.passed_over) and its label: a
candidate against the client, not the classic protocol's. Hand-made histories on the shape of
sarama's exactly-once example (docs/findings.md F13): transaction 1 reads p0@10-11 and is aborted
on purpose; the example's ResetOffset does not rewind the claim, so transaction 2 reads p0@12-13
and commits past them."""

from __future__ import annotations

from typing import Any

from kchaos.verifier.attribution import label_case
from kchaos.verifier.model import HistoryIndex
from kchaos.workloads.history import pair_operations

PER_TXID = {"run-w0": {"0": 5}}


def _history(*between: tuple[str, dict[str, Any]], second_inputs: tuple[int, ...] = (12, 13),
             second_end: str = "commit") -> HistoryIndex:
    lines: list[dict[str, Any]] = []
    op = 0
    clock = 0.0

    def add(f: str, value: dict[str, Any]) -> None:
        nonlocal op, clock
        op += 1
        clock += 0.01
        base = {"process": "w0.1", "op": op, "f": f, "txid": "run-w0", "pid": 1000, "epoch": 0}
        lines.append({**base, "time": clock, "type": "invoke", "value": value})
        lines.append({**base, "time": clock + 0.001, "type": "ok", "value": value})

    add("send", {"txn_seq": 1, "inputs": [[0, 10], [0, 11]], "outputs": 4})
    add("send_offsets", {"txn_seq": 1, "offsets": {"0": 12}})
    add("abort", {"txn_seq": 1, "reason": "intentional"})
    for f, value in between:
        add(f, value)
    add("send", {"txn_seq": 2, "inputs": [[0, o] for o in second_inputs], "outputs": 4})
    add(second_end, {"txn_seq": 2})
    return HistoryIndex(pair_operations(lines))


def test_the_consumer_went_on_past_an_aborted_input():
    got = _history(("reset-offset", {"partition": 0, "offset": 10, "rewinds_claim": False})).passed_over(0, 10)
    assert got == {"process": "w0.1", "aborted_txn_seq": 1, "next_txn_seq": 2, "next_first_offset": 12}
    # a rewind to the input or before it, that the consumer did not follow, is its skip too
    assert _history(("rewind", {"offsets": {"0": 10}})).passed_over(0, 11) is not None
    assert _history(("rewind", {"offsets": {"0": -1001}})).passed_over(0, 11) is not None


def test_what_a_late_endtxn_or_a_rebalance_could_explain_is_not_the_consumers_skip():
    # the rewind read a committed offset already past the input: a late EndTxn may have put it there
    assert _history(("rewind", {"offsets": {"0": 12}})).passed_over(0, 10) is None
    # the partition changed hands in between
    assert _history(("revoke", {"partitions": [0]}), ("assign", {"partitions": [0]})).passed_over(0, 10) is None
    # it went back to the input
    assert _history(second_inputs=(10, 11)).passed_over(0, 10) is None
    # nothing committed past it (yet): no skip shown
    assert _history(second_end="abort").passed_over(0, 10) is None
    # an input whose transaction did not end in its client's abort
    committed = _history()
    assert committed.passed_over(0, 12) is None and committed.passed_over(0, 99) is None


def test_a_passed_over_lost_input_is_a_candidate_against_the_client():
    case = {"explanation": "hand-made", "input": {"partition": 0, "offset": 10},
            "transactions": [{"process": "w0.1", "txn_seq": 1, "txid": "run-w0", "outcome": "aborted"}]}
    assert label_case("lost-input", case, PER_TXID, set())["label"] == "classic-protocol"
    passed = {**case, "passed_over": {"process": "w0.1", "aborted_txn_seq": 1, "next_txn_seq": 2,
                                      "next_first_offset": 12}}
    got = label_case("lost-input", passed, PER_TXID, set())
    assert got["label"] == "candidate" and "went on past it" in got["why"] and "offset 12" in got["why"]
    # the mechanism seen does not outrank what the consumer's own history shows
    assert label_case("lost-input", passed, PER_TXID, {"run-w0"})["label"] == "candidate"


def _ended_with(*after: tuple[str, dict[str, Any]], polls: bool = True) -> HistoryIndex:
    """w0.1 reads p0@10-11 (its poll recorded, or not), aborts their transaction, resets the
    offset to commit as sarama's example does; then ``after``, 1 s apart from t=10."""
    lines: list[dict[str, Any]] = []
    steps = ([("poll", {"count": 2, "positions": {"0": [10, 11]}})] if polls else []) + [
        ("send", {"txn_seq": 1, "inputs": [[0, 10], [0, 11]], "outputs": 4}),
        ("send_offsets", {"txn_seq": 1, "offsets": {"0": 12}}),
        ("abort", {"txn_seq": 1, "reason": "intentional"}),
        ("reset-offset", {"partition": 0, "offset": 10, "rewinds_claim": False})]
    for op, (f, value) in enumerate(steps + list(after)):
        clock = 0.01 * op if op < len(steps) else 10.0 + op - len(steps)
        base = {"process": "w0.1", "op": op, "f": f, "txid": "run-w0", "pid": 1000, "epoch": 0}
        lines += [{**base, "time": clock, "type": "invoke", "value": value},
                  {**base, "time": clock + 0.001, "type": "ok", "value": value}]
    return HistoryIndex(pair_operations(lines))


def test_an_aborted_input_its_consumer_never_read_again_is_left_behind():
    assert _ended_with().left_behind(0, 10, until=60.0) == {
        "process": "w0.1", "aborted_txn_seq": 1, "aborted_at": 0.031,
        "reset_offset": {"offset": 10, "rewinds_claim": False}}
    # reads of other partitions, and what came after the bound, do not count
    other = _ended_with(("poll", {"count": 1, "positions": {"1": [3, 3]}}), ("poll", {"count": 1, "positions": {"0": [10, 10]}}))
    assert other.left_behind(0, 10, until=10.5) is not None
    assert other.left_behind(0, 10, until=12.0) is None  # it read p0 again at t=11


def test_what_the_history_cannot_show_or_a_rebalance_explains_is_not_left_behind():
    assert _ended_with(polls=False).left_behind(0, 10, until=60.0) is None  # its reads are not recorded
    assert _ended_with(("revoke", {"partitions": [0]})).left_behind(0, 10, until=60.0) is None
    assert _ended_with(("rewind", {"offsets": {"0": 10}})).left_behind(0, 10, until=60.0) is None
    assert _ended_with(("send", {"txn_seq": 2, "inputs": [[0, 12]], "outputs": 2})).left_behind(0, 10, until=60.0) is None
    assert _ended_with().left_behind(0, 12, until=60.0) is None  # no transaction held p0@12
