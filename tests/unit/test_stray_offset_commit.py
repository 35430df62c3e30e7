"""An offset commit no transaction that may have committed sent (offsets_log.stray_offset_commit_cases)
and its label. Hand-made histories on the shape of kafka-python's kept offsets (docs/findings.md
F19): w1 holds p2 and p3; its transaction 34 sends p2@75 and the group coordinator refuses it
(UNKNOWN_MEMBER_ID: w1 was paused past its session); w1 aborts it, rejoins, and its transaction
47 sends p3@76 alone and commits. The log then holds p2@75 too: transaction 47 carried it."""

from __future__ import annotations

from typing import Any

from kchaos.verifier.attribution import label_case
from kchaos.verifier.model import HistoryIndex
from kchaos.verifier.offsets_log import refused, stray_offset_commit_cases
from kchaos.workloads.history import pair_operations

REFUSAL = ("CommitFailedError: Transaction offset commit failed due to consumer group metadata mismatch: "
           "UnknownMemberIdError")


def _history(first: str = "refused", commit: str | None = None) -> HistoryIndex:
    """``first``: how transaction 34's send_offsets ended (refused, timeout, ok); ``commit``: a
    commit of 34 before its abort, and how it ended (None: none asked)."""
    lines: list[dict[str, Any]] = []
    n = 0
    clock = 0.0

    def add(f: str, value: dict[str, Any], outcome: str = "ok", error: str | None = None) -> None:
        nonlocal n, clock
        n += 1
        clock += 1.0
        base = {"process": "w1.1", "op": n, "f": f, "txid": "run-w1", "pid": 1000, "epoch": 0}
        lines.append({**base, "time": clock, "type": "invoke", "value": value})
        lines.append({**base, "time": clock + 0.1, "type": outcome, "value": {},
                      **({"error": error} if error else {})})

    add("send", {"txn_seq": 33, "inputs": [[2, 70], [3, 71]]})
    add("send_offsets", {"txn_seq": 33, "offsets": {"2": 71, "3": 72}})
    add("commit", {"txn_seq": 33, "offsets": {"2": 71, "3": 72}})
    add("send", {"txn_seq": 34, "inputs": [[2, o] for o in range(71, 75)]})
    if first == "refused":
        add("send_offsets", {"txn_seq": 34, "offsets": {"2": 75}}, "fail", REFUSAL)
    elif first == "timeout":
        add("send_offsets", {"txn_seq": 34, "offsets": {"2": 75}}, "fail", "KafkaTimeoutError: timed out")
    else:
        add("send_offsets", {"txn_seq": 34, "offsets": {"2": 75}})
    if commit is not None:
        add("commit", {"txn_seq": 34, "offsets": {"2": 75}}, commit)
    add("abort", {"txn_seq": 34, "reason": "error"})
    add("send", {"txn_seq": 47, "inputs": [[3, 72], [3, 73], [3, 74], [3, 75]]})
    add("send_offsets", {"txn_seq": 47, "offsets": {"3": 76}})
    add("commit", {"txn_seq": 47, "offsets": {"3": 76}})
    return HistoryIndex(pair_operations(lines))


def _log(*commits: tuple[int, int]) -> list[dict[str, Any]]:
    return [{"log_partition": 4, "log_offset": i, "partition": p, "offset": o, "commit_timestamp": i}
            for i, (p, o) in enumerate(commits)]


CARRIED = _log((2, 71), (3, 72), (2, 75), (3, 76))
PER_TXID = {"run-w1": {"0": 3}}  # classic protocol (kafka-python has no KIP-890 part 2)


def test_an_offset_only_an_aborted_transaction_sent_is_named_with_the_next_commit_of_its_process():
    cases, recorded, _ = stray_offset_commit_cases(_history(), CARRIED, "in")
    assert recorded == 3
    [case] = cases
    assert "in/2 at 75" in case["explanation"] and "w1.1's 34" in case["explanation"]
    assert case["offset_commit"]["log"] == "__consumer_offsets-4"
    [sender] = case["transactions"]
    assert (sender["txn_seq"], sender["outcome"]) == (34, "aborted")
    assert sender["send_offsets"]["refused"] and sender["wrote_it"].startswith("no") and case["carried"]
    assert sender["next_committed"]["txn_seq"] == 47
    got = label_case("stray-offset-commit", case, PER_TXID, set())
    assert got["label"] == "candidate" and "carried it" in got["why"]


def test_the_offsets_of_transactions_that_may_have_committed_are_no_stray():
    assert stray_offset_commit_cases(_history(), _log((2, 71), (3, 72), (3, 76)), "in")[0] == []
    # a commit of 34 that ended unknown, or failed then: the abort after it does not undo an
    # unknown one, so its offsets may be committed
    assert stray_offset_commit_cases(_history(commit="info"), CARRIED, "in")[0] == []
    assert stray_offset_commit_cases(_history(commit="ok"), CARRIED, "in")[0] == []
    [case] = stray_offset_commit_cases(_history(commit="fail"), CARRIED, "in")[0]
    assert case["transactions"][0]["txn_seq"] == 34


def test_an_offset_the_coordinator_may_have_taken_is_the_classic_protocols_to_explain():
    # a timed-out send_offsets (or one that returned) may have reached the coordinator; a late
    # EndTxn of an earlier transaction can then commit it before the client's abort (KAFKA-17754)
    for first in ("timeout", "ok"):
        [case] = stray_offset_commit_cases(_history(first), CARRIED, "in")[0]
        assert not case["carried"] and case["transactions"][0]["wrote_it"] == "maybe"
        assert label_case("stray-offset-commit", case, PER_TXID, set())["label"] == "classic-protocol"
        assert label_case("stray-offset-commit", case, PER_TXID, {"run-w1"})["label"] == "kafka-17754"


def test_an_offset_nobody_sent_is_named_too():
    [case] = stray_offset_commit_cases(_history(), _log((2, 71), (3, 72), (2, 99), (3, 76)), "in")[0]
    assert "no transaction of the history sent" in case["explanation"] and case["transactions"] == []


def test_a_history_without_offsets_matches_nothing():
    history = HistoryIndex(pair_operations([
        {"process": "w1.1", "op": 1, "f": "send", "time": 1.0, "type": "invoke", "value": {"txn_seq": 1}},
        {"process": "w1.1", "op": 1, "f": "send", "time": 1.1, "type": "ok", "value": {}}]))
    assert stray_offset_commit_cases(history, CARRIED, "in")[1] == 0


def test_refusals_in_each_clients_words():
    for error in (REFUSAL, "UNKNOWN_MEMBER_ID: The coordinator is not aware of this member.",
                  "CommitFailedException: ... The coordinator is not aware of this member.",
                  "kafka server: Specified group generation id is not valid", "IllegalGenerationError",
                  "FencedInstanceIdError"):
        assert refused(error), error
    for error in (None, "", "KafkaTimeoutError: timed out", "NotCoordinatorError", "REQUEST_TIMED_OUT"):
        assert not refused(error), error


def test_the_inputs_a_carried_stray_commit_skipped_are_the_clients():
    """The stray commit moved p2 from 71 to 75: inputs 71-74 are lost inputs, and an offset moved
    back to a stray one is its doing too; both labelled candidates through it (attribution.attribute)."""
    from kchaos.verifier.attribution import attribute

    [stray] = stray_offset_commit_cases(_history(), CARRIED, "in")[0]
    assert stray["moved_from"] == 71
    lost = [{"explanation": f"input at in/2@{o}", "input": {"id": f"i{o}", "partition": 2, "offset": o},
             "transactions": [{"process": "w1.1", "txn_seq": 34, "txid": "run-w1"}]} for o in (70, 71, 74, 75)]
    back = {"explanation": "moved back", "offset_commits": [{"partition": 2, "offset": 80}, {"partition": 2, "offset": 75}],
            "written_by": []}
    again = [{"explanation": f"input 2@{o} twice", "records": [{"in_partition": 2, "in_offset": o, "txid": "run-w1"}] * 2}
             for o in (76, 80)]
    moved_back = {**stray, "moved_from": 80}  # had it moved 80 -> 75, input 2@76 would be read again
    got = attribute({"anomalies": {"stray-offset-commit": [stray, moved_back], "lost-input": lost,
                                   "offsets-backwards": [back], "duplicate": again},
                     "facts": {"commits_by_client_tv_per_txid": PER_TXID}})
    assert [c["label"] for c in got["cases"]["duplicate"]] == ["candidate", "classic-protocol"]
    labels = [c["label"] for c in got["cases"]["lost-input"]]
    assert labels == ["classic-protocol", "candidate", "candidate", "classic-protocol"], got["cases"]["lost-input"]
    assert "moved from 71 to 75" in got["cases"]["lost-input"][1]["why"]
    assert got["cases"]["offsets-backwards"][0]["label"] == "candidate"
    # a stray whose senders may have reached the coordinator explains nothing further
    [maybe] = stray_offset_commit_cases(_history("timeout"), CARRIED, "in")[0]
    got = attribute({"anomalies": {"stray-offset-commit": [maybe], "lost-input": lost[1:2]},
                     "facts": {"commits_by_client_tv_per_txid": PER_TXID}})
    assert got["cases"]["lost-input"][0]["label"] == "classic-protocol"


def _stamped(*commits: tuple[int, int, float]) -> list[dict[str, Any]]:
    """Offset commits stamped by the group coordinator (ms, its clock)."""
    return [{"log_partition": 4, "log_offset": i, "partition": p, "offset": o, "commit_timestamp": ms}
            for i, (p, o, ms) in enumerate(commits)]


def test_a_second_commit_of_an_offset_outside_its_senders_windows_is_carried():
    """F19's second shape (client-zombie seed 2): another member committed p3@76 in its own
    transaction 47 (sent at 8.0-8.1 s), and w1's refused transaction 34 had sent the same offset
    (here: 34 sends p3@76). The log holds p3@76 twice; the second, stamped at 20 s, lies in no
    window of a sender that may have committed: carried. By value alone it would pass."""
    history = _history()
    history.ops = [op if not (op["f"] == "send_offsets" and op["value"].get("txn_seq") == 34)
                   else {**op, "value": {"txn_seq": 34, "offsets": {"3": 76}}} for op in history.ops]
    sent_at = next(op["invoke_time"] for op in history.ops if op["f"] == "send_offsets" and op["value"]["txn_seq"] == 47)
    log = _stamped((2, 71, 3000), (3, 72, 3000), (3, 76, sent_at * 1000 + 1), (3, 76, 20000))
    [case], _, timing = stray_offset_commit_cases(history, log, "in", clock=(0.0, 0.0))
    assert "in/3 at 76 at 20.000" in case["explanation"] and "w1.1's 47" in case["explanation"]
    assert case["offset_commit"]["log_offset"] == 3 and case["moved_from"] == 76 and case["carried"]
    assert timing == {"placed": 3, "outside": 1, "by_value_only": False}
    assert stray_offset_commit_cases(history, log, "in")[0] == []  # no clock: by value
    # a stamp a clock fault may have moved is matched by value alone
    assert stray_offset_commit_cases(history, log, "in", (0.0, 0.0), lambda ms: ms > 15000)[0] == []
    # the brokers' clock measured 9 s ahead: the late stamp is 11 s on the harness's, in 47's window
    shifted = _stamped((2, 71, 12000), (3, 72, 12000), (3, 76, sent_at * 1000 + 9001), (3, 76, sent_at * 1000 + 9002))
    assert stray_offset_commit_cases(history, shifted, "in", clock=(9000.0, 5.0))[0] == []


def test_stamps_that_miss_most_windows_are_a_wrong_clock_not_carried_commits():
    log = _stamped((2, 71, 99000), (3, 72, 99000), (3, 76, 99000))
    cases, _, timing = stray_offset_commit_cases(_history(), log, "in", clock=(0.0, 1.0))
    assert cases == [] and timing["by_value_only"] and timing["outside"] == 3


def test_an_aborted_sender_stamped_outside_its_sending_did_not_write_it():
    """Transaction 34's send_offsets returned ok and it aborted: by value alone a late EndTxn of
    an earlier transaction could have committed its offsets (classic protocol). With the clocks
    known, a record stamped while 34 was not sending it was written by another request."""
    history = _history("ok")
    op = next(op for op in history.ops if op["f"] == "send_offsets" and op["value"]["txn_seq"] == 34)
    for ms, carried in ((op["invoke_time"] * 1000 + 1, False), (op["complete_time"] * 1000 + 5000, True)):
        log = _stamped((2, 71, 3000), (3, 72, 3000), (2, 75, ms), (3, 76, 8050))
        [case] = stray_offset_commit_cases(history, log, "in", clock=(0.0, 0.0))[0]
        assert case["carried"] is carried, case["transactions"][0]["wrote_it"]
        label = label_case("stray-offset-commit", case, PER_TXID, set())["label"]
        assert label == ("candidate" if carried else "classic-protocol")

