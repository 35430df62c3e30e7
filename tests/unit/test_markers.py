"""COMMIT markers against the coordinator's log (verifier/markers.py), on hand-made segments and records."""

from kchaos.protocol.decoders import TransactionLogEntry
from kchaos.verifier.markers import read_commit_markers, unprepared_commit_markers
from kchaos.verifier.segments import read_replicas

from tests.segments import control_batch, data_batch


def _record(status, ms, producer_id=7, offset=0, txid="run-w0"):
    return {"partition": 1, "offset": offset,
            "entry": TransactionLogEntry(txid, producer_id, 0, status=status, last_update_ms=ms)}


def _marker(ms, producer_id=7, offset=9):
    return {"topic": "out", "partition": 0, "offset": offset, "producer_id": producer_id, "producer_epoch": 0,
            "coordinator_epoch": 1, "time_ms": ms, "covers_from": 0, "nodes": ["node-1"]}


def test_a_marker_after_its_prepare_agrees_with_the_log():
    log = [_record("Ongoing", 100, offset=1), _record("PrepareCommit", 200, offset=2), _record("CompleteCommit", 260, offset=3)]
    got = unprepared_commit_markers([_marker(205), _marker(260)], log)
    assert got["commit_markers"] == 2 and got["unprepared"] == []


def test_a_marker_whose_producer_was_still_ongoing_in_the_log_is_unprepared():
    log = [_record("Ongoing", 100, offset=1), _record("PrepareAbort", 9000, offset=2)]
    (found,) = unprepared_commit_markers([_marker(5000)], log)["unprepared"]
    assert found["log"]["status"] == "Ongoing" and found["log"]["before_marker_ms"] == 4900
    assert found["log"]["transactional_id"] == "run-w0" and found["offset"] == 9
    # an abort decided before the marker is no prepare either
    log = [_record("Ongoing", 100, offset=1), _record("PrepareAbort", 150, offset=2)]
    assert unprepared_commit_markers([_marker(5000)], log)["unprepared"][0]["log"]["status"] == "PrepareAbort"


def test_the_next_transactions_first_record_in_the_markers_millisecond_does_not_hide_the_commit():
    log = [_record("PrepareCommit", 200, offset=1), _record("CompleteCommit", 210, offset=2), _record("Ongoing", 210, offset=3)]
    assert unprepared_commit_markers([_marker(210)], log)["unprepared"] == []
    # a record stamped after the marker is not read as the state at its time
    log = [_record("PrepareCommit", 200, offset=1), _record("Ongoing", 230, offset=2)]
    assert unprepared_commit_markers([_marker(220)], log)["unprepared"] == []


def test_a_producer_without_records_before_the_marker_or_a_moved_clock_is_not_judged():
    log = [_record("Ongoing", 100, producer_id=8)]
    got = unprepared_commit_markers([_marker(50), _marker(500, producer_id=9)], log)
    assert got["unprepared"] == [] and got["no_log_record_before"] == 2
    log = [_record("Ongoing", 100)]
    got = unprepared_commit_markers([_marker(5000)], log, skewed=[(4000.0, 6000.0, None)])
    assert got["unprepared"] == [] and got["clock_skew_set_aside"] == 1


def test_markers_merge_across_replicas_and_know_the_range_they_end(tmp_path):
    for node in ("node-1", "node-2"):
        part = tmp_path / node / "out-0"
        part.mkdir(parents=True)
        segment = (data_batch(0, 7, 0, 0, [b"a"]) + control_batch(1, 7, 0, 1, 0)
                   + data_batch(2, 7, 0, 1, [b"b", b"c"]) + control_batch(4, 7, 0, 0, 0)
                   + data_batch(5, 7, 0, 3, [b"d"]))
        if node == "node-1":
            segment += control_batch(6, 7, 0, 1, 2, ts=7000)  # only node-1 holds the last marker
        (part / "00000000000000000000.log").write_bytes(segment)
    markers = read_commit_markers(read_replicas({"node-1": tmp_path / "node-1", "node-2": tmp_path / "node-2"}))
    assert [(m["offset"], m["covers_from"], m["coordinator_epoch"], m["nodes"]) for m in markers] == [
        (1, 0, 0, ["node-1", "node-2"]), (6, 5, 2, ["node-1"])]
    assert markers[1]["time_ms"] == 7000
