"""The nightly on a stock runner, without a cluster: which runs need root (derived from their
campaigns' fault kinds and backend, never hand-written), their skip with the reason in a process
that is not root (JUnit ``<skipped>``, summary.json, the console, never the exit code; kept through
a merge), and the slim after a night on hand-made run directories: expected verdicts slimmed to
their evidence, unexpected ones kept whole, and expected INVALID runs pruned past ``--keep``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import xmlschema

import kchaos.ci.needs as needs
from kchaos.ci.nightly import load_matrix
from kchaos.cli.main import main
from kchaos.harness.prune import apply_prune, plan_prune, plan_slim_expected

REPO = Path(__file__).resolve().parents[2]
SCHEMA = xmlschema.XMLSchema(str(REPO / "ci" / "junit.xsd"))
CAMPAIGNS = REPO / "campaigns"


@pytest.fixture
def no_faketime(monkeypatch):
    monkeypatch.setattr(needs.faketime, "library", lambda: None)


def _needs(path: Path) -> dict[str, tuple[str, ...]]:
    _, variants = load_matrix(path)
    return {label: needs.root_needs(campaign) for _, label, _, _, campaign in variants}


def test_the_runs_that_need_root_are_read_from_their_campaigns(no_faketime, monkeypatch):
    found = _needs(CAMPAIGNS / "nightly.toml")
    assert {label for label, why in found.items() if why} == {"docker-default", "hunt-clock", "nemesis-all"}
    assert any("nsenter" in why for why in found["docker-default"])  # the docker backend's partitions
    assert any("mount" in why for why in found["nemesis-all"]) and any("libfaketime" in why for why in found["nemesis-all"])
    assert found["default"] == () and found["negative-read-uncommitted"] == ()
    # libfaketime installed: a clock fault needs no root, a disk fault still does
    monkeypatch.setattr(needs.faketime, "library", lambda: Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"))
    found = _needs(CAMPAIGNS / "nightly.toml")
    assert found["hunt-clock"] == () and [w for w in found["nemesis-all"] if "mount" in w] == list(found["nemesis-all"])


def _matrix(tmp_path: Path) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(f"""name = "m"
[[entry]]
label = "docker-default"
campaign = "{CAMPAIGNS / 'default.toml'}"
seeds = [5]
set = ["cluster.backend=docker"]
[[entry]]
campaign = "{CAMPAIGNS / 'hunt-clock.toml'}"
seeds = [1]
expect = "invalid"
""")
    return path


def test_a_run_that_needs_root_is_skipped_with_the_reason_when_not_root(tmp_path, capsys, monkeypatch, no_faketime):
    monkeypatch.setattr(needs.os, "geteuid", lambda: 1000)
    monkeypatch.setattr("kchaos.ci.nightly.os.geteuid", lambda: 1000)

    def never(*args, **kwargs):
        raise AssertionError("a run that needs root was started")

    monkeypatch.setattr("kchaos.ci.nightly.execute_run", never)
    matrix = _matrix(tmp_path)
    assert main(["ci", "nightly", "--matrix", str(matrix), "--plan"]) == 0
    assert capsys.readouterr().out.count("(not root here: it would be skipped)") == 2
    assert main(["ci", "nightly", "--matrix", str(matrix), "--shard", "1/1", "--night-id", "n1",
                 "--out", str(tmp_path / "s1")]) == 0  # skipped runs are no failure of the night
    captured = capsys.readouterr()
    night = Path(captured.out.strip().splitlines()[-1])
    assert "docker-default seed=5 [cluster.backend=docker]: skipped (needs root, and this process is not (uid 1000)" \
           in captured.err and "2 skipped (need root; not in the exit code)" in captured.err
    SCHEMA.validate(str(night / "junit.xml"))
    suite = SCHEMA.to_dict(str(night / "junit.xml"))["testsuite"][0]
    assert (suite["@tests"], suite["@failures"], suite["@errors"], suite["@skipped"]) == (2, 0, 0, 2)
    reasons = [case["skipped"]["@message"] for case in suite["testcase"]]
    assert "nsenter" in reasons[0] and "libfaketime" in reasons[1]
    summary = json.loads((night / "summary.json").read_text())
    assert [r["verdict"] for r in summary["runs"]] == ["skipped", "skipped"] and summary["exit_code"] == 0
    assert [s["name"] for s in summary["skipped"]] == ["docker-default seed=5 [cluster.backend=docker]",
                                                        "hunt-clock seed=1"]
    # merged, the runs stay skipped with their reasons, out of the exit code
    assert main(["ci", "merge", str(tmp_path / "s1"), "--out", str(tmp_path / "out")]) == 0
    merged = Path(capsys.readouterr().out.strip().splitlines()[-1])
    suite = SCHEMA.to_dict(str(merged / "junit.xml"))["testsuite"][0]
    assert (suite["@tests"], suite["@failures"], suite["@errors"], suite["@skipped"]) == (2, 0, 0, 2)
    assert "nsenter" in suite["testcase"][0]["skipped"]["@message"]


def test_as_root_nothing_is_skipped(tmp_path, monkeypatch, no_faketime):
    from kchaos.ci.nightly import root_skip
    from kchaos.ci.nightly import resolve_night

    _, runs = resolve_night(_matrix(tmp_path), "n1")
    assert [bool(root_skip(r, root=True)) for r in runs] == [False, False]
    assert [bool(root_skip(r, root=False)) for r in runs] == [True, True]


# --- the slim after a night, on hand-made run directories ---

def _run(root: Path, name: str, verdict: str, expect: str) -> Path:
    run = root / name
    (run / "topics").mkdir(parents=True)
    (run / "campaign.json").write_text("{}")
    (run / "status.json").write_text(json.dumps({"phase": "done", "complete": True, "verdict": verdict}))
    (run / "results.json").write_text(json.dumps({"verdict": verdict, "anomalies": {}, "run": {"seed": 1}}))
    (run / "expect.json").write_text(json.dumps({"verdict": expect}))
    (run / "topics" / "kchaos-input.committed.parquet").write_bytes(b"x" * 100)
    data = run / "cluster" / "node-1" / "data"
    (data / "kchaos-input-0").mkdir(parents=True)
    (data / "kchaos-input-0" / "00000000000000000000.log").write_bytes(b"y" * 50_000)
    (data / "cleaner-offset-checkpoint").write_text("0\n1\n__consumer_offsets 0 12\n")
    return run


def _whole(run: Path) -> bool:
    return bool(list(run.glob("cluster/node-1/data/*/*.log")))


def test_after_a_night_expected_verdicts_are_slimmed_and_unexpected_ones_kept_whole(tmp_path):
    control = _run(tmp_path, "20261201T021800Z-negative-seed1", "invalid", "invalid")   # caught, as expected
    clean = _run(tmp_path, "20261201T021900Z-default-seed1", "valid", "valid")
    finding = _run(tmp_path, "20261201T022000Z-default-seed2", "invalid", "valid")      # a new bug
    uncaught = _run(tmp_path, "20261201T022100Z-negative-seed2", "valid", "invalid")    # control not caught
    actions = plan_slim_expected([(control, True), (clean, True), (finding, False), (uncaught, False)])
    assert [a.action for a in actions] == ["slim", "slim", "keep", "keep"]
    assert "unexpected" in actions[2].why
    apply_prune(actions)
    assert not _whole(control) and not _whole(clean) and _whole(finding) and _whole(uncaught)
    for run in (control, clean):  # the evidence stays
        assert (run / "topics/kchaos-input.committed.parquet").exists() and (run / "results.json").exists()
        assert (run / "cluster/node-1/data/cleaner-offset-checkpoint").exists()
    assert [a.action for a in plan_slim_expected([(control, True)])] == ["keep"]  # already slim
    # later nights: the expected INVALID control goes past --keep; the unexpected one is kept
    assert {a.run.name: a.action for a in plan_prune(tmp_path, keep=0)} == {
        control.name: "delete", clean.name: "delete", finding.name: "skip", uncaught.name: "delete"}


def test_merge_slim_expected_slims_the_expected_runs_of_the_night(tmp_path, capsys):
    shard = tmp_path / "s" / "20261201T021700Z-m-shard-1-of-1"
    shard.mkdir(parents=True)
    runs = [{"key": 0, "name": "neg seed=1", "label": "neg", "seed": 1, "expect": "invalid"},
            {"key": 1, "name": "default seed=2", "label": "default", "seed": 2, "expect": "valid"}]
    record = {"night_id": "n1", "matrix": "m", "shard": "1/1", "shards": 1, "fingerprint": "f", "resolved_runs": 2,
              "started": "20261201T021700Z"}
    (shard / "plan.json").write_text(json.dumps({**record, "runs": runs}))
    made = [_run(shard, "20261201T021800Z-neg-seed1", "invalid", "invalid"),
            _run(shard, "20261201T021900Z-default-seed2", "invalid", "valid")]
    (shard / "summary.json").write_text(json.dumps({"night": record, "complete": True, "runs": [
        {**r, "verdict": v, "expected": r["expect"], "errors": [], "seconds": 1.0, "run_dir": str(d)}
        for r, d, v in zip(runs, made, ["invalid", "invalid"])]}))
    assert main(["ci", "merge", str(tmp_path / "s"), "--out", str(tmp_path / "out"), "--slim-expected"]) == 1
    captured = capsys.readouterr()
    night = Path(captured.out.strip().splitlines()[-1])
    assert "slimmed 1 runs whose verdict was expected" in captured.err and "1 unexpected kept whole" in captured.err
    assert not _whole(night / made[0].name) and _whole(night / made[1].name)
