"""The checker's results of a stored run: the engine the ``[verifier]`` table names, the Spark job
cross-checked against the reference, and the run's conditions folded in as errors. It decides no
exit code and writes only the engines' own results files (``write_results``, for
verifier/verdict.py's ``judge_run``, which turns these results into the verdict and writes
``results.json``).

``verify_run`` picks the engine the campaign's ``[verifier]`` table names, runs it, cross-checks
the Spark job against the single-process reference, and folds in what else a verdict depends on:
a drain that timed out, a cluster unhealthy after the final heal, a run stopped early. Each of
those is an error on the typed results, and an error makes a verdict ``unknown`` unless a check
found it ``invalid`` (verifier/results.py). ``kchaos run`` and ``kchaos analyze`` both come here,
so a stored run gets the same verdict from either, with nothing from the harness.
"""

from __future__ import annotations

import json
import sys
import time
import threading
from pathlib import Path
from typing import Any

from kchaos.files import atomic_write, read_json
from kchaos.log import say
from kchaos.rundir import PYTHON_RESULTS_FILE, SPARK_RESULTS_FILE, RunDir
from kchaos.runtime.processes import ManagedProcess
from kchaos.verifier.checks import NOT_FOR_TXN, TXN_ISOLATION_CHECK, case_keys
from kchaos.verifier.isolation.judge import txn_fault_evidence, txn_run_checks
from kchaos.verifier.model import MAX_CASES
from kchaos.verifier.pychecker import check_run, check_unfinished_run
from kchaos.verifier.results import INVALID, UNKNOWN, Results
from kchaos.verifier.spark.isolation import isolation_cross_check
from kchaos.verifier.spec import VerifierSpec
from kchaos.waiting import gone_within

#: how often a long verification says it is still at work
VERIFY_PROGRESS_S = 30.0


#: the file a Spark job started ahead (``SparkJob(..., ahead=True)``) waits for in the run's
#: verifier/ directory: ``{"go": true}`` once the run is recorded, ``{"go": false}`` to stand down
GO_FILE = "go.json"


class SparkJob:
    """The Spark job in a process of its own (its JVM too), recorded by a pid file so that a
    crashed harness's reaper stops it. Started ``ahead``, it brings its JVM and session up and then
    waits for :meth:`release` (the harness starts it as the workers stop after the drain, so
    that the session's start overlaps the final reads instead of following them: docs/benchmarks.md)."""

    def __init__(self, run: Path, master: str | None, bootstrap: str | None, data_dir: str | None = None,
                 ahead: bool = False):
        self.run, self.master, self.bootstrap, self.ahead = run, master, bootstrap, ahead
        self.out = run / SPARK_RESULTS_FILE
        # The job runs in the run's verifier/ directory, not the user's: Spark 4.0 creates an
        # "artifacts" directory in its working directory (ArtifactManager) and leaves it behind.
        # So every path on its command line is absolute.
        self.home = run.resolve() / "verifier"
        self.go = self.home / GO_FILE
        argv = [sys.executable, "-m", "kchaos.verifier.spark.job", str(run.resolve()), "--out", str(self.out.resolve())]
        if master:
            argv += ["--master", master]
        if bootstrap:
            argv += ["--bootstrap", bootstrap]
        if data_dir:
            argv += ["--data-dir", data_dir if "://" in data_dir else str(Path(data_dir).resolve())]
        if ahead:
            argv += ["--wait-for", str(self.go)]
        self.log = run / "logs" / "spark-verifier.log"
        self.process = ManagedProcess("spark-verifier", argv, self.log, self.home, marker=str(run), cwd=self.home)
        self.released = False

    def start(self) -> "SparkJob":
        self.out.unlink(missing_ok=True)
        self.go.unlink(missing_ok=True)
        self.process.start()
        return self

    def release(self) -> None:
        """The run is recorded: the job goes on to its ingest and checks."""
        self.home.mkdir(parents=True, exist_ok=True)
        atomic_write(self.go, json.dumps({"go": True}))
        self.released = True

    def cancel(self) -> None:
        """Stand down a job that was never released (the run failed before its verdict)."""
        if self.process.is_running():
            atomic_write(self.go, json.dumps({"go": False}))
            if not gone_within(self.process.is_running, 5.0, 0.2):
                self.process.kill()
        self.process.forget_if_exited()

    def results(self, timeout_s: float) -> Results:
        """Its results within ``timeout_s`` from now (releasing a job started ahead), or an
        ``unknown`` naming why there are none."""
        if self.ahead and not self.released:
            self.release()
        started = time.monotonic()
        job = self.process
        say(f"verifying with Spark ({self.master or 'local[2]'}"
            f"{', reading the topics from Kafka' if self.bootstrap else ''}"
            f"{', its session started during the final reads' if self.ahead else ''})")
        try:
            while job.is_running() and time.monotonic() - started < timeout_s:
                gone_within(job.is_running, min(VERIFY_PROGRESS_S, timeout_s - (time.monotonic() - started)), 0.5)
                if job.is_running():
                    say(f"verifying with Spark: {time.monotonic() - started:.0f}s (at most {timeout_s:.0f}s); "
                        f"its log: {self.log}")
        finally:
            timed_out = job.is_running()
            if timed_out:
                job.kill()
            job.forget_if_exited()
        if self.out.exists():
            return Results.from_json(json.loads(self.out.read_text()))
        tail = self.log.read_text(errors="replace").strip().splitlines()[-5:] if self.log.exists() else []
        reason = f"timed out after {timeout_s:.0f}s" if timed_out else f"exited with code {job.returncode()}"
        return Results(checker="spark", errors=[f"the Spark verifier {reason} without results ({self.log}): "
                                                + " | ".join(tail)])


def start_spark_job_ahead(run: Path, spec: VerifierSpec, bootstrap: str | None) -> SparkJob | None:
    """The campaign's Spark job started before the run is recorded (see :class:`SparkJob`), or None
    where the campaign's engine is not Spark or it does not start ahead. ``bootstrap``: the live
    cluster, read only where the campaign reads the topics from Kafka."""
    if spec.engine != "spark" or not spec.start_ahead:
        return None
    return SparkJob(run, spec.spark_master, bootstrap if spec.read_from_kafka else None, spec.data_dir,
                    ahead=True).start()


class Beside:
    """``fn(*args)`` in a daemon thread, for :meth:`result`: one that is never asked for (a run
    interrupted while the Spark job ran) holds up nothing, not even the interpreter's exit."""

    def __init__(self, fn: Any, *args: Any):
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name="kchaos-beside", daemon=True)
        self._thread.start()

    def _run(self, fn: Any, args: tuple[Any, ...]) -> None:
        try:
            self._value = fn(*args)
        except BaseException as exc:  # raised again where the result is asked for
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def disagreements(primary: Results, reference: Results) -> list[str]:
    """Where two engines disagree: a check missing from one, a check's verdict or note (which
    carries the exact case count), or its cases (checks.case_keys: one explanation template per
    kind of case, so equal cases read alike): case by case where both kept every case (at most
    MAX_CASES), else by the digest of every case's explanation (checks.case_digest, up to
    DIGEST_MAX_CASES; beyond it each engine keeps only its own first ones); the checks left
    unchecked, and why."""
    a_checks, b_checks = ({c.name: c for c in r.checks} for r in (primary, reference))
    a_keys, b_keys = (case_keys(r.to_json()) for r in (primary, reference))
    problems = []
    for name in sorted(set(a_checks) | set(b_checks)):
        a, b = a_checks.get(name), b_checks.get(name)
        if a is None or b is None or a.verdict != b.verdict or a.note != b.note:
            problems.append(f"{name}: {primary.checker} {a and (a.verdict, a.note)} vs "
                            f"{reference.checker} {b and (b.verdict, b.note)}")
        elif len(a.cases) < MAX_CASES and a_keys.get(name, []) != b_keys.get(name, []):
            only_a = sorted(set(a_keys.get(name, [])) - set(b_keys.get(name, [])))
            only_b = sorted(set(b_keys.get(name, [])) - set(a_keys.get(name, [])))
            problems.append(f"{name}: the same count, other cases: only {primary.checker}: {only_a[:3]}; "
                            f"only {reference.checker}: {only_b[:3]}")
        elif a.digest and b.digest and a.digest != b.digest:  # more cases than either keeps: all compared
            problems.append(f"{name}: the same count, other cases (digests of every case's explanation differ: "
                            f"{primary.checker} {a.digest}, {reference.checker} {b.digest})")
    if primary.not_checked != reference.not_checked:
        problems.append(f"not checked: {primary.checker} {sorted(primary.not_checked)} vs "
                        f"{reference.checker} {sorted(reference.not_checked)}")
    return problems


def reads_disagree(run: Path, final: dict[str, Any]) -> list[str]:
    """The run's two reads of its topics (the client dumps and the Spark ingest), where it has
    both: each user topic and view must hold as many records in each (the pipeline has stopped).
    An internal topic may have grown between them (the Spark ingest reads second, and the
    cluster itself still writes there: a Kafka Streams member's last offset commit, group
    metadata), but never shrunk. A difference beyond that means one read is partial or was
    altered; the verdict cannot rest on either."""
    ingest = read_json(Path(run) / "topics-spark" / "ingest.json", None) or {}
    counted = {f"{t['topic']}.{t['view']}": t.get("records") for t in final.get("topics") or []}

    def disagree(name: str, spark: Any, dump: Any) -> bool:
        if name.startswith("__") and isinstance(spark, int) and isinstance(dump, int):
            return spark < dump
        return spark != dump

    return [f"{name}: {entry.get('records')} records through Spark's Kafka source, {counted[name]} in the client dump"
            for name, entry in sorted((ingest.get("topics") or {}).items())
            if name in counted and disagree(name, entry.get("records"), counted[name])]


def apply_run_conditions(results: Results, final: dict[str, Any]) -> None:
    """What the run's end says about the verdict, from ``final.json``: a drain that timed out
    (not every input was processed before the final reads), an unhealthy final heal, a broker
    missing at the end, a graceful stop (what ran was healed, drained within bounds, read and
    checked). The first three concern liveness: where a liveness check judged them
    (stalled-pipeline, broker-not-rejoined) the check's verdict says it, with its cases;
    otherwise each is a liveness error, which keeps the liveness verdict from valid."""
    judged = {c.name for c in results.checks if c.verdict != UNKNOWN}
    if final and not final.get("drained", True) and "stalled-pipeline" not in judged:
        results.liveness_errors.append("the drain timed out: not every input was processed before the final reads")
    heal = final.get("heal") or {}
    if heal and not heal.get("healthy", True):
        named = any(c.name == "broker-not-rejoined" and c.verdict == INVALID for c in results.checks)
        if not (named and "not registered" in str(heal.get("error"))):
            results.liveness_errors.append(f"the cluster was not healthy after the final heal: {heal.get('error')}")
    elif heal.get("at_end") and "broker-not-rejoined" not in judged:
        results.liveness_errors.append(f"the cluster was not healthy at the end of the run, though it was at the final "
                                       f"heal: {heal['at_end']}")
    if final.get("interrupted"):
        results.interruption = {**final["interrupted"], "final_reads": True}


def verify_run(run: Path, spec: VerifierSpec, bootstrap: str | None = None, ops: list[dict[str, Any]] | None = None,
               stopped_in: str | None = None, spark_job: SparkJob | None = None) -> Results:
    """The results of a stored run, verdict included. ``ops``: the paired history when the
    caller has read it; ``stopped_in``: the phase ``status.json`` last recorded (for a run that
    stopped before its final reads); ``spark_job``: the campaign's Spark job, started ahead."""

    final_path = run / "final.json"
    if _workload_kind(run) == "txn":
        return txn_run_results(run, spark_job, stopped_in, spec, ops)  # ops: the history judge_run read
    if not final_path.exists():
        # stopped before its final reads: what it recorded is kept, nothing is passed
        if spark_job is not None:
            spark_job.cancel()
        results = check_unfinished_run(run, ops or [], stopped_in)
        results.interruption = {"phase": stopped_in, "final_reads": False}
        return results
    final = json.loads(final_path.read_text())
    if spec.engine == "spark":
        if spark_job is None:
            spark_job = SparkJob(run, spec.spark_master, bootstrap, spec.data_dir).start()
        # the reference checks while the Spark job does, where the run is small enough for it by
        # the final reads' counts (an upper bound of the outputs): the harness only waits meanwhile
        recorded = sum(t.get("records") or 0 for t in final.get("topics") or [])
        early = Beside(check_run, run, ops) if spec.cross_check and recorded <= spec.cross_check_max_outputs else None
        results = spark_job.results(spec.timeout_s)
        reference = early.result() if early is not None else None
        if results.facts.get("topic_source") == "spark-kafka-source":
            differ = reads_disagree(run, final)
            if differ:
                results.errors.append("the two reads of the topics disagree: " + "; ".join(differ))
        outputs = results.facts.get("outputs_raw") or 0
        if spec.cross_check and results.checks and outputs <= spec.cross_check_max_outputs:
            reference = check_run(run, ops) if reference is None else reference
            write_results(run, reference, PYTHON_RESULTS_FILE)
            problems = disagreements(results, reference)
            results.cross_check = {"checker": "python", "agrees": not problems, "disagreements": problems}
            if problems:
                results.errors.append("the Spark and Python checkers disagree: " + "; ".join(problems))
    else:
        results = check_run(run, ops)
    apply_run_conditions(results, final)
    return results


def _workload_kind(run: Path) -> str | None:
    """The recorded campaign's ``workload.kind``, read without validating it (None without one)."""
    data = RunDir(run).campaign_data(None)
    workload = data.get("workload") if isinstance(data, dict) else None
    return workload.get("kind", "ctp") if isinstance(workload, dict) else None


def txn_run_results(run: Path, spark_job: SparkJob | None = None, stopped_in: str | None = None,
                    spec: VerifierSpec | None = None, ops: list[dict[str, Any]] | None = None) -> Results:
    """A ``workload.kind = "txn"`` run's results: the isolation-cycle check (verifier/isolation/
    judge.py), its one required check, judged by the Python reference and, with the Spark engine
    (``spec.engine``, the default), computed again by Spark's queries (verifier/spark/isolation.py,
    in a session of this process) and compared: a disagreement is an error, so the verdict is never
    valid on one engine's word when both ran. The registry's checks do not apply to it and are
    ``not_checked`` with the reason (checks.NOT_FOR_TXN). The run's end still speaks (a heal that
    failed, an interruption). A Spark job started ahead stands down (it would ingest the pipeline's
    topics, which the run lacks)."""
    if spark_job is not None:
        spark_job.cancel()
    spark = spec is None or spec.engine == "spark"
    results = Results(checker="python", not_checked=dict(NOT_FOR_TXN), required=[TXN_ISOLATION_CHECK],
                      facts={"workload_kind": "txn", "engines": {
                          "python": "judged", "spark": "cross-check" if spark else "not run (verifier.engine = python)"}})
    final_path = run / "final.json"
    if not final_path.exists():
        results.not_checked[TXN_ISOLATION_CHECK] = "the run stopped before its final reads: no final log to judge by"
        results.interruption = {"phase": stopped_in, "final_reads": False}
        return results
    final = json.loads(final_path.read_text())
    try:
        checks, facts = txn_run_checks(run, final, ops)
    except (OSError, ValueError, KeyError) as exc:
        results.not_checked[TXN_ISOLATION_CHECK] = f"the run's history or final log could not be read: {exc!r}"[:400]
    else:
        results.checks.extend(checks)
        results.facts.update(facts)
        for check in checks:
            results.not_checked.pop(check.name, None)
        errors, measured = txn_fault_evidence(run, ops)
        results.errors.extend(errors)
        results.facts.update(measured)
        if spark:
            say("verifying with Spark: the isolation-cycle check again, compared with the reference")
            try:
                problems = isolation_cross_check(run, (checks[0], facts), master=spec.spark_master if spec else None)
            except Exception as exc:  # a checker that crashes leaves the verdict unknown, said
                problems = [f"the Spark isolation check failed: {exc!r}"[:400]]
            results.cross_check = {"checker": "spark", "agrees": not problems, "disagreements": problems[:20]}
            results.facts["engines"]["spark"] = "agrees" if not problems else "disagrees"
            if problems:
                results.errors.append("the Spark and Python isolation checks disagree: " + "; ".join(problems)[:600])
    apply_run_conditions(results, final)
    return results


def write_results(run: Path, results: Results, name: str | None = None,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the results (atomically, as every run-directory file) as results.json, or as ``name``
    (an engine's own), with ``extra`` top-level blocks (the run's own record); return what was written."""
    data = {**(extra or {}), **results.to_json()}
    RunDir(run).write_results(data, name)
    return data
