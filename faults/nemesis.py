"""The nemesis: executes a fault schedule in a thread, one fault at a time, and always heals.

Each fault is one operation in the harness history, ``f = "fault:<kind>"``: the invoke line
when it starts (with the scheduled index and role), the completion when it is healed (with the
resolved nodes, the role they held and the details). A fault that cannot be injected (its role
has no holder right now, the cluster refused) completes as ``fail`` with the reason.
:meth:`Nemesis.stop` heals whatever is active, then :meth:`final_heal` puts every node, link
and worker back and waits for the cluster to be healthy (no under-replicated partition).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from kchaos.clusters.base import Capability
from kchaos.faults.base import Aim, Fault, FaultContext
from kchaos.faults.kinds import make_fault
from kchaos.faults.pacing import Pacer
from kchaos.faults.scheduled import ScheduledFault
from kchaos.faults.spec import PacingSpec
from kchaos.faults.timeline import ScheduledRunner
from kchaos.errors import KchaosError
from kchaos.workloads.history import HistoryWriter


class Nemesis(ScheduledRunner[ScheduledFault]):
    """The fault schedule, on the runner planned steps share (faults/timeline.py): a fault holds
    the cluster lock for its whole inject-hold-heal, so it never lands inside a node upgrade."""

    def __init__(self, ctx: FaultContext, schedule: list[ScheduledFault], history: HistoryWriter,
                 on_event: Any = None, cluster_lock: threading.Lock | None = None, pacing: PacingSpec | None = None):
        super().__init__("nemesis", schedule, lambda sf: sf.at_s, cluster_lock)
        self.ctx = ctx
        self.schedule = schedule
        self.history = history
        self.on_event = on_event or (lambda message: None)
        self.active: Fault | None = None
        #: faults struck outside the schedule (held over a planned step): healed by stop() too
        self.struck: list[Fault] = []
        self.executed: list[dict[str, Any]] = []
        #: how many planned steps have begun: a fault planned for an earlier phase is dropped
        self.steps_begun = 0
        self.per_phase = any(sf.phase is not None for sf in schedule)
        #: clear while a step runs (per-phase schedules: the next phase's faults wait for it)
        self._step_done = threading.Event()
        self._step_done.set()
        self._lock = threading.Lock()
        work = ctx.workload.work if ctx.workload is not None else None
        self.pacer = Pacer(pacing or PacingSpec(), work, self.stopping, self._coordinators)

    def _coordinators(self, role: str) -> dict[str, int]:
        """Who coordinates what a paced fault may aim at, looked up now: each transactional id's
        transaction coordinator, or the group's coordinator (key ``group``)."""
        cluster = self.ctx.cluster
        if role == "txn-coordinator":
            return {txid: cluster.transaction_coordinator(txid) for txid in self.ctx.transactional_ids()}
        assert self.ctx.workload is not None
        return {"group": cluster.group_coordinator(self.ctx.workload.spec.group_id)}

    def begin_phase(self) -> None:
        """A planned step begins (faults/steps.py): the faults planned for the phase before it that
        have not started are dropped, and (a per-phase schedule) the next phase's wait for the step
        to be done (end_phase): they are the phase after it, and one that took the cluster lock
        before the step's own fault did would run inside the change instead."""
        with self._lock:
            self.steps_begun += 1
            if self.per_phase:
                self._step_done.clear()

    def end_phase(self, planned_at_s: float) -> None:
        """The step begun last is done: the next phase's faults, planned from the step's time,
        slide by how long after it the step ended (not by what pacing waited in the phase before),
        so they keep their gaps from its end."""
        with self._lock:
            if self.per_phase and self.started_at is not None:
                self.shift_s = max(0.0, time.monotonic() - self.started_at - planned_at_s)
            self._step_done.set()

    def _phase_over(self, sf: ScheduledFault) -> bool:
        """True (and recorded) when ``sf`` was planned for a phase that a step has since ended."""
        if sf.phase is None or sf.phase >= self.steps_begun:
            return False
        self.history.event("fault-dropped", {"index": sf.index, "kind": sf.kind, "target": sf.target,
                                             "phase": sf.phase, "steps_begun": self.steps_begun,
                                             "why": "its phase ended before it started: the next phase's "
                                                    "faults start over from the first of the order"}, outcome="info")
        self.executed.append({"index": sf.index, "kind": sf.kind, "target": sf.target, "outcome": "dropped"})
        return True

    def execute(self, index: int, sf: ScheduledFault) -> None:
        if self._phase_over(sf):  # dropped at once, not after the step that ended its phase
            return
        while not self._step_done.wait(0.5):  # a per-phase schedule: the phase begins once its step is done
            if self.stopping.is_set():
                return
        if self._phase_over(sf):  # a later step began meanwhile
            return
        # pacing waits outside the cluster lock: a planned step may act meanwhile
        decision = self.pacer.wait_for_recovery(sf)
        aim = self.pacer.aim(sf)
        if decision or aim is not None:
            self.shift_s += decision.get("waited_s") or 0.0  # the faults after this one keep their spacing
            aimed = {"aimed_at": aim.to_json()} if isinstance(aim, Aim) else (aim or {})
            self.history.event("pace", {"index": sf.index, "kind": sf.kind, "target": sf.target, **decision, **aimed},
                               outcome="ok")
            if decision.get("why") or decision.get("waited_s", 0) >= 1:
                self.on_event(f"pacing fault {sf.index} {sf.kind}: waited {decision.get('waited_s', 0):g}s for the "
                              f"pipeline ({decision.get('rate')} "
                              f"{'input offsets' if decision.get('signal') == 'group offsets' else 'commits'}/s, "
                              f"baseline {decision.get('baseline')})"
                              + (f"; {decision['why']}" if decision.get("why") else ""))
        if self.stopping.is_set():
            return
        with self.cluster_lock:
            if self._phase_over(sf):  # a step began while it paced, or held the lock meanwhile
                return
            self._execute(sf, aim if isinstance(aim, Aim) else None)

    def strike(self, sf: ScheduledFault, during: str, injected: threading.Event | None = None) -> None:
        """Execute one fault outside the schedule, now, without the cluster lock: a fault held over a
        planned step (faults/steps.py ``fault``), so that the change itself (a FeatureCommand, the
        workers' restarts) runs under it. Aimed like a scheduled fault; one operation in the history
        like any other (``during`` names the step), so its exposure and its effect are measured the
        same way. ``injected`` is set once it acted (or failed to)."""
        aim = self.pacer.aim(sf)
        if aim is not None:
            aimed = {"aimed_at": aim.to_json()} if isinstance(aim, Aim) else aim
            self.history.event("pace", {"index": sf.index, "kind": sf.kind, "target": sf.target, "during": during,
                                        **aimed}, outcome="ok")
        self._execute(sf, aim if isinstance(aim, Aim) else None, during=during, injected=injected)

    def _execute(self, sf: ScheduledFault, aim: Aim | None = None, during: str | None = None,
                 injected: threading.Event | None = None) -> None:
        fault = make_fault(sf, dataclasses.replace(self.ctx, aim=aim) if aim is not None else self.ctx)
        f = f"fault:{sf.kind}"
        op = self.history.invoke(f, {"index": sf.index, "kind": sf.kind, "target": sf.target, "hold_s": sf.hold_s,
                                     **({"during": during} if during else {})})
        with self._lock:
            if during is None:
                self.active = fault
            else:
                self.struck.append(fault)
        try:
            try:
                resolved = fault.invoke()
            finally:
                if injected is not None:
                    injected.set()
        except Exception as exc:
            reason = exc.one_line() if isinstance(exc, KchaosError) else repr(exc)
            self._heal(fault)
            # a fault that failed part way may still have acted: what it had resolved is kept
            # (the verifier excuses an epoch-jump's fences by the id it names). An error kchaos did
            # not word itself says where it was raised: a bare OSError alone named no cause
            # (nemesis-all's disk-full on 4.2.1, docs/findings.md F7)
            where = {} if isinstance(exc, KchaosError) else {"raised_at": raised_at(exc)}
            self.history.complete(op, f, "fail", {"index": sf.index, **({"resolved": fault.target} if fault.target else {}),
                                                  **where}, error=reason)
            self.executed.append({"index": sf.index, "kind": sf.kind, "outcome": "fail", "error": reason})
            self.on_event(f"fault {sf.index} {sf.kind}:{sf.target} could not be injected: {reason}")
            return
        self.on_event(f"fault {sf.index} {sf.kind} on {resolved.get('role')} {resolved.get('nodes')}")
        self.wait(sf.hold_s)
        healed = self._heal(fault)
        self.history.complete(op, f, "ok", {"index": sf.index, "resolved": resolved, "heal": healed})
        self.executed.append({"index": sf.index, "kind": sf.kind, "target": sf.target, "outcome": "ok",
                              "resolved": resolved})

    def _heal(self, fault: Fault) -> dict[str, Any]:
        try:
            return fault.heal()
        except Exception as exc:
            return {"error": repr(exc)}
        finally:
            with self._lock:
                if self.active is fault:
                    self.active = None
                if fault in self.struck:
                    self.struck.remove(fault)

    def stop(self) -> None:
        self.halt(600)
        with self._lock:
            faults = [f for f in (self.active, *self.struck) if f is not None]
        for fault in faults:
            self._heal(fault)

    def final_heal(self, timeout_s: float) -> dict[str, Any]:
        """Every link up, every node running and resumed, every worker resumed; then wait for health."""
        op = self.history.invoke("heal", {"timeout_s": timeout_s})
        cluster = self.ctx.cluster
        actions: list[str] = []
        try:
            if cluster.has(Capability.NETWORK) or cluster.has(Capability.PARTITION):
                cluster.network.heal()  # type: ignore[attr-defined]
                actions.append("network reset")
            if cluster.has(Capability.MESSAGES):
                released = cluster.messages.reset()  # type: ignore[attr-defined]
                actions.append(f"message rules removed ({len(released)} requests affected)")
            for node in cluster.nodes:
                if getattr(node, "is_paused", False):
                    node.resume()
                    actions.append(f"resumed node {node.node_id}")
                if (cluster.has(Capability.RESTART) or cluster.has(Capability.KILL)) and not getattr(node, "is_running", True):
                    node.start()
                    actions.append(f"started node {node.node_id}")
            pool = self.ctx.workload.pool if self.ctx.workload is not None else None
            if pool is not None:
                pool.resume_all()
            started = time.monotonic()
            cluster.wait_healthy(timeout_s)
            value = {"actions": actions, "healthy_after_s": round(time.monotonic() - started, 1)}
            self.history.complete(op, "heal", "ok", value)
            return {"healthy": True, **value}
        except Exception as exc:
            urp: Any
            try:
                urp = cluster.under_replicated_partitions()
            except Exception:
                urp = "unknown"
            reason = exc.one_line() if isinstance(exc, KchaosError) else repr(exc)
            self.history.complete(op, "heal", "fail", {"actions": actions, "under_replicated": urp}, error=reason)
            return {"healthy": False, "actions": actions, "under_replicated": urp, "error": reason,
                    "trace": traceback.format_exc(limit=2)}


def raised_at(exc: BaseException, frames: int = 4) -> list[str]:
    """The innermost ``frames`` of where ``exc`` was raised, as ``file:line function``."""
    return [f"{Path(frame.filename).name}:{frame.lineno} {frame.name}"
            for frame in traceback.extract_tb(exc.__traceback__)[-frames:]]
