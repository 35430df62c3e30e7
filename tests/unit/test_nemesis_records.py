"""What the nemesis records of a fault that failed part way (faults/nemesis.py): what it had
resolved, so that the verifier can excuse what it did before it failed (an epoch-jump's fences
of the id it names: a split transaction otherwise, kchaos' own false positive)."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

from kchaos.faults.base import FaultContext
from kchaos.faults.nemesis import Nemesis
from kchaos.faults.schedule import ScheduledFault
from kchaos.workloads.history import HistoryWriter
from kchaos.workloads.spec import WorkloadSpec


class _Unreachable:
    """A cluster whose metadata cannot be read: the jump fails after choosing its id."""

    def admin(self):
        raise ConnectionError("the cluster did not answer")


def test_a_fault_that_failed_part_way_keeps_what_it_resolved(tmp_path):
    spec = WorkloadSpec()
    ctx = FaultContext(_Unreachable(), SimpleNamespace(spec=spec, txid_prefix="tx", work=None))
    history = HistoryWriter(tmp_path / "harness.jsonl", "harness")
    nemesis = Nemesis(ctx, [], history, cluster_lock=threading.Lock())
    nemesis.execute(0, ScheduledFault(0, 0.0, "epoch-jump", "random-worker", 5.0, 1, {}))
    history.close()
    ops = [json.loads(line) for line in (tmp_path / "harness.jsonl").read_text().splitlines()]
    failed = [op for op in ops if op["type"] == "fail"]
    assert len(failed) == 1 and "did not answer" in failed[0]["error"]
    assert failed[0]["value"]["resolved"]["detail"]["transactional_id"] in spec.transactional_ids("tx")
    assert nemesis.executed[0]["outcome"] == "fail"
    # an error kchaos did not word itself says where it was raised, innermost frame last
    assert failed[0]["value"]["raised_at"][-1] == f"test_nemesis_records.py:{_Unreachable.admin.__code__.co_firstlineno + 1} admin"


def test_a_fault_planned_for_a_phase_a_step_ended_is_dropped_and_recorded(tmp_path):
    """A per-phase schedule (faults/schedule.py): once step 1 began, a fault planned before it is
    dropped (an event says why), one planned after it waits for the step to be done, and the next phase's faults slide
    by how late the step ended, not by what pacing waited before it."""
    spec = WorkloadSpec()
    ctx = FaultContext(_Unreachable(), SimpleNamespace(spec=spec, txid_prefix="tx", work=None))
    history = HistoryWriter(tmp_path / "harness.jsonl", "harness")
    before = ScheduledFault(0, 20.0, "epoch-jump", "random-worker", 5.0, 1, {}, phase=0)
    after = ScheduledFault(1, 30.0, "epoch-jump", "random-worker", 5.0, 2, {}, phase=1)
    nemesis = Nemesis(ctx, [before, after], history, cluster_lock=threading.Lock())
    nemesis.started_at = time.monotonic() - 34.0  # the step planned at 30 s begins 4 s late
    nemesis.shift_s = 12.0  # what pacing waited in the phase before
    nemesis.begin_phase()
    nemesis.execute(0, before)
    assert not nemesis._phase_over(after)  # planned after the step: it runs, once the step is done
    waiting = threading.Thread(target=nemesis.execute, args=(1, after))
    waiting.start()
    waiting.join(0.8)
    assert waiting.is_alive()  # the step runs on: the next phase's first fault waits for it
    nemesis.stopping.set()
    waiting.join(2.0)
    assert not waiting.is_alive()  # and a stop ends the wait without injecting anything
    nemesis.started_at = time.monotonic() - 44.0  # the step planned at 30 s is done 14 s after it
    nemesis.end_phase(30.0)
    assert 13.5 < nemesis.shift_s < 15.0 and nemesis._step_done.is_set()
    history.close()
    ops = [json.loads(line) for line in (tmp_path / "harness.jsonl").read_text().splitlines()]
    (dropped,) = [op for op in ops if op["f"] == "fault-dropped" and op["type"] == "info"]
    assert dropped["value"]["index"] == 0 and dropped["value"]["steps_begun"] == 1
    assert not [op for op in ops if op["f"].startswith("fault:")]  # never injected
    assert [e["outcome"] for e in nemesis.executed] == ["dropped"]
    # a schedule planned for the whole run (phase None, as every stored schedule before) drops nothing
    whole = Nemesis(ctx, [ScheduledFault(0, 20.0, "epoch-jump", "random-worker", 5.0, 1, {})],
                    HistoryWriter(tmp_path / "whole.jsonl", "harness"), cluster_lock=threading.Lock())
    whole.begin_phase()
    assert not whole._phase_over(whole.schedule[0]) and whole._step_done.is_set()  # faults go on during steps
    whole.end_phase(30.0)
    assert whole.shift_s == 0.0
