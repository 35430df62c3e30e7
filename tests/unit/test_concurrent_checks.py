"""Checks run concurrently (checks.run_checks with a pool; the Spark engine's default) record
the same results, in registry order, as checks run one by one; the intermediate results the
Spark checks share are built once however many threads ask. No JVM: a stand-in engine."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from kchaos.verifier.acknowledged import Acknowledged
from kchaos.verifier.checks import CHECKS, run_checks
from kchaos.verifier.engine import Engine
from kchaos.verifier.model import NotApplicable
from kchaos.verifier.results import INVALID, UNKNOWN, VALID, CheckResult, Results
from kchaos.verifier.spark.run import BuiltOnce
from kchaos.verifier.spec import VerifierSpec
from kchaos.faults.spec import FaultsSpec
from kchaos.workloads.spec import ObserverSpec, WorkloadSpec


def _engine(seed: int) -> Engine:
    """A stand-in engine, one query per registered check: each waits a random while (so concurrent
    checks finish out of order) and returns a result naming its check; one does not apply, one crashes."""
    rng = random.Random(seed)
    delays = {c.anomaly: rng.uniform(0, 0.02) for c in CHECKS}

    def make(check):
        def run(data):
            time.sleep(delays[check.anomaly])
            if check.anomaly == "lost-input":
                raise NotApplicable("stand-in: not applicable")
            if check.anomaly == "aborted-read":
                raise RuntimeError("stand-in crash")
            return CheckResult(check.anomaly, INVALID if check.anomaly == "duplicate" else VALID,
                               [{"explanation": f"case of {check.anomaly}"}])
        return run

    return type("StandIn", (Engine,), {c.query.__name__: staticmethod(make(c)) for c in CHECKS})()


def _data(**workload) -> SimpleNamespace:
    """An external app's run (no client history) as the engines' run objects present it."""
    history = SimpleNamespace(has_history=False, ops=[], faults=[], committed_transactions=lambda: 0)
    spec = WorkloadSpec(external_command=("app",), **workload)
    return SimpleNamespace(workload=spec,
                           history=history, txn_log=None, final={"liveness": {"stable": True}, "group_offsets": {}},
                           run=Path("/nonexistent"), offset_log=None, acknowledged=Acknowledged(), compaction=None,
                           txn_log_records=None, foreign_committed=0, output_processes=None,
                           outputs_committed_count=0, inputs_committed_count=0,
                           campaign=SimpleNamespace(observers=ObserverSpec(), workload=spec, verifier=VerifierSpec(),
                                                    faults=FaultsSpec(enabled=False)),
                           observer_summary=None)


@pytest.mark.parametrize("seed", range(5))
def test_a_pool_records_the_same_results_in_registry_order(seed):
    engine, data = _engine(seed), _data()
    alone, pooled = Results(checker="t"), Results(checker="t")
    run_checks(alone, data, engine)
    with ThreadPoolExecutor(4) as pool:
        run_checks(pooled, data, engine, pool)
    assert pooled.to_json() == alone.to_json()
    names = [c.name for c in pooled.checks]
    registry = [c.anomaly for c in CHECKS]
    assert names == sorted(names, key=registry.index)
    # what each outcome becomes is unchanged: requirement notes (no history, no transaction log),
    # a check that does not apply, a crash, a result
    by_name = {c.name: c for c in pooled.checks}
    assert "no client history" in pooled.not_checked["offsets-ahead"]  # nothing to read: not checked, never valid
    assert by_name["invalid-txn-transition"].verdict == UNKNOWN
    assert pooled.not_checked["lost-input"] == "stand-in: not applicable"
    assert by_name["aborted-read"].verdict == UNKNOWN and "stand-in crash" in by_name["aborted-read"].note
    assert by_name["duplicate"].verdict == INVALID
    assert "lost-write" in pooled.not_checked  # no history: not_checked by its requirement


def test_built_once_builds_each_name_once_under_concurrent_requests():
    shared, builds, start = BuiltOnce(), [], threading.Barrier(8)

    def build(name):
        def run():
            builds.append(name)
            time.sleep(0.05)  # the others arrive while this build is under way
            return object()
        return run

    def ask(i):
        start.wait()
        # "b" is built by asking for "a" inside its build, as _duplicate_keys asks for _per_input
        first = shared.get("a", build("a"))
        return first, shared.get("b", lambda: (shared.get("a", build("a")), build("b")())[1])

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(ask, range(8)))
    assert sorted(builds) == ["a", "b"]
    assert len({id(a) for a, _ in got}) == 1 and len({id(b) for _, b in got}) == 1


def test_a_failed_build_is_tried_again():
    shared, calls = BuiltOnce(), []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise OSError("first build fails")
        return "built"

    with pytest.raises(OSError):
        shared.get("x", flaky)
    assert shared.get("x", flaky) == "built" and shared.get("x", flaky) == "built"
    assert len(calls) == 2


def test_every_engine_answers_every_registered_check():
    """The registry names each check's query as a method of the engine interface; both engines
    implement all of them (an engine that missed one could not be made)."""
    from kchaos.verifier.pychecker import PythonEngine

    assert {c.query.__name__ for c in CHECKS} == set(Engine.__abstractmethods__)
    PythonEngine()  # the Spark engine is made the same way in every Spark check (tests/integration)
    with pytest.raises(TypeError):
        type("Incomplete", (Engine,), {"duplicates": staticmethod(lambda data: None)})()
