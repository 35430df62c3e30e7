"""The share-ledger tests of tests/unit/test_share.py, checked by the Spark job (a JVM: not a
unit test)."""

from __future__ import annotations

import pytest

from tests.unit.test_share import *  # noqa: F401,F403  (the tests, collected again here)
from tests.unit.test_checkers import ENGINE, use_spark_engine


@pytest.fixture(autouse=True)
def engine(spark):
    use_spark_engine(spark)
    yield "spark"
    ENGINE.clear()
