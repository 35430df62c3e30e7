"""The Spark job started ahead (verify.SparkJob): its session comes up during the drain, and it
checks nothing until the harness releases it; it stands down on the harness's word, on its
absence past the bound, or when the harness that started it is gone. Hand-made go files, no JVM."""

from __future__ import annotations

import json
import threading
import time

from kchaos.verifier.spark.job import released
from kchaos.verifier.spec import VerifierSpec
from kchaos.verifier.verify import GO_FILE, Beside, SparkJob, start_spark_job_ahead


def test_the_job_waits_for_the_harness_and_goes_on_its_word(tmp_path):
    go = tmp_path / GO_FILE
    threading.Timer(0.5, lambda: go.write_text(json.dumps({"go": True}))).start()
    started = time.monotonic()
    assert released(go, timeout_s=10) is True
    assert time.monotonic() - started >= 0.4  # it waited for the file, not past it


def test_the_job_stands_down_when_told_or_when_nobody_answers(tmp_path):
    go = tmp_path / GO_FILE
    go.write_text(json.dumps({"go": False}))
    assert released(go, timeout_s=10) is False
    go.unlink()
    assert released(go, timeout_s=0.5) is False


def test_a_half_written_word_is_read_again(tmp_path):
    go = tmp_path / GO_FILE
    go.write_text("{\"go\": tr")  # never so (atomic writes), but a torn read must not be taken as an answer
    threading.Timer(0.4, lambda: go.write_text(json.dumps({"go": True}))).start()
    assert released(go, timeout_s=10) is True


def test_only_a_spark_campaign_starting_ahead_gets_a_job_ahead(tmp_path):
    assert start_spark_job_ahead(tmp_path, VerifierSpec(engine="python"), "localhost:9092") is None
    assert start_spark_job_ahead(tmp_path, VerifierSpec(start_ahead=False), "localhost:9092") is None


def test_a_job_started_ahead_is_told_where_to_wait_and_a_job_started_now_is_not(tmp_path):
    ahead = SparkJob(tmp_path, None, "h:1", ahead=True)
    now = SparkJob(tmp_path, None, "h:1")
    assert ahead.process.argv[-2:] == ["--wait-for", str(tmp_path.resolve() / "verifier" / GO_FILE)]
    assert "--wait-for" not in now.process.argv
    ahead.release()
    assert json.loads((tmp_path / "verifier" / GO_FILE).read_text()) == {"go": True}


def test_the_reference_beside_the_job_gives_its_answer_or_its_error_where_asked():
    assert Beside(lambda a, b: a + b, 2, 3).result() == 5

    def fails() -> None:
        raise ValueError("the reference failed")

    beside = Beside(fails)
    try:
        beside.result()
    except ValueError as exc:
        assert str(exc) == "the reference failed"
    else:
        raise AssertionError("the reference's error was swallowed")
