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


def test_only_the_records_read_committed_hides_are_parsed_again(spark):
    """spark.run.raw_only: the raw view minus the committed one, by coordinates. A partition with
    the same records in both views is skipped without a join; one with an extra raw record, or
    with as many records at other offsets, gives exactly the records the committed view lacks."""
    from kchaos.verifier.spark.run import raw_only

    schema = "topic STRING, partition INT, offset BIGINT, value STRING"
    committed = [("a", 0, 0, "x"), ("a", 0, 1, "x"), ("a", 1, 0, "x"), ("b", 0, 0, "x"), ("b", 0, 1, "x")]
    raw = [*committed, ("a", 1, 1, "aborted"), ("b", 0, 2, "aborted")]
    found = raw_only(spark.createDataFrame(raw, schema), spark.createDataFrame(committed, schema)).collect()
    assert sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in found) == [
        ("a", 1, 1, "aborted"), ("b", 0, 2, "aborted")]
    assert raw_only(spark.createDataFrame(committed, schema), spark.createDataFrame(committed, schema)).count() == 0
    # as many records at other offsets (not a subset: two reads of one log cannot give it) still differ
    shifted = [("a", 0, 0, "x"), ("a", 0, 4, "late")]
    found = raw_only(spark.createDataFrame(shifted, schema), spark.createDataFrame(committed[:2], schema)).collect()
    assert [(r["offset"], r["value"]) for r in found] == [(4, "late")]
