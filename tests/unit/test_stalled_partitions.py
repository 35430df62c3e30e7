"""liveness.stalled_partitions on hand-made data: what counts as a stall."""

from types import SimpleNamespace

from kchaos.verifier.liveness import stalled_partitions


def _data(final_offset, samples, acknowledged):
    final = {"group_offsets": {"0": final_offset}, "progress": {"samples": samples}}
    return SimpleNamespace(final=final, acknowledged=SimpleNamespace(committed=[(0, o) for o in acknowledged]))


def test_inputs_the_group_never_passed_are_a_stall():
    stalled = stalled_partitions(_data(3, [[1.0, {"0": 2}], [2.0, {"0": 3}]], range(5)))
    assert [(s.partition, s.unprocessed, s.first) for s in stalled] == [(0, 2, 3)]


def test_an_offset_moved_back_after_the_group_passed_it_is_no_stall():
    """The mutation test's shape: the pipeline processed every input (its offset reached 5), then
    the group's offset was moved back to 0: offsets-backwards says so, liveness does not."""
    assert stalled_partitions(_data(0, [[1.0, {"0": 2}], [2.0, {"0": 5}]], range(5))) == []
