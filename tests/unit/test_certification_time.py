"""bench/certification_time.py's cut of a run's console log into phases, on a hand-made log."""

from __future__ import annotations

import json

from bench.certification_time import render, summarise, timeline

LOG = """\
[kchaos 2026-12-02T15:00:00] run directory /x (seed 7)
[kchaos 2026-12-02T15:00:15] faults: 0s elapsed, 400s left; seeded 0 inputs
[kchaos 2026-12-02T15:07:05] healing: every node, link and worker back; waiting for a healthy cluster
[kchaos 2026-12-02T15:07:06] cluster healthy again
[kchaos 2026-12-02T15:07:30] drained
[kchaos 2026-12-02T15:07:42] verifying with Spark (local[2])
[kchaos 2026-12-02T15:08:55] verdict: VALID
[kchaos 2026-12-02T15:09:00] report: /x/report.html
"""


def test_a_run_is_cut_at_its_own_console_lines(tmp_path):
    (tmp_path / "kchaos.log").write_text(LOG)
    assert timeline(tmp_path) == {"setup": 15.0, "workload": 410.0, "heal": 1.0, "drain": 24.0, "final_reads": 12.0,
                                  "verify": 73.0, "stop_and_report": 5.0, "overhead": 115.0, "total": 540.0}


def test_a_run_without_its_marks_has_no_timeline(tmp_path):
    (tmp_path / "kchaos.log").write_text("\n".join(LOG.splitlines()[:3]))  # stopped in its workload
    assert timeline(tmp_path) is None


def test_the_table_says_the_planned_workload_and_the_gate(tmp_path):
    (tmp_path / "kchaos.log").write_text(LOG)
    (tmp_path / "campaign.json").write_text(json.dumps({"name": "certify-tv-flip", "run": {"duration_s": 400}}))
    (tmp_path / "certification.json").write_text(json.dumps({"overall": "pass"}))
    (tmp_path / "results.json").write_text(json.dumps({"verdict": "valid", "run": {"seed": 7}}))
    row = summarise(tmp_path)
    line = render([row]).splitlines()[-1]
    assert "| certify-tv-flip | 7 | valid | PASS | 15 | 410 (of 400) |" in line and "**9.0**" in line
