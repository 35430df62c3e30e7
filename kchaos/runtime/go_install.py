"""Go programs kchaos builds from the Go module proxy into its cache with ``go install``
(Toxiproxy's server, actionlint): one way to find Go and one way to build, so a build cut short
never looks built (it is made in a temporary directory beside its final name and renamed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kchaos.errors import SetupError


def go_binary() -> str | None:
    """The Go toolchain on PATH, or Go's own install directory."""
    return shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)


def go_install(module: str, version: str, built_name: str, binary: Path, what: str) -> Path:
    """``binary``, built once from ``module@v<version>`` (whose command is named ``built_name``)."""
    if binary.exists():
        return binary
    go = go_binary()
    if not go:
        raise SetupError(f"Go was not found; kchaos builds {what} with `go install`",
                         "install Go (https://go.dev/doc/install or apt-get install golang)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=binary.parent) as gobin:
        env = dict(os.environ, GOBIN=gobin, GOFLAGS="-mod=mod")
        proc = subprocess.run([go, "install", f"{module}@v{version}"], capture_output=True, text=True, env=env,
                              cwd=gobin)
        built = Path(gobin) / built_name
        if proc.returncode != 0 or not built.exists():
            raise SetupError(f"`go install {module}@v{version}` failed",
                             "check that the Go module proxy is reachable (GOPROXY)",
                             detail=(proc.stdout + proc.stderr)[-3000:])
        built.rename(binary)
    return binary
