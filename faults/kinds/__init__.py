"""Every fault kind, each declared once: its parameters with their defaults and validation, the
roles it can target, the cluster capability it needs, and the Fault class that invokes and
heals it. A family of kinds is one module here (node, network, workers, messages); the package
imports each module it holds, so adding a kind is adding its declaration (or a module) and its
test: the campaign loader, the scheduler, the nemesis and ``kchaos`` commands find it by name."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from kchaos.clusters.base import Capability
from kchaos.errors import ConfigError
from kchaos.faults.base import Fault, FaultContext
from kchaos.faults.scheduled import ScheduledFault


class NoParams(BaseModel):
    """A kind without parameters. Parameters are strict: a campaign's string is not a number."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


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


def message_rules() -> dict[str, str]:
    """Message fault kind -> the proxy's rule kind."""
    return {k.name: k.message_rule for k in KINDS.values() if k.message_rule}


# every module of this package declares its kinds when imported
for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
