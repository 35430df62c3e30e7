"""Faults of the workload's own processes: a worker crashed, paused, turned into a zombie (paused
past its transaction timeout, replaced, resumed) or its transactional.id taken over."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kchaos.errors import ConfigError
from kchaos.faults.base import Fault
from kchaos.faults.kinds import FaultKind, NoParams, register


class ZombieParams(NoParams):
    pause_s: float | None = Field(None, gt=0, le=600, description=(
        "how long the worker stays paused before its replacement starts (None: the workload's transaction timeout "
        "plus 5 s, so the coordinator times its transaction out first); past the session timeout, the group moves "
        "its partitions meanwhile"))


class ClientFault(Fault):
    """Faults of the workload's own processes (crash, pause, zombie, transactional.id takeover)."""

    def invoke(self) -> dict[str, Any]:
        pool = self.ctx.workload.pool if self.ctx.workload is not None else None
        if pool is None:
            raise ConfigError(f"fault {self.scheduled.kind} needs a running workload")
        slot = self.rng.choice(sorted(pool.slots))
        kind = self.scheduled.kind
        if kind == "worker-crash":
            detail = pool.crash(slot)
        elif kind == "worker-pause":
            detail = pool.suspend(slot)
        elif kind == "zombie":
            detail = pool.zombie(slot, pause_s=self.params.pause_s if self.params is not None else None)
        else:
            detail = pool.takeover(slot)
        self.target = {"nodes": [], "role": f"worker {slot}", "detail": detail}
        return self.target

    def heal(self) -> dict[str, Any]:
        pool = self.ctx.workload.pool if self.ctx.workload is not None else None
        if not self.healed and self.scheduled.kind == "worker-pause" and pool is not None:
            pool.resume_all()
        self.healed = True
        return {}


#: a transactional.id's fencing, in the consumer-group pipeline (a share workload has no zombie to fence)
CONSUMER_GROUP_TRANSACTIONS = frozenset({"consumer-group", "transactional"})
register(
    FaultKind("worker-crash", "SIGKILL a workload worker; the harness restarts it", None, ("random-worker",), ClientFault),
    FaultKind("worker-pause", "SIGSTOP a worker for the fault's duration", None, ("random-worker",), ClientFault),
    FaultKind("zombie", "pause a worker (past the transaction timeout by default), replace it, resume it", None,
              ("random-worker",), ClientFault, ZombieParams, workload=CONSUMER_GROUP_TRANSACTIONS),
    FaultKind("txid-takeover", "start a second worker with the same transactional.id", None, ("random-worker",),
              ClientFault, workload=CONSUMER_GROUP_TRANSACTIONS),
)
