"""A watchdog that outlives a crashed harness: ``python -m kchaos.clusters.reaper PID`` (directory in
``$KCHAOS_REAP_DIR``, so that the reaper's own command line does not carry the run directory
that leak checks look for).

Started by ``kchaos run`` in its own session. It waits for the harness process ``PID`` to end
(however it ends: exit, exception, SIGKILL, or a native crash in a client library) and then
kills every process recorded by a pid file under ``DIR`` (the run directory: brokers,
Toxiproxy, workers). After a clean run there is nothing left to kill and it simply exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kchaos.clusters.processes import is_alive, reap


def watch(parent: int, directory: Path, poll_s: float = 0.5) -> list[int]:
    while is_alive(parent):
        time.sleep(poll_s)
    return reap(directory, owner=parent)


def start_reaper(directory: Path) -> subprocess.Popen:
    """Spawn the watchdog for the current process; it needs no further care."""
    return subprocess.Popen([sys.executable, "-m", "kchaos.clusters.reaper", str(os.getpid())],
                            env={**os.environ, "KCHAOS_REAP_DIR": str(directory)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


if __name__ == "__main__":
    killed = watch(int(sys.argv[1]), Path(os.environ["KCHAOS_REAP_DIR"]))
    if killed:
        print(f"kchaos reaper: the harness ended; killed {len(killed)} leftover processes", file=sys.stderr)
