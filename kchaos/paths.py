"""Where kchaos keeps caches (jars, binaries) and state (clusters left up by `cluster up`)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Downloaded and built artefacts, reused across runs: ``$KCHAOS_CACHE`` or ``~/.cache/kchaos``."""
    root = os.environ.get("KCHAOS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kchaos"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_dir() -> Path:
    """Clusters kept up between commands: ``$KCHAOS_STATE`` or ``~/.local/state/kchaos``."""
    root = os.environ.get("KCHAOS_STATE") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "kchaos"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
