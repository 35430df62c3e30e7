"""What the segment facts could not read is said (verifier/segments.py, issue 77): a node's log
directory missing for a partition, a segment file cut short or unreadable, a node without its log
directory. Each fact read on them (commit_markers, sequence_reuse) carries ``partial``; a whole
cluster's carries none. Hand-made segments (tests/segments.py)."""

from __future__ import annotations

import shutil

import pytest

from kchaos.verifier.markers import commit_marker_facts, signatures
from kchaos.verifier.segments import read_segments, run_segments
from kchaos.verifier.sequences import sequence_reuse_facts
from tests.segments import control_batch, data_batch

#: out-0: a committed transaction, then an aborted one, then a committed one (offsets 0-6)
SEGMENT = (data_batch(0, 7, 0, 0, [b"a"]) + control_batch(1, 7, 0, 1, 0) + data_batch(2, 7, 0, 1, [b"b", b"c"])
           + control_batch(4, 7, 0, 0, 0) + data_batch(5, 7, 0, 3, [b"d"]) + control_batch(6, 7, 0, 1, 0))
NODES = ("node-1", "node-2")


def _cluster(run):
    """Two nodes, each holding out-0 whole in two segments, its high watermark (7) recorded."""
    cut = len(data_batch(0, 7, 0, 0, [b"a"]) + control_batch(1, 7, 0, 1, 0))
    for node in NODES:
        part = run / "cluster" / node / "data" / "out-0"
        part.mkdir(parents=True)
        (part / "00000000000000000000.log").write_bytes(SEGMENT[:cut])
        (part / "00000000000000000002.log").write_bytes(SEGMENT[cut:])
        (part.parent / "replication-offset-checkpoint").write_text("0\n1\nout 0 7\n")
    return run


def _facts(run):
    segments = run_segments(run)
    return (commit_marker_facts(segments, lambda pids: []), sequence_reuse_facts(segments, []))


def test_a_whole_clusters_facts_are_not_partial(tmp_path):
    segments = run_segments(_cluster(tmp_path))
    assert segments.partial == () and [b.base_offset for b, _ in segments.replicas[("out", 0)]] == [0, 1, 2, 4, 5, 6]
    assert all("partial" not in fact for fact in _facts(tmp_path))


def _remove_the_partition(run):
    shutil.rmtree(run / "cluster" / "node-2" / "data" / "out-0")


def _truncate_the_last_segment(run):
    path = run / "cluster" / "node-2" / "data" / "out-0" / "00000000000000000002.log"
    path.write_bytes(path.read_bytes()[:-20])


def _cut_the_first_segment(run):
    path = run / "cluster" / "node-2" / "data" / "out-0" / "00000000000000000000.log"
    path.write_bytes(path.read_bytes()[:-20])  # the marker at offset 1 cut short, a segment after it


def _make_a_segment_unreadable(run):
    path = run / "cluster" / "node-2" / "data" / "out-0" / "00000000000000000002.log"
    path.unlink()
    path.mkdir()  # read as a file: IsADirectoryError, as an unreadable file's OSError


def _lose_a_nodes_log_directory(run):
    shutil.rmtree(run / "cluster" / "node-2" / "data")
    (run / "cluster" / "node-2" / "logs").mkdir()


@pytest.mark.parametrize("corrupt, said", [
    (_remove_the_partition, "node-2: no log directory of out-0, which its replication-offset-checkpoint lists"),
    (_truncate_the_last_segment, "node-2: out-0 ends at offset 6, below the high watermark 7"),
    (_cut_the_first_segment, "node-2: out-0: segment 00000000000000000000.log stops at byte"),
    (_make_a_segment_unreadable, "node-2: out-0: segment 00000000000000000002.log could not be read"),
    (_lose_a_nodes_log_directory, "node-2 has no log directory"),
])
def test_what_a_node_did_not_hold_whole_is_said_in_every_segment_fact(tmp_path, corrupt, said):
    """The other node still holds every batch, so the merged batches look whole: only the nodes'
    own records tell that one replica was not read whole."""
    run = _cluster(tmp_path)
    corrupt(run)
    markers, reuse = _facts(run)
    assert any(said in why for why in markers["partial"]), markers["partial"]
    assert reuse["partial"] == markers["partial"]
    assert markers["commit_markers"] == 2  # computed on what was read, and said to be partial


def test_a_gap_between_batches_of_a_partition_the_cleaner_does_not_compact_is_said(tmp_path):
    part = tmp_path / "node-1" / "out-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(data_batch(0, 7, 0, 0, [b"a"]) + control_batch(3, 7, 0, 1, 0))
    (tmp_path / "node-1" / "replication-offset-checkpoint").write_text("0\n1\nout 0 4\n")
    assert read_segments({"node-1": tmp_path / "node-1"}).partial == ("node-1: out-0 has no batch of offsets 1 to 2",)
    compacted = tmp_path / "node-1" / "__consumer_offsets-0"
    shutil.move(part, compacted)
    (tmp_path / "node-1" / "replication-offset-checkpoint").write_text("0\n1\n__consumer_offsets 0 4\n")
    assert read_segments({"node-1": tmp_path / "node-1"}).partial == ()


def test_an_f8_signature_read_on_partial_segments_says_so():
    unprepared = [{"topic": "out", "partition": 0, "offset": 9, "covers_from": 0, "producer_id": 7}]
    results = {"verdict": "valid", "facts": {"commit_markers": {"unprepared": unprepared,
                                                                "partial": ["node-2 has no log directory"]}}}
    (found,) = signatures(results)
    assert found["line"].endswith("no visible effect (on partial segments: 1 gaps, facts.commit_markers.partial)")
    results["facts"]["commit_markers"].pop("partial")
    assert "partial" not in signatures(results)[0]["line"]
