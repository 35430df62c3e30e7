"""`kchaos ci nightly` as CI runs it: a small matrix on real brokers (a faulted correct run and a
negative control that must be caught), JUnit XML valid against the schema, the index, exit 0; and
the same kind of matrix, faultless, as two shards merged into one night."""

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


#: the shards' runs: 5 s, faultless, one broker, no observer, the Python checker (about 30 s each on 2
#: cores; the nightly test above runs faults and Spark)
QUICK = ['"run.duration_s=5"', '"workload.records=1000"', '"workload.rate=500"', '"workload.max_batch=50"',
         '"faults.enabled=false"', '"cluster.nodes=1"', '"observers.count=0"', '"verifier.engine=python"']


@pytest.mark.long  # two real runs of about 30 s each, one per shard: 70 s on this 2-core machine under load;
# the split, the merge, its refusals and the exit codes are unit-tested (tests/unit/test_ci_shards.py)
def test_a_night_on_two_shards_merges_into_the_unsharded_night(tmp_path):
    """`--shard 1/2` and `--shard 2/2` of a two-run matrix (a run and a negative control on a fresh
    seed, drawn from the night's id by each shard on its own), then `kchaos ci merge`: the shards'
    runs are the unsharded night's (`--plan`), the merged JUnit is valid and counts both, the index
    holds one night, the exit code is the night's."""
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(f"""
name = "ci-shards"
[[entry]]
campaign = "{REPO / 'campaigns' / 'default.toml'}"
seeds = [3]
set = [{", ".join(QUICK)}]
[[entry]]
label = "control"
campaign = "{REPO / 'campaigns' / 'negative-read-uncommitted.toml'}"
fresh_seeds = 1
set = [{", ".join(QUICK)}]
expect = "invalid"
""")
    night = ["--matrix", str(matrix), "--night-id", "shard-test"]
    plan = kchaos("ci", "nightly", *night, "--plan", "--json")
    assert plan.returncode == 0, plan.stderr[-2000:]
    whole = json.loads(plan.stdout)["split"][0]["plan"]
    assert [r["fresh"] for r in whole] == [False, True]
    shards = []
    for shard in ("1/2", "2/2"):
        result = kchaos("ci", "nightly", *night, "--shard", shard, "--out", str(tmp_path / f"shard{shard[0]}"),
                        timeout=600)
        assert result.returncode in (0, 3) and result.stdout.strip(), result.stderr[-4000:]
        shards.append(Path(result.stdout.strip().splitlines()[-1]))
        assert result.returncode == 0, result.stderr[-4000:]
    ran = [r for s in shards for r in json.loads((s / "summary.json").read_text())["runs"]]
    assert sorted((r["name"], r["seed"]) for r in ran) == sorted((r["name"], r["seed"]) for r in whole)
    assert sorted(r["shard"] for r in ran) == ["1/2", "2/2"]
    out = tmp_path / "runs-nightly"
    merged = kchaos("ci", "merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--out", str(out))
    assert merged.returncode == 0, merged.stderr[-4000:]
    merged_night = Path(merged.stdout.strip().splitlines()[-1])
    schema = xmlschema.XMLSchema(str(REPO / "ci" / "junit.xsd"))
    schema.validate(str(merged_night / "junit.xml"))
    suite = schema.to_dict(str(merged_night / "junit.xml"))["testsuite"][0]
    assert (suite["@tests"], suite["@failures"], suite["@errors"]) == (2, 0, 0)
    summary = json.loads((merged_night / "summary.json").read_text())
    assert summary["exit_code"] == 0
    assert [(r["name"], r["seed"], r["verdict"], r["expected"]) for r in summary["runs"]] == [
        (w["name"], w["seed"], w["expect"], w["expect"]) for w in whole]
    for r in summary["runs"]:
        run_dir = Path(r["run_dir"])
        assert run_dir.parent == merged_night and (run_dir / "report.html").exists()
        assert json.loads((run_dir / "expect.json").read_text())["shard"] == r["shard"]
    index = (out / "index.html").read_text()
    assert index.count(merged_night.name) >= 2 and "shard-1-of-2" not in index
    assert "| `" in (merged_night / "releases.md").read_text()
