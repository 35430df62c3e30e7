"""Campaign files (TOML): what to run, validated on load with errors naming the key.

A campaign has a ``[run]`` table (seed, duration), a ``[cluster]`` table (:class:`ClusterSpec`)
, ``[workload]``, ``[faults]`` and ``[verifier]`` tables, and optional ``[[steps]]`` (feature
flips, rolling upgrades: faults/steps.py) that make it a certification campaign. Unknown tables and keys
are errors, so a typo never silently falls back to a default. The typed result is
verifier.campaign.Campaign, which the run records in its directory.
"""

from __future__ import annotations

import importlib.resources
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kchaos.clusters.spec import apply_overrides, describe_validation_error
from kchaos.errors import ConfigError
from kchaos.faults.spec import check_capabilities
from kchaos.verifier.campaign import Campaign
from kchaos.workloads.client_settings import check_confluent_properties

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
        check_capabilities(campaign.faults, campaign.cluster)
    return campaign
