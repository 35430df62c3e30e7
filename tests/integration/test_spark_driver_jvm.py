"""The verifier's driver JVM writes its class-data-sharing archive once, from a complete job, and
later jobs map it (verifier/spark/env.py). Real Spark jobs in processes of their own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kchaos.paths import cache_dir
from tests.unit.test_checkers import RunBuilder


def _job(run, env):
    proc = subprocess.run([sys.executable, "-m", "kchaos.verifier.spark.job", str(run)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # the JVM's own logs must not reach stdout


@pytest.mark.long  # three Spark jobs, one of them writing a ~170 MB archive (about a minute)
def test_the_first_complete_job_writes_the_class_archive_and_later_jobs_reuse_it(tmp_path):
    import os

    cache = tmp_path / "cache"
    cache.mkdir()
    for entry in cache_dir().iterdir():  # the jars already resolved, without any archive
        if entry.name != "spark-cds":
            (cache / entry.name).symlink_to(entry)
    env = {**os.environ, "KCHAOS_CACHE": str(cache)}
    archives = cache / "spark-cds"

    broken = tmp_path / "broken"
    broken.mkdir()  # no campaign: the job reports it, and its JVM's classes are not kept
    assert _job(broken, env)["verdict"] == "unknown"
    assert not list(archives.glob("*")), "an incomplete job's archive was kept"

    run = RunBuilder().write(tmp_path / "run")
    assert _job(run, env)["verdict"] == "valid"
    [archive] = archives.glob("*")
    assert archive.name.startswith("driver-") and archive.suffix == ".jsa" and archive.stat().st_size > 10**7
    written = archive.stat().st_mtime_ns

    assert _job(run, env)["verdict"] == "valid"
    assert list(archives.glob("*")) == [archive] and archive.stat().st_mtime_ns == written  # mapped, not rewritten
