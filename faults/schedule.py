"""Seeded fault schedules: a pure function of (fault mix, run duration, seed).

The schedule is written to ``RUN_DIR/schedule.json`` before it executes, and ``kchaos replay``
executes a stored schedule as is. Targets are *roles* here ("txn-coordinator"); they resolve to
nodes at the moment of injection. The random choices made at injection time (which node of a
"random" target, which worker) come from a per-fault seed stored in the schedule.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Sequence

from kchaos.faults.scheduled import ScheduledFault
from kchaos.faults.spec import FaultsSpec
from kchaos.files import atomic_write


def generate_schedule(spec: FaultsSpec, run_duration_s: float, seed: int,
                      step_starts: Sequence[float] = ()) -> list[ScheduledFault]:
    """The run's faults. With ``spec.per_phase`` and planned steps, each stretch between two
    steps' planned starts is planned on its own, from the step's start and from the first entry of
    the (seeded) order: every phase a certification gates gets every entry in turn, wherever the
    previous phase's cycle stood when it ended."""
    if not spec.enabled:
        return []
    entries = spec.entries()
    if not entries:
        return []
    rng = random.Random(f"{seed}:faults")
    order = entries[:]
    rng.shuffle(order)
    starts = sorted(step_starts) if spec.per_phase else []
    bounds = [spec.start_after_s, *sorted({s for s in starts if s > spec.start_after_s})]
    schedule: list[ScheduledFault] = []
    for i, begin in enumerate(bounds):
        end = bounds[i + 1] if i + 1 < len(bounds) else run_duration_s
        phase = sum(1 for s in starts if s <= begin) if starts else None
        schedule += _plan(spec, entries, order, rng, begin, end, run_duration_s, len(schedule), phase)
    return schedule


def _plan(spec: FaultsSpec, entries: list, order: list, rng: random.Random, begin: float, end: float,
          run_duration_s: float, first_index: int, phase: int | None) -> list[ScheduledFault]:
    """Faults from ``begin`` while each starts before ``end`` and heals within the run."""
    weights = [e.weight for e in entries]
    planned: list[ScheduledFault] = []
    t = begin
    while t < end:
        if spec.order == "round-robin":
            entry = order[len(planned) % len(order)]
        else:
            entry = rng.choices(entries, weights=weights, k=1)[0]
        hold = entry.duration_s or spec.duration_s
        if t + hold > run_duration_s:
            break
        planned.append(ScheduledFault(first_index + len(planned), round(t, 3), entry.kind, entry.resolved_target, hold,
                                      rng.randrange(2**31), dict(entry.params), phase))
        t += spec.interval_s if spec.gap_s is None else hold + spec.gap_s
    return planned


def write_schedule(path: Path, schedule: list[ScheduledFault], seed: int) -> None:
    atomic_write(path, json.dumps({"seed": seed, "faults": [f.to_json() for f in schedule]}, indent=2))


def read_schedule(path: Path) -> list[ScheduledFault]:
    data = json.loads(Path(path).read_text())
    return [ScheduledFault(**f) for f in data["faults"]]
