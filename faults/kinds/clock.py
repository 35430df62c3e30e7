"""Clock faults: a broker's wall clock moved while it runs, as Jepsen's clock nemesis does.

Kafka times transactions out, expires producer ids and transactional ids, and stamps
LogAppendTime records and markers by the wall clock (``Time.milliseconds``), on whichever broker
does it. ``clock-bump`` steps the target's clock by ``offset_s`` (forward or back) for the fault's
hold; ``clock-strobe`` flips it between the true time and ``delta_s`` off every ``period_s``;
``clock-drift`` makes it gain (or lose) ``rate`` seconds per second, in one-second steps. Heal
sets the clock true again (a step back for a clock that ran ahead, as ``ntpdate`` does).

The clock is moved through libfaketime in the node's JVM (kchaos/runtime/faketime.py): the local
backend under ``cluster.clock_control``, which a campaign with clock faults turns on. Every
change is proved on the broker: the clock probe (clusters/clock_probe.py) measures the target's
clock through a LogAppendTime record after the change and after the heal, and the fault records
both (``measured_offset_ms``). A fault records the range of offsets it applied
(``offset_range_s``) and the ``__transaction_state`` partitions its targets led when it resolved
them and again at its heal (leadership moves while it lasts): the verifier sets aside the
coordinator stamps those partitions got while it lasted, and the client transactions of their
transactional ids, every partition's where a fault recorded only one of the two
(verifier/driver_checks.py); what it can match by producer epoch it judges
(verifier/coordinator_log.py ``match_by_epoch``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from pydantic import Field, field_validator

from kchaos.clusters.base import Capability
from kchaos.clusters.clock_probe import measure_broker_clocks
from kchaos.errors import ConfigError
from kchaos.faults.base import NODE_TARGETS, Fault, resolve_node_target
from kchaos.faults.kinds import MOVES_BROKER_CLOCK, ClusterNeeds, FaultKind, NoParams, register
from kchaos.runtime.faketime import CACHE_S

#: how long a change may take to show on the broker, and how close it must show
APPLY_WITHIN_S = 8.0
APPLIED_WITHIN_MS = 1000.0
MAX_OFFSET_S = 30 * 86400  # past every expiry Kafka has by default (transactional ids: 7 days)
CLOCK_TARGETS = (*NODE_TARGETS, "all")


def _an_offset(value: float, info: Any) -> float:
    if value == 0 or abs(value) > MAX_OFFSET_S:
        raise ValueError(f"{info.field_name} must be non-zero and within {MAX_OFFSET_S} s (30 days); got {value!r}")
    return value


class BumpParams(NoParams):
    offset_s: float = Field(60, description="seconds the clock is moved (negative: back)")
    idle_worker: bool = Field(False, description=(
        "pause a worker (SIGSTOP) for the step, the one whose transactional id the target coordinates when "
        "there is one, and resume it after the heal: its id sits idle across the moved clock, as an owner "
        "that keeps its id but stops using it does, so an expiry can reach an id still held"))
    _sized = field_validator("offset_s")(_an_offset)


class StrobeParams(NoParams):
    delta_s: float = Field(5, description="seconds off the true time in the off half of each period (negative: back)")
    period_s: float = Field(2, description=f"seconds per flip; at least {CACHE_S} (how often the broker reads its clock's offset)")
    _delta = field_validator("delta_s")(_an_offset)

    @field_validator("period_s")
    @classmethod
    def _period(cls, value: float) -> float:
        if value < CACHE_S:
            raise ValueError(f"period_s must be at least {CACHE_S} s; got {value!r}")
        return value


class DriftParams(NoParams):
    rate: float = Field(0.5, description="seconds the clock gains per second (negative: loses)")

    @field_validator("rate")
    @classmethod
    def _rate(cls, value: float) -> float:
        if value == 0 or not -0.9 <= value <= 100:
            raise ValueError(f"rate must be non-zero, from -0.9 to 100 seconds per second; got {value!r}")
        return value


class ClockFault(Fault):
    """Moves the target nodes' clocks; strobe and drift keep moving them until healed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stop = threading.Event()
        self._mover: threading.Thread | None = None
        self._offsets: list[float] = []  # the offsets applied while it lasted (not the heal's 0)
        self._paused_slot: str | None = None  # idle_worker: the worker paused across the step

    def _set(self, offset_s: float) -> None:
        for nid in self.target["nodes"]:
            self.ctx.cluster.node(nid).set_clock_offset(offset_s)
        self._offsets.append(offset_s)

    def _measure(self, shows: Callable[[float], bool]) -> dict[str, Any]:
        """The targets' clocks as the brokers stamp records, measured until each shows what the
        fault set (``shows(offset_ms)``; the library re-reads the offset about once a second,
        measured: up to 3 s) or :data:`APPLY_WITHIN_S` passed; ``applied`` says which. A
        controller-only target is listed under ``controller_only`` and not measured (``applied``
        None when no target is a broker)."""
        started = time.monotonic()
        # a controller-only node leads no partition, so no record carries its clock: said, not
        # waited for (the wait held such a step 8 s longer than its hold; issue 61)
        broker_ids = {n.node_id for n in self.ctx.cluster.brokers}
        targets = list(self.target["nodes"])
        controller_only = [n for n in targets if n not in broker_ids]
        unmeasurable = {"controller_only": controller_only} if controller_only else {}
        targets = [n for n in targets if n in broker_ids]
        if not targets:
            return {**unmeasurable, "applied": None, "after_s": 0.0}
        nodes = [str(n) for n in targets]
        found: dict[str, Any] = {}
        while True:
            try:
                brokers = measure_broker_clocks(self.ctx.cluster, samples=3, nodes=targets).get("brokers") or {}
            except Exception as exc:  # a partitioned or killed broker: said, not hidden
                return {**found, **unmeasurable, "error": f"{type(exc).__name__}: {exc}", "applied": False}
            found = {n: brokers.get(n) for n in nodes}
            applied = all(m is not None and shows(m["offset_ms"]) for m in found.values())
            waited = time.monotonic() - started
            if applied or waited > APPLY_WITHIN_S:
                return {**found, **unmeasurable, "applied": applied, "after_s": round(waited, 1)}
            time.sleep(0.25)

    def _shows_change(self, offset_ms: float) -> bool:
        """What proves this kind's change on the broker: the step; the strobe's off half; a drift
        under way (at least half a second ahead or behind, in its direction)."""
        p = self.params
        if self.scheduled.kind == "clock-bump":
            return abs(offset_ms - p.offset_s * 1000) <= APPLIED_WITHIN_MS
        if self.scheduled.kind == "clock-strobe":
            return abs(offset_ms - p.delta_s * 1000) <= APPLIED_WITHIN_MS
        return offset_ms * p.rate > 0 and abs(offset_ms) >= 500

    def invoke(self) -> dict[str, Any]:
        self.ctx.cluster.require(Capability.CLOCK)
        self.target = resolve_node_target(self.ctx, self.scheduled.target, self.rng)
        kind, p = self.scheduled.kind, self.params
        first = {"clock-bump": lambda: p.offset_s, "clock-strobe": lambda: p.delta_s,
                 "clock-drift": lambda: p.rate * 1.0}[kind]()
        idle = self._idle_owner() if getattr(p, "idle_worker", False) else None
        self._set(first)
        led = self._transaction_log_partitions()
        if kind != "clock-bump":
            self._mover = threading.Thread(target=self._move, name=f"kchaos-{kind}", daemon=True)
            self._mover.start()
        self.target = {**self.target, "detail": {**self.target["detail"], "first_offset_s": first,
                                                 **({"idle_worker": idle} if idle else {}),
                                                 "transaction_log_partitions": led,
                                                 "measured_offset_ms": self._measure(self._shows_change)}}
        return self.target

    def _idle_owner(self) -> dict[str, Any]:
        """Pause the worker whose transactional id the target coordinates (a random one when the
        target names none) before the clock moves; the heal resumes it once the clock is true."""
        pool = self.ctx.workload.pool if self.ctx.workload is not None else None
        if pool is None or not pool.slots:
            raise ConfigError("idle_worker needs a running workload of kchaos' own workers")
        txid = self.target["detail"].get("transactional_id")
        slots = sorted(pool.slots)
        slot = next((s for s in slots if txid and txid.endswith(f"-{s}")), None) or self.rng.choice(slots)
        self._paused_slot = slot
        return {"slot": slot, "owns_target_transactional_id": bool(txid and txid.endswith(f"-{slot}")),
                **pool.suspend(slot)}

    def _transaction_log_partitions(self) -> list[int] | None:
        """The ``__transaction_state`` partitions the targets lead: the coordinators whose stamps
        the moved clock makes. None when they could not be read (the verifier then sets aside
        every coordinator's stamps in the window)."""
        try:
            leaders = self.ctx.cluster.partition_metadata("__transaction_state")
        except Exception:
            return None
        return sorted(p for p, m in leaders.items() if int(m.leader) in self.target["nodes"])

    def _move(self) -> None:
        p, started = self.params, time.monotonic()
        if self.scheduled.kind == "clock-strobe":
            off = True
            while not self._stop.wait(p.period_s):
                off = not off
                self._set(p.delta_s if off else 0.0)
        else:
            while not self._stop.wait(1.0):
                self._set(p.rate * (time.monotonic() - started + 1.0))

    def heal(self) -> dict[str, Any]:
        if self.healed:
            return {}
        self.healed = True
        try:
            return self._set_true()
        finally:
            # after the clock is true (or the heal failed): the idle worker's next request meets
            # whatever expired while it slept; never left stopped
            if self._paused_slot is not None and self.ctx.workload is not None and self.ctx.workload.pool is not None:
                self.ctx.workload.pool.resume_all()

    def _set_true(self) -> dict[str, Any]:
        self._stop.set()
        if self._mover is not None:
            self._mover.join(5)
        if not self.target.get("nodes"):
            return {}
        applied = [min(self._offsets), max(self._offsets)]
        led = self._transaction_log_partitions()  # still on the moved clock: what it led at the end
        self._set(0.0)
        return {"nodes": self.target["nodes"], "offset_range_s": applied, "transaction_log_partitions": led,
                "measured_offset_ms": self._measure(lambda offset_ms: abs(offset_ms) <= APPLIED_WITHIN_MS),
                **({"resumed_worker": self._paused_slot} if self._paused_slot else {})}


#: libfaketime in every broker's JVM
CLOCK_NEEDS = ClusterNeeds(cluster={"clock_control": True})
register(
    FaultKind("clock-bump", "step the target's wall clock by offset_s (libfaketime); heal sets it true",
              Capability.CLOCK, CLOCK_TARGETS, ClockFault, BumpParams, needs=CLOCK_NEEDS,
              evidence=frozenset({MOVES_BROKER_CLOCK})),
    FaultKind("clock-strobe", "flip the target's wall clock between true and delta_s off every period_s",
              Capability.CLOCK, CLOCK_TARGETS, ClockFault, StrobeParams, needs=CLOCK_NEEDS,
              evidence=frozenset({MOVES_BROKER_CLOCK})),
    FaultKind("clock-drift", "the target's wall clock gains rate seconds per second, in one-second steps",
              Capability.CLOCK, CLOCK_TARGETS, ClockFault, DriftParams, needs=CLOCK_NEEDS,
              evidence=frozenset({MOVES_BROKER_CLOCK})),
)
