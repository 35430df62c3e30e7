"""Corruptions of a real run's stored evidence (tests/corruptions.py): each is named by the
verifier, or makes the verdict unknown, never valid. One clean run on the shared cluster; each
corruption edits a copy of its run directory. The reference checks each copy (seconds); one copy
with every anomaly corruption at once is checked by both engines (one Spark job)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kchaos.verifier.pychecker import check_run
from kchaos.verifier.spark_checks import check_run_spark
from kchaos.workloads.spec import ObserverSpec
from tests import corruptions

from .conftest import restore
from .test_workload import Harness, _spec


@pytest.fixture(scope="module")
def clean_run(_cluster3_session, tmp_path_factory) -> Path:
    """A clean run with aborted seeder batches (an aborted input to expose) and several offset
    commits per partition (one between two to lose or move back)."""
    restore(_cluster3_session)
    h = Harness(_cluster3_session, tmp_path_factory.mktemp("clean"),
                _spec(records=600, rate=3000, max_batch=10, abort_fraction=0.0, seed_abort_fraction=0.3),
                observers=ObserverSpec(count=1))
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    assert results["facts"]["acknowledged_inputs"]["aborted"] > 0 and results["facts"]["coordinator"]["attributed"] > 0
    assert results["checks"]["unseen"]["verdict"] == "valid"  # the observer read everything, and in order
    return h.run.path


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, ignore=shutil.ignore_patterns("history"))
    return to


def _holds(results: dict, expectation: tuple[str, str]) -> bool:
    kind, what = expectation
    if kind == "anomaly":
        return results["verdict"] == "invalid" and what in results["anomaly_types"]
    return results["verdict"] == "unknown" and any(what in e for e in results["errors"])


@pytest.mark.parametrize("corrupt", corruptions.ANOMALIES + corruptions.GAPS, ids=lambda f: f.__name__)
def test_a_corruption_of_a_real_run_is_named_or_unknown(clean_run, tmp_path, corrupt):
    run = _copy(clean_run, tmp_path / "run")
    expectation = corrupt(run)
    results = check_run(run).to_json()
    assert _holds(results, expectation), (expectation, results["verdict"], results["anomaly_types"], results["errors"])


def test_every_anomaly_corruption_is_named_by_both_engines(clean_run, tmp_path, spark):
    run = _copy(clean_run, tmp_path / "run")
    expected = {corrupt(run)[1] for corrupt in corruptions.ANOMALIES}
    for results in (check_run_spark(spark, run).to_json(), check_run(run).to_json()):
        assert results["verdict"] == "invalid" and expected <= set(results["anomaly_types"]), (
            results["checker"], sorted(expected - set(results["anomaly_types"])), results["errors"])
