"""liveness.stalled_partitions on hand-made data: what counts as a stall."""

from types import SimpleNamespace

from kchaos.verifier.liveness import samples_against_log, stalled_partitions


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


def test_samples_are_held_against_the_groups_log_both_ways():
    """liveness.samples_against_log: a sample past every commit of its partition, and a commit
    the last sample should have seen (stamped settle_ms before it, on the harness's clock) that it
    did not; stamps that cannot be placed (settle_ms None) are not compared."""
    log = [{"partition": 0, "offset": 4, "commit_timestamp": 100_000}]
    assert samples_against_log([[110.0, {"0": 4}]], log, 5_000) == []
    assert samples_against_log([[110.0, {"0": 6}]], log, 5_000) == [
        "partition 0 sampled at offset 6 (at 110.000), where the log holds no commit past 4"]
    behind = [[110.0, {"0": 2}]]
    assert samples_against_log(behind, log, 5_000) == [
        "the log holds a commit of partition 0 at offset 4, stamped 10 s before the last sample (at 110.000), which "
        "read offset 2"]
    assert samples_against_log(behind, log, 15_000) == []  # not yet visible for certain
    assert samples_against_log(behind, log, 5_000, shift_ms=-8_000) == []  # the brokers' clock 8 s behind
    assert samples_against_log(behind, log, None) == []
