"""Sequence numbers used again after an abort (verifier/sequences.py), on hand-made batches."""

import json

from kchaos.protocol.log_segments import Batch
from kchaos.verifier.attribution import label_case
from kchaos.verifier.sequences import failed_sends, reused_sequences, reuses_for, sequence_reuse_facts


def _data(offset, seq, count=1, pid=7, epoch=0, txn=("w0", 1, 5)):
    worker, incarnation, txn_seq = txn
    value = json.dumps({"worker": worker, "incarnation": incarnation, "txn_seq": txn_seq}).encode()
    return Batch(offset, offset + count - 1, 0, pid, epoch, seq, count, 0, True, False, first_value=value)


def _marker(offset, committed, pid=7, epoch=0):
    return Batch(offset, offset, 0, pid, epoch, -1, 1, 0, True, True, committed, 0)


def _replicas(*batches):
    return {("out", 1): [(b, ["node-1"]) for b in batches]}


FAILED = {("w0.1", 5)}

#: F21 as the log holds it: X (seq 10-11, transaction 5, its send failed) aborted, an empty commit
#: (transaction 6 added the partition, wrote nothing), then Y at 12 = X's base + X's count
F21 = [_data(100, 10, 2, txn=("w0", 1, 5)), _marker(102, False), _marker(103, True),
       _data(104, 12, 1, txn=("w0", 1, 7)), _marker(105, True)]


def test_an_aborted_batchs_range_sent_again_and_not_written_is_found():
    (found,) = reused_sequences(_replicas(*F21), FAILED)
    assert found["aborted_batch"] == {"offset": 100, "base_sequence": 10, "count": 2, "transaction": ["w0.1", 5]}
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
