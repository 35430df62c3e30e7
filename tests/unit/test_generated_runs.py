"""Property-based tests of the Python checker on generated run directories (tests/generated_runs.py):
a world valid by construction is valid, and each injected anomaly is named. The same worlds are
checked by both engines, case by case, in tests/integration/test_differential.py."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from kchaos.verifier.pychecker import check_run
from tests.generated_runs import MUTATIONS, keep_failing_run, worlds

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _check(world, holds) -> None:
    """Check ``world`` with the Python engine; when ``holds(results)`` is false, keep the run
    directory and fail with where it is."""
    tmp = Path(tempfile.mkdtemp(prefix="kchaos-generated-"))
    try:
        run = world.write(tmp / "run")
        results = check_run(run).to_json()
        problem = holds(results)
        if problem:
            raise AssertionError(f"{problem}: kept as {keep_failing_run(run, world.mutation or 'clean')}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@FAST
@given(worlds(mutations=(None,)))
def test_a_world_valid_by_construction_is_valid(world):
    # an external app leaves no client history: its progress is read from the coordinator's log
    committed = sum(1 for t in world.txns if (t.committed if world.external else t.client == "committed"))

    def holds(results):
        progress = results["checks"]["no-progress"]
        if committed and any(world.inputs_per_partition):
            ok = (results["verdict"] == "valid" and progress["note"].startswith(f"{committed} committed transactions")
                  and ("coordinator's log" in progress["note"]) == world.external)
        else:  # nothing committed: vacuous, which the checker must say rather than pass
            ok = results["verdict"] == "unknown" and progress["verdict"] == "unknown"
        return None if ok else f"{results['verdict']} {results['anomaly_types']} {progress}"

    _check(world, holds)


@FAST
@given(worlds(mutations=tuple(MUTATIONS)))
def test_each_injected_anomaly_is_named(world):
    def holds(results):
        if results["verdict"] == "invalid" and world.expected in results["anomaly_types"]:
            return None
        return f"{world.mutation}: {results['verdict']} {results['anomaly_types']}"

    _check(world, holds)


def test_generated_transaction_logs_cover_the_state_machine():
    """The worlds reach every coordinator state, Dead and PrepareEpochFence included, and tombstones."""
    from hypothesis import find

    seen: set[str] = set()

    def covers(world) -> bool:
        seen.update(record[1] or "tombstone" for record in world.txn_log)
        return {"Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "PrepareAbort", "CompleteAbort",
                "PrepareEpochFence", "Dead", "tombstone"} <= seen

    find(worlds(mutations=(None,)), covers, settings=settings(max_examples=300, deadline=None,
                                                              database=None))
