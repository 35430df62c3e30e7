"""A known Kafka bug's signature in a run's facts is said (issue 77, item 6): COMMIT markers the
coordinator's surviving log never prepared (docs/findings.md F8, verifier/markers.py) add words
to the verdict line, the outcome's one line, the report's first screen, JUnit and the nightly's
summary; they never change a verdict or an exit code. Hand-made results only."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from kchaos.ci.nightly import signature_counts, signature_record, signature_summary
from kchaos.reports.junit import JudgedRun
from kchaos.verifier.markers import signatures, signatures_line
from kchaos.verifier.outcome import outcome_of

LINE4 = "F8's signature seen: 4 COMMIT markers from a record that did not survive, no visible effect"


def _marker(offset: int, covers_from: int = 0, topic: str = "out", partition: int = 0) -> dict:
    return {"topic": topic, "partition": partition, "offset": offset, "producer_id": 7, "producer_epoch": 0,
            "coordinator_epoch": 3, "time_ms": 5000, "covers_from": covers_from, "nodes": ["node-1"],
            "log": {"status": "Ongoing", "before_marker_ms": 4900}}


def _results(verdict: str = "valid", unprepared: list | None = None, anomalies: dict | None = None,
             not_checked: dict | None = None, markers: bool = True) -> dict:
    safety = "invalid" if verdict == "invalid" else verdict
    facts = {"commit_markers": {"nodes": ["node-1", "node-2", "node-3"], "commit_markers": 900,
                                "unprepared": list(unprepared or []), "no_log_record_before": 0,
                                "clock_skew_set_aside": 0} if markers else None}
    return {"verdict": verdict, "safety": safety, "liveness": "valid", "anomalies": anomalies or {},
            "anomaly_types": sorted(anomalies or {}), "not_checked": not_checked or {}, "facts": facts}


FOUR = [_marker(10 * i + 9, 10 * i) for i in range(4)]


def test_a_valid_run_with_unprepared_commit_markers_says_f8s_signature():
    results = _results("valid", FOUR)
    (found,) = signatures(results)
    assert (found["finding"], found["count"], found["made_visible"]) == ("F8", 4, 0)
    assert found["line"] == LINE4 and signatures_line([found]) == LINE4
    outcome = outcome_of(Path("/r"), results, None, None)
    assert outcome.summary() == "valid; " + LINE4
    assert (outcome.verdict, outcome.judgement, outcome.exit_code) == ("valid", "valid", 0)  # words, not a verdict
    one = outcome_of(Path("/r"), _results("valid", FOUR[:1]), None, None)
    assert one.summary() == "valid; F8's signature seen: 1 COMMIT marker from a record that did not survive, " \
                            "no visible effect"


def test_a_run_without_unprepared_markers_says_nothing_more():
    for results in (_results("valid", []), _results("valid", markers=False), {"verdict": "valid", "facts": {}}):
        assert signatures(results) == []
        outcome = outcome_of(Path("/r"), results, None, None)
        assert outcome.signatures == () and outcome.signature_line == "" and outcome.summary() == "valid"


def test_an_invalid_run_keeps_its_line_and_verdict_and_the_markers_effect_is_said_as_seen():
    lost = {"lost-write": [{"explanation": "w3 transaction 746: 1 output never written"}]}
    before = outcome_of(Path("/r"), _results("invalid", [], lost), None, None).summary()
    assert before == "invalid (safety invalid, liveness valid): lost-write (1 cases)"
    outcome = outcome_of(Path("/r"), _results("invalid", FOUR, lost), None, None)
    assert outcome.summary() == (before + "; F8's signature seen: 4 COMMIT markers from a record that did not "
                                          "survive, none made an aborted read visible")
    assert (outcome.judgement, outcome.exit_code) == ("invalid", 1)
    # an aborted read whose record lies in the range a marker ends: that marker made it visible
    aborted = {"aborted-read": [{"explanation": "out-0@12 visible, its transaction aborted",
                                 "records": [{"topic": "out", "partition": 0, "offset": 12}]},
                                {"explanation": "another partition", "records": [{"topic": "out", "partition": 1,
                                                                                  "offset": 12}]}]}
    (found,) = signatures(_results("invalid", FOUR, aborted))
    assert found["made_visible"] == 1 and found["line"].endswith(", 1 of them made aborted reads visible")
    summary = outcome_of(Path("/r"), _results("invalid", FOUR, aborted), None, None).summary()
    assert summary.startswith("invalid (safety invalid, liveness valid): aborted-read (2 cases); F8's signature")


def test_an_unknown_run_says_when_the_markers_effect_could_not_be_judged():
    results = _results("unknown", FOUR, not_checked={"aborted-read": "no committed view of out"})
    results["required_not_checked"] = dict(results["not_checked"])
    outcome = outcome_of(Path("/r"), results, None, None)
    assert outcome.summary() == ("unknown (safety unknown, liveness valid): aborted-read not checked: no committed "
                                 "view of out; F8's signature seen: 4 COMMIT markers from a record that did not survive, their effect not judged "
                                 "(aborted-read not checked)")
    assert outcome.exit_code == 2


def test_a_certifications_line_carries_the_signature_and_keeps_its_exit_code():
    outcome = outcome_of(Path("/r"), _results("valid", FOUR), {"overall": "pass", "summary": "pass (2 phases)"}, None)
    assert outcome.summary() == "valid: certification pass (2 phases); " + LINE4 and outcome.exit_code == 0


def test_the_nightly_counts_the_runs_with_a_signature_and_names_them():
    seen = JudgedRun("default seed=1", "default", "valid", 1.0, outcome_of(Path("/r/1"), _results("valid", FOUR),
                                                                             None, None))
    clean = JudgedRun("default seed=2", "default", "valid", 1.0,
                      outcome_of(Path("/r/2"), _results("valid"), None, None))
    broken = JudgedRun("default seed=3", "default", "valid", 1.0, None, ["port taken"])
    records = [{"name": j.name, **signature_record(j)} for j in (seen, clean, broken)]
    assert records[0] == {"name": "default seed=1", "signatures": ["F8"], "signature": LINE4}
    assert records[1]["signatures"] == [] and records[2] == {"name": "default seed=3", "signatures": [],
                                                             "signature": None}
    counts = signature_counts(records)
    assert counts == {"runs": 1, "by_finding": {"F8": ["default seed=1"]}}
    assert signature_summary(counts) == "1 run with a known Kafka bug's signature seen: F8 in 1 (default seed=1)"
    assert signature_summary(signature_counts(records[1:])) == ""


def test_analyze_says_the_signature_on_the_verdict_line_and_the_reports_first_screen(tmp_path, monkeypatch, caplog):
    """`kchaos analyze` of a hand-made valid run whose brokers' segments (here: the fact, put in
    place of the segments it holds none of) held four unprepared COMMIT markers."""
    from kchaos.cli.main import main
    from kchaos.verifier import pychecker
    from tests.unit.test_checkers import RunBuilder

    fact = {"nodes": ["node-1", "node-2"], "commit_markers": 120, "unprepared": FOUR, "no_log_record_before": 0,
            "clock_skew_set_aside": 0}
    monkeypatch.setattr(pychecker, "commit_marker_facts", lambda *a, **k: fact)
    run = RunBuilder().write(tmp_path / "run")
    with caplog.at_level(logging.INFO):
        assert main(["analyze", str(run), "--engine", "python"]) == 0  # valid: the exit code is untouched
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("verdict: ")]
    assert line.startswith("verdict: VALID (safety valid, liveness valid); " + LINE4 + "; inputs ")
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == "valid" and results["run"]["exit_code"] == 0
    html = (run / "report.html").read_text()
    first_screen = html[:html.index("<h2>What was tested</h2>")]
    assert f'<small id="kafka-bug-signature">valid; {LINE4} (<a href="#commit-markers">the markers</a>)</small>' \
        in first_screen.replace("&#39;", "'")
    assert 'id="commit-markers"' in html


def test_a_merged_night_counts_the_runs_with_a_signature(tmp_path, capsys, caplog):
    from kchaos.cli.main import main
    from tests.unit.test_ci_shards import RUNS, _shard

    a = _shard(tmp_path / "a", "n1", "1/2", [RUNS[0], RUNS[3]], [(0, "valid"), (3, "valid")], resolved=4)
    _shard(tmp_path / "b", "n1", "2/2", [RUNS[1], RUNS[2]], [(1, "invalid"), (2, "valid")], resolved=4)
    (results_path,) = a.glob("*-default-seed0/results.json")
    results = json.loads(results_path.read_text())
    results_path.write_text(json.dumps({**results, **_results("valid", FOUR)}))
    with caplog.at_level(logging.INFO):
        assert main(["ci", "merge", str(a), str(tmp_path / "b"), "--out", str(tmp_path / "out")]) == 0
    night = Path(capsys.readouterr().out.strip().splitlines()[-1])
    summary = json.loads((night / "summary.json").read_text())
    assert summary["kafka_bug_signatures"] == {"runs": 1, "by_finding": {"F8": ["default seed=0"]}}
    assert [r["signatures"] for r in summary["runs"]] == [["F8"], [], [], []]
    assert summary["runs"][0]["signature"] == LINE4
    assert "1 run with a known Kafka bug's signature seen: F8 in 1 (default seed=0)" in caplog.text


def test_the_nightly_says_and_counts_the_runs_with_a_signature(tmp_path, capsys, caplog, monkeypatch):
    """`kchaos ci nightly` with its runs made up (no cluster): each run's console line, the end's
    count and summary.json carry the signature; the exit code is the verdicts' alone."""
    from kchaos.cli.main import main
    from kchaos.rundir import RunDir
    from kchaos.verifier.outcome import load_outcome

    campaigns = Path(__file__).resolve().parents[2] / "campaigns"
    matrix = tmp_path / "m.toml"
    matrix.write_text(f'name = "m"\n[[entry]]\ncampaign = "{campaigns / "default.toml"}"\nseeds = [1, 2]\n')

    def execute(campaign, night, seed=None, **kwargs):
        run = Path(night) / f"20261202T0100{seed:02d}Z-default-seed{seed}"
        run.mkdir()
        (run / "campaign.json").write_text("{}")
        (run / "status.json").write_text(json.dumps({"phase": "done", "complete": True, "verdict": "valid"}))
        (run / "results.json").write_text(json.dumps({**_results("valid", FOUR if seed == 1 else []),
                                                      "run": {"seed": seed}}))
        return RunDir(run), load_outcome(run)

    monkeypatch.setattr("kchaos.ci.nightly.execute_run", execute)
    with caplog.at_level(logging.INFO):
        assert main(["ci", "nightly", "--matrix", str(matrix), "--out", str(tmp_path / "out")]) == 0
    night = Path(capsys.readouterr().out.strip().splitlines()[-1])
    summary = json.loads((night / "summary.json").read_text())
    assert summary["kafka_bug_signatures"] == {"runs": 1, "by_finding": {"F8": ["default seed=1"]}}
    assert [(r["verdict"], r["signatures"]) for r in summary["runs"]] == [("valid", ["F8"]), ("valid", [])]
    lines = [r.getMessage() for r in caplog.records]
    assert f"default seed=1: valid (expected valid); safety valid, liveness valid; {LINE4}" in lines
    assert "default seed=2: valid (expected valid); safety valid, liveness valid" in lines
    assert "1 run with a known Kafka bug's signature seen: F8 in 1 (default seed=1)" in caplog.text
    assert LINE4 in (night / "junit.xml").read_text().replace("&apos;", "'").replace("&#39;", "'")
