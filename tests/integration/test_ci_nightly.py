"""`kchaos ci nightly` as CI runs it: a small matrix on real brokers (a faulted correct run and a
negative control that must be caught), JUnit XML valid against the schema, the index, exit 0."""

from __future__ import annotations

import json

import pytest
from pathlib import Path

import xmlschema

from .test_cli import REPO, kchaos

SHORT = ['"run.duration_s=10"', '"workload.records=1500"', '"workload.rate=500"', '"workload.max_batch=50"',
         '"faults.start_after_s=2"', '"faults.exposure="']  # a 10 s run cannot meet the default's exposure bar


@pytest.mark.long  # two campaigns end to end (about 3 minutes); JUnit and exit codes are unit-tested
def test_nightly_matrix_writes_junit_index_and_exit_code(tmp_path):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(f"""
name = "ci-test"
[[entry]]
campaign = "{REPO / 'campaigns' / 'default.toml'}"
seeds = [3]
set = [{", ".join(SHORT)}]
[[entry]]
label = "control"
campaign = "{REPO / 'campaigns' / 'negative-read-uncommitted.toml'}"
seeds = [1]
set = [{", ".join(SHORT)}]
expect = "invalid"
""")
    out = tmp_path / "out"
    result = kchaos("ci", "nightly", "--matrix", str(matrix), "--out", str(out), timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    night = next(out.glob("*-ci-test"))
    junit = night / "junit.xml"
    schema = xmlschema.XMLSchema(str(REPO / "ci" / "junit.xsd"))
    schema.validate(str(junit))
    suite = schema.to_dict(str(junit))["testsuite"][0]
    assert (suite["@tests"], suite["@failures"], suite["@errors"]) == (2, 0, 0)
    summary = json.loads((night / "summary.json").read_text())
    assert [(r["verdict"], r["expected"]) for r in summary["runs"]] == [("valid", "valid"), ("invalid", "invalid")]
    control = Path(summary["runs"][1]["run_dir"])
    assert "aborted-read" in json.loads((control / "results.json").read_text())["anomaly_types"]
    index = (out / "index.html").read_text()
    assert index.count('<span class="pill valid">valid</span>') == 1 and "negative-read-uncommitted" in index
    assert all((Path(r["run_dir"]) / "report.html").exists() for r in summary["runs"])
