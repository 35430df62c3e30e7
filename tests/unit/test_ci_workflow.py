"""The example CI workflows: actionlint (ci/lint.py, built into kchaos' cache by ``kchaos setup
--actionlint``, which ``make test`` runs) finds nothing in ci/examples/*.yml, and the nightly
workflow keeps the shape docs/ci.md describes: the night's id and the shards' matrix from the plan
in a first job, the Go version from the workers' go.mod, the shards' timeouts from the plan, one
JUnit report read from this night's merge only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kchaos.ci.lint import ACTIONLINT_VERSION, actionlint_path, run_actionlint
from kchaos.runtime.go_install import go_binary

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "ci" / "examples").glob("*.yml"))
NIGHTLY = REPO / "ci" / "examples" / "github-nightly.yml"


def test_actionlint_finds_nothing_in_the_ci_examples():
    if not actionlint_path().exists() and go_binary() is None:
        pytest.skip(f"actionlint {ACTIONLINT_VERSION} is not in the cache and Go is absent to build it "
                    "(`kchaos setup --actionlint` needs Go)")
    assert EXAMPLES
    proc = run_actionlint(EXAMPLES)
    assert proc.returncode == 0, f"actionlint {ACTIONLINT_VERSION} on {[p.name for p in EXAMPLES]}:\n{proc.stdout}{proc.stderr}"


def _job(text: str, name: str) -> str:
    """A job's block of the workflow's text (from ``  name:`` to the next job at that indent)."""
    match = re.search(rf"^  {name}:\n(.*?)(?=^  [a-z-]+:\n|^  # |\Z)", text, re.S | re.M)
    assert match, f"no job {name!r}"
    return match.group(1)


def test_the_nightly_workflow_plans_shards_merges_and_reports_only_this_night():
    text = NIGHTLY.read_text()
    plan, shard, merge, findings = (_job(text, n) for n in ("plan", "shard", "merge", "findings"))
    assert "--plan --shards" in plan and "--json" in plan and '"needs_root"' in plan and "at_most_min" in plan
    assert "night-id: ${{ steps.night.outputs.id }}" in plan and "matrix: ${{ steps.plan.outputs.matrix }}" in plan
    # every shard: the plan's matrix, the one night id, its timeouts from the plan
    assert "include: ${{ fromJSON(needs.plan.outputs.matrix) }}" in shard
    assert "timeout-minutes: ${{ matrix.job_minutes }}" in shard and "timeout-minutes: ${{ matrix.run_minutes }}" in shard
    assert "NIGHT_ID: ${{ needs.plan.outputs.night-id }}" in shard and '--night-id "$NIGHT_ID"' in shard
    assert "--slim-expected" in shard and "sudo -n true" in shard and "NEEDS_ROOT: ${{ matrix.needs_root }}" in shard
    # the Go version the workers ask for, read from their go.mod
    for job in (shard, findings):
        assert "go-version-file: workloads/clients/go/go.mod" in job and 'go-version: "' not in job
    assert (REPO / "workloads/clients/go/go.mod").read_text().count("\ngo 1.") == 1
    # the merge: the JUnit report of this night's merged directory, never a glob over past nights
    assert "kchaos ci merge" in merge and "--slim-expected" in merge
    assert "report_paths: ${{ steps.merge.outputs.night }}/junit.xml" in merge
    assert "*/junit.xml" not in text
