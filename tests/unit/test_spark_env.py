"""The verifier's driver JVM options and its size estimate: pure logic, no JVM started."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kchaos.errors import SetupError
from kchaos.verifier.spark import env as spark_env
from kchaos.verifier.spark.env import QUICK_JIT_BELOW, class_archive, driver_java_options
from kchaos.verifier.spark.job import output_records


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KCHAOS_SPARK_JIT", raising=False)
    return tmp_path / "cache"


def test_a_missing_class_archive_is_dumped_where_asked_and_an_existing_one_is_used(cache, tmp_path):
    archive = class_archive()
    assert archive is not None and archive.parent.is_dir() and archive.parent.parent == cache
    dump = archive.with_name("dump.tmp")
    options = driver_java_options(dump_archive_to=dump).split()
    assert f"-XX:ArchiveClassesAtExit={dump}" in options
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in options)
    assert not any("Archive" in o for o in driver_java_options().split())  # nothing asked, nothing dumped
    archive.write_bytes(b"archive")
    options = driver_java_options(dump_archive_to=dump).split()
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert not any(o.startswith("-XX:ArchiveClassesAtExit") for o in options)
    # CDS warnings would land on the job's stdout, whose last line is its JSON summary
    assert "-Xlog:cds=off,cds+dynamic=off" in options


def test_the_archive_is_named_after_the_jvm_and_the_class_path(cache, tmp_path, monkeypatch):
    home = tmp_path / "pyspark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"1")
    monkeypatch.setattr(spark_env, "pyspark_home", lambda: home)
    first = class_archive()
    assert class_archive() == first
    (home / "jars" / "spark-core.jar").write_bytes(b"12")  # another build of a jar: another archive
    assert class_archive() != first
    monkeypatch.setattr(spark_env, "_java", lambda: None)
    assert class_archive() is None


def test_small_jobs_compile_with_c1_only_and_large_or_unknown_ones_with_c2(cache, monkeypatch):
    quick = "-XX:TieredStopAtLevel=1"
    assert quick in driver_java_options(records=QUICK_JIT_BELOW - 1).split()
    assert quick not in driver_java_options(records=QUICK_JIT_BELOW).split()
    assert quick not in driver_java_options(records=None).split()
    assert quick in driver_java_options(records=10**9, jit="quick").split()
    monkeypatch.setenv("KCHAOS_SPARK_JIT", "full")
    assert quick not in driver_java_options(records=10).split()
    monkeypatch.setenv("KCHAOS_SPARK_JIT", "fast")
    with pytest.raises(SetupError, match="KCHAOS_SPARK_JIT"):
        driver_java_options(records=10)


def _dump(path, rows):
    pq.write_table(pa.table({"partition": pa.array([0] * rows, pa.int32())}), path)


def test_the_job_is_sized_from_the_ingest_or_the_client_dumps(tmp_path):
    run = tmp_path / "run"
    (run / "topics").mkdir(parents=True)
    assert output_records(run, None) is None  # no campaign: unknown, and the job reports what is missing
    (run / "campaign.json").write_text(json.dumps({"workload": {"output_topics": ["a", "b"]}}))
    for topic, view, rows in (("a", "committed", 3), ("a", "raw", 5), ("b", "committed", 7), ("in", "raw", 100)):
        _dump(run / "topics" / f"{topic}.{view}.parquet", rows)
    assert output_records(run, None) == 15  # b's raw view is missing: not counted
    ingest = {"layout": "view/topic", "data_dir": str(run / "elsewhere"),
              "topics": {"a.committed": {"records": 10}, "a.raw": {"records": 12}, "in.raw": {"records": 99}}}
    (run / "topics-spark").mkdir()
    (run / "topics-spark" / "ingest.json").write_text(json.dumps(ingest))
    assert output_records(run, None) == 22
    (run / "topics-spark" / "ingest.json").write_text("{not json")
    assert output_records(run, None) is None  # unknown: the job still runs, sized for large


def test_a_dump_left_by_a_process_that_is_gone_is_removed(tmp_path):
    import os
    import subprocess
    import sys

    from kchaos.verifier.spark.env import remove_stale_dumps

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"driver-x.jsa.{gone.stdout.strip()}.tmp"
    live = tmp_path / f"driver-x.jsa.{os.getpid()}.tmp"
    archive = tmp_path / "driver-x.jsa"
    for f in (stale, live, archive):
        f.write_bytes(b"x")
    remove_stale_dumps(tmp_path)
    assert not stale.exists() and live.exists() and archive.exists()
