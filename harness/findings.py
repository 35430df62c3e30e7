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
to run; a claimed VALID must come out VALID. ``seeds`` names the other seeds the claim was seen
on with the bundle's configuration; ``verify --every-seed`` runs each of them too (the recorded
campaign with that seed and the schedule the seed makes, as ``kchaos run`` made it). A claim that
rests on a race says so with ``at_least``: how many of its runs must reproduce it (by default,
every run made; never more than were made). Such a claim is about its runs, not its bundle
alone, so ``verify`` always runs its seeds too: one replay of a race proves nothing either way. A
claim seen once, whose replays have not shown it again, says ``sighting = true`` (and its heading
in docs/findings.md says "one sighting"): its replay is made and reported, reproduced or not, and
only a replay that fails is a drift; it claims that the run happened as recorded, not that it
reproduces.

A claim of an UNKNOWN verdict (a cluster that did not come back, say) names why with ``because``:
words the replay's reasons must contain (``because = "not registered"``). Any other reason is a
drift: an unknown run proves nothing by itself, only the reason it was unknown does.

``verify --releases 4.0.1 4.4.0`` is the release matrix of the findings: each claim's bundle
(its seed and schedule) on each release named, brokers and Java clients alike, and a table of
which findings reproduce on which release: the table to read before an upgrade. A release where
a claim does not reproduce is an answer there, not a drift.

Exit codes: 0 every claim reproduced (with ``--releases``: every run finished); 1 a drift (another verdict, none of the claimed kinds, a
replay that failed); 3 a registry or bundle that does not load, found before any cluster starts.
"""

from __future__ import annotations

import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from kchaos.errors import ConfigError, KchaosError
from kchaos.faults.schedule import read_schedule
from kchaos.harness.run import execute_run, replay_run
from kchaos.reports.findings_index import claims_table
from kchaos.rundir import RunDir
from kchaos.verifier.campaign import Campaign, load_recorded
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
    seeds: tuple[int, ...] = ()  # further seeds it was seen on, beside the bundle's own
    at_least: int | None = None  # runs that must reproduce it (a race); None: every run made
    sighting: bool = False  # seen once, not claimed to reproduce: only a failed replay drifts
    because: str = ""  # an unknown claim: words its reasons must contain

    @property
    def name(self) -> str:
        return f"{self.finding}:{self.bundle}"


@dataclass
class Check:
    """One replayed claim: what came out, and whether it matches."""

    claim: Claim
    seed: int | None = None  # None: the bundle's own seed and schedule
    release: str | None = None  # None: the bundle's own Kafka release
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
        if self.claim.because:
            return any(self.claim.because in note for note in self.notes)
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
        unknown = set(entry) - {"finding", "bundle", "verdict", "any_of", "trigger", "seeds", "at_least", "sighting", "because"}
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
        try:
            claim = Claim(str(entry["finding"]), str(entry["bundle"]), str(entry["verdict"]),
                          tuple(entry.get("any_of", ())), str(entry.get("trigger", "")),
                          tuple(int(s) for s in entry.get("seeds", ())),
                          int(entry["at_least"]) if "at_least" in entry else None,
                          entry.get("sighting", False), str(entry.get("because", "")))
        except KeyError as exc:
            raise ConfigError(f"{where}: {exc.args[0]} is missing") from None
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: seeds must be a list of integers, at_least an integer") from None
        if claim.at_least is not None and not 1 <= claim.at_least <= 1 + len(claim.seeds):
            raise ConfigError(f"{where}: at_least {claim.at_least} is not between 1 and its {1 + len(claim.seeds)} runs")
        if claim.sighting not in (True, False) or (claim.sighting and (claim.seeds or claim.at_least)):
            raise ConfigError(f"{where}: sighting is true or false, and a sighting has no other seeds or at_least "
                              "(seen again, it is a claim on its seeds)")
        if claim.verdict not in VERDICTS:
            raise ConfigError(f"{where}: verdict {claim.verdict!r} is not one of {', '.join(VERDICTS)}")
        if claim.verdict == "invalid" and not claim.any_of:
            raise ConfigError(f"{where}: an invalid claim names its anomaly kinds (any_of)")
        if (claim.verdict == "unknown") != bool(claim.because):
            raise ConfigError(f"{where}: an unknown claim, and only one, names why with because "
                              "(words its run's reasons contain)")
        missing = RunDir(evidence / claim.bundle).missing_for_replay()
        if missing:
            raise ConfigError(f"{where}: bundle {claim.bundle} cannot be replayed: {', '.join(missing)} missing")
        check_bundle_loads(evidence / claim.bundle, where)
        claims.append(claim)
    names = [c.name for c in claims]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{path}: claims listed twice: {twice}")
    return claims


def check_bundle_loads(bundle: Path, where: str) -> None:
    """A bundle this kchaos can no longer read (a campaign key renamed, a schedule of a fault kind
    that is gone) is refused here, before any replay starts a cluster."""
    try:
        load_recorded(bundle)
        read_schedule(bundle / "schedule.json")
        int((bundle / "seed").read_text().strip())
    except KchaosError as exc:
        raise ConfigError(f"{where}: bundle {bundle.name} no longer loads: {exc.one_line()}",
                          "record the claim again from a new run (docs/findings.md, 'Reproducing')") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{where}: bundle {bundle.name} no longer loads: {type(exc).__name__}: {exc}",
                          "record the claim again from a new run (docs/findings.md, 'Reproducing')") from None


def select(claims: list[Claim], names: list[str]) -> list[Claim]:
    """The claims a name picks: a finding (F1a), a bundle, or finding:bundle; none named: all."""
    if not names:
        return claims
    picked = [c for c in claims if {c.finding, c.bundle, c.name} & set(names)]
    unmatched = [n for n in names if not any(n in (c.finding, c.bundle, c.name) for c in claims)]
    if unmatched:
        raise ConfigError(f"no claim named {', '.join(unmatched)}", "`kchaos findings` lists them")
    return picked


def on_release(campaign: Campaign, release: str) -> Campaign:
    """The campaign with its brokers, and its Java clients when it has them, at ``release``."""
    data = campaign.model_dump(mode="json")
    data["cluster"]["kafka_version"] = release
    # (a fleet's java entries that name no version of their own follow java_client_version)
    if data["workload"].get("client") in ("java", "mixed", "streams", "fleet") and data["workload"].get("java_client_version"):
        data["workload"]["java_client_version"] = release
    return Campaign.model_validate(data)


def replay_bundle(bundle: Path, out: Path, seed: int | None = None, release: str | None = None) -> Outcome:
    """``kchaos replay`` of one bundle: its recorded campaign, seed and fault schedule; with
    ``seed``, the recorded campaign on that seed and the schedule that seed makes; with
    ``release``, the bundle's seed and schedule on that Kafka release."""
    campaign = on_release(load_recorded(bundle), release) if release is not None else None
    if seed is None:
        return replay_run(bundle, out, campaign)[1]
    return execute_run(campaign or load_recorded(bundle), out, seed=seed, replay_of=bundle)[1]


def verify(evidence: Path, claims: list[Claim], out: Path,
           replay: Callable[..., Outcome] | None = None, say: Callable[[str], None] = print,
           every_seed: bool = False, releases: list[str] | None = None) -> list[Check]:
    """Replay each claim's bundle (and its other seeds with ``every_seed``, or when it rests on a
    race; with ``releases``, each bundle on each of those releases), one after another; a replay
    that fails is a drift, never hidden."""
    replay = replay or replay_bundle
    checks = []
    # a race claim (at_least) is a claim over its runs, so its seeds always run; the release
    # matrix runs bundles only, since a release where a claim does not reproduce is an answer
    plan = [(c, s, r) for c in claims
            for s in (None, *(c.seeds if every_seed or (c.at_least and not releases) else ()))
            for r in (releases or [None])]
    for claim, seed, release in plan:
        check = Check(claim, seed, release)
        started = time.monotonic()
        say(f"replaying {claim.name}{f' on seed {seed}' if seed is not None else ''}"
            f"{f' on Kafka {release}' if release else ''} (claimed {claim.verdict})")
        try:
            outcome = replay(evidence / claim.bundle, out / claim.bundle, seed, release)
            check.verdict, check.kinds, check.run_dir = outcome.verdict, tuple(sorted(outcome.anomalies)), outcome.run_dir
            if outcome.verdict == "unknown":
                check.notes += list(outcome.errors) + [f"{k}: {v}" for k, v in outcome.required_not_checked.items()]
        except KchaosError as exc:
            check.error = exc.one_line()
        except Exception as exc:  # one broken replay must not hide the others
            check.error = f"{type(exc).__name__}: {exc}"
        check.minutes = round((time.monotonic() - started) / 60, 1)
        checks.append(check)
        say(f"  {'reproduced' if check.reproduced else _mark(check)}: {check.verdict or check.error} "
            f"{', '.join(check.kinds)} ({check.minutes} min)")
    return checks


@dataclass
class ClaimResult:
    """A claim over the runs made for it: reproduced when enough of them reproduced it."""

    claim: Claim
    runs: int
    reproduced_runs: int
    failed_runs: int = 0  # replays that did not finish: a drift for any claim, a sighting too

    @property
    def needed(self) -> int:
        return min(self.claim.at_least or self.runs, self.runs)

    @property
    def holds(self) -> bool:
        if self.claim.sighting:
            return not self.failed_runs
        return self.reproduced_runs >= self.needed


def claim_results(checks: list[Check]) -> list[ClaimResult]:
    results: dict[str, ClaimResult] = {}
    for c in checks:
        result = results.setdefault(c.claim.name, ClaimResult(c.claim, 0, 0))
        result.runs += 1
        result.reproduced_runs += c.reproduced
        result.failed_runs += c.error is not None
    return list(results.values())


def listing_table(claims: list[Claim]) -> str:
    rows = [("finding", "bundle", "claimed", "other seeds", "trigger")]
    rows += [(c.finding, c.bundle, c.verdict + (f" ({', '.join(c.any_of)})" if c.any_of else "")
              + (f' (because "{c.because}")' if c.because else ""),
              " ".join(map(str, c.seeds)) or "-", c.trigger) for c in claims]
    return _table(rows)


def claims_markdown(evidence: Path, claims: list[Claim]) -> str:
    """The claims as docs/findings.md shows them ("Faithfulness, claim by claim"): each claim, the
    replays `kchaos findings verify` makes of it and what they must show, and its trigger. Made
    from the registry by the index's own renderer (reports/findings_index.py), so that the page and
    the registry cannot disagree (tests/unit/test_findings.py)."""
    return claims_table(evidence, [asdict(c) for c in claims])


def verify_table(checks: list[Check]) -> str:
    rows = [("finding", "bundle", "seed", "claimed", "replayed", "kinds", "minutes", "")]
    for c in checks:
        rows.append((c.claim.finding, c.claim.bundle, "bundle" if c.seed is None else c.seed, c.claim.verdict,
                     c.verdict or "error",
                     ", ".join(c.kinds) or c.error or ("; ".join(c.notes) if c.claim.because else "-"),
                     f"{c.minutes}", _mark(c)))
    total = sum(c.minutes for c in checks)
    drift = sum(not c.reproduced for c in checks)
    text = _table(rows) + f"\n{len(checks) - drift} of {len(checks)} runs reproduced their claim, {total:.1f} minutes"
    sightings = [c for c in checks if c.claim.sighting and not c.reproduced and not c.error]
    if sightings:
        text += f" ({len(sightings)} of the others a sighting's replay, not claimed to reproduce)"
    races = [r for r in claim_results(checks) if r.runs > 1 or r.claim.at_least]
    for r in races:
        text += (f"\n{r.claim.name}: {r.reproduced_runs} of {r.runs} runs, {r.needed} needed: "
                 f"{'holds' if r.holds else 'DRIFT'}")
    return text


def _mark(check: Check) -> str:
    if check.reproduced:
        return "ok"
    if check.claim.sighting and not check.error:
        return "not reproduced (one sighting)"
    return "DRIFT"


def release_table(checks: list[Check]) -> str:
    """Which findings reproduce on which release: a row per claim (and seed), a column per release."""
    releases = sorted({c.release for c in checks if c.release}, key=lambda r: tuple(int(x) for x in r.split(".")))
    cells: dict[tuple[str, Any], dict[str, str]] = {}
    for c in checks:
        row = cells.setdefault((c.claim.name, c.seed), {})
        if c.error:
            row[c.release or ""] = "error"
        else:
            kinds = f" ({', '.join(c.kinds)})" if c.kinds else ""
            row[c.release or ""] = ("reproduces" if c.reproduced else "does not") + f": {c.verdict}{kinds}"
    rows = [("claim", "seed", *releases)]
    rows += [(name, "bundle" if seed is None else seed, *(row.get(r, "-") for r in releases))
             for (name, seed), row in cells.items()]
    return _table(rows)


def _table(rows: list[tuple[Any, ...]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows)
