"""Where kchaos keeps caches (jars, binaries) and state (clusters left up by `cluster up`)."""

from __future__ import annotations

import os
from pathlib import Path


def _directory(override: str, xdg: str, fallback: str) -> Path:
    """``$override``, else ``$xdg/kchaos``, else ``fallback/kchaos``; created on first use."""
    root = os.environ.get(override) or os.path.join(os.environ.get(xdg) or os.path.expanduser(fallback), "kchaos")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Downloaded and built artefacts, reused across runs: ``$KCHAOS_CACHE`` or ``~/.cache/kchaos``."""
    return _directory("KCHAOS_CACHE", "XDG_CACHE_HOME", "~/.cache")


def state_dir() -> Path:
    """Clusters kept up between commands: ``$KCHAOS_STATE`` or ``~/.local/state/kchaos``."""
    return _directory("KCHAOS_STATE", "XDG_STATE_HOME", "~/.local/state")
