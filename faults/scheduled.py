"""One fault of a schedule, as the schedule holds it and the nemesis executes it.

A leaf: the kinds, pacing and the nemesis read it, and :mod:`kchaos.faults.schedule` makes it,
so it imports nothing from faults (the schedule reads the spec, which imports the kinds).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScheduledFault:
    index: int
    at_s: float          # seconds after the fault phase starts
    kind: str
    target: str
    hold_s: float
    seed: int            # drives the choices made at injection (random node, worker...)
    params: dict[str, Any] = field(default_factory=dict)  # numbers; message faults also names (apis, error)
    #: planned per phase ([faults] per_phase): how many planned steps start at or before its time;
    #: the nemesis drops it once a later step has begun. None: planned for the whole run
    phase: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
