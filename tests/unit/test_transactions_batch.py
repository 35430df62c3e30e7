"""How the KIP-664 queries after a run are answered when the one-JVM batch answers only some of
them, or none (kchaos/runtime/kafka_tools.py): every query still gets its answer, in its own place,
and the run says how they ran. The batch itself runs against real brokers in
tests/integration/test_local_cluster.py."""

from __future__ import annotations

import kchaos.runtime.kafka_tools as kafka_tools
from kchaos.errors import SetupError
from kchaos.runtime.kafka_tools import ToolResult, run_transactions_batch

ARGVS = [["list"], ["find-hanging", "--broker-id", "1"], ["find-hanging", "--broker-id", "2"]]


def _alone(tool, argv, version, timeout_s, check):
    return ToolResult(argv, 0, f"alone {' '.join(argv)}", "")


def test_queries_the_batch_did_not_answer_run_alone_in_their_places(monkeypatch):
    def batch(argvs, version, timeout_s):
        return [ToolResult(argvs[0], 0, "batch list", ""), None, ToolResult(argvs[2], 1, "", "refused")], "exit 137"

    monkeypatch.setattr(kafka_tools, "_transactions_batch", batch)
    monkeypatch.setattr(kafka_tools, "run_tool", _alone)
    results, how = run_transactions_batch(ARGVS, "4.4.0")
    assert [r.stdout for r in results] == ["batch list", "alone find-hanging --broker-id 1", ""]
    assert results[2].returncode == 1 and results[2].stderr == "refused"
    assert how == "one JVM, and one each for the 1 it did not answer (exit 137)"


def test_without_a_jdk_every_query_runs_alone_and_says_why(monkeypatch):
    def batch(argvs, version, timeout_s):
        raise SetupError("kchaos' batch of KIP-664 queries needs a JDK (javac), not only a JRE")

    monkeypatch.setattr(kafka_tools, "_transactions_batch", batch)
    monkeypatch.setattr(kafka_tools, "run_tool", _alone)
    results, how = run_transactions_batch(ARGVS, "4.4.0")
    assert [r.stdout for r in results] == [f"alone {' '.join(a)}" for a in ARGVS]
    assert how.startswith("one JVM per query: kchaos' batch of KIP-664 queries needs a JDK")


def test_a_batch_that_answered_everything_is_one_jvm(monkeypatch):
    monkeypatch.setattr(kafka_tools, "_transactions_batch",
                        lambda argvs, version, timeout_s: ([ToolResult(a, 0, "b", "") for a in argvs], "unused"))
    monkeypatch.setattr(kafka_tools, "run_tool", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran alone")))
    results, how = run_transactions_batch(ARGVS, "4.4.0")
    assert how == "one JVM" and len(results) == 3


def test_a_batch_that_timed_out_keeps_the_answers_it_had_and_runs_nothing_again(monkeypatch, tmp_path):
    import subprocess
    from pathlib import Path
    from types import SimpleNamespace

    def run(argv, **kwargs):  # the JVM answered the first query, then hung until killed
        out = Path(argv[argv.index(kafka_tools.TRANSACTIONS_BATCH) + 1])
        (out / "0.out").write_text("TransactionalId\ntx-1\n")
        (out / "0.exit").write_text("0\n")
        (out / "1.exit").write_text("")  # killed while writing
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])

    monkeypatch.setattr(kafka_tools, "tool_jars", lambda tool, version: (SimpleNamespace(classpath="jars/*"), version))
    monkeypatch.setattr(kafka_tools, "transactions_batch_classes", lambda: tmp_path)
    monkeypatch.setattr(kafka_tools, "require_java", lambda: "java")
    monkeypatch.setattr(kafka_tools.subprocess, "run", run)
    monkeypatch.setattr(kafka_tools, "run_tool", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran alone")))
    results, how = run_transactions_batch(ARGVS, "4.4.0", timeout_s=5)
    assert how == "one JVM" and [r.returncode for r in results] == [0, -1, -1]
    assert results[0].stdout == "TransactionalId\ntx-1\n"
    assert results[1].stderr == results[2].stderr == "kafka tool transactions timed out after 5s (one JVM for 3 queries)"
