"""Housekeeping of a runs root: keep the newest runs whole, delete (or slim) the older ones.

A run directory is 40-60 MB, most of it the brokers' data (``cluster/node-*/data``), which the
verifier no longer needs once the topics are dumped into ``topics/``. ``prune`` keeps the
``keep`` newest runs untouched; each older one is deleted, or with ``slim`` loses its broker
data only (logs, history, dumps, results and the report stay, so ``analyze`` and ``report``
still work; the log cleaner's checkpoints stay too, the verifier's record of compaction).

Never touched: a run still in progress (not complete and a live process names it), and a run
that found a bug (its checker said INVALID, or its certification failed) unless
``include_invalid`` (the evidence of a bug is what a user keeps), or unless its matrix entry
expected it (``expect.json``: a negative control caught, a known-bug guard): that is no new bug,
and older ones go as any run does, or a cache of nights would grow by every control every night.

After a night (``kchaos ci nightly|merge --slim-expected``), ``plan_slim_expected`` slims every
run whose verdict matched its expectation (a valid run, an expected INVALID negative control or
known-bug guard, a certification that failed as expected) to its evidence, and keeps every
unexpected one whole: what a user reads first is the unexpected.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from kchaos.errors import ConfigError
from kchaos.rundir import EXPECT_FILE, RunDir, find_runs
from kchaos.runtime.processes import processes_with_marker

KEPT_IN_SLIM = {"cleaner-offset-checkpoint"}


@dataclass
class PruneAction:
    run: Path
    action: str      # "keep", "delete", "slim", "skip"
    why: str
    freed: int = 0   # bytes


def _disk_bytes(files) -> int:
    """Bytes on disk (a broker's index files are sparse: their apparent size overstates it 50 times)."""
    return sum(f.lstat().st_blocks * 512 for f in files)


def _size(path: Path) -> int:
    return _disk_bytes(f for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _broker_data(run: Path) -> list[Path]:
    return [f for f in run.glob("cluster/node-*/data/**/*") if f.is_file() and f.name not in KEPT_IN_SLIM]


def caught_as_expected(run: Path) -> bool:
    """An INVALID run its matrix entry expected (a negative control caught, a known-bug guard, a
    certification that failed as expected: ``expect.json`` says invalid): the evidence of no new
    bug, so older ones are pruned as any run is."""
    expect = RunDir(run).read(EXPECT_FILE, {}, (OSError, ValueError)) or {}
    return isinstance(expect, dict) and expect.get("verdict") == "invalid"


def plan_prune(root: Path, keep: int, slim: bool = False, include_invalid: bool = False) -> list[PruneAction]:
    if not root.is_dir():
        raise ConfigError(f"{root} is not a directory", "pass the root the runs were written to (kchaos run --out)")
    if keep < 0:
        raise ConfigError(f"--keep {keep} is negative", "pass how many of the newest runs to keep whole (0 or more)")
    actions = []
    for index, run in enumerate(find_runs(root)):
        status = RunDir(run).status(tolerate=(OSError, ValueError))
        if index < keep:
            actions.append(PruneAction(run, "keep", f"one of the {keep} newest"))
        elif not status.complete and processes_with_marker(str(run)):
            actions.append(PruneAction(run, "skip", "in progress (a live process works in it)"))
        elif status.found_a_bug and not include_invalid and not caught_as_expected(run):
            actions.append(PruneAction(run, "skip", "INVALID: the evidence of a bug is kept (--include-invalid prunes it)"))
        elif slim:
            data = _broker_data(run)
            actions.append(PruneAction(run, "slim", "older: broker data removed, evidence kept",
                                       _disk_bytes(data)) if data else
                           PruneAction(run, "keep", "older, already slim"))
        else:
            actions.append(PruneAction(run, "delete", "older", _size(run)))
    return actions


def plan_slim_expected(runs: Iterable[tuple[Path, bool]]) -> list[PruneAction]:
    """``runs``: (run directory, whether its verdict was the expected one). The expected ones are
    slimmed (their broker data removed, the evidence kept), the unexpected kept whole; a run a live
    process works in is never touched."""
    actions = []
    for run, as_expected in runs:
        run = Path(run)
        if not run.is_dir():
            continue
        status = RunDir(run).status(tolerate=(OSError, ValueError))
        if not status.complete and processes_with_marker(str(run)):
            actions.append(PruneAction(run, "skip", "in progress (a live process works in it)"))
        elif not as_expected:
            actions.append(PruneAction(run, "keep", "unexpected verdict: kept whole"))
        else:
            data = _broker_data(run)
            actions.append(PruneAction(run, "slim", "verdict as expected: broker data removed, evidence kept",
                                       _disk_bytes(data)) if data else
                           PruneAction(run, "keep", "verdict as expected, already slim"))
    return actions


def apply_prune(actions: list[PruneAction]) -> None:
    for a in actions:
        if a.action == "delete":
            shutil.rmtree(a.run)
        elif a.action == "slim":
            for f in _broker_data(a.run):
                f.unlink()
