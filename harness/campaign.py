"""Campaign files (TOML): what to run, validated on load with errors naming the key.

A campaign has a ``[run]`` table (seed, duration), a ``[cluster]`` table (:class:`ClusterSpec`)
, ``[workload]``, ``[faults]`` and ``[verifier]`` tables, and optional ``[[steps]]`` (feature
flips, rolling upgrades: harness/steps.py) that make it a certification campaign. Unknown tables and keys
are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import importlib.resources
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kchaos.clusters.spec import ClusterSpec, apply_overrides, describe_validation_error
from kchaos.errors import ConfigError
from kchaos.faults.spec import MESSAGE_KINDS, PACKAGES, FaultsSpec, check_capabilities
from kchaos.harness.steps import StepSpec, check_steps
from kchaos.verifier.spec import VerifierSpec
from kchaos.workloads.client_settings import check_confluent_properties
from kchaos.workloads.spec import WorkloadSpec

# Shipped campaigns are package data (kchaos.campaigns), installed as plain files by a wheel too.
CAMPAIGNS_DIR = Path(str(importlib.resources.files("kchaos.campaigns")))
DEFAULT_CAMPAIGN = CAMPAIGNS_DIR / "default.toml"


def resolve_campaign_path(path: Path | str | None) -> Path:
    """A campaign file as given, or else a shipped one by name (``certify-tv-flip``,
    ``certify-tv-flip.toml`` or ``campaigns/certify-tv-flip.toml``): a wheel install has no
    campaigns/ folder of the user's own."""
    if path is None:
        return DEFAULT_CAMPAIGN
    given = Path(path)
    if given.exists():
        return given
    name = given.name if given.suffix == ".toml" else f"{given.name}.toml"
    shipped = CAMPAIGNS_DIR / name
    if given.parent in (Path("."), Path("campaigns")) and shipped.exists():
        return shipped
    return given


class RunSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    seed: int | None = Field(None, ge=0, description="None: a fresh seed, recorded in the run directory")
    duration_s: float = Field(60.0, gt=0, le=86400, description="steady + fault phase; seeding may go on into the drain")
    progress_interval_s: float = Field(5.0, gt=0)


class Campaign(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = "default"
    description: str = ""
    run: RunSettings = Field(default_factory=RunSettings)
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    faults: FaultsSpec = Field(default_factory=lambda: FaultsSpec(enabled=False))
    verifier: VerifierSpec = Field(default_factory=VerifierSpec)
    steps: tuple[StepSpec, ...] = Field((), description="planned feature flips and rolling upgrades (harness/steps.py)")

    @model_validator(mode="before")
    @classmethod
    def _message_proxy(cls, data: Any) -> Any:
        """Message faults need the message proxy on the client path: turn it on unless the
        campaign says otherwise (then the capability check names the conflict)."""
        faults = data.get("faults") if isinstance(data, dict) else None
        if not isinstance(faults, dict) or faults.get("enabled", True) is False:
            return data
        kinds = [e.get("kind") for e in faults.get("mix") or () if isinstance(e, dict)]
        kinds += [e["kind"] for name in faults.get("packages") or () for e in PACKAGES.get(name, [])]
        if any(kind in MESSAGE_KINDS for kind in kinds):
            cluster = dict(data.get("cluster") or {})
            cluster.setdefault("proxy_messages", True)
            data = {**data, "cluster": cluster}
        return data

    @model_validator(mode="after")
    def _steps_fit(self) -> "Campaign":
        check_steps(self.steps, self.cluster.backend, self.cluster.kafka_version, self.run.duration_s)
        return self

    @model_validator(mode="after")
    def _faults_fit(self) -> "Campaign":
        if not self.faults.enabled:
            return self
        for entry in self.faults.entries():
            if entry.resolved_target == "txn-coordinator" and not self.workload.transactional:
                raise ValueError(f"faults: {entry.kind} targets the transaction coordinator but workload.delivery is "
                                 f"{self.workload.delivery!r} (no transactional.id); use another target")
            if "share-coordinator" in entry.resolved_target and self.workload.kind != "share":
                raise ValueError(f"faults: {entry.kind} targets the share coordinator but workload.kind is "
                                 f"{self.workload.kind!r}; use workload.kind = 'share' or another target")
            if entry.kind in ("zombie", "txid-takeover") and self.workload.kind == "share":
                raise ValueError(f"faults: {entry.kind} is for the consumer-group pipeline; under a share workload use "
                                 "worker-pause (past the record lock) or worker-crash")
            if entry.kind in ("zombie", "txid-takeover") and not self.workload.transactional:
                raise ValueError(f"faults: {entry.kind} needs a transactional workload (workload.delivery = 'exactly-once')")
        return self


def load_campaign(path: Path | None, overrides: list[str] | None = None) -> Campaign:
    """Read, override (``--set a.b=c``) and validate a campaign; raise ConfigError on any problem."""
    path = resolve_campaign_path(path)
    try:
        data: dict[str, Any] = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        shipped = ", ".join(sorted(p.stem for p in CAMPAIGNS_DIR.glob("*.toml")))
        raise ConfigError(f"campaign file {path} does not exist",
                          f"pass an existing .toml file, a shipped campaign's name ({shipped}), or none for the default") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"campaign file {path} is not valid TOML: {exc}") from None
    data = apply_overrides(data, overrides or [])
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe_validation_error(exc, '').lstrip('.')}") from None
    if campaign.workload.client in ("confluent", "mixed"):
        check_confluent_properties(campaign.workload)
    if campaign.faults.enabled:
        check_capabilities(campaign.faults, campaign.cluster.backend,
                           proxied=campaign.cluster.proxy_clients or campaign.cluster.proxy_internal,
                           messages=campaign.cluster.proxy_messages)
    return campaign
