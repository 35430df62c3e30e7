"""The hand-made run directories of tests/unit/test_checkers.py, checked by the Spark job: each
injected anomaly is named by the Spark engine too. Spark is a JVM, so these are not unit tests;
the tests are the unit module's own, collected again here with the Spark engine."""

from __future__ import annotations

import pytest

from tests.unit.test_checkers import *  # noqa: F401,F403  (the tests, collected again here)
from tests.unit.test_checkers import ENGINE, use_spark_engine


@pytest.fixture(autouse=True)
def engine(spark):
    use_spark_engine(spark)
    yield "spark"
    ENGINE.clear()
