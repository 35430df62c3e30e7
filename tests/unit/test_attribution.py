"""Whose anomaly (verifier/attribution.py): hand-made results, one per label and per edge."""

from kchaos.verifier.attribution import attribute, label_case, protocol_of

PER_TXID = {"run-w0": {"0": 12}, "run-w1": {"2": 9}, "run-w2": {"0": 3, "2": 4}}


def _case(**fields):
    return {"explanation": "hand-made", "records": [{"topic": "out", "offset": 1, **fields}]}


def _late(txid, ended=True):
    return {"api": "EndTxn", "transactional_id": txid, "ended_a_transaction": ended}


def test_protocol_of_reads_the_coordinators_record():
    assert protocol_of({"0": 3}) == "classic"
    assert protocol_of({"2": 3}) == "kip-890"
    assert protocol_of({"0": 1, "2": 3}) == "both"
    assert protocol_of({"2": 0, "0": 2}) == "classic"
    assert protocol_of(None) is None and protocol_of({}) is None


def test_a_classic_case_is_kafka_17754s_only_when_a_late_endtxn_of_its_id_ended_a_transaction():
    seen = label_case("lost-write", _case(txid="run-w0"), PER_TXID, {"run-w0"})
    assert seen["label"] == "kafka-17754" and "run-w0" in seen["why"]
    # a late EndTxn of another id, or none at all: the protocol allows it, the run did not show it
    assert label_case("lost-write", _case(txid="run-w0"), PER_TXID, {"run-w1"})["label"] == "classic-protocol"
    assert label_case("lost-write", _case(txid="run-w0"), PER_TXID, set())["label"] == "classic-protocol"


def test_a_kip890_case_is_not_the_protocols_whatever_the_proxy_saw():
    got = label_case("lost-write", _case(txid="run-w1"), PER_TXID, {"run-w1"})
    assert got["label"] == "candidate" and "KIP-890" in got["why"]


def test_a_shape_a_late_endtxn_does_not_make_is_a_candidate_on_the_classic_protocol_too():
    got = label_case("offsets-backwards", _case(txid="run-w0"), PER_TXID, {"run-w0"})
    assert got["label"] == "candidate" and "offsets-backwards" in got["why"]


def test_mixed_unknown_and_idless_cases_stay_unattributed():
    both = label_case("lost-write", _case(txid="run-w2"), PER_TXID, {"run-w2"})
    assert both["label"] == "unattributed" and "both protocols" in both["why"]
    never = label_case("lost-write", _case(txid="run-w9"), PER_TXID, {"run-w9"})
    assert never["label"] == "unattributed" and "run-w9" in never["why"]
    assert label_case("lost-write", {"explanation": "no ids", "input": {"offset": 3}}, PER_TXID, set())["label"] == "unattributed"
    # a case naming ids of both protocols is not the classic protocol's either
    two = {"records": [{"txid": "run-w0"}, {"txid": "run-w1"}]}
    assert label_case("lost-write", two, PER_TXID, {"run-w0"})["label"] == "unattributed"


def test_a_worker_process_names_its_slots_id():
    case = {"explanation": "lost", "transactions": [{"process": "w0.3", "txn_seq": 4}]}
    assert label_case("lost-write", case, PER_TXID, {"run-w0"})["label"] == "kafka-17754"


def test_attribute_labels_safety_cases_only_and_counts_them():
    results = {
        "anomalies": {"lost-write": [_case(txid="run-w0"), _case(txid="run-w0")],
                      "duplicate": [_case(txid="run-w1")],
                      "stalled-pipeline": [{"explanation": "stalled", "worker": "w0"}]},
        "facts": {"commits_by_client_tv_per_txid": PER_TXID,
                  "late_requests": {"requests": [_late("run-w0"), _late("run-w1", ended=False)]}},
    }
    got = attribute(results)
    assert got["by_anomaly"] == {"duplicate": {"candidate": 1}, "lost-write": {"kafka-17754": 2}}
    assert got["labels"] == {"kafka-17754": 2, "candidate": 1}
    assert "stalled-pipeline" not in got["cases"]
    assert got["summary"].startswith("2 the classic protocol's (KAFKA-17754")


def test_no_safety_anomaly_no_attribution():
    assert attribute({"anomalies": {}, "facts": {}}) is None
    assert attribute({"anomalies": {"stalled-pipeline": [{"explanation": "x"}]}}) is None


def test_a_run_without_the_coordinators_record_attributes_nothing():
    got = attribute({"anomalies": {"lost-write": [_case(txid="run-w0")]}, "facts": {}})
    assert got["labels"] == {"unattributed": 1}


def test_a_duplicate_inside_one_transaction_is_a_candidate_not_the_protocols():
    """KafkaJS's shape (docs/clients.md): one committed transaction holds an input twice, after
    its own retry; a late EndTxn can only make copies in two transactions."""
    one = {"records": [{"txid": "run-w0", "txn_seq": 16, "incarnation": 1, "offset": 67},
                       {"txid": "run-w0", "txn_seq": 16, "incarnation": 1, "offset": 70}]}
    got = label_case("duplicate", one, PER_TXID, {"run-w0"})
    assert got["label"] == "candidate" and "one transaction" in got["why"]
    two = {"records": [{"txid": "run-w0", "txn_seq": 16, "incarnation": 1}, {"txid": "run-w0", "txn_seq": 17, "incarnation": 1}]}
    assert label_case("duplicate", two, PER_TXID, {"run-w0"})["label"] == "kafka-17754"


def test_a_lost_write_never_written_is_a_candidate_and_an_aborted_one_the_protocols():
    """A late EndTxn aborts records that were written: they stay in the raw log. A committed
    transaction whose missing outputs the raw log does not hold at all was never written whole."""
    def lost(in_raw_log, outcome="committed"):
        return {**_case(txid="run-w0"), "transaction": {"txid": "run-w0", "outcome": outcome},
                "outputs": {"expected": 8, "visible": 4, "in_raw_log": in_raw_log}}

    got = label_case("lost-write", lost(4), PER_TXID, {"run-w0"})
    assert got["label"] == "candidate" and "4 of its 8 outputs are nowhere in the log" in got["why"]
    # the missing ones are in the raw log (aborted by a marker): the classic protocol allows it
    assert label_case("lost-write", lost(8), PER_TXID, set())["label"] == "classic-protocol"
    assert label_case("lost-write", lost(8), PER_TXID, {"run-w0"})["label"] == "kafka-17754"
    # the client did not see it commit (the coordinator's log did): not judged by this rule
    assert label_case("lost-write", lost(4, "unknown"), PER_TXID, set())["label"] == "classic-protocol"


def test_a_duplicate_in_the_range_an_offset_moved_back_over_is_that_moves():
    """The group's offset of partition 3 went back from 1768 to 4 (F17's rewind to the start,
    committed): inputs 4 to 1767 are processed again. Those duplicates are the move's, a
    candidate; one outside its range keeps the protocol's label."""
    from kchaos.verifier.attribution import attribute

    back = {"explanation": "moved back", "offset_commits": [{"partition": 3, "offset": 1768}, {"partition": 3, "offset": 4}],
            "written_by": [{"process": "w3.2", "txn_seq": 9, "txid": "run-w0"}]}
    dups = [{"explanation": f"input 3@{o} twice", "records": [{"in_partition": p, "in_offset": o, "txid": "run-w0"}] * 2}
            for p, o in ((3, 4), (3, 1767), (3, 1768), (2, 100))]
    got = attribute({"anomalies": {"offsets-backwards": [back], "duplicate": dups},
                     "facts": {"commits_by_client_tv_per_txid": PER_TXID}})
    assert got["cases"]["offsets-backwards"][0]["label"] == "candidate"
    assert [c["label"] for c in got["cases"]["duplicate"]] == ["candidate", "candidate", "classic-protocol",
                                                               "classic-protocol"]
    assert "moved back from 1768 to 4" in got["cases"]["duplicate"][0]["why"]


def test_a_duplicate_below_a_move_back_read_again_by_its_mover_is_that_moves():
    """F17's first inputs: aiokafka read an OffsetFetch error as "no offset" and went back to the
    partition's start, so its transaction 91 read inputs 0-3 again and sent offset 4, which moved
    the group's offset back from 125. Inputs 0-3 lie below the move's range; the transaction that
    read them again is the one that sent the lower offset. A copy by another transaction, or only
    the first copy being a sender of it, keeps the duplicate's label."""
    from kchaos.verifier.attribution import attribute

    def txn(seq, t):
        return {"process": "w0.1", "txn_seq": seq, "txid": "run-w0", "history_op": {"invoke_time": t}}

    back = {"explanation": "moved back", "offset_commits": [{"partition": 0, "offset": 125}, {"partition": 0, "offset": 4}],
            "written_by": [txn(5, 10.0), txn(91, 40.0)]}
    dups = [{"explanation": "input 0@0 twice", "records": [{"in_partition": 0, "in_offset": 0, "txid": "run-w0"}] * 2,
             "transactions": [txn(91, 40.0), txn(5, 10.0)]},
            {"explanation": "input 0@1 twice", "records": [{"in_partition": 0, "in_offset": 1, "txid": "run-w0"}] * 2,
             "transactions": [txn(5, 10.0), txn(77, 30.0)]},
            {"explanation": "input 1@1 twice", "records": [{"in_partition": 1, "in_offset": 1, "txid": "run-w0"}] * 2,
             "transactions": [txn(5, 10.0), txn(91, 40.0)]}]
    got = attribute({"anomalies": {"offsets-backwards": [back], "duplicate": dups},
                     "facts": {"commits_by_client_tv_per_txid": PER_TXID}})
    labels = got["cases"]["duplicate"]
    assert labels[0]["label"] == "candidate"
    assert "processed again by w0.1's transaction 91, which sent the lower offset 4 of partition 0" in labels[0]["why"]
    assert [c["label"] for c in labels[1:]] == ["classic-protocol", "classic-protocol"]


def test_a_duplicate_a_zombie_transaction_wrote_is_the_clients():
    """F14's shape: w1.1's transaction 48 committed after the group had given partition 1 to w2.1
    (its offset commit moved the partition back: written_by, partition_moved_to). A duplicate one
    of whose copies it wrote is the zombie's write, a candidate; another keeps its label."""
    from kchaos.verifier.attribution import attribute

    back = {"explanation": "moved back", "offset_commits": [{"partition": 1, "offset": 461}, {"partition": 1, "offset": 115}],
            "written_by": [{"process": "w1.1", "txn_seq": 48, "txid": "run-w0",
                            "partition_moved_to": {"process": "w2.1"}}]}
    dups = [{"explanation": f"input 1@{o} twice", "records": [{"in_partition": 1, "in_offset": o, "txid": "run-w0"}] * 2,
             "transactions": [{"process": p, "txn_seq": s, "txid": "run-w0"}, {"process": "w2.1", "txn_seq": 3,
                                                                               "txid": "run-w0"}]}
            for o, p, s in ((111, "w1.1", 48), (470, "w1.1", 60))]
    got = attribute({"anomalies": {"offsets-backwards": [back], "duplicate": dups},
                     "facts": {"commits_by_client_tv_per_txid": PER_TXID}})
    labels = got["cases"]["duplicate"]
    assert labels[0]["label"] == "candidate" and "w1.1's transaction 48" in labels[0]["why"]
    assert labels[1]["label"] != "candidate"  # (unattributed here: its slots name ids of both protocols)


def _unprepared(topic="out", partition=0, offset=9, covers_from=0, producer_id=7):
    return {"topic": topic, "partition": partition, "offset": offset, "covers_from": covers_from,
            "producer_id": producer_id, "producer_epoch": 0, "coordinator_epoch": 3, "time_ms": 5000,
            "log": {"transactional_id": "run-w0", "status": "Ongoing", "before_marker_ms": 4000}}


def _aborted_read(*offsets, producer_id=7):
    return {"explanation": "hand-made", "records": [{"topic": "out", "partition": 0, "offset": o, "txid": "run-w0"}
                                                    for o in offsets],
            "transactions": [{"txid": "run-w0", "producer_id": producer_id}]}


def test_an_aborted_read_a_marker_the_log_never_prepared_made_visible_is_the_brokers():
    got = label_case("aborted-read", _aborted_read(2, 5), PER_TXID, set(), unprepared=[_unprepared()])
    assert got["label"] == "candidate" and "F8" in got["why"] and "coordinator epoch 3" in got["why"]
    assert "Ongoing" in got["why"] and "out-0 offset 9" in got["why"] and "made its records visible" in got["why"]
    # the same case without such a marker stays the classic protocol's
    assert label_case("aborted-read", _aborted_read(2, 5), PER_TXID, set())["label"] == "classic-protocol"


def test_an_unprepared_marker_explains_only_the_records_it_ends_of_its_own_producer():
    marker = [_unprepared(offset=9, covers_from=4)]
    # a record below the range, another producer's, or another partition's: not explained
    assert label_case("aborted-read", _aborted_read(2, 5), PER_TXID, set(), unprepared=marker)["label"] == "classic-protocol"
    assert label_case("aborted-read", _aborted_read(5, producer_id=8), PER_TXID, set(),
                      unprepared=marker)["label"] == "classic-protocol"
    assert label_case("aborted-read", _aborted_read(9), PER_TXID, set(), unprepared=marker)["label"] == "classic-protocol"
    # another anomaly is not made by a marker that made records visible
    assert label_case("lost-write", _aborted_read(5), PER_TXID, set(), unprepared=marker)["label"] == "classic-protocol"


def test_attribute_reads_the_unprepared_markers_from_the_commit_markers_fact():
    results = {"anomalies": {"aborted-read": [_aborted_read(2)]},
               "facts": {"commits_by_client_tv_per_txid": PER_TXID,
                         "commit_markers": {"commit_markers": 40, "unprepared": [_unprepared()]}}}
    got = attribute(results)
    assert got["by_anomaly"] == {"aborted-read": {"candidate": 1}}


def test_a_torn_transaction_or_lost_input_of_a_never_written_lost_write_is_a_candidate_too():
    txn = {"process": "w0.1", "txn_seq": 8, "outcome": "committed", "txid": "run-w0"}
    results = {"anomalies": {
        "lost-write": [{"explanation": "lost", "transaction": txn, "transactions": [txn],
                        "outputs": {"expected": 6, "visible": 4, "in_raw_log": 4}}],
        "torn-transaction": [{"explanation": "torn", "transactions": [txn]}],
        "lost-input": [{"explanation": "lost input", "transactions": [txn]},
                       {"explanation": "another's", "transactions": [{**txn, "txn_seq": 9}]}]},
        "facts": {"commits_by_client_tv_per_txid": PER_TXID}}
    got = attribute(results)
    assert got["by_anomaly"]["torn-transaction"] == {"candidate": 1}
    assert got["by_anomaly"]["lost-input"] == {"candidate": 1, "classic-protocol": 1}
    assert "w0.1's transaction 8 committed with 2 of its 6 outputs nowhere in the log" in got["cases"]["torn-transaction"][0]["why"]
    # outputs that were written and aborted (a late EndTxn can do that) leave them the protocol's
    results["anomalies"]["lost-write"][0]["outputs"]["in_raw_log"] = 6
    assert attribute(results)["by_anomaly"]["torn-transaction"] == {"classic-protocol": 1}
