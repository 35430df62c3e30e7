"""The README and docs/ci.md say what the code does: the default campaign's size, the nightly's
time and that the workflow example keeps the nightly history; every CLI command is documented."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from kchaos.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_describes_the_default_campaign_as_it_is():
    campaign = tomllib.loads((ROOT / "campaigns" / "default.toml").read_text())
    workload, faults = campaign["workload"], campaign["faults"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"{workload['workers']} worker processes on a KIP-848 consumer group" in readme
    assert f"inputs seeded at {workload['rate']}/s for the whole {campaign['run']['duration_s']} s of faults" in readme
    assert f"{len(faults['mix'])} role-targeted faults" in readme
    bar = faults["exposure"]
    assert f"at least {bar['committed']['kill']} committed transactions overlapped" in readme


def test_the_nightly_example_keeps_its_history_at_the_time_the_docs_say():
    workflow = (ROOT / "ci" / "examples" / "github-nightly.yml").read_text()
    minute, hour = re.search(r'cron: "(\d+) (\d+) \* \* \*"', workflow).groups()
    assert f"{int(hour):02d}:{int(minute):02d} UTC" in (ROOT / "docs" / "ci.md").read_text()
    assert "restore-keys: kchaos-runs-" in workflow and "cache/save" in workflow and "kchaos prune" in workflow


def test_every_command_is_in_the_readme():
    commands = build_parser()._subparsers._group_actions[0].choices
    readme = (ROOT / "README.md").read_text()
    assert [c for c in commands if f"kchaos {c}" not in readme] == []


def test_every_package_of_the_layers_ships_in_the_wheel():
    """A sub-package missing from pyproject's list installs without it (faults/kinds once did)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = {package: Path(path) for package, path in config["package-dir"].items()}
    shipped = set(config["packages"])
    missing = []
    for package, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            name = ".".join([package, *init.parent.relative_to(ROOT / folder).parts])
            if name not in shipped:
                missing.append(name)
    assert missing == []


def test_every_fault_kind_is_in_the_faults_table():
    from kchaos.faults.kinds import KINDS

    table = (ROOT / "docs" / "faults.md").read_text()
    assert [k for k in KINDS if f"`{k}`" not in table] == []
