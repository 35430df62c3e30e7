"""Sequence numbers used again after an abort (verifier/sequences.py), on hand-made batches: F21's
path (a failed send's numbers given back) and issue 76's (an unanswered batch's numbers given back
by the abort, librdkafka)."""

import json

from kchaos.protocol.log_segments import Batch
from kchaos.verifier.attribution import label_case
from kchaos.verifier.sequences import aborts, failed_sends, reused_sequences, reuses_for, sequence_reuse_facts


def _data(offset, seq, count=1, pid=7, epoch=0, txn=("w0", 1, 5), leader=0):
    worker, incarnation, txn_seq = txn
    value = json.dumps({"worker": worker, "incarnation": incarnation, "txn_seq": txn_seq}).encode()
    return Batch(offset, offset + count - 1, leader, pid, epoch, seq, count, 0, True, False, first_value=value)


def _marker(offset, committed, pid=7, epoch=0, leader=0):
    return Batch(offset, offset, leader, pid, epoch, -1, 1, 0, True, True, committed, 0)


def _replicas(*batches):
    return {("out", 1): [(b, ["node-1"]) for b in batches]}


FAILED = {("w0.1", 5)}

#: F21 as the log holds it: X (seq 10-11, transaction 5, its send failed) aborted, an empty commit
#: (transaction 6 added the partition, wrote nothing), then Y at 12 = X's base + X's count
F21 = [_data(100, 10, 2, txn=("w0", 1, 5)), _marker(102, False), _marker(103, True),
       _data(104, 12, 1, txn=("w0", 1, 7)), _marker(105, True)]


def test_an_aborted_batchs_range_sent_again_and_not_written_is_found():
    (found,) = reused_sequences(_replicas(*F21), FAILED)
    assert found["path"] == "failed-send" and "abort" not in found
    assert found["aborted_batch"] == {"offset": 100, "base_sequence": 10, "count": 2, "transaction": ["w0.1", 5],
                                      "leader_epoch": 0}
    assert found["abort_marker"] == {"offset": 102, "leader_epoch": 0, "coordinator_epoch": 0}
    assert found["empty_commit"]["offset"] == 103 and found["next_batch"]["base_sequence"] == 12
    assert found["next_batch"]["transaction"] == ["w0.1", 7]
    assert reuses_for([found], "w0.1", 6) == [found]
    assert reuses_for([found], "w0.1", 7) == [] and reuses_for([found], "w1.1", 6) == []


def test_what_looks_alike_and_is_not_is_left_out():
    # the send did not fail (an abort on purpose keeps its numbers: F15's path looks the same)
    assert reused_sequences(_replicas(*F21), set()) == []
    # the numbers given back and nothing sent: the next batch starts at X's base
    rolled_back = F21[:3] + [_data(104, 10, 1, txn=("w0", 1, 7))]
    assert reused_sequences(_replicas(*rolled_back), FAILED) == []
    # X's range committed, not aborted; or a new epoch; or two empty commits (which one sent it?)
    committed = [F21[0], _marker(102, True), _marker(103, True), F21[3]]
    assert reused_sequences(_replicas(*committed), FAILED) == []
    assert reused_sequences(_replicas(*F21[:3], _data(104, 12, epoch=1, txn=("w0", 1, 7))), FAILED) == []
    assert reused_sequences(_replicas(*F21[:3], _marker(103, True), F21[3]), FAILED) == []
    # another producer's batches between do not matter
    other = [F21[0], _data(101, 0, pid=8, txn=("w1", 1, 2)), F21[1], F21[2], F21[3]]
    assert len(reused_sequences(_replicas(*other), FAILED)) == 1


def test_the_fact_counts_what_it_read_and_the_history_names_failed_sends():
    ops = [{"f": "send", "process": "w0.1", "outcome": "fail", "value": {"txn_seq": 5}},
           {"f": "send", "process": "w0.1", "outcome": "ok", "value": {"txn_seq": 6}},
           {"f": "commit", "process": "w0.1", "outcome": "fail", "value": {"txn_seq": 6}}]
    assert failed_sends(ops) == FAILED
    compressed = Batch(200, 200, 0, 7, 0, 13, 1, 0, True, False)  # no value read
    fact = sequence_reuse_facts({("out", 1): [(b, ["node-1"]) for b in [*F21, compressed]]}, ops)
    assert fact["transactional_batches"] == 3 and fact["unread"] == 1 and len(fact["reused"]) == 1
    assert fact["by_path"] == {"failed-send": 1, "aborted-unanswered": 0}
    assert sequence_reuse_facts(None, ops) is None


def test_attribution_names_the_reuse_for_the_transaction_that_sent_it():
    (reuse,) = reused_sequences(_replicas(*F21), FAILED)
    case = {"explanation": "torn", "transactions": [{"process": "w0.1", "txn_seq": 6, "outcome": "committed",
                                                     "txid": "run-w0"}]}
    per_txid = {"run-w0": {"0": 9}}
    got = label_case("torn-transaction", case, per_txid, set(), reused=[reuse])
    assert got["label"] == "candidate" and "F21" in got["why"] and "base sequence 10, 2 records" in got["why"]
    assert label_case("torn-transaction", case, per_txid, set())["label"] == "classic-protocol"
    # another anomaly, or a transaction outside the range, is not explained by it
    assert label_case("duplicate", case, per_txid, set(), reused=[reuse])["label"] == "classic-protocol"
    later = {"explanation": "torn", "transactions": [{"process": "w0.1", "txn_seq": 8, "outcome": "committed",
                                                      "txid": "run-w0"}]}
    assert label_case("torn-transaction", later, per_txid, set(), reused=[reuse])["label"] == "classic-protocol"


#: issue 76 as the stored seed-711 run's kchaos-invoices-2 holds it: transaction 745's batch (seq
#: 985) written at leader epoch 4 just before its leader was killed; the client aborted 745 after
#: another error (its send had succeeded); the ABORT and the empty commit of 746 at leader epoch 5;
#: 747's batch at 986
LIBRDKAFKA = [_data(3865, 985, 1, pid=1, epoch=2, txn=("w3", 3, 745), leader=4),
              _marker(4095, False, pid=1, epoch=2, leader=5), _marker(4101, True, pid=1, epoch=2, leader=5),
              _data(4104, 986, 1, pid=1, epoch=2, txn=("w3", 3, 747), leader=5)]
REASON = "error: Failed to commit offsets to transaction (Coordinator load in progress)"
ABORT_OPS = [{"f": "send", "process": "w3.3", "op": 1, "outcome": "ok", "value": {"txn_seq": 745}},
             {"f": "send_offsets", "process": "w3.3", "op": 2, "outcome": "fail", "value": {"txn_seq": 745}},
             {"f": "abort", "process": "w3.3", "op": 3, "outcome": "ok", "value": {"txn_seq": 745, "reason": REASON}},
             {"f": "send", "process": "w3.3", "op": 4, "outcome": "ok", "value": {"txn_seq": 746}},
             {"f": "commit", "process": "w3.3", "op": 5, "outcome": "ok", "value": {"txn_seq": 746}}]


def test_an_unanswered_batchs_range_given_back_by_the_abort_is_found_and_named():
    assert aborts(ABORT_OPS) == {("w3.3", 745): {"op": 3, "outcome": "ok", "reason": REASON}}
    fact = sequence_reuse_facts(_replicas(*LIBRDKAFKA), ABORT_OPS)
    (found,) = fact["reused"]
    assert fact["by_path"] == {"failed-send": 0, "aborted-unanswered": 1}
    assert found["path"] == "aborted-unanswered" and found["producer_id"] == 1 and found["producer_epoch"] == 2
    assert found["aborted_batch"] == {"offset": 3865, "base_sequence": 985, "count": 1, "transaction": ["w3.3", 745],
                                      "leader_epoch": 4}
    assert found["abort_marker"] == {"offset": 4095, "leader_epoch": 5, "coordinator_epoch": 0}
    assert found["empty_commit"] == {"offset": 4101, "coordinator_epoch": 0, "leader_epoch": 5}
    assert found["next_batch"] == {"offset": 4104, "base_sequence": 986, "transaction": ["w3.3", 747]}
    assert found["abort"]["reason"] == REASON
    assert reuses_for([found], "w3.3", 746) == [found]
    # a failed send on the same log keeps F21's path
    failed = [dict(ABORT_OPS[0], outcome="fail"), *ABORT_OPS[1:]]
    assert [r["path"] for r in sequence_reuse_facts(_replicas(*LIBRDKAFKA), failed)["reused"]] == ["failed-send"]


def test_a_reuse_without_the_abort_paths_evidence_is_not_named():
    # the same log, the leader never changed before the abort (an abort on purpose keeps the
    # numbers; F15's never-sent batch looks the same): not named
    steady = [_data(3865, 985, 1, pid=1, epoch=2, txn=("w3", 3, 745), leader=5), *LIBRDKAFKA[1:]]
    assert sequence_reuse_facts(_replicas(*steady), ABORT_OPS)["reused"] == []
    # the leader moved again between the abort and the empty commit (the committed transaction's
    # send met a leader move: F15's trigger, not a duplicate answered by the leader holding X)
    moved = [LIBRDKAFKA[0], LIBRDKAFKA[1], _marker(4101, True, pid=1, epoch=2, leader=6),
             _data(4104, 986, 1, pid=1, epoch=2, txn=("w3", 3, 747), leader=6)]
    assert sequence_reuse_facts(_replicas(*moved), ABORT_OPS)["reused"] == []
    # the history shows no abort of 745 by its client (the coordinator ended it): not named
    assert sequence_reuse_facts(_replicas(*LIBRDKAFKA), [op for op in ABORT_OPS if op["f"] != "abort"])["reused"] == []
    # the numbers were given back and nothing sent (the next batch starts at X's base), or a new epoch
    rolled_back = [*LIBRDKAFKA[:3], _data(4104, 985, 1, pid=1, epoch=2, txn=("w3", 3, 747), leader=5)]
    assert sequence_reuse_facts(_replicas(*rolled_back), ABORT_OPS)["reused"] == []
    bumped = [*LIBRDKAFKA[:3], _data(4104, 986, 1, pid=1, epoch=3, txn=("w3", 3, 747), leader=5)]
    assert sequence_reuse_facts(_replicas(*bumped), ABORT_OPS)["reused"] == []
    # without the aborts, reused_sequences names only the failed-send path
    assert reused_sequences(_replicas(*LIBRDKAFKA), set()) == []


def test_attribution_names_the_abort_path_for_the_transaction_that_sent_it():
    (reuse,) = sequence_reuse_facts(_replicas(*LIBRDKAFKA), ABORT_OPS)["reused"]
    case = {"explanation": "lost", "transactions": [{"process": "w3.3", "txn_seq": 746, "outcome": "committed",
                                                     "txid": "run-w3"}]}
    got = label_case("lost-write", case, {"run-w3": {"0": 9}}, set(), reused=[reuse])
    assert got["label"] == "candidate" and "F21" in got["why"] and "issue 76" in got["why"]
    assert "base sequence 985, 1 record" in got["why"] and "leader epoch 4 to 5" in got["why"]
    assert "whose send failed" not in got["why"]
