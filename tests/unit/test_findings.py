"""The findings regression suite's logic (harness/findings.py) on hand-made claims and outcomes;
the replays themselves run real clusters (`kchaos findings verify`, the nightly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kchaos.errors import ConfigError
from kchaos.harness import findings
from kchaos.verifier.outcome import Outcome

REPO = Path(__file__).resolve().parents[2]


SHIPPED = REPO / "docs" / "evidence" / "kip-890-java-tv2"  # a real bundle's files: loadable as recorded


def bundle(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    for f in ("campaign.json", "seed", "schedule.json"):
        (root / name / f).write_text((SHIPPED / f).read_text())


def registry(root: Path, text: str) -> Path:
    (root / findings.REGISTRY).write_text(text)
    return root


def refused(root: Path, text: str, words: str) -> ConfigError:
    """The registry ``text`` is refused when it loads, naming ``words``."""
    registry(root, text)
    with pytest.raises(ConfigError, match=words) as raised:
        findings.load_claims(root)
    return raised.value


def test_the_shipped_registry_names_replayable_bundles_only():
    claims = findings.load_claims(REPO / "docs" / "evidence")
    assert {c.finding for c in claims} >= {"F1a", "F1b", "F1c", "F3", "F5c", "F6"}
    assert all(c.trigger for c in claims), "every claim says what triggered it"


def test_a_claim_must_be_replayable_and_say_its_anomaly_class(tmp_path):
    bundle(tmp_path, "b1")
    refused(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b1"\nverdict = "invalid"\n', "names its anomaly kinds")
    refused(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b2"\nverdict = "valid"\n', "b2 cannot be replayed")
    refused(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b1"\nverdict = "ok"\n', "not one of")
    refused(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b1"\nverdict = "valid"\n' * 2, "listed twice")
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

    def replay(bundle_dir: Path, out: Path, seed: int | None, release: str | None) -> Outcome:
        if bundle_dir.name == "broken":
            raise RuntimeError("the cluster did not start")
        return outcomes[bundle_dir.name]

    checks = findings.verify(tmp_path, claims_of(tmp_path), tmp_path / "out", replay=replay, say=lambda _: None)
    assert [(c.claim.bundle, c.reproduced) for c in checks] == [("hunt", True), ("fixed", False), ("broken", False)]
    assert checks[2].error == "RuntimeError: the cluster did not start"
    table = findings.verify_table(checks)
    assert "1 of 3 runs reproduced" in table and table.count("DRIFT") == 2


def test_an_invalid_claim_needs_one_of_its_kinds_not_any_anomaly(tmp_path):
    claim = findings.Claim("F1", "hunt", "invalid", ("lost-write",))
    assert not findings.Check(claim, verdict="invalid", kinds=("duplicate",)).reproduced
    assert findings.Check(claim, verdict="invalid", kinds=("duplicate", "lost-write")).reproduced
    assert not findings.Check(claim, verdict="unknown").reproduced


def test_an_unknown_claim_holds_only_for_its_reason(tmp_path):
    claim = findings.Claim("F9", "wedged", "unknown", because="not registered")
    wedged = "the cluster was not healthy after the final heal: cluster did not become healthy within 120s: brokers [1] not registered"
    assert findings.Check(claim, verdict="unknown", notes=[wedged]).reproduced
    assert not findings.Check(claim, verdict="unknown", notes=["the drain timed out"]).reproduced
    assert not findings.Check(claim, verdict="valid").reproduced
    bundle(tmp_path, "b1")
    refused(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b1"\nverdict = "unknown"\n', "names why with because")
    refused(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b1"\nverdict = "valid"\nbecause = "x"\n', "names why with because")
    registry(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "b1"\nverdict = "unknown"\nbecause = "not registered"\n')
    assert findings.load_claims(tmp_path)[0].because == "not registered"


def test_a_bundle_that_no_longer_loads_is_refused_before_any_replay(tmp_path):
    bundle(tmp_path, "old")
    registry(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "old"\nverdict = "valid"\n')
    (tmp_path / "old" / "campaign.json").write_text('{"cluster": {"nodes": "three"}}')  # a key kchaos no longer reads so
    with pytest.raises(ConfigError, match="bundle old no longer loads") as raised:
        findings.load_claims(tmp_path)
    assert raised.value.exit_code == 3
    bundle(tmp_path, "noseed")
    (tmp_path / "noseed" / "seed").write_text("five\n")
    refused(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "noseed"\nverdict = "valid"\n', "noseed no longer loads")
    refused(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "old"\nverdict = "valid"\nseeds = ["x"]\n',
            "seeds must be a list of integers")
    refused(tmp_path, '[[claim]]\nfinding = "F9"\nbundle = "old"\nverdict = "valid"\nseeds = [2]\nat_least = 3\n',
            "at_least 3 is not between 1 and its 2 runs")


def test_every_seed_runs_the_claims_other_seeds_after_its_bundle(tmp_path):
    bundle(tmp_path, "hunt")
    registry(tmp_path, '[[claim]]\nfinding = "F1"\nbundle = "hunt"\nverdict = "invalid"\nany_of = ["lost-write"]\n'
                       'seeds = [6, 7]\n')
    claims = findings.load_claims(tmp_path)
    ran: list[int | None] = []

    def replay(bundle_dir: Path, out: Path, seed: int | None, release: str | None) -> Outcome:
        ran.append(seed)
        # seed 7 loses the race this time: the claim's kind is missing
        return Outcome(f"r{seed}", "invalid", anomalies={"duplicate" if seed == 7 else "lost-write": [{}]})

    assert [c.seed for c in findings.verify(tmp_path, claims, tmp_path / "out", replay=replay, say=lambda _: None)] == [None]
    checks = findings.verify(tmp_path, claims, tmp_path / "out", replay=replay, say=lambda _: None, every_seed=True)
    assert ran == [None, None, 6, 7] and [c.reproduced for c in checks] == [True, True, False]
    table = findings.verify_table(checks)
    assert "2 of 3 runs reproduced" in table and " bundle " in table and " 7 " in table
    assert "F1:hunt: 2 of 3 runs, 3 needed: DRIFT" in table  # by default every run must reproduce it
    race = findings.Claim("F1", "hunt", "invalid", ("lost-write",), seeds=(6, 7), at_least=2)
    assert findings.claim_results([findings.Check(race, c.seed, verdict=c.verdict, kinds=c.kinds) for c in checks])[0].holds
    # a race claim verified on its bundle alone needs that one run
    assert not findings.claim_results([findings.Check(race, None, verdict="invalid", kinds=("duplicate",))])[0].holds


def test_a_race_claim_always_runs_its_seeds_but_not_on_the_release_matrix(tmp_path):
    """hunt-epoch-rollover's F5c: its bundle's seed loses the race on some replays, and the claim is
    2 of its 3 runs; a plain verify that replayed the bundle alone called that a drift."""
    bundle(tmp_path, "hunt")
    registry(tmp_path, '[[claim]]\nfinding = "F5c"\nbundle = "hunt"\nverdict = "invalid"\nany_of = ["hanging-transaction"]\n'
                       'seeds = [6, 7]\nat_least = 2\n')
    claims = findings.load_claims(tmp_path)
    ran: list[tuple[int | None, str | None]] = []

    def replay(bundle_dir: Path, out: Path, seed: int | None, release: str | None) -> Outcome:
        ran.append((seed, release))
        if seed is None:  # the bundle's seed lost the race this time
            return Outcome("r", "valid")
        return Outcome("r", "invalid", anomalies={"hanging-transaction": [{}]})

    checks = findings.verify(tmp_path, claims, tmp_path / "out", replay=replay, say=lambda _: None)
    assert ran == [(None, None), (6, None), (7, None)]
    assert findings.claim_results(checks)[0].holds
    assert "F5c:hunt: 2 of 3 runs, 2 needed" in findings.verify_table(checks)
    ran.clear()
    findings.verify(tmp_path, claims, tmp_path / "out", replay=replay, say=lambda _: None, releases=["4.0.1"])
    assert ran == [(None, "4.0.1")]


def test_the_cli_exits_1_on_a_drift_and_3_on_a_bundle_that_does_not_load(tmp_path, monkeypatch):
    from kchaos.cli.main import main

    claims_of(tmp_path)
    outcomes = {"hunt": Outcome("r1", "valid"),  # the claimed INVALID came out VALID: a drifted verdict
                "fixed": Outcome("r2", "valid"), "broken": Outcome("r3", "invalid", anomalies={"duplicate": [{}]})}
    monkeypatch.setattr(findings, "replay_bundle", lambda b, out, seed=None, release=None: outcomes[b.name])
    def argv(*names: str) -> list[str]:
        return ["findings", "verify", *names, "--evidence", str(tmp_path), "--out", str(tmp_path / "out")]

    assert main(argv("fixed", "broken")) == 0
    assert main(argv("hunt")) == 1
    outcomes["broken"] = Outcome("r3", "invalid", anomalies={"lost-write": [{}]})  # not the claimed kind
    assert main(argv("broken")) == 1
    (tmp_path / "fixed" / "schedule.json").write_text("[{")
    assert main(argv()) == 3  # refused before any replay


def test_the_release_matrix_runs_each_claim_on_each_release_and_says_where_it_reproduces(tmp_path):
    claims = claims_of(tmp_path)[:2]  # hunt (invalid, lost-write or aborted-read), fixed (valid)
    asked: list[tuple[str, int | None, str | None]] = []

    def replay(bundle_dir: Path, out: Path, seed: int | None, release: str | None) -> Outcome:
        asked.append((bundle_dir.name, seed, release))
        if bundle_dir.name == "hunt" and release == "4.0.0":
            return Outcome("r", "invalid", anomalies={"lost-write": [{}]})
        return Outcome("r", "valid")  # fixed on 4.4.0; the fixed configuration valid on both

    checks = findings.verify(tmp_path, claims, tmp_path / "out", replay=replay, say=lambda _: None,
                             releases=["4.4.0", "4.0.0"])
    assert asked == [("hunt", None, "4.4.0"), ("hunt", None, "4.0.0"), ("fixed", None, "4.4.0"),
                     ("fixed", None, "4.0.0")]
    table = findings.release_table(checks).splitlines()
    assert table[0].split() == ["claim", "seed", "4.0.0", "4.4.0"]  # releases in version order
    assert "reproduces: invalid (lost-write)" in table[1] and "does not: valid" in table[1]
    assert table[2].count("reproduces: valid") == 2


def test_a_release_campaign_moves_brokers_and_java_clients_only(tmp_path):
    from kchaos.verifier.campaign import load_recorded

    campaign = load_recorded(SHIPPED)  # Java kafka-clients 4.2.1 on Kafka 4.2.1
    moved = findings.on_release(campaign, "4.0.1")
    assert (moved.cluster.kafka_version, moved.workload.java_client_version) == ("4.0.1", "4.0.1")
    assert moved.faults == campaign.faults and moved.workload.records == campaign.workload.records


def test_a_sighting_is_replayed_and_reported_but_only_a_failed_replay_drifts(tmp_path):
    bundle(tmp_path, "once")
    registry(tmp_path, '[[claim]]\nfinding = "F6"\nbundle = "once"\nverdict = "invalid"\nany_of = ["torn-transaction"]\n'
                       'sighting = true\n')
    claims = findings.load_claims(tmp_path)
    assert claims[0].sighting
    quiet = findings.Check(claims[0], verdict="valid")  # the replay lost the race
    assert not quiet.reproduced and findings.claim_results([quiet])[0].holds
    table = findings.verify_table([quiet])
    assert "not reproduced (one sighting)" in table and "DRIFT" not in table
    failed = findings.Check(claims[0], error="the cluster did not start")
    assert not findings.claim_results([failed])[0].holds and "DRIFT" in findings.verify_table([failed])
    seen = findings.Check(claims[0], verdict="invalid", kinds=("torn-transaction",))
    assert seen.reproduced and findings.claim_results([seen])[0].holds
    refused(tmp_path, '[[claim]]\nfinding = "F6"\nbundle = "once"\nverdict = "invalid"\nany_of = ["duplicate"]\n'
                      'sighting = true\nseeds = [3]\n', "a sighting has no other seeds")
    refused(tmp_path, '[[claim]]\nfinding = "F6"\nbundle = "once"\nverdict = "valid"\nsighting = "yes"\n',
            "sighting is true or false")


def test_the_shipped_sightings_say_so_in_their_headings():
    """A claim the registry marks as a sighting says "one sighting" in its finding's heading, or
    on the line of docs/findings.md that names its bundle (a sighting beside a finding that
    rests on more seeds)."""
    text = (REPO / "docs" / "findings.md").read_text()
    headings = {line.split(".", 1)[0].lstrip("# ").strip(): line for line in text.splitlines()
                if line.startswith("#") and line.lstrip("# ").startswith("F")}
    for claim in findings.load_claims(REPO / "docs" / "evidence"):
        if claim.sighting:
            naming = [line for line in text.splitlines() if claim.bundle in line]
            assert "one sighting" in headings[claim.finding] or any("one sighting" in line for line in naming), \
                claim.bundle


def test_the_findings_page_states_every_claim_and_its_replays_as_the_registry_does():
    """docs/findings.md's table of claims is the registry's (`kchaos findings --markdown`): a claim,
    a seed or a verdict changed in one and not the other fails here (issue 61: F8's differed)."""
    evidence = REPO / "docs" / "evidence"
    table = findings.claims_markdown(evidence, findings.load_claims(evidence))
    assert table in (REPO / "docs" / "findings.md").read_text(), \
        "regenerate the table with `kchaos findings --markdown` and paste it into docs/findings.md"
