"""The findings regression suite's logic (harness/findings.py) on hand-made claims and outcomes;
the replays themselves run real clusters (`kchaos findings verify`, the nightly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kchaos.errors import ConfigError
from kchaos.harness import findings
from kchaos.verifier.outcome import Outcome

REPO = Path(__file__).resolve().parents[2]


def bundle(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    for f in ("campaign.json", "seed", "schedule.json"):
        (root / name / f).write_text("{}")


def registry(root: Path, text: str) -> Path:
    (root / findings.REGISTRY).write_text(text)
    return root


def test_the_shipped_registry_names_replayable_bundles_only():
    claims = findings.load_claims(REPO / "docs" / "evidence")
    assert {c.finding for c in claims} >= {"F1a", "F1b", "F1c", "F3", "F5c", "F6"}
    assert all(c.trigger for c in claims), "every claim says what triggered it"


def test_a_claim_must_be_replayable_and_say_its_anomaly_class(tmp_path):
    bundle(tmp_path, "b1")
    registry(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b1"\nverdict = "invalid"\n')
    with pytest.raises(ConfigError, match="names its anomaly kinds"):
        findings.load_claims(tmp_path)
    registry(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b2"\nverdict = "valid"\n')
    with pytest.raises(ConfigError, match="b2 cannot be replayed"):
        findings.load_claims(tmp_path)
    registry(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b1"\nverdict = "ok"\n')
    with pytest.raises(ConfigError, match="not one of"):
        findings.load_claims(tmp_path)
    registry(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b1"\nverdict = "valid"\n' * 2)
    with pytest.raises(ConfigError, match="listed twice"):
        findings.load_claims(tmp_path)
    with pytest.raises(ConfigError, match="no findings registry"):
        findings.load_claims(tmp_path / "nowhere")


def claims_of(tmp_path: Path) -> list[findings.Claim]:
    for name in ("hunt", "fixed", "broken"):
        bundle(tmp_path, name)
    registry(tmp_path, '[[claim]]\nfinding = "F1"\nbundle = "hunt"\nverdict = "invalid"\nany_of = ["lost-write", '
                       '"aborted-read"]\n[[claim]]\nfinding = "F1"\nbundle = "fixed"\nverdict = "valid"\n'
                       '[[claim]]\nfinding = "F2"\nbundle = "broken"\nverdict = "invalid"\nany_of = ["duplicate"]\n')
    return findings.load_claims(tmp_path)


def test_claims_are_picked_by_finding_bundle_or_both(tmp_path):
    claims = claims_of(tmp_path)
    assert [c.bundle for c in findings.select(claims, ["F1"])] == ["hunt", "fixed"]
    assert [c.bundle for c in findings.select(claims, ["broken", "F1:fixed"])] == ["fixed", "broken"]
    assert findings.select(claims, []) == claims
    with pytest.raises(ConfigError, match="no claim named F7"):
        findings.select(claims, ["F7"])


def test_verify_names_every_drift_and_hides_no_failed_replay(tmp_path):
    outcomes = {"hunt": Outcome("r1", "invalid", anomalies={"aborted-read": [{}], "duplicate": [{}]}),
                # the fix's bundle now shows an anomaly: a drift
                "fixed": Outcome("r2", "invalid", anomalies={"lost-write": [{}]})}

    def replay(bundle_dir: Path, out: Path) -> Outcome:
        if bundle_dir.name == "broken":
            raise RuntimeError("the cluster did not start")
        return outcomes[bundle_dir.name]

    checks = findings.verify(tmp_path, claims_of(tmp_path), tmp_path / "out", replay=replay, say=lambda _: None)
    assert [(c.claim.bundle, c.reproduced) for c in checks] == [("hunt", True), ("fixed", False), ("broken", False)]
    assert checks[2].error == "RuntimeError: the cluster did not start"
    table = findings.verify_table(checks)
    assert "1 of 3 reproduced" in table and table.count("DRIFT") == 2


def test_an_invalid_claim_needs_one_of_its_kinds_not_any_anomaly(tmp_path):
    claim = findings.Claim("F1", "hunt", "invalid", ("lost-write",))
    assert not findings.Check(claim, verdict="invalid", kinds=("duplicate",)).reproduced
    assert findings.Check(claim, verdict="invalid", kinds=("duplicate", "lost-write")).reproduced
    assert not findings.Check(claim, verdict="unknown").reproduced
