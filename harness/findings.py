"""The findings regression suite: ``kchaos findings`` lists what docs/findings.md claims, bundle by
bundle; ``kchaos findings verify [NAME...]`` replays each bundle (its recorded campaign, seed and
fault schedule, as ``kchaos replay`` does) and compares the verdict and the anomaly kinds with the
claim. A drift (another verdict, or none of the claimed kinds) exits 1.

The claims live beside the bundles, in ``docs/evidence/findings.toml``: one entry per bundle,

.. code-block:: toml

    [[claim]]
    finding = "F1a"                 # the heading in docs/findings.md
    bundle = "kafka-17754-confluent-tv1"
    verdict = "invalid"
    any_of = ["lost-write", "lost-input", "aborted-read"]   # a race: which kinds a replay shows varies
    trigger = "..."                 # what made it: a real network's or client's doing, or kchaos' construction

``any_of`` is the claim's anomaly class: a replay reproduces the fault schedule and the workload's
choices, not the race itself, so the cases (and which of the class's kinds appear) vary from run
to run; a claimed VALID must come out VALID.
"""

from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kchaos.errors import ConfigError, KchaosError
from kchaos.harness.run import replay_run
from kchaos.verifier.outcome import Outcome

REGISTRY = "findings.toml"
VERDICTS = ("valid", "invalid", "unknown")


@dataclass(frozen=True)
class Claim:
    finding: str
    bundle: str
    verdict: str
    any_of: tuple[str, ...] = ()
    trigger: str = ""

    @property
    def name(self) -> str:
        return f"{self.finding}:{self.bundle}"


@dataclass
class Check:
    """One replayed claim: what came out, and whether it matches."""

    claim: Claim
    verdict: str | None = None
    kinds: tuple[str, ...] = ()
    minutes: float = 0.0
    run_dir: str | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        if self.error or self.verdict != self.claim.verdict:
            return False
        return not self.claim.any_of or bool(set(self.kinds) & set(self.claim.any_of))


def load_claims(evidence: Path) -> list[Claim]:
    """The claims of ``evidence/findings.toml``; every bundle it names must exist and be replayable."""
    path = evidence / REGISTRY
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no findings registry at {path}", "run from the repository, or pass --evidence DIR") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    claims = []
    for i, entry in enumerate(data.get("claim", [])):
        where = f"{path} claim {i + 1}"
        unknown = set(entry) - {"finding", "bundle", "verdict", "any_of", "trigger"}
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
        try:
            claim = Claim(str(entry["finding"]), str(entry["bundle"]), str(entry["verdict"]),
                          tuple(entry.get("any_of", ())), str(entry.get("trigger", "")))
        except KeyError as exc:
            raise ConfigError(f"{where}: {exc.args[0]} is missing") from None
        if claim.verdict not in VERDICTS:
            raise ConfigError(f"{where}: verdict {claim.verdict!r} is not one of {', '.join(VERDICTS)}")
        if claim.verdict == "invalid" and not claim.any_of:
            raise ConfigError(f"{where}: an invalid claim names its anomaly kinds (any_of)")
        missing = [f for f in ("campaign.json", "seed", "schedule.json") if not (evidence / claim.bundle / f).exists()]
        if missing:
            raise ConfigError(f"{where}: bundle {claim.bundle} cannot be replayed: {', '.join(missing)} missing")
        claims.append(claim)
    names = [c.name for c in claims]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{path}: claims listed twice: {twice}")
    return claims


def select(claims: list[Claim], names: list[str]) -> list[Claim]:
    """The claims a name picks: a finding (F1a), a bundle, or finding:bundle; none named: all."""
    if not names:
        return claims
    picked = [c for c in claims if {c.finding, c.bundle, c.name} & set(names)]
    unmatched = [n for n in names if not any(n in (c.finding, c.bundle, c.name) for c in claims)]
    if unmatched:
        raise ConfigError(f"no claim named {', '.join(unmatched)}", "`kchaos findings` lists them")
    return picked


def replay_bundle(bundle: Path, out: Path) -> Outcome:
    """``kchaos replay`` of one bundle: its recorded campaign, seed and fault schedule."""
    return replay_run(bundle, out)[1]


def verify(evidence: Path, claims: list[Claim], out: Path,
           replay: Callable[[Path, Path], Outcome] = replay_bundle, say: Callable[[str], None] = print) -> list[Check]:
    """Replay each claim's bundle, one after another; a replay that fails is a drift, never hidden."""
    checks = []
    for claim in claims:
        check = Check(claim)
        started = time.monotonic()
        say(f"replaying {claim.name} (claimed {claim.verdict})")
        try:
            outcome = replay(evidence / claim.bundle, out / claim.bundle)
            check.verdict, check.kinds, check.run_dir = outcome.verdict, tuple(sorted(outcome.anomalies)), outcome.run_dir
            if outcome.verdict == "unknown":
                check.notes += list(outcome.errors) + [f"{k}: {v}" for k, v in outcome.required_not_checked.items()]
        except KchaosError as exc:
            check.error = exc.one_line()
        except Exception as exc:  # one broken replay must not hide the others
            check.error = f"{type(exc).__name__}: {exc}"
        check.minutes = round((time.monotonic() - started) / 60, 1)
        checks.append(check)
        say(f"  {'reproduced' if check.reproduced else 'DRIFT'}: {check.verdict or check.error} "
            f"{', '.join(check.kinds)} ({check.minutes} min)")
    return checks


def listing_table(claims: list[Claim]) -> str:
    rows = [("finding", "bundle", "claimed", "trigger")]
    rows += [(c.finding, c.bundle, c.verdict + (f" ({', '.join(c.any_of)})" if c.any_of else ""), c.trigger)
             for c in claims]
    return _table(rows)


def verify_table(checks: list[Check]) -> str:
    rows = [("finding", "bundle", "claimed", "replayed", "kinds", "minutes", "")]
    for c in checks:
        rows.append((c.claim.finding, c.claim.bundle, c.claim.verdict, c.verdict or "error",
                     ", ".join(c.kinds) or (c.error or "-"), f"{c.minutes}", "ok" if c.reproduced else "DRIFT"))
    total = sum(c.minutes for c in checks)
    drift = sum(not c.reproduced for c in checks)
    return _table(rows) + f"\n{len(checks) - drift} of {len(checks)} reproduced, {total:.1f} minutes"


def _table(rows: list[tuple[Any, ...]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows)
