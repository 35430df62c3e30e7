"""Faults paced by the work, as Jepsen paces its nemesis: before a fault starts, the pipeline must
be committing again (``[faults.pacing] mode = "recovery"``), and a fault aimed at a transactional
id's coordinator can wait for one of the ids' commits to be under way (``aim``).

The schedule stays seeded: which faults, in which order, held how long, with which per-fault
seed. What pacing decides (how long a fault waited and why, which commit it was aimed at) depends
on the run's timing, so each decision is an event in the harness's history (``pace``), and the
verifier's exposure (verifier/exposure.py) measures what the faults then hit.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from kchaos.faults.base import Aim
from kchaos.faults.kinds import KINDS
from kchaos.faults.scheduled import ScheduledFault
from kchaos.faults.spec import PacingSpec
from kchaos.workloads.work_monitor import WorkMonitor

#: how often the pacer reads the workers' histories while it waits for recovery / for a commit to aim at
RECOVERY_POLL_S = 0.25
AIM_POLL_S = 0.005
#: a commit invoked longer ago than this is not "under way" for aiming: its worker is blocked or gone
AIM_FRESH_S = 1.0
#: the operation a fault aimed at each role waits for: a commit (EndTxn) reaches the transaction
#: coordinator, a send_offsets (TxnOffsetCommit) the group coordinator
AIMED_AT = {"txn-coordinator": "commit", "group-coordinator": "send_offsets"}


class Pacer:
    """Decides when each fault starts (and what in-flight work it is aimed at); the nemesis records
    each decision."""

    def __init__(self, spec: PacingSpec, work: WorkMonitor | None, stopping: threading.Event,
                 coordinators: Callable[[str], dict[str, int]] | None = None):
        self.spec = spec
        self.work = work
        self.stopping = stopping
        #: role -> {transactional id or group: node now}: for aiming (None: no aiming possible)
        self.coordinators = coordinators
        #: the pipeline's rate before the first fault (commits, or a group's offsets, a second)
        self.baseline: float | None = None

    def _rate(self, now: float) -> float:
        assert self.work is not None
        self.work.refresh()
        return self.work.commit_rate(now - self.spec.window_s, now)

    def wait_for_recovery(self, sf: ScheduledFault) -> dict[str, Any]:
        """Wait (at most ``max_wait_s``) until the pipeline commits at ``recovery_share`` of its
        baseline rate over the last ``window_s``; the decision, as recorded."""
        if self.spec.mode != "recovery":
            return {}
        if self.work is None or self.work.signal is None:
            return {"recovered": None, "waited_s": 0.0,
                    "why": "no progress signal: the pipeline keeps no client history, the fault starts on its schedule"}
        started = time.time()
        deadline = started + self.spec.max_wait_s
        while True:
            now = time.time()
            rate = self._rate(now)
            wanted = self.spec.recovery_share * self.baseline if self.baseline else 0.0
            # no baseline yet (the first fault): the pipeline must have committed at all
            recovered = rate >= wanted and rate > 0
            if recovered or now >= deadline or self.stopping.is_set():
                decision = {"recovered": recovered, "waited_s": round(now - started, 2), "rate": round(rate, 1),
                            "baseline": None if self.baseline is None else round(self.baseline, 1),
                            "share": self.spec.recovery_share, "window_s": self.spec.window_s,
                            "signal": self.work.signal}
                if recovered:
                    # the yardstick is the rate before the first fault, for either signal: every
                    # later measurement follows a fault's heal, when the pipeline drains its
                    # backlog; a catch-up's rate (a group's offsets: 227 against 27 offsets/s; commits:
                    # 37 against a steady 11-13 a second) is one the steady pipeline cannot meet, and
                    # as the yardstick it made every later fault wait out max_wait_s (certify-tv-flip
                    # seed 27: 10 of 22 faults, 200 s of a 400 s schedule)
                    self.baseline = self.baseline or rate
                elif not self.stopping.is_set():
                    decision["why"] = f"not recovered within {self.spec.max_wait_s:g}s: the fault starts anyway"
                return decision
            time.sleep(RECOVERY_POLL_S)

    def aim(self, sf: ScheduledFault) -> Aim | dict[str, Any] | None:
        """For a fault aimed at a coordinator, wait (at most ``aim_wait_s``) for an operation that
        reaches it to be under way; the Aim, or a dict saying why there is none, or None when the
        fault is not one pacing aims."""
        f = AIMED_AT.get(sf.target)
        if not self.spec.aim or f is None or not getattr(KINDS.get(sf.kind), "aimed_at_work", False):
            return None
        if self.work is None or self.coordinators is None:
            return {"aimed": False, "why": "no progress signal to aim by"}
        if not self.work.has_history:  # the group's offsets say what committed, not what is under way
            return {"aimed": False, "why": "the pipeline keeps no client history: no commit under way can be seen"}
        try:
            nodes = self.coordinators(sf.target)
        except Exception as exc:  # the coordinators could not be looked up now: the fault picks its own
            return {"aimed": False, "why": f"coordinators not known: {exc!r}"}
        deadline = time.time() + self.spec.aim_wait_s
        while time.time() < deadline and not self.stopping.is_set():
            self.work.refresh()
            now = time.time()
            for op in reversed(self.work.in_flight(f)):
                key = op.txid if sf.target == "txn-coordinator" else "group"
                if now - op.invoked <= AIM_FRESH_S and key in nodes:
                    return Aim(op.f, op.process, op.txid, op.txn_seq, nodes[key], op.invoked, now)
            time.sleep(AIM_POLL_S)
        return {"aimed": False, "why": f"no {f} under way within {self.spec.aim_wait_s:g}s"}
