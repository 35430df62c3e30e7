"""The ``[faults]`` table of a campaign: which faults, how often, for how long, aimed at what.

Validated on load with errors that name the key and list the accepted values. Capabilities are
checked against the cluster backend before anything starts (:func:`check_capabilities`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kchaos.clusters import backend_capabilities, backend_capability_gap
from kchaos.clusters.spec import ClusterSpec
from kchaos.errors import CapabilityError, ConfigError
from kchaos.faults.kinds import KINDS

#: named bundles of mix entries; packages compose with each other and with `mix`
PACKAGES: dict[str, list[dict[str, Any]]] = {
    "coordinators": [{"kind": "kill", "target": "txn-coordinator"}, {"kind": "kill", "target": "group-coordinator"},
                     {"kind": "pause", "target": "txn-coordinator"}],
    "controller": [{"kind": "kill", "target": "controller"}, {"kind": "partition", "target": "controller-quorum"}],
    "leaders": [{"kind": "kill", "target": "leader-output"}, {"kind": "terminate", "target": "leader-input"}],
    "partitions": [{"kind": "partition", "target": "isolate-leader-output"},
                   {"kind": "partition", "target": "majority-minority"}, {"kind": "partition", "target": "ring"}],
    "network": [{"kind": "latency", "target": "all-clients"}, {"kind": "client-link-down", "target": "txn-coordinator"},
                {"kind": "reset-peer", "target": "group-coordinator"}],
    "clients": [{"kind": "worker-crash", "target": "random-worker"}, {"kind": "zombie", "target": "random-worker"},
                {"kind": "txid-takeover", "target": "random-worker"}],
    # the coordinators' and a leader's wall clocks moved (faults/kinds/clock.py): steps either way
    # within the clients' timeouts, a strobe, a drift
    "clocks": [{"kind": "clock-bump", "target": "txn-coordinator", "params": {"offset_s": 30}},
               {"kind": "clock-bump", "target": "group-coordinator", "params": {"offset_s": -30}},
               {"kind": "clock-strobe", "target": "txn-coordinator", "params": {"delta_s": 20, "period_s": 2}},
               {"kind": "clock-drift", "target": "leader-output", "params": {"rate": 2}}],
    "disks": [{"kind": "disk-full", "target": "leader-output"}, {"kind": "disk-full", "target": "txn-coordinator"}],
    # KAFKA-17754's shapes (docs/findings.md): a commit or abort, or a Produce, reaching the broker
    # after its transaction ended. The duplicate needs no client timeout, so it bites whatever the
    # clients' settings; the holds need a client request timeout shorter than the hold.
    "kip890": [{"kind": "message-duplicate", "target": "all",
                "params": {"apis": ["EndTxn"], "count": 1, "duplicate_after_ms": 1500}},
               {"kind": "message-hold", "target": "all",
                "params": {"apis": ["EndTxn"], "count": 1, "release_after_ms": 6000}, "duration_s": 8},
               {"kind": "message-hold", "target": "leader-output",
                "params": {"apis": ["Produce"], "count": 1, "release_after_ms": 6000}, "duration_s": 8}],
}
# Jepsen's `--nemesis all`: every family on one schedule (nodes, network, clients, messages, clocks, disks)
PACKAGES["all"] = [PACKAGES["coordinators"][0], PACKAGES["leaders"][1], PACKAGES["partitions"][0],
                   PACKAGES["network"][0], PACKAGES["clients"][0], PACKAGES["clients"][1], PACKAGES["kip890"][0],
                   PACKAGES["kip890"][1], PACKAGES["clocks"][0], PACKAGES["clocks"][2], PACKAGES["disks"][0]]


class FaultEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str
    target: str | None = None  # None: the kind's first accepted target
    weight: float = Field(1.0, gt=0)
    duration_s: float | None = Field(None, gt=0, le=3600, description="how long the fault holds; None: the mix default")
    params: dict[str, bool | float | str | list[str]] = Field(default_factory=dict)

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value not in KINDS:
            raise ValueError(f"unknown fault kind {value!r}; accepted: {', '.join(sorted(KINDS))}")
        return value

    @model_validator(mode="after")
    def _target_and_params(self) -> "FaultEntry":
        kind = KINDS[self.kind]
        if self.target is not None and self.target not in kind.targets:
            raise ValueError(f"fault {self.kind!r} cannot target {self.target!r}; accepted targets: {', '.join(kind.targets)}")
        kind.check_params(self.params)
        problem = getattr(kind.params, "target_problem", None)
        if problem is not None and (message := problem(self.resolved_target, self.params)):
            raise ValueError(f"fault {self.kind!r}: {message}")
        return self

    @property
    def resolved_target(self) -> str:
        return self.target or KINDS[self.kind].targets[0]


class ExposureSpec(BaseModel):
    """``[faults.exposure]``: the work a campaign's faults must hit for its run to speak for them
    (verifier/exposure.py measures it in every run). A committed transaction is exposed to a fault
    kind when its life (from its first send to its commit) overlaps a window of that kind (from the
    fault's injection to its heal). Below a requirement the verdict is unknown, naming the kind and
    the figure: a fault that hit nothing tested nothing. A campaign that requires nothing still has
    a floor (``floor``, one committed transaction per fault of each kind), lowered only by saying so."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    committed: dict[str, int] = Field(
        default_factory=dict, description="per fault kind: at least this many committed transactions overlapping its "
                                          "windows (counted once each)")
    share: float | None = Field(
        None, ge=0, le=1, description="at least this share of the run's committed transactions overlapping a window of "
                                      "one of the kinds in `committed`")
    stall_s: float = Field(10.0, gt=0, description="a stall: no commit for longer than this while the workload runs "
                                                   "(reported with what each worker was doing)")
    floor: float = Field(1.0, ge=0, description=(
        "without `committed`: per executed fault kind, at least this many committed transactions under its windows per "
        "fault of the kind (a kind below it makes the run unknown, with the figure); 0 lowers it to nothing, said in "
        "the campaign"))

    @field_validator("committed")
    @classmethod
    def _kinds(cls, value: dict[str, int]) -> dict[str, int]:
        for kind, count in value.items():
            if kind not in KINDS:
                raise ValueError(f"exposure: unknown fault kind {kind!r}; accepted: {', '.join(sorted(KINDS))}")
            if count < 0:
                raise ValueError(f"exposure: {kind} = {count}: a count of 0 or more")
        return value

    @property
    def required(self) -> bool:
        return bool(self.committed) or self.share is not None


class PacingSpec(BaseModel):
    """``[faults.pacing]``: when a fault may start besides its scheduled time. ``schedule``: at its
    time (a fault still waits for the one before it to heal). ``recovery``: also not before the
    pipeline commits again at ``recovery_share`` of its rate before the first fault, measured over
    ``window_s``, waiting at most ``max_wait_s`` (then it starts anyway, and says so); the schedule
    slides by what it waited, so faults keep their spacing. ``aim``: a fault aimed at a transactional
    id's coordinator waits (at most ``aim_wait_s``) for a commit of one of the ids to be under way,
    and takes that id's coordinator. Every decision is an event in the harness's history."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Literal["schedule", "recovery"] = "schedule"
    recovery_share: float = Field(0.5, gt=0, le=1)
    window_s: float = Field(5.0, gt=0, le=120)
    max_wait_s: float = Field(30.0, ge=0, le=600)
    aim: bool = False
    aim_wait_s: float = Field(3.0, ge=0, le=60)


class FaultsSpec(BaseModel):
    """A fault mix: every ``interval_s`` (from ``start_after_s`` until ``run.duration_s`` minus the
    hold) one entry is drawn by weight and held for ``duration_s``, then healed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = True
    order: Literal["weighted", "round-robin"] = Field(
        "weighted", description="weighted: each fault drawn by weight; round-robin: every entry in turn, "
                                "in a seeded order, so each appears once the schedule is long enough")
    per_phase: bool = Field(
        False, description="with [[steps]]: plan each stretch between two steps on its own, from the step's planned "
                           "start and from the first entry of the order, and drop a stretch's faults that had not "
                           "started when the next step began; a phase's faults wait for its step to be done; so every "
                           "phase between steps (the certification's rows) gets every entry in turn, however long the "
                           "previous phase ran")
    packages: tuple[str, ...] = ()
    mix: tuple[FaultEntry, ...] = ()
    start_after_s: float = Field(5.0, ge=0)
    interval_s: float = Field(10.0, gt=0, description="time from one fault's start to the next one's")
    gap_s: float | None = Field(
        None, ge=0, description="when set (instead of interval_s): time from one fault's heal to the next one's "
                                "start, so faults of different holds keep the same healthy gap between them")
    duration_s: float = Field(5.0, gt=0, description="default hold of a fault before it is healed")
    heal_timeout_s: float = Field(120.0, gt=0, description="after the final heal: bound for the cluster to be healthy")
    recover_hanging: bool = Field(
        False, description="at the final reads, abort the transactions that still pin a partition's last stable offset "
                           "(KIP-664's TransactionsCommand abort) and require the partition to move on; the hang is "
                           "still a case")
    exposure: ExposureSpec = Field(default_factory=ExposureSpec)
    pacing: PacingSpec = Field(default_factory=PacingSpec)
    coverage: dict[str, int] | None = Field(
        None, description="the faults a run must execute, per kind (at least this many each); below it the verdict is "
                          "unknown, naming the kinds that fell short. None (the default): every kind the schedule "
                          "planned at least once; {} requires none")

    @field_validator("coverage")
    @classmethod
    def _coverage(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        for kind, count in (value or {}).items():
            if kind not in KINDS:
                raise ValueError(f"coverage: unknown fault kind {kind!r}; accepted: {', '.join(sorted(KINDS))}")
            if count < 0:
                raise ValueError(f"coverage: {kind} = {count}: a count of 0 or more")
        return value

    @field_validator("packages")
    @classmethod
    def _packages(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in PACKAGES:
                raise ValueError(f"unknown fault package {name!r}; accepted: {', '.join(PACKAGES)}")
        return value

    @model_validator(mode="after")
    def _hold_fits(self) -> "FaultsSpec":
        if self.gap_s is not None:
            return self  # each fault starts after the one before it healed
        for entry in self.entries():
            hold = entry.duration_s or self.duration_s
            if hold >= self.interval_s:
                raise ValueError(f"fault {entry.kind} holds {hold}s but faults start every {self.interval_s}s: "
                                 "a fault must heal before the next starts (lower duration_s or raise interval_s)")
        return self

    def entries(self) -> list[FaultEntry]:
        out = [FaultEntry(**e) for name in self.packages for e in PACKAGES[name]]
        return out + list(self.mix)


def check_capabilities(faults: FaultsSpec, cluster: ClusterSpec) -> None:
    """Every fault of the mix against what the cluster's backend can do (before anything starts)."""
    caps = backend_capabilities(cluster)
    entries = faults.entries() if faults.enabled else []
    for entry in entries:
        for needed in KINDS[entry.kind].capabilities(entry.params):
            if needed not in caps:
                have = ", ".join(sorted(c.value for c in caps)) or "none"
                gap = backend_capability_gap(cluster, needed)
                raise CapabilityError(
                    f"fault {entry.kind!r} needs the {needed.value!r} capability, which the {cluster.backend} backend "
                    f"lacks as configured (it has: {have})" + (f": {gap}" if gap else ""),
                    "drop that fault from [faults], or declare its commands (docs/clusters.md)" if gap and
                    cluster.backend == "external" else
                    "drop that fault from [faults], or use the local backend with the proxies it needs")
    ext = cluster.external
    touches_nodes = [e.kind for e in entries if KINDS[e.kind].capabilities(e.params)]
    if ext is not None and touches_nodes and not (ext.allow_faults and ext.cluster_id):
        raise ConfigError(f"faults {sorted(set(touches_nodes))} would act on an external cluster, which needs "
                          "cluster.external.allow_faults = true and its cluster_id",
                          "set both (kafka-cluster.sh cluster-id prints the id); the id is checked against the "
                          "cluster before anything is touched")
