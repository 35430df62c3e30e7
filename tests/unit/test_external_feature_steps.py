"""A ``[[steps]]`` feature flip and ``cluster.transaction_version`` on a cluster kchaos did not start,
without a cluster: what a campaign must say before its flip may touch somebody's cluster (refused on
load, exit 3, one line naming what is missing), the refusals of what kchaos could not undo, the plan's
words, and the heal journal's entry for a cluster-wide act and the shell line that undoes it."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from kchaos.cli.plan import plan, render_plan
from kchaos.errors import ConfigError
from kchaos.faults.schedule import generate_schedule
from kchaos.harness.campaign import load_campaign
from kchaos.runtime.heal_journal import CLUSTER_WIDE, HealJournal, heal_pending, where
from kchaos.runtime.kafka_tools import feature_change_args, feature_restore_shell, finalized_level

FLIP = ('[[steps]]\nat_s = 20\naction = "feature"\nfeature = "transaction.version"\nlevel = 2\n'
        '[[steps]]\nat_s = 40\naction = "feature"\nfeature = "transaction.version"\nlevel = 1\n')


def external_campaign(tmp_path: Path, external: str = "", cluster: str = "", steps: str = FLIP,
                      faults: str = "[faults]\nenabled = false\n") -> Path:
    path = tmp_path / "c.toml"
    path.write_text('[run]\nduration_s = 60\n[cluster]\nbackend = "external"\n' + cluster
                    + '[cluster.external]\nbootstrap_servers = "10.9.0.11:9092"\n' + external
                    + '[workload]\nclient = "java"\n' + faults + steps)
    return path


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    line = err.value.one_line()
    assert "\n" not in line and err.value.exit_code == 3
    return line


def test_a_flip_on_an_external_cluster_needs_its_own_permission_and_the_cluster_id(tmp_path):
    # neither: both named, and the step
    line = refusal(external_campaign(tmp_path))
    assert "steps[0] (transaction.version -> 2) would change a feature level of an external cluster" in line
    assert "needs cluster.external.allow_feature_changes = true and cluster.external.cluster_id" in line
    # the id alone, or the permission alone: the other is named
    line = refusal(external_campaign(tmp_path, 'cluster_id = "MkU3OEVBNTcwNTJENDM2Qg"\n'))
    assert "needs cluster.external.allow_feature_changes = true (fix: set it" in line
    line = refusal(external_campaign(tmp_path, "allow_feature_changes = true\n"))
    assert "needs cluster.external.cluster_id (fix: set it" in line
    # allow_faults is the faults' permission, not this one
    line = refusal(external_campaign(tmp_path, 'cluster_id = "abc"\nallow_faults = true\n'))
    assert "allow_feature_changes = true" in line
    # with both, the campaign loads
    campaign = load_campaign(external_campaign(tmp_path, 'cluster_id = "abc"\nallow_feature_changes = true\n'))
    assert [s.level for s in campaign.steps] == [2, 1]


def test_flips_on_clusters_kchaos_starts_need_no_consent(tmp_path):
    for backend in ("local", "docker"):
        path = tmp_path / f"{backend}.toml"
        path.write_text(f'[run]\nduration_s = 60\n[cluster]\nbackend = "{backend}"\ntransaction_version = 1\n'
                        '[workload]\nclient = "java"\n[faults]\nenabled = false\n' + FLIP)
        assert len(load_campaign(path).steps) == 2


def test_what_kchaos_could_not_undo_is_refused_on_an_external_cluster(tmp_path):
    consent = 'cluster_id = "abc"\nallow_feature_changes = true\n'
    metadata = '[[steps]]\nat_s = 20\naction = "feature"\nfeature = "metadata.version"\nlevel = "latest"\n'
    line = refusal(external_campaign(tmp_path, consent, steps=metadata))
    assert "kchaos does not change metadata.version on a cluster it did not start" in line
    upgrade = '[[steps]]\nat_s = 20\naction = "rolling-upgrade"\nversion = "4.3.1"\n'
    line = refusal(external_campaign(tmp_path, consent, steps=upgrade))
    assert "a rolling upgrade needs a cluster kchaos starts" in line and "'external'" in line
    docker = tmp_path / "docker.toml"
    docker.write_text('[run]\nduration_s = 60\n[cluster]\nbackend = "docker"\n[faults]\nenabled = false\n' + upgrade)
    assert [s.version for s in load_campaign(docker).steps] == ["4.3.1"]  # each release's own image
    pinned = tmp_path / "pinned.toml"
    pinned.write_text('[run]\nduration_s = 60\n[cluster]\nbackend = "docker"\ndocker = { image = "apache/kafka:4.2.1" }\n'
                      '[faults]\nenabled = false\n' + upgrade)
    assert "is one release; a rolling upgrade runs each release's own image" in refusal(pinned)


def test_transaction_version_on_an_external_cluster_is_a_requirement_the_plan_says_is_checked(tmp_path):
    campaign = load_campaign(external_campaign(tmp_path, cluster="transaction_version = 1\n", steps=""))
    assert campaign.cluster.format_features() == {"transaction.version": 1}
    text = render_plan(plan(campaign, 1, False, generate_schedule(campaign.faults, campaign.run.duration_s, 1)))
    assert "transaction.version 1 required (checked against the cluster at start, never set)" in text
    assert "release default" not in text
    # without one, the plan says the level is the cluster's own and not checked
    campaign = load_campaign(external_campaign(tmp_path, steps=""))
    text = render_plan(plan(campaign, 1, False, []))
    assert "its own transaction.version (not checked" in text
    # with consent, the plan says each flip is journaled and put back
    campaign = load_campaign(external_campaign(tmp_path, 'cluster_id = "abc"\nallow_feature_changes = true\n'))
    assert "each change journaled with the level before" in render_plan(plan(campaign, 1, False, []))


def test_a_level_that_could_not_be_checked_is_refused_on_load(tmp_path):
    """FeatureCommand (Java) reads the levels at start: client settings it cannot use are refused
    when the campaign loads, not silently skipped."""
    gssapi = '[cluster.external.client_config]\n"security.protocol" = "SASL_PLAINTEXT"\n"sasl.mechanism" = "GSSAPI"\n'
    path = tmp_path / "c.toml"
    path.write_text('[run]\nduration_s = 60\n[cluster]\nbackend = "external"\ntransaction_version = 2\n'
                    '[cluster.external]\nbootstrap_servers = "10.9.0.11:9092"\n' + gssapi
                    + '[workload]\nclient = "java"\n[faults]\nenabled = false\n')
    line = refusal(path)
    assert "cluster.transaction_version on an external cluster is checked against the cluster's finalised levels" in line
    assert "GSSAPI" in line
    path.write_text(path.read_text().replace("transaction_version = 2\n", ""))
    assert load_campaign(path).cluster.format_features() == {}


def test_finalized_levels_as_feature_command_describes_them():
    levels = {"metadata.version": "4.2-IV1", "transaction.version": 2, "group.version": 0}
    assert finalized_level(levels, "transaction.version") == 2
    assert finalized_level(levels, "group.version") == 0
    assert finalized_level(levels, "share.version") == 0  # a feature the brokers do not know: they run without it
    assert finalized_level(levels, "metadata.version") is None


def test_the_journaled_undo_puts_the_first_level_back_from_any_level(tmp_path):
    """The undo is one shell line that needs no harness: FeatureCommand's downgrade, else its
    upgrade, to the level the run found. Run here through a stand-in for FeatureCommand that plays
    the controller (a downgrade to a higher level and an upgrade to a lower one refused, the same
    level accepted), from above, from below and at the level; each heal marks the entry healed."""
    level, fake = tmp_path / "level", tmp_path / "feature-command"
    fake.write_text("#!/bin/sh\nfor a; do case $a in upgrade|downgrade) verb=$a;; esac; last=$a; done\n"
                    f"want=${{last#*=}}; have=$(cat {level})\n"
                    '[ "$verb" = upgrade ] && [ "$want" -lt "$have" ] && exit 1\n'
                    '[ "$verb" = downgrade ] && [ "$want" -gt "$have" ] && exit 1\n'
                    f'echo "$want" > {level}\n')
    fake.chmod(0o755)
    args = ["--bootstrap-server", "10.9.0.11:9092", "--command-config", "/run dir/client-brokers.properties"]
    shell = feature_restore_shell([str(fake)], args, "transaction.version", 1, downgrade_first=True)
    first, second = shell.split(" || ")
    assert shlex.split(first) == [str(fake), *args, "downgrade", "--feature", "transaction.version=1"]
    assert shlex.split(second) == [str(fake), *args, "upgrade", "--feature", "transaction.version=1"]
    assert feature_change_args(args, "transaction.version", 2, False)[-3:] == ["upgrade", "--feature",
                                                                              "transaction.version=2"]
    journal = HealJournal(tmp_path / "heal-journal.jsonl")
    for start in (2, 0, 1):
        level.write_text(f"{start}\n")
        entry = journal.acting(CLUSTER_WIDE, "feature", "the flip", [{"action": "feature", "node": CLUSTER_WIDE,
                                                                      "shell": shell}],
                               {"feature": "transaction.version", "level": 2, "before": 1, "original": 1})
        report = heal_pending(journal, lambda u: _sh(u["shell"]), "healed by a test")
        assert [r["id"] for r in report if r["healed"]] == [entry] and level.read_text().strip() == "1", start
    assert journal.pending() == [] and where(CLUSTER_WIDE) == "the cluster" and where(2) == "node 2"
    # a cluster that does not answer: the entry stays pending, for the next heal
    fake.write_text("#!/bin/sh\nexit 1\n")
    entry = journal.acting(CLUSTER_WIDE, "feature", "the flip", [{"action": "feature", "node": CLUSTER_WIDE,
                                                                  "shell": shell}], {"feature": "transaction.version"})
    assert [r["healed"] for r in heal_pending(journal, lambda u: _sh(u["shell"]), "x")] == [False]
    assert [e.id for e in journal.pending()] == [entry]


def _sh(shell: str) -> tuple[bool, str]:
    proc = subprocess.run(["/bin/sh", "-c", shell], capture_output=True, text=True)
    return proc.returncode == 0, proc.stdout + proc.stderr
