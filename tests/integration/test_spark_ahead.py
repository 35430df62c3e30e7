"""The Spark job started ahead, with its real JVM: a job the harness never released (its run failed
before the verdict) stands down when told, writes no results and leaves no process; the released
path is the default campaign's own (tests/integration/test_cli.py, end to end)."""

from __future__ import annotations

from kchaos.rundir import SPARK_RESULTS_FILE
from kchaos.runtime.processes import processes_with_marker
from kchaos.verifier.spark.job import SESSION_UP
from kchaos.verifier.verify import SparkJob
from kchaos.waiting import wait_until


def test_a_job_started_ahead_and_never_released_stands_down_and_leaves_nothing(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    job = SparkJob(run, None, None, ahead=True).start()
    log = run / "logs" / "spark-verifier.log"
    wait_until(lambda: SESSION_UP in log.read_text(errors="replace"), 120, 0.5, "the job's session")
    assert len(processes_with_marker(str(run))) >= 2  # the job and its driver JVM, which holds the run's path
    job.cancel()
    wait_until(lambda: processes_with_marker(str(run)) == [], 30, 0.2, "a process of the stood-down job")
    assert not (run / SPARK_RESULTS_FILE).exists()
    assert job.process.returncode() == 0  # it stood down on the word, not by a kill
