"""What faults and planned steps ask of the workload they run beside: typed, so a fault never
probes an unknown object (workloads.ctp.CtpWorkload and workloads.pool.WorkerPool provide them)."""

from __future__ import annotations

from typing import Any, Mapping, Protocol

from kchaos.workloads.spec import WorkloadSpec
from kchaos.workloads.work_monitor import WorkMonitor


class WorkerControl(Protocol):
    """The workload's worker processes, by slot (``w0``, ``w1``...)."""

    slots: Mapping[str, Any]

    def crash(self, slot_name: str) -> dict[str, Any]: ...

    def suspend(self, slot_name: str) -> dict[str, Any]: ...

    def zombie(self, slot_name: str, pause_s: float | None = None) -> dict[str, Any]: ...

    def takeover(self, slot_name: str) -> dict[str, Any]: ...

    def resume_all(self) -> None: ...

    def restart_all(self) -> list[dict[str, Any]]: ...


class FaultWorkload(Protocol):
    """The pipeline a fault aims at: its topics, group and transactional ids (roles are looked up
    from them), and its workers (None before they start)."""

    spec: WorkloadSpec
    txid_prefix: str
    pool: WorkerControl | None
    #: the workers' progress as they record it (None before they start): what pacing reads
    work: WorkMonitor | None
