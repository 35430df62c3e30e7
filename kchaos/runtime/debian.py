"""Debian packages kchaos installs itself when a feature needs them and the machine allows it
(root, apt): the Docker engine, libfaketime, the test labs' tools."""

from __future__ import annotations

import os
import shutil
import subprocess


def can_install() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def apt_install(packages: list[str] | tuple[str, ...]) -> subprocess.CompletedProcess:
    """``apt-get install`` the packages, after ``apt-get update`` if the first try fails (a fresh
    machine may not have its package lists yet). The caller checks what it needed is there."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    argv = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, env=env)
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    return proc
