"""What the nemesis records of a fault that failed part way (faults/nemesis.py): what it had
resolved, so that the verifier can excuse what it did before it failed (an epoch-jump's fences
of the id it names: a split transaction otherwise, kchaos' own false positive)."""

from __future__ import annotations

import json
import threading
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
