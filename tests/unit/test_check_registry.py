"""Checks are values: one registry entry per check (verifier/checks.py), and each engine registers
one function per entry, named after the check's query. The engines' interface is made from the
registry, so adding a check is one entry and its functions."""

from __future__ import annotations

import pytest

from kchaos.verifier import checks
from kchaos.verifier.checks import CHECKS, LEDGER_CHECKS, REGISTRY, implementation
from kchaos.verifier.pychecker import PythonEngine
from kchaos.verifier.spark.checks import SparkEngine  # imports no Spark session: pyspark loads when a job runs


@pytest.mark.parametrize("engine", ["python", "spark"])
def test_every_check_has_a_function_in_each_engine(engine):
    assert [c.anomaly for c in CHECKS if implementation(c, engine) is None] == []


def test_the_share_ledger_answers_its_checks_and_its_own_duplicate():
    import kchaos.verifier.share_checks  # noqa: F401 (its checks register)

    ledger = [c.anomaly for c in REGISTRY if c.share_ledger]
    assert ledger == ["duplicate", *(c.anomaly for c in LEDGER_CHECKS)]
    assert [c.anomaly for c in REGISTRY if c.share_ledger and implementation(c, "ledger") is None] == []


def test_each_function_is_named_after_its_check_and_each_engine_is_made_from_them():
    for check in CHECKS:
        for engine in ("python", "spark"):
            assert implementation(check, engine).__name__ == f"check_{check.anomaly.replace('-', '_')}"
        assert getattr(PythonEngine, check.query.__name__) is implementation(check, "python")
        assert getattr(SparkEngine, check.query.__name__) is implementation(check, "spark")
    PythonEngine()
    SparkEngine()


def test_a_function_named_otherwise_or_for_an_unknown_check_is_refused():
    with pytest.raises(ValueError, match="name it check_zombie_write"):
        checks.implements("zombie-write", "test")(lambda data: None)
    with pytest.raises(ValueError, match="not a registered check"):
        checks.implements("no-such-check", "test")


def test_every_explanation_belongs_to_its_check():
    assert all(kind.split(".")[0] in {c.anomaly for c in REGISTRY} for kind in checks.EXPLANATIONS)
