"""Campaign files (TOML): what to run, validated on load with errors naming the key.

A campaign has a ``[run]`` table (seed, duration), a ``[cluster]`` table (:class:`ClusterSpec`)
, ``[workload]``, ``[faults]`` and ``[verifier]`` tables, and optional ``[[steps]]`` (feature
flips, rolling upgrades: faults/steps.py) that make it a certification campaign. Unknown tables and keys
are errors, so a typo never silently falls back to a default. The typed result is
verifier.campaign.Campaign, which the run records in its directory.
"""

from __future__ import annotations

import importlib.resources
import shutil
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kchaos.clusters.spec import apply_overrides, describe_validation_error
from kchaos.errors import ConfigError
from kchaos.faults.schedule import generate_schedule
from kchaos.faults.scheduled import ScheduledFault
from kchaos.faults.spec import FaultsSpec, check_capabilities
from kchaos.faults.steps import check_feature_consent
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


def campaign_argument(path: Path) -> str:
    """How a command line names a campaign file so that it finds the same file from anywhere: a
    shipped campaign by its name, any other by its absolute path."""
    resolved = Path(path).resolve()
    if resolved.suffix == ".toml" and resolved.parent == CAMPAIGNS_DIR.resolve():
        return resolved.stem
    return str(resolved)


def shipped_campaigns() -> list[str]:
    return sorted(p.stem for p in CAMPAIGNS_DIR.glob("*.toml") if p.stem != "nightly")


def read_toml(path: Path, what: str, missing_fix: str) -> dict[str, Any]:
    """A TOML file's tables; ConfigError for a file that is missing, not a file, not text, not
    TOML, or empty (an empty campaign would otherwise run the defaults without a word)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} file {path} does not exist", missing_fix) from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a directory, not a file", f"pass a {what} .toml file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} file {path} is not text (not UTF-8)", f"pass a {what} .toml file") from None
    except OSError as exc:
        raise ConfigError(f"{what} file {path} cannot be read: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} file {path} is not valid TOML: {exc}") from None
    if not data:
        raise ConfigError(f"{what} file {path} is empty", f"write the {what}'s tables")
    return data


def read_campaign_file(path: Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A campaign file's tables. ``extends = "NAME"`` (a shipped campaign's name, or a file relative
    to this one) starts from that campaign: this file's tables are merged over it key by key, and
    an array (``[[workload.fleet]]``, ``[[faults.mix]]``, ``[[steps]]``) replaces the base's whole.
    A team's certification is then its fleet over the shipped one."""
    data = read_toml(path, "campaign", f"pass an existing .toml file, a shipped campaign's name "
                                       f"({', '.join(shipped_campaigns())}), or none for the default")
    base_name = data.pop("extends", None)
    if base_name is None:
        return data
    if not isinstance(base_name, str) or not base_name:
        raise ConfigError(f"{path}: extends must name a campaign (a shipped campaign's name or a .toml file)")
    relative = Path(path).parent / base_name
    base = relative if relative.is_file() else resolve_campaign_path(base_name)
    if base.resolve() in _seen or base.resolve() == Path(path).resolve():
        raise ConfigError(f"{path}: extends {base_name!r} makes a cycle", "extend a campaign that does not extend this one")
    return _merged(read_campaign_file(base, (*_seen, Path(path).resolve())), data)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def planned_schedule(campaign: Campaign, seed: int) -> list[ScheduledFault]:
    """The campaign's fault schedule for ``seed``, planned around its steps' times (a campaign
    with ``[faults] per_phase`` plans each phase between steps on its own)."""
    return generate_schedule(campaign.faults, campaign.run.duration_s, seed, [step.at_s for step in campaign.steps])


def check_chaos(campaign: Campaign, declared: dict[str, Any], seed: int | None) -> None:
    """A run without chaos is asked for, never fallen into: a campaign without a [faults] table, or
    whose schedule (run.duration_s, faults.start_after_s, interval_s and the holds) has no room
    for one fault, is refused unless it says faults.enabled = false."""
    if declared.get("enabled") is False:
        return
    if "faults" not in campaign.model_fields_set and not declared:
        raise ConfigError("the campaign declares no faults ([faults] is missing)",
                          "add a [faults] table, or say faults.enabled = false for a run without faults")
    if not planned_schedule(campaign, seed or 0):
        entries = campaign.faults.entries()
        hold = max((e.duration_s or campaign.faults.duration_s for e in entries), default=campaign.faults.duration_s)
        raise ConfigError(
            f"the fault schedule is empty: the first fault would start at {campaign.faults.start_after_s:g}s and hold "
            f"{hold:g}s, past run.duration_s = {campaign.run.duration_s:g}s" if entries else
            "the fault schedule is empty: [faults] lists no fault (mix or packages)",
            "lengthen run.duration_s, start faults earlier (faults.start_after_s), or say faults.enabled = false")


def load_campaign(path: Path | None, overrides: list[str] | None = None, seed: int | None = None) -> Campaign:
    """Read, override (``--set a.b=c``) and validate a campaign; raise ConfigError on any problem."""
    path = resolve_campaign_path(path)
    data = apply_overrides(read_campaign_file(path), overrides or [], model=Campaign)
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe_validation_error(exc, '').lstrip('.')}") from None
    if any(slot.client == "confluent" for slot, _ in campaign.workload.fleet_groups()):
        check_confluent_properties(campaign.workload)
    check_chaos(campaign, data.get("faults") or {}, seed if seed is not None else campaign.run.seed)
    if campaign.faults.enabled:
        check_capabilities(campaign.faults, campaign.cluster)
        held = [s.fault for s in campaign.steps if s.fault is not None]
        if held:  # the faults held over steps, against the same capabilities
            check_capabilities(FaultsSpec(mix=held, gap_s=0), campaign.cluster)
    check_feature_consent(campaign.steps, campaign.cluster)
    check_external_command(campaign)
    return campaign


def check_external_command(campaign: Campaign) -> None:
    """A bring-your-own pipeline's program must exist before a cluster starts (else: minutes of
    crash loops)."""
    command = campaign.workload.external_command
    if command and shutil.which(command[0]) is None:
        raise ConfigError(f"workload.external_command: {command[0]!r} is not an executable program here",
                          "give the program's path, or a name on PATH")
