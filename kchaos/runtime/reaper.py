"""A watchdog that outlives a crashed harness: ``python -m kchaos.runtime.reaper PID`` (directory in
``$KCHAOS_REAP_DIR``, so that the reaper's own command line does not carry the run directory
that leak checks look for).

Started by ``kchaos run`` in its own session. It waits for the harness process ``PID`` to end
(however it ends: exit, exception, SIGKILL, or a native crash in a client library) and then
kills every process recorded by a pid file under ``DIR`` (the run directory: brokers,
Toxiproxy, workers). Then, a dead man's switch for clusters kchaos did not start, it undoes
whatever the run's heal journal still holds (a partition's rules, a paused or stopped node:
kchaos/runtime/heal_journal.py). After a clean run there is nothing left to do and it simply exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kchaos.runtime import small_disk
from kchaos.runtime.heal_journal import JOURNAL_NAME, HealJournal, heal_pending
from kchaos.runtime.node_commands import run_undo
from kchaos.runtime.processes import is_alive, reap


def watch(parent: int, directory: Path, poll_s: float = 0.5) -> list[int]:
    while is_alive(parent):
        time.sleep(poll_s)
    return reap(directory, owner=parent)


def heal_journals(directory: Path) -> list[dict]:
    """Undo what the journals under ``directory`` hold unhealed (the harness died before it could)."""
    report = []
    for path in sorted(directory.rglob(JOURNAL_NAME)):
        report += heal_pending(HealJournal(path), run_undo, "healed by the reaper (the harness had died)")
    return report


def start_reaper(directory: Path) -> subprocess.Popen:
    """Spawn the watchdog for the current process; it needs no further care."""
    return subprocess.Popen([sys.executable, "-m", "kchaos.runtime.reaper", str(os.getpid())],
                            env={**os.environ, "KCHAOS_REAP_DIR": str(directory)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


if __name__ == "__main__":
    directory = Path(os.environ["KCHAOS_REAP_DIR"])
    killed = watch(int(sys.argv[1]), directory)
    if small_disk.mounts_under(directory):  # disk faults' small filesystems: data copied back, unmounted
        small_disk.unmount_all(directory)
    if killed:
        print(f"kchaos reaper: the harness ended; killed {len(killed)} leftover processes", file=sys.stderr)
    healed = heal_journals(directory)
    if healed:
        print(f"kchaos reaper: undid {sum(1 for h in healed if h['healed'])} of {len(healed)} unhealed acts "
              "on the cluster's nodes (the rest: `kchaos heal RUN_DIR`)", file=sys.stderr)
