"""The verdict belongs to verifier/: results round-trip through their file form, the run's end
(drain, heal, interruption) and the cross-check fold into the verdict there, and ``results.json``
is written by one function. Python engine only (no JVM)."""

from __future__ import annotations

import json
import subprocess
import sys

from kchaos.verifier.pychecker import check_run
from kchaos.verifier.results import CheckResult, Results
from kchaos.verifier.spec import VerifierSpec
from kchaos.verifier.verify import apply_run_conditions, disagreements, verify_run, write_results

from .test_checkers import RunBuilder, _out

PYTHON = VerifierSpec(engine="python")


def _final(run, **changes):
    final = json.loads((run / "final.json").read_text())
    final.update(changes)
    (run / "final.json").write_text(json.dumps(final))


def test_results_round_trip_through_their_file_form(tmp_path):
    b = RunBuilder()
    b.committed["a"].append(_out(0, 2, 0))
    results = check_run(b.write(tmp_path / "r"))
    results.cross_check = {"checker": "python", "agrees": True, "disagreements": []}
    results.interruption = {"phase": "faults", "final_reads": True}
    data = json.loads(json.dumps(results.to_json(), default=str))
    again = Results.from_json(data)
    assert json.loads(json.dumps(again.to_json(), default=str)) == data
    assert again.verdict == "invalid" and data["interrupted"] is True


def test_a_timed_out_drain_is_judged_by_the_liveness_checks_and_unknown_only_where_they_cannot(tmp_path):
    """The drain's bound ran out: stalled-pipeline judges the final reads. Every input processed
    by then: valid. Where the group's offsets could not be read, nothing can say why: the
    liveness verdict is unknown with the drain's reason, and the safety verdict is the checks'."""
    clean = RunBuilder().write(tmp_path / "clean")
    _final(clean, drained=False)
    results = verify_run(clean, PYTHON)
    assert (results.verdict, results.safety, results.liveness) == ("valid", "valid", "valid")
    assert "by the final reads every committed input was processed" in {c.name: c for c in results.checks}[
        "stalled-pipeline"].note
    _final(clean, group_offsets=None, group_offsets_error="KafkaException(_TIMED_OUT)")
    results = verify_run(clean, PYTHON)
    assert results.liveness == "unknown" and results.liveness_errors == [
        "the drain timed out: not every input was processed before the final reads"]
    assert any("drain timed out" in e for e in results.to_json()["errors"])

    b = RunBuilder()
    b.committed["a"].append(_out(0, 2, 0))
    dirty = b.write(tmp_path / "dirty")
    _final(dirty, heal={"healthy": False, "error": "node 2 did not come back"})
    results = verify_run(dirty, PYTHON)
    assert results.verdict == "invalid" and any("node 2 did not come back" in e for e in results.to_json()["errors"])
    assert (results.safety, results.liveness) == ("invalid", "unknown")


def test_a_broker_unregistered_after_a_healthy_heal_is_a_liveness_failure(tmp_path):
    """The heal's check can pass before the controller fences a broker whose heartbeats stopped
    (docs/findings.md F9): broker-not-rejoined names it, from the heal's watch of registration
    (a run recorded before brokers_at_end) or from the brokers' metadata at the end."""
    run = RunBuilder().write(tmp_path / "r")
    _final(run, heal={"healthy": True, "faults": 4, "at_end": "brokers [2] not registered"}, brokers_at_end=None)
    results = verify_run(run, PYTHON)
    assert (results.verdict, results.safety, results.liveness) == ("invalid", "valid", "invalid")
    assert results.errors == [] and results.liveness_errors == []
    assert [c["broker"] for c in results.anomalies["broker-not-rejoined"]] == [2]
    # every broker registered by the heal's watch, which reads no leader: leadership not judged, never valid
    _final(run, heal={"healthy": True, "faults": 4, "at_end": None})
    results = verify_run(run, PYTHON)
    assert (results.verdict, results.safety, results.liveness) == ("unknown", "valid", "unknown")
    assert "leaders at the run's end were not read" in results.not_checked["broker-not-rejoined"]
    _final(run, heal={"healthy": True, "faults": 4, "at_end": None},
           brokers_at_end={"at": 300.0, "expected": [1, 2, 3], "registered": [1, 3], "leaderless": ["in-0"],
                           "after_heal_s": 41.0})
    results = verify_run(run, PYTHON)
    assert sorted(c["explanation"] for c in results.anomalies["broker-not-rejoined"]) == [
        "broker 2 was not registered at the run's end (41 s after the final heal), though the final heal found every "
        "broker: fenced by the controller or stopped, it leads and serves nothing",
        "in-0 had no leader at the run's end (41 s after the final heal)"]
    # a run that recorded neither: not checked, never passed
    _final(run, heal=None, brokers_at_end=None)
    results = verify_run(run, PYTHON)
    assert "broker-not-rejoined" in results.not_checked and results.liveness == "unknown"


def test_a_graceful_stop_is_recorded_and_a_run_without_final_reads_is_never_passed(tmp_path):
    run = RunBuilder().write(tmp_path / "r")
    _final(run, interrupted={"signal": "SIGINT", "phase": "faults"})
    results = verify_run(run, PYTHON)
    assert results.verdict == "valid" and results.interruption == {"signal": "SIGINT", "phase": "faults",
                                                                   "final_reads": True}
    (run / "final.json").unlink()
    results = verify_run(run, PYTHON, stopped_in="drain")
    assert results.verdict == "unknown" and results.interruption == {"phase": "drain", "final_reads": False}
    assert not results.checks and "duplicate" in results.not_checked


def test_engines_that_disagree_on_a_count_are_named():
    a = Results("spark", [CheckResult("duplicate", "invalid", [{"explanation": "x"}], note="2 cases")])
    b = Results("python", [CheckResult("duplicate", "invalid", [{"explanation": "x"}], note="1 cases")])
    assert disagreements(a, b) == ["duplicate: spark ('invalid', '2 cases') vs python ('invalid', '1 cases')"]
    assert disagreements(a, a) == []
    c = Results("python")
    apply_run_conditions(c, {})
    assert c.errors == [] and c.interruption is None


def test_engines_that_agree_on_the_count_but_not_on_a_case_beyond_the_kept_ones_are_named():
    """More cases than either keeps (MAX_CASES): the digests of every case's explanation differ
    when one case differs, the fiftieth-first included; equal cases in another order agree."""
    from kchaos.verifier.checks import result

    cases = [{"explanation": f"input 0@{o} slot 0 is visible 2 times in committed outputs"} for o in range(80)]
    other = cases[:79] + [{"explanation": "input 0@999 slot 0 is visible 2 times in committed outputs"}]
    a = Results("spark", [result("duplicate", cases)])
    b = Results("python", [result("duplicate", other)])
    assert len(a.checks[0].cases) == 50 and a.checks[0].note == b.checks[0].note == "80 cases"
    assert len(disagreements(a, b)) == 1 and "digests of every case's explanation differ" in disagreements(a, b)[0]
    assert disagreements(a, Results("python", [result("duplicate", list(reversed(cases)))])) == []
    # an engine that could not build every case (beyond DIGEST_MAX_CASES) has no digest: not compared
    assert disagreements(a, Results("python", [result("duplicate", cases[:50], total=80)])) == []


def test_results_json_is_the_typed_results_written_once(tmp_path):
    run = RunBuilder().write(tmp_path / "r")
    written = write_results(run, verify_run(run, PYTHON))
    assert json.loads((run / "results.json").read_text()) == json.loads(json.dumps(written, sort_keys=True))


def test_a_verdict_needs_nothing_from_the_harness(tmp_path):
    """``kchaos analyze`` reaches its verdict through verifier/ alone: verifying a stored run
    imports no harness module."""
    run = RunBuilder().write(tmp_path / "r")
    code = ("import sys; from pathlib import Path; from kchaos.verifier.verify import verify_run, write_results; "
            "from kchaos.verifier.spec import VerifierSpec; "
            f"r = write_results(Path({str(run)!r}), verify_run(Path({str(run)!r}), VerifierSpec(engine='python'))); "
            "print(r['verdict'], sorted(m for m in sys.modules if m.startswith('kchaos.harness')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["valid", "[]"]


def test_a_data_directory_must_be_an_absolute_path_or_a_url():
    from pathlib import Path

    import pydantic
    import pytest

    from kchaos.verifier.spark.ingest import data_location

    for good in ("hdfs://namenode:8020/kchaos", "s3a://bucket/kchaos", "file:///mnt/shared", "/mnt/shared"):
        assert VerifierSpec(data_dir=good).data_dir == good
    for bad in ("relative/dir", "shared dir", ""):
        with pytest.raises(pydantic.ValidationError, match="not a data directory"):
            VerifierSpec(data_dir=bad)
    run = Path("/runs/20261123T000000Z-default-seed1")
    assert data_location(run, "hdfs://nn/kchaos/") == "hdfs://nn/kchaos/20261123T000000Z-default-seed1"
    assert data_location(run, None) == "/runs/20261123T000000Z-default-seed1/topics-spark"


def test_the_two_reads_must_agree_except_an_internal_topic_that_grew(tmp_path):
    """A user topic read differently by Spark and the client dump is a disagreement; an internal
    topic may have grown between the two reads (a Streams member's last offset commit, seen in a
    real run), never shrunk."""
    from kchaos.verifier.verify import reads_disagree

    (tmp_path / "topics-spark").mkdir()
    (tmp_path / "topics-spark" / "ingest.json").write_text(json.dumps({"topics": {
        "kchaos-input.committed": {"records": 100}, "kchaos-invoices.raw": {"records": 41},
        "__consumer_offsets.committed": {"records": 1139}, "__transaction_state.raw": {"records": 10}}}))
    final = {"topics": [{"topic": "kchaos-input", "view": "committed", "records": 100},
                        {"topic": "kchaos-invoices", "view": "raw", "records": 40},
                        {"topic": "__consumer_offsets", "view": "committed", "records": 1138},
                        {"topic": "__transaction_state", "view": "raw", "records": 11}]}
    assert reads_disagree(tmp_path, final) == [
        "__transaction_state.raw: 10 records through Spark's Kafka source, 11 in the client dump",
        "kchaos-invoices.raw: 41 records through Spark's Kafka source, 40 in the client dump"]


def test_a_heal_that_gave_up_on_a_broker_names_it_in_a_run_recorded_before_the_watch(tmp_path):
    run = RunBuilder().write(tmp_path / "r")
    _final(run, heal={"healthy": False, "error": "cluster did not become healthy: brokers [3] not registered"},
           brokers_at_end=None)
    results = verify_run(run, PYTHON)
    assert (results.verdict, results.liveness, results.liveness_errors) == ("invalid", "invalid", [])
    assert results.anomalies["broker-not-rejoined"][0]["explanation"] == (
        "broker 3 was not registered when the final heal gave up waiting for it: fenced by the controller or "
        "stopped, it leads and serves nothing")
