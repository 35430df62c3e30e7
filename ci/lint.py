"""The CI examples' linter: actionlint (https://github.com/rhysd/actionlint), built with ``go install``
from the Go module proxy into kchaos' cache as Toxiproxy is (``kchaos setup --actionlint``; ``make
test`` asks for it), and run on ``ci/examples/*.yml`` by tests/unit/test_ci_workflow.py, which fails
on any finding. actionlint checks a GitHub Actions workflow's syntax, its expressions and contexts
(``matrix``, ``needs.<job>.outputs``), the inputs of well-known actions, and its ``run:`` scripts
through shellcheck where shellcheck is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kchaos.errors import SetupError
from kchaos.paths import cache_dir

ACTIONLINT_MODULE = "github.com/rhysd/actionlint/cmd/actionlint"
ACTIONLINT_VERSION = "1.7.12"


def go_binary() -> str | None:
    return shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)


def actionlint_path() -> Path:
    return cache_dir() / "bin" / f"actionlint-{ACTIONLINT_VERSION}"


def ensure_actionlint() -> Path:
    """The actionlint binary, built with ``go install`` into the cache on first use."""
    binary = actionlint_path()
    if binary.exists():
        return binary
    go = go_binary()
    if not go:
        raise SetupError("Go was not found; kchaos builds actionlint with `go install`",
                         "install Go (https://go.dev/doc/install or apt-get install golang)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=binary.parent) as gobin:
        env = dict(os.environ, GOBIN=gobin, GOFLAGS="-mod=mod")
        proc = subprocess.run([go, "install", f"{ACTIONLINT_MODULE}@v{ACTIONLINT_VERSION}"],
                              capture_output=True, text=True, env=env, cwd=gobin)
        built = Path(gobin) / "actionlint"
        if proc.returncode != 0 or not built.exists():
            raise SetupError(f"`go install {ACTIONLINT_MODULE}@v{ACTIONLINT_VERSION}` failed",
                             "check that the Go module proxy is reachable (GOPROXY)",
                             detail=(proc.stdout + proc.stderr)[-3000:])
        built.rename(binary)
    return binary


def run_actionlint(files: list[Path]) -> subprocess.CompletedProcess[str]:
    """actionlint on ``files`` (exit 0: no finding; 1: findings, one a line)."""
    return subprocess.run([str(ensure_actionlint()), "-no-color", *map(str, files)], capture_output=True, text=True)
