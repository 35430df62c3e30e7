"""Every fault kind, each declared once: its parameters with their defaults and validation, the
roles it can target, the cluster capability it needs, the Fault class that invokes and heals it,
and what it needs beyond that: the cluster settings it turns on when the campaign loads
(``needs``), the workload it runs under (``workload``), the evidence rules its executions trigger
in the verifier (``evidence``), and whether pacing aims it at work under way (``aimed_at_work``).
A family of kinds is one module here; the package imports every module it holds, so adding a
kind is adding its declaration (or a module) and its test: the campaign loader, the scheduler,
the nemesis, the verifier and ``kchaos`` commands find it by name and read what it declares."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, ValidationError

from kchaos.clusters.base import Capability
from kchaos.errors import ConfigError
from kchaos.faults.base import Fault, FaultContext
from kchaos.faults.scheduled import ScheduledFault


class NoParams(BaseModel):
    """A kind without parameters. Parameters are strict: a campaign's string is not a number."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


@dataclass(frozen=True)
class ClusterNeeds:
    """What a kind needs the cluster started with, set when the campaign loads unless the campaign
    sets it itself (verifier/campaign.py applies it; the capability check then judges the backend)."""

    #: [cluster] settings, on a cluster kchaos starts
    cluster: Mapping[str, Any] = field(default_factory=dict)
    #: [cluster.external] settings, on a cluster it did not start
    external: Mapping[str, Any] = field(default_factory=dict)


#: evidence rules a kind's executions trigger in the verifier
#: the kind moves a broker's clock: split-transaction sets aside its windows (verifier/driver_checks.py)
MOVES_BROKER_CLOCK = "moves-broker-clock"
#: the transactional id in its detail is initialised as a worker's would be (verifier/coordinator_log.py)
FENCES_TRANSACTIONAL_ID = "fences-transactional-id"
#: its effect (verifier/fault_effects.py): each target broker registers a new incarnation
RESTARTS_BROKER = "restarts-broker"
#: its effect: a cut broker fenced, or an ISR left without it
CUTS_BROKER_OFF = "cuts-broker-off"
#: its effect: the stopped broker fenced, when it was stopped past its session
STOPS_BROKER = "stops-broker"
#: its effect: the clients' calls through its links slower by its toxic's latency (the clients' history)
DELAYS_CLIENT_LINKS = "delays-client-links"


@dataclass(frozen=True)
class FaultKind:
    name: str
    summary: str
    #: what the backend must be able to do (None: nothing of it: the workload's own processes, or the client protocol)
    capability: Capability | None
    targets: tuple[str, ...]
    fault: type[Fault]
    params: type[BaseModel] = NoParams
    #: message faults: the message proxy's rule kind (clusters/proxy/rules.py)
    message_rule: str | None = None
    needs: ClusterNeeds = ClusterNeeds()
    #: what the workload must be ("transactional", "consumer-group"): refused on load otherwise
    workload: frozenset[str] = frozenset()
    #: the evidence rules its executions trigger (MOVES_BROKER_CLOCK, FENCES_TRANSACTIONAL_ID)
    evidence: frozenset[str] = frozenset()
    #: pacing may hold it until a commit is under way on its target (faults/pacing.py)
    aimed_at_work: bool = False

    def check_params(self, params: dict[str, Any]) -> BaseModel:
        """The parameters, typed with their defaults; ValueError naming the kind and the problem."""
        accepted = set(self.params.model_fields)
        unknown = set(params) - accepted
        if unknown:
            raise ValueError(f"fault {self.name!r} has no parameter {', '.join(sorted(unknown))}; "
                             f"accepted: {', '.join(sorted(accepted)) or 'none'}")
        try:
            return self.params.model_validate(params)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(x) for x in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            raise ValueError(f"fault {self.name!r}: {message if error['type'] == 'value_error' else f'{where}: {message}'}"
                             ) from None

    def capabilities(self, params: dict[str, Any]) -> tuple[Capability, ...]:
        """What the backend must be able to do for this kind with these parameters: its own
        capability, and what its parameters ask beyond it (a message fault between brokers)."""
        extra = getattr(self.params, "extra_capabilities", None)
        return (() if self.capability is None else (self.capability,)) + (tuple(extra(params)) if extra else ())

    def cluster_needs(self, params: dict[str, Any]) -> ClusterNeeds:
        """``needs``, and what these parameters add (the parameters model's ``cluster_needs``,
        as with ``extra_capabilities``): a message fault on the links between brokers needs the
        message proxy there."""
        extra = getattr(self.params, "cluster_needs", None)
        more = extra(params) if extra else {}
        return ClusterNeeds({**self.needs.cluster, **more}, self.needs.external) if more else self.needs

    def make(self, scheduled: ScheduledFault, ctx: FaultContext) -> Fault:
        return self.fault(scheduled, ctx, self.check_params(scheduled.params))


KINDS: dict[str, FaultKind] = {}


def register(*kinds: FaultKind) -> None:
    for kind in kinds:
        if kind.name in KINDS:
            raise ValueError(f"fault kind {kind.name!r} is declared twice")
        KINDS[kind.name] = kind


def fault_kind(name: str) -> FaultKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown fault kind {name!r}", f"use one of {', '.join(sorted(KINDS))}") from None


def make_fault(scheduled: ScheduledFault, ctx: FaultContext) -> Fault:
    return fault_kind(scheduled.kind).make(scheduled, ctx)


def kinds_with(evidence: str) -> frozenset[str]:
    """The kinds whose executions trigger an evidence rule of the verifier."""
    return frozenset(k.name for k in KINDS.values() if evidence in k.evidence)


def message_rules() -> dict[str, str]:
    """Message fault kind -> the proxy's rule kind."""
    return {k.name: k.message_rule for k in KINDS.values() if k.message_rule}


# every module of this package declares its kinds when imported
for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
