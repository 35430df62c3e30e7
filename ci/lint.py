"""The CI examples' linter: actionlint (https://github.com/rhysd/actionlint), built with ``go install``
from the Go module proxy into kchaos' cache as Toxiproxy is (``kchaos setup --actionlint``; ``make
test`` asks for it), and run on ``ci/examples/*.yml`` by tests/unit/test_ci_workflow.py, which fails
on any finding. actionlint checks a GitHub Actions workflow's syntax, its expressions and contexts
(``matrix``, ``needs.<job>.outputs``), the inputs of well-known actions, and its ``run:`` scripts
through shellcheck where shellcheck is installed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kchaos.paths import cache_dir
from kchaos.runtime.go_install import go_install

ACTIONLINT_MODULE = "github.com/rhysd/actionlint/cmd/actionlint"
ACTIONLINT_VERSION = "1.7.12"


def actionlint_path() -> Path:
    return cache_dir() / "bin" / f"actionlint-{ACTIONLINT_VERSION}"


def ensure_actionlint() -> Path:
    """The actionlint binary, built with ``go install`` into the cache on first use."""
    return go_install(ACTIONLINT_MODULE, ACTIONLINT_VERSION, "actionlint", actionlint_path(), "actionlint")


def run_actionlint(files: list[Path]) -> subprocess.CompletedProcess[str]:
    """actionlint on ``files`` (exit 0: no finding; 1: findings, one a line)."""
    return subprocess.run([str(ensure_actionlint()), "-no-color", *map(str, files)], capture_output=True, text=True)
