"""Debian's Chromium and ChromeDriver, for the report tests (a real headless browser).

``kchaos setup --browser`` installs them with apt when they are missing (as root; otherwise it
prints the command to run). Nothing else in kchaos needs a browser.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from kchaos.errors import SetupError

PACKAGES = ("chromium", "chromium-driver")


def find_browser() -> tuple[str, str] | None:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def ensure_browser() -> tuple[str, str]:
    found = find_browser()
    if found:
        return found
    command = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    if os.geteuid() != 0:
        raise SetupError("Chromium and ChromeDriver are not installed (the report tests need them)",
                         f"run: sudo {' '.join(command)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = subprocess.run(command, capture_output=True, text=True, env=env)
    if install.returncode != 0:  # a stale package index: refresh it once and retry
        subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=env)
        install = subprocess.run(command, capture_output=True, text=True, env=env)
    found = find_browser()
    if install.returncode != 0 or not found:
        raise SetupError("apt-get could not install Chromium and ChromeDriver", f"run: {' '.join(command)}",
                         detail=(install.stdout + install.stderr)[-3000:])
    return found
