"""kchaos prune on hand-made run directories: the newest kept whole, older ones deleted or slimmed
(broker data gone, evidence and the cleaner's checkpoint kept), INVALID and live runs left alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kchaos.errors import ConfigError
from kchaos.harness.prune import apply_prune, find_runs, plan_prune


def _run(root: Path, name: str, verdict: str = "valid", complete: bool = True) -> Path:
    run = root / name
    (run / "topics").mkdir(parents=True)
    (run / "campaign.json").write_text("{}")
    (run / "status.json").write_text(json.dumps({"phase": "done" if complete else "faults", "complete": complete,
                                                 "verdict": verdict}))
    (run / "topics" / "kchaos-input.committed.parquet").write_bytes(b"x" * 100)
    data = run / "cluster" / "node-1" / "data"
    (data / "kchaos-input-0").mkdir(parents=True)
    (data / "kchaos-input-0" / "00000000000000000000.log").write_bytes(b"y" * 50_000)
    (data / "cleaner-offset-checkpoint").write_text("0\n1\n__consumer_offsets 0 12\n")
    return run


def test_newest_kept_older_deleted_invalid_and_in_progress_left_alone(tmp_path):
    old = _run(tmp_path, "20261101T000000Z-default-seed1")
    bad = _run(tmp_path, "20261102T000000Z-hunt-seed2", verdict="invalid")
    mid = _run(tmp_path, "20261103T000000Z-default-seed3")
    new = _run(tmp_path / "night-1", "20261104T000000Z-default-seed4")  # a nightly root's layout
    assert find_runs(tmp_path) == [new, mid, bad, old]
    actions = plan_prune(tmp_path, keep=1)
    assert [(a.run, a.action) for a in actions] == [(new, "keep"), (mid, "delete"), (bad, "skip"), (old, "delete")]
    assert actions[1].freed >= 50_000
    apply_prune(actions)
    assert new.exists() and bad.exists() and not mid.exists() and not old.exists()
    apply_prune(plan_prune(tmp_path, keep=0, include_invalid=True))
    assert not bad.exists() and not new.exists()


def test_a_run_whose_certification_failed_is_kept_as_the_evidence_of_a_bug(tmp_path):
    """The checker said valid, the certification failed (exit 1): a bug all the same."""
    failed = _run(tmp_path, "20261101T000000Z-certify-seed1")
    (failed / "status.json").write_text(json.dumps({"phase": "done", "complete": True, "verdict": "valid",
                                                    "certification": "fail"}))
    new = _run(tmp_path, "20261102T000000Z-default-seed2")
    actions = plan_prune(tmp_path, keep=1)
    assert [(a.run, a.action) for a in actions] == [(new, "keep"), (failed, "skip")]
    assert "INVALID" in actions[1].why
    assert [(a.run, a.action) for a in plan_prune(tmp_path, keep=1, include_invalid=True)] == [(new, "keep"),
                                                                                             (failed, "delete")]


def test_slim_removes_broker_data_and_keeps_evidence_and_the_cleaner_checkpoint(tmp_path):
    _run(tmp_path, "20261103T000000Z-default-seed3")
    old = _run(tmp_path, "20261101T000000Z-default-seed1")
    actions = plan_prune(tmp_path, keep=1, slim=True)
    assert [a.action for a in actions] == ["keep", "slim"]
    apply_prune(actions)
    assert not list(old.glob("cluster/node-1/data/*/*.log"))
    assert (old / "cluster/node-1/data/cleaner-offset-checkpoint").exists()
    assert (old / "topics/kchaos-input.committed.parquet").exists() and (old / "status.json").exists()
    assert [a.action for a in plan_prune(tmp_path, keep=1, slim=True)] == ["keep", "keep"]  # already slim


def test_a_run_a_live_process_works_in_is_never_pruned(tmp_path):
    run = _run(tmp_path, "20261101T000000Z-default-seed1", complete=False)
    worker = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(60)", str(run)])
    try:
        assert [a.action for a in plan_prune(tmp_path, keep=0)] == ["skip"]
    finally:
        worker.kill()
        worker.wait()
    assert [a.action for a in plan_prune(tmp_path, keep=0)] == ["delete"]  # an abandoned incomplete run goes


@pytest.mark.parametrize("root, keep, needle", [("missing", 1, "is not a directory"), (".", -1, "negative")])
def test_bad_input_is_a_config_error(tmp_path, root, keep, needle):
    with pytest.raises(ConfigError, match=needle):
        plan_prune(tmp_path / root, keep)
