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

from kchaos.faults.scheduled import ScheduledFault
from kchaos.faults.spec import FaultsSpec
from kchaos.files import atomic_write


def generate_schedule(spec: FaultsSpec, run_duration_s: float, seed: int) -> list[ScheduledFault]:
    if not spec.enabled:
        return []
    entries = spec.entries()
    if not entries:
        return []
    rng = random.Random(f"{seed}:faults")
    weights = [e.weight for e in entries]
    order = entries[:]
    rng.shuffle(order)
    schedule = []
    t = spec.start_after_s
    while True:
        if spec.order == "round-robin":
            entry = order[len(schedule) % len(order)]
        else:
            entry = rng.choices(entries, weights=weights, k=1)[0]
        hold = entry.duration_s or spec.duration_s
        if t + hold > run_duration_s:
            break
        schedule.append(ScheduledFault(len(schedule), round(t, 3), entry.kind, entry.resolved_target, hold,
                                       rng.randrange(2**31), dict(entry.params)))
        t += spec.interval_s if spec.gap_s is None else hold + spec.gap_s
    return schedule


def write_schedule(path: Path, schedule: list[ScheduledFault], seed: int) -> None:
    atomic_write(path, json.dumps({"seed": seed, "faults": [f.to_json() for f in schedule]}, indent=2))


def read_schedule(path: Path) -> list[ScheduledFault]:
    data = json.loads(Path(path).read_text())
    return [ScheduledFault(**f) for f in data["faults"]]
