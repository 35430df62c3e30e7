"""verifier/late_requests.py on hand-made proxy events and transaction logs."""

import json

from kchaos.protocol.decoders import TransactionLogEntry
from kchaos.verifier.late_requests import late_request_facts, late_requests, read_message_events


def held_end_txn(committed: bool, answer: str, epoch: int = 2, **extra) -> dict:
    return {"time": 100.0, "rule": "kchaos-fault-1", "connection": 7, "correlation_id": 40, "action": "held",
            "api": "EndTxn", "api_version": 1, "transactional_id": "t", "producer_id": 1, "producer_epoch": epoch,
            "committed": committed, "released_after_ms": 6000, "client_connected_at_release": False,
            "answer": {"error": answer}, **extra}


def log(*records: tuple[int, str, int, int], start_ms: int = 105_900) -> list[dict]:
    """(offset, status, epoch, last update ms) of transactional id t, a transaction that began at
    ``start_ms`` (by default after the held request was sent, at 100 s)."""
    return [{"partition": 0, "offset": o, "entry": TransactionLogEntry("t", 1, epoch, status=status, last_update_ms=ms,
                                                                      start_ms=start_ms)}
            for o, status, epoch, ms in records]


def test_a_late_abort_followed_by_prepare_abort_ended_the_open_transaction():
    rows = late_requests([held_end_txn(False, "NONE")],
                         log((1, "Ongoing", 2, 105_900), (2, "PrepareAbort", 2, 106_003), (3, "CompleteAbort", 2, 106_006)))
    [row] = rows
    assert row["ended_a_transaction"] is True and row["answer"] == "NONE" and row["arrived_ms"] == 106_000
    assert [(f["after_ms"], f["status"]) for f in row["transaction_log"]] == [(3, "PrepareAbort"), (6, "CompleteAbort")]


def test_a_request_that_prepares_its_own_transaction_was_slow_not_late():
    """A hold shorter than the client's timeout: the client still waits for its commit, which the
    coordinator applies to the transaction it was sent for (begun before the request was sent)."""
    [row] = late_requests([held_end_txn(True, "NONE")], log((2, "PrepareCommit", 2, 106_001), start_ms=99_950))
    assert (row["ended_a_transaction"], row["ended_its_own"]) == (False, True)


def test_a_late_retry_of_a_finished_transaction_writes_nothing_and_ended_nothing():
    [row] = late_requests([held_end_txn(True, "NONE")], log((1, "CompleteCommit", 2, 105_000)))
    assert row["ended_a_transaction"] is False and row["transaction_log"] == []


def test_under_tv2_the_late_request_is_fenced():
    [row] = late_requests([held_end_txn(True, "PRODUCER_FENCED", epoch=5)],
                          log((1, "Ongoing", 6, 105_990), (2, "PrepareCommit", 6, 106_040)))
    assert row["ended_a_transaction"] is False and row["answer"] == "PRODUCER_FENCED"


def test_the_wrong_direction_or_epoch_or_a_later_prepare_is_not_blamed_on_the_request():
    assert not late_requests([held_end_txn(True, "NONE")], log((2, "PrepareAbort", 2, 106_003)))[0]["ended_a_transaction"]
    assert not late_requests([held_end_txn(False, "NONE")], log((2, "PrepareAbort", 3, 106_003)))[0]["ended_a_transaction"]
    assert not late_requests([held_end_txn(False, "NONE")], log((2, "PrepareAbort", 2, 106_200)))[0]["ended_a_transaction"]


def test_requests_delivered_on_time_or_unanswered_are_not_late_requests():
    on_time = {**held_end_txn(True, "NONE"), "action": "sent, response dropped"}
    unanswered = {**held_end_txn(True, "NONE"), "answer": None}
    assert late_requests([on_time, unanswered], log()) == []


def test_facts_read_the_event_log_keeping_the_answered_record(tmp_path):
    events = tmp_path / "cluster" / "messages" / "events.jsonl"
    events.parent.mkdir(parents=True)
    first = {**held_end_txn(False, "NONE"), "answer": None}
    events.write_text(json.dumps(first) + "\n" + json.dumps(held_end_txn(False, "NONE")) + "\n" + '{"cut by a ki')
    assert len(read_message_events(tmp_path)) == 1
    facts = late_request_facts(tmp_path, log((2, "PrepareAbort", 2, 106_001)))
    assert {k: facts[k] for k in ("affected", "late_or_duplicated", "accepted", "ended_a_transaction")} == \
        {"affected": 1, "late_or_duplicated": 1, "accepted": 1, "ended_a_transaction": 1}
    assert late_request_facts(tmp_path / "none", None) is None


def client_op(f: str, seconds: float, seq: int) -> dict:
    return {"f": f, "process": "w0.1", "txid": "t", "invoke_time": seconds, "outcome": "ok", "value": {"txn_seq": seq}}


def test_the_clients_next_end_of_the_transaction_says_whether_the_late_request_went_against_it():
    ended = log((2, "PrepareAbort", 2, 106_003))
    ops = [client_op("commit", 99.0, 1), client_op("commit", 106.060, 7), client_op("abort", 107.0, 8)]
    [row] = late_requests([held_end_txn(False, "NONE")], ended, ops)
    assert row["client_then"] == {"f": "commit", "process": "w0.1", "txn_seq": 7, "outcome": "ok", "after_ms": 60}
    assert row["against_the_client"] is True  # late abort, then the client's commit: a lost write
    [row] = late_requests([held_end_txn(False, "NONE")], ended, [client_op("abort", 106.040, 7)])
    assert row["against_the_client"] is False and row["client_then"]["f"] == "abort"
    [row] = late_requests([held_end_txn(True, "NONE")], log((2, "PrepareCommit", 2, 106_003)),
                          [client_op("abort", 106.050, 7)])
    assert row["against_the_client"] is True  # late commit, then the client's abort: an aborted read


def test_a_client_decision_in_flight_when_the_request_arrived_is_the_one_that_counts():
    """The client's own commit was sent before the late commit arrived and completed after it:
    both commit the same transaction, nothing goes against the client."""
    in_flight = {**client_op("commit", 105.900, 6), "complete_time": 106.012}
    [row] = late_requests([held_end_txn(True, "NONE")], log((2, "PrepareCommit", 2, 106_001)),
                          [in_flight, client_op("abort", 106.088, 7)])
    assert row["client_then"]["txn_seq"] == 6 and row["against_the_client"] is False
