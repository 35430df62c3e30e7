"""Differential testing of the two engines on generated run directories (tests/generated_runs.py):
the Spark job and the Python reference must agree on the verdict, on every check's verdict and
case count, on the facts both count, and on the cases themselves (their explanations, built from
one template per kind in verifier/checks.py), and the Spark job must name the injected anomaly. A disagreement keeps the
run directory and says how to re-check it: ``kchaos analyze DIR`` runs both engines and prints
where they differ.

Spark is a JVM, so this is not a unit test: CI draws a bounded number of worlds, ``make
test-long`` many more, and the Python half of the property (clean is valid, each injected anomaly
is named) runs in the unit tier (tests/unit/test_generated_runs.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from kchaos.verifier.checks import case_keys
from kchaos.verifier.pychecker import check_run
from kchaos.verifier.spark.checks import check_run_spark
from kchaos.verifier.verify import disagreements
from tests.generated_runs import keep_failing_run, worlds

COUNTED_FACTS = ("inputs_committed", "inputs_aborted_or_undecided", "outputs_committed", "outputs_raw",
                 "outputs_without_lineage", "transaction_log_records", "client_transaction_versions",
                 "commits_by_client_tv_per_txid")


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])


def _engines_agree(spark, world) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = world.write(Path(tmp) / "run")
        reference = check_run(run)
        found = check_run_spark(spark, run)
        a, b = found.to_json(), reference.to_json()
        problems = disagreements(found, reference)
        if a["verdict"] != b["verdict"]:
            problems.append(f"verdict: spark {a['verdict']} vs python {b['verdict']}")
        if case_keys(a) != case_keys(b):
            problems.append(f"cases: spark {case_keys(a)} vs python {case_keys(b)}")
        for fact in COUNTED_FACTS:  # what each engine counts its own way must come to the same figures
            if a["facts"].get(fact) != b["facts"].get(fact):
                problems.append(f"fact {fact}: spark {a['facts'].get(fact)} vs python {b['facts'].get(fact)}")
        if world.expected and world.expected not in a["anomaly_types"]:
            problems.append(f"spark did not name the injected {world.mutation} ({a['anomaly_types']})")
        if problems:
            kept = keep_failing_run(run, f"differential-{world.mutation or 'clean'}")
            raise AssertionError("; ".join(problems) + f"\nrun directory kept: {kept} (re-check: kchaos analyze {kept})")


# A Spark check of a small run costs a few seconds (a dozen checks, each one or two jobs), about
# 19 s on a loaded CI machine: CI draws four worlds, the long tier eighty.
@_settings(4)
@given(world=worlds())
def test_spark_and_python_agree_case_by_case(spark, world):
    _engines_agree(spark, world)


@pytest.mark.long
@_settings(80)
@given(world=worlds())
def test_spark_and_python_agree_on_many_worlds(spark, world):
    _engines_agree(spark, world)
