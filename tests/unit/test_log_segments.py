"""The brokers' segment reader (kchaos/protocol/log_segments.py) on hand-made record batches."""

from kchaos.protocol.log_segments import partition_dirs, read_partition, read_segment
from tests.segments import control_batch, data_batch


def test_data_and_marker_batches_read_back_with_their_headers():
    data = data_batch(10, 7, 2, 40, [b"v", b"w"], leader_epoch=4)
    segment = data + control_batch(12, 7, 2, 1, 5) + control_batch(13, 7, 2, 0, 6, leader_epoch=4)
    first, commit, abort = read_segment(segment)
    assert (first.base_offset, first.last_offset, first.count, first.base_sequence) == (10, 11, 2, 40)
    assert (first.producer_id, first.producer_epoch, first.leader_epoch) == (7, 2, 4)
    assert first.transactional and not first.control and first.committed is None
    assert (commit.control, commit.committed, commit.coordinator_epoch, commit.max_timestamp) == (True, True, 5, 1000)
    assert (abort.committed, abort.coordinator_epoch, abort.leader_epoch) == (False, 6, 4)


def test_a_batch_cut_short_or_a_zero_tail_ends_the_segment():
    whole = control_batch(0, 1, 0, 1, 0)
    assert len(list(read_segment(whole + whole[:30]))) == 1
    assert len(list(read_segment(whole + bytes(64)))) == 1
    assert list(read_segment(b"")) == []


def test_a_control_record_that_is_no_marker_has_no_kind():
    leader_change = control_batch(0, -1, -1, 2, 0)  # type 2: a leader change (KRaft's)
    (batch,) = read_segment(leader_change)
    assert batch.control and batch.committed is None and batch.coordinator_epoch is None


def test_a_partitions_segments_are_read_in_offset_order(tmp_path):
    part = tmp_path / "out-3"
    part.mkdir()
    (part / "00000000000000000010.log").write_bytes(control_batch(10, 1, 0, 0, 1))
    (part / "00000000000000000002.log").write_bytes(control_batch(2, 1, 0, 1, 1))
    (tmp_path / "out-3-delete").mkdir()
    (tmp_path / "meta.properties").write_text("")
    assert [b.base_offset for b in read_partition(part)] == [2, 10]
    assert [(t, p) for t, p, _ in partition_dirs(tmp_path)] == [("out", 3)]
