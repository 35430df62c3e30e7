"""The ``[faults]`` table of a campaign: which faults, how often, for how long, aimed at what.

Validated on load with errors that name the key and list the accepted values. Capabilities are
checked against the cluster backend before anything starts (:func:`check_capabilities`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kchaos.clusters.base import Capability

#: brokers a message fault's requests go to, resolved when it is invoked
MESSAGE_TARGETS = ("txn-coordinator", "group-coordinator", "leader-output", "leader-input", "random", "all")

#: fault kind -> (capability it needs, accepted targets, what it does)
FAULT_KINDS: dict[str, tuple[Capability | None, tuple[str, ...], str]] = {
    "kill": (Capability.KILL, ("random", "share-coordinator", "minority", "txn-coordinator", "group-coordinator", "controller",
                               "leader-input", "leader-output"), "SIGKILL the target node(s); heal restarts them"),
    "terminate": (Capability.TERMINATE, ("random", "share-coordinator", "minority", "txn-coordinator", "group-coordinator", "controller",
                                         "leader-input", "leader-output"), "graceful stop; heal restarts"),
    "pause": (Capability.PAUSE, ("random", "share-coordinator", "minority", "txn-coordinator", "group-coordinator", "controller",
                                 "leader-input", "leader-output"), "SIGSTOP; heal sends SIGCONT"),
    "restart": (Capability.RESTART, ("random", "share-coordinator", "txn-coordinator", "group-coordinator", "controller",
                                     "leader-input", "leader-output"), "graceful restart at once"),
    "rolling-restart": (Capability.RESTART, ("all",), "restart every broker in turn, waiting for health between"),
    "partition": (Capability.NETWORK, ("isolate-random", "isolate-txn-coordinator", "isolate-group-coordinator",
                                       "isolate-share-coordinator",
                                       "isolate-controller", "isolate-leader-input", "isolate-leader-output",
                                       "majority-minority", "ring", "controller-quorum"),
                  "cut inter-node links (replication and quorum) through the pair proxies"),
    "client-link-down": (Capability.NETWORK, ("random", "share-coordinator", "txn-coordinator", "group-coordinator", "leader-input",
                                              "leader-output"), "disable the client proxy of the target broker"),
    "latency": (Capability.NETWORK, ("all-clients", "random", "txn-coordinator", "group-coordinator", "leader-input",
                                     "leader-output"), "latency with jitter on client links"),
    "timeout": (Capability.NETWORK, ("random", "txn-coordinator", "group-coordinator", "leader-input", "leader-output"),
                "client link stops passing data; connections close after the timeout"),
    "reset-peer": (Capability.NETWORK, ("random", "txn-coordinator", "group-coordinator", "leader-input", "leader-output"),
                   "client connections reset (TCP RST) after a delay"),
    "bandwidth": (Capability.NETWORK, ("all-clients", "random", "txn-coordinator", "leader-input", "leader-output"),
                  "client link bandwidth limited (KB/s)"),
    "slicer": (Capability.NETWORK, ("all-clients", "random", "txn-coordinator", "leader-input", "leader-output"),
               "client traffic sliced into small delayed packets"),
    "worker-crash": (None, ("random-worker",), "SIGKILL a workload worker; the harness restarts it"),
    "worker-pause": (None, ("random-worker",), "SIGSTOP a worker for the fault's duration"),
    "zombie": (None, ("random-worker",), "pause a worker past the transaction timeout, replace it, resume it"),
    "txid-takeover": (None, ("random-worker",), "start a second worker with the same transactional.id"),
    "message-delay": (Capability.MESSAGES, MESSAGE_TARGETS, "delay matching requests by delay_ms (in order)"),
    "message-hold": (Capability.MESSAGES, MESSAGE_TARGETS,
                     "hold a matching request until the heal (or release_after_ms), then deliver it even if the "
                     "client gave up on it"),
    "message-drop-response": (Capability.MESSAGES, MESSAGE_TARGETS,
                              "the broker gets the request, the client never hears (an unknown outcome)"),
    "message-duplicate": (Capability.MESSAGES, MESSAGE_TARGETS,
                          "deliver a matching request, then a copy duplicate_after_ms later on another connection"),
    "message-error": (Capability.MESSAGES, MESSAGE_TARGETS,
                      "answer a matching request with `error` without it reaching the broker"),
}

#: message fault kind -> the proxy's rule kind (clusters/message_proxy.py)
MESSAGE_KINDS: dict[str, str] = {"message-delay": "delay", "message-hold": "hold",
                                 "message-drop-response": "drop-response", "message-duplicate": "duplicate",
                                 "message-error": "error"}
#: parameters of message faults, with their defaults (faults/library.py MessageFault)
MESSAGE_DEFAULTS: dict[str, Any] = {"apis": ["EndTxn"], "worker": "all", "count": 1, "delay_ms": 2000,
                                    "release_after_ms": 0, "duplicate_after_ms": 1000, "error": "NOT_COORDINATOR"}

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


def check_message_params(kind: str, params: dict[str, Any]) -> None:
    """The parameters of a message fault, checked on load against what the proxy accepts."""
    from kchaos.clusters.kafka_protocol import API_KEYS, ERROR_CODES, FORGEABLE_APIS

    apis = params.get("apis", MESSAGE_DEFAULTS["apis"])
    if not isinstance(apis, list) or not apis or any(a not in API_KEYS for a in apis):
        raise ValueError(f"fault {kind!r}: apis must be a list of API names from {', '.join(API_KEYS)}; got {apis!r}")
    worker = params.get("worker", "all")
    if not (worker in ("all", "random") or (isinstance(worker, float) and worker >= 0 and worker == int(worker))):
        raise ValueError(f"fault {kind!r}: worker is a worker slot number, \"random\" or \"all\"; got {worker!r}")
    for name in ("count", "delay_ms", "release_after_ms", "duplicate_after_ms"):
        if name in params and not (isinstance(params[name], float) and params[name] >= 0):
            raise ValueError(f"fault {kind!r}: {name} must be a number >= 0; got {params[name]!r}")
    if kind == "message-error":
        error = params.get("error", MESSAGE_DEFAULTS["error"])
        if error not in ERROR_CODES:
            raise ValueError(f"fault {kind!r}: error must be one of {', '.join(ERROR_CODES)}; got {error!r}")
        not_forgeable = [a for a in apis if a not in FORGEABLE_APIS]
        if not_forgeable:
            raise ValueError(f"fault {kind!r}: kchaos can forge an error response for {', '.join(FORGEABLE_APIS)} "
                             f"only, not {', '.join(not_forgeable)}")


class FaultEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str
    target: str | None = None  # None: the kind's first accepted target
    weight: float = Field(1.0, gt=0)
    duration_s: float | None = Field(None, gt=0, le=3600, description="how long the fault holds; None: the mix default")
    params: dict[str, float | str | list[str]] = Field(default_factory=dict)

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {value!r}; accepted: {', '.join(FAULT_KINDS)}")
        return value

    @model_validator(mode="after")
    def _target(self) -> "FaultEntry":
        accepted = FAULT_KINDS[self.kind][1]
        if self.target is not None and self.target not in accepted:
            raise ValueError(f"fault {self.kind!r} cannot target {self.target!r}; accepted targets: {', '.join(accepted)}")
        allowed_params = {"latency": {"latency_ms", "jitter_ms"}, "bandwidth": {"rate_kbps"}, "timeout": {"timeout_ms"},
                          "reset-peer": {"timeout_ms"}, "slicer": {"average_size", "delay_us"}}.get(self.kind, set())
        if self.kind in MESSAGE_KINDS:
            allowed_params = {"apis", "worker", "count"} | {
                "message-delay": {"delay_ms"}, "message-hold": {"release_after_ms"}, "message-drop-response": set(),
                "message-duplicate": {"duplicate_after_ms"}, "message-error": {"error"}}[self.kind]
        unknown = set(self.params) - allowed_params
        if unknown:
            raise ValueError(f"fault {self.kind!r} has no parameter {', '.join(sorted(unknown))}; "
                             f"accepted: {', '.join(sorted(allowed_params)) or 'none'}")
        if self.kind in MESSAGE_KINDS:
            check_message_params(self.kind, self.params)
        elif any(not isinstance(v, float) for v in self.params.values()):
            raise ValueError(f"fault {self.kind!r}: parameters are numbers")
        return self

    @property
    def resolved_target(self) -> str:
        return self.target or FAULT_KINDS[self.kind][1][0]


class FaultsSpec(BaseModel):
    """A fault mix: every ``interval_s`` (from ``start_after_s`` until ``run.duration_s`` minus the
    hold) one entry is drawn by weight and held for ``duration_s``, then healed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = True
    order: Literal["weighted", "round-robin"] = Field(
        "weighted", description="weighted: each fault drawn by weight; round-robin: every entry in turn, "
                                "in a seeded order, so each appears once the schedule is long enough")
    packages: tuple[str, ...] = ()
    mix: tuple[FaultEntry, ...] = ()
    start_after_s: float = Field(5.0, ge=0)
    interval_s: float = Field(10.0, gt=0, description="time from one fault's start to the next one's")
    duration_s: float = Field(5.0, gt=0, description="default hold of a fault before it is healed")
    heal_timeout_s: float = Field(120.0, gt=0, description="after the final heal: bound for the cluster to be healthy")

    @field_validator("packages")
    @classmethod
    def _packages(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in PACKAGES:
                raise ValueError(f"unknown fault package {name!r}; accepted: {', '.join(PACKAGES)}")
        return value

    @model_validator(mode="after")
    def _hold_fits(self) -> "FaultsSpec":
        for entry in self.entries():
            hold = entry.duration_s or self.duration_s
            if hold >= self.interval_s:
                raise ValueError(f"fault {entry.kind} holds {hold}s but faults start every {self.interval_s}s: "
                                 "a fault must heal before the next starts (lower duration_s or raise interval_s)")
        return self

    def entries(self) -> list[FaultEntry]:
        out = [FaultEntry(**e) for name in self.packages for e in PACKAGES[name]]
        return out + list(self.mix)


def capabilities_for_backend(backend: str) -> frozenset[Capability]:
    """What a backend can do, known before it starts (so a campaign is rejected on load)."""
    if backend == "local":
        return frozenset(Capability)
    if backend == "docker":
        return frozenset({Capability.KILL, Capability.TERMINATE, Capability.PAUSE, Capability.RESTART})
    return frozenset()


def check_capabilities(faults: FaultsSpec, backend: str, proxied: bool = True, messages: bool = True) -> None:
    from kchaos.errors import CapabilityError

    caps = set(capabilities_for_backend(backend))
    if not proxied:
        caps.discard(Capability.NETWORK)
    if not messages:
        caps.discard(Capability.MESSAGES)
    for entry in faults.entries() if faults.enabled else []:
        needed = FAULT_KINDS[entry.kind][0]
        if needed is not None and needed not in caps:
            have = ", ".join(sorted(c.value for c in caps)) or "none"
            raise CapabilityError(
                f"fault {entry.kind!r} needs the {needed.value!r} capability, which the {backend} backend lacks "
                f"(it has: {have})",
                "drop that fault from [faults], or use the local backend")
