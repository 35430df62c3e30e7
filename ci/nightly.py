"""``kchaos ci nightly``: a campaign matrix with fixed and fresh seeds, JUnit XML, an index page.

Matrix file (TOML; default ``campaigns/nightly.toml``)::

    name = "nightly"
    [[entry]]
    campaign = "default.toml"      # relative to the matrix file, or absolute
    seeds = [1, 2]                 # fixed seeds: the same schedule every night
    fresh_seeds = 1                # plus this many new seeds (recorded, so a failure replays)
    set = ["run.duration_s=40"]    # --set overrides for this entry
    expect = "valid"               # "invalid" for a negative control that must be caught

Every campaign of the matrix is loaded and validated before any cluster starts. Runs go to
``OUT/<UTC time>-<name>/``, with ``junit.xml`` and ``summary.json`` beside them, and
``OUT/index.html`` (all nights under OUT, with trends) is rendered at the end.

Exit code: 1 if any run's verdict was not what its entry expects and it was ``invalid`` or an
uncaught negative control (a correctness finding outranks everything), else 3 if a run failed
with a harness error, else 2 if any run was ``unknown``, else 0.
"""

from __future__ import annotations

import json
import random
import time
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kchaos.ci.junit import RunOutcome, write_junit
from kchaos.clusters.spec import describe_validation_error
from kchaos.errors import ConfigError, KchaosError
from kchaos.harness.campaign import CAMPAIGNS_DIR, load_campaign
from kchaos.harness.run import execute_run, say
from kchaos.reports.index import render_index
from kchaos.verifier.campaign import Campaign

DEFAULT_MATRIX = CAMPAIGNS_DIR / "nightly.toml"


class MatrixEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    campaign: str
    seeds: list[int] = Field(default_factory=list)
    fresh_seeds: int = Field(0, ge=0, le=100)
    set: list[str] = Field(default_factory=list)
    expect: Literal["valid", "invalid"] = "valid"
    label: str | None = None


class Matrix(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = "nightly"
    entry: list[MatrixEntry] = Field(min_length=1)


def load_matrix(path: Path) -> tuple[Matrix, list[tuple[MatrixEntry, Path, Campaign]]]:
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"matrix file {path} does not exist", "pass an existing .toml file or none for the default") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"matrix file {path} is not valid TOML: {exc}") from None
    try:
        matrix = Matrix.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe_validation_error(exc, '').lstrip('.')}") from None
    resolved = []
    for i, entry in enumerate(matrix.entry):
        campaign_path = Path(entry.campaign)
        if not campaign_path.is_absolute():
            campaign_path = (path.parent / campaign_path).resolve()
        if not entry.seeds and not entry.fresh_seeds:
            raise ConfigError(f"{path}: entry {i} ({entry.campaign}) has no seeds and no fresh_seeds: it would run nothing")
        try:
            resolved.append((entry, campaign_path, load_campaign(campaign_path, entry.set)))
        except ConfigError as exc:
            raise ConfigError(f"{path}: entry {i}: {exc.one_line()}") from None
    return matrix, resolved


def exit_code(outcomes: list[RunOutcome]) -> int:
    unexpected = [o for o in outcomes if not o.passed]
    if any(o.verdict in ("invalid", "valid") for o in unexpected):
        return 1
    if any(o.verdict == "harness-error" for o in unexpected):
        return 3
    if any(o.verdict == "unknown" for o in unexpected):
        return 2
    return 0


def run_nightly(matrix_path: Path, out_root: Path, extra_fresh: int = 0) -> int:
    matrix, entries = load_matrix(matrix_path)  # every campaign validated before anything starts
    night = out_root / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{matrix.name}"
    night.mkdir(parents=True, exist_ok=True)
    fresh = random.SystemRandom()
    plan = []
    for entry, path, campaign in entries:
        seeds = list(entry.seeds) + [fresh.randrange(2**31) for _ in range(entry.fresh_seeds + extra_fresh)]
        plan += [(entry, path, campaign, seed) for seed in seeds]
    (night / "plan.json").write_text(json.dumps([{"campaign": str(p), "seed": s, "set": e.set, "expect": e.expect}
                                                 for e, p, _, s in plan], indent=2))
    say(f"nightly {matrix.name}: {len(plan)} runs into {night}")
    outcomes: list[RunOutcome] = []
    for entry, path, campaign, seed in plan:
        label = entry.label or campaign.name
        name = f"{label} seed={seed}" + (f" [{' '.join(entry.set)}]" if entry.set else "")
        started = time.monotonic()
        outcome = RunOutcome(name, label, entry.expect, "harness-error", 0.0)
        interrupted = False
        try:
            run, _ = execute_run(campaign, night, seed=seed, campaign_path=path, overrides=entry.set)
            (run.path / "expect.json").write_text(json.dumps({"verdict": entry.expect}))
            results = run.read_json("results.json")
            interrupted = bool(results.get("interrupted"))  # a graceful stop (Ctrl-C) ends the night
            outcome.verdict, outcome.anomalies = results["verdict"], results.get("anomalies") or {}
            outcome.errors = results.get("errors") or []
            outcome.run_dir = str(run.path)
            outcome.replay = run.read_json("replay.json").get("command")
        except KchaosError as exc:
            outcome.errors = [exc.one_line()]
        except Exception as exc:  # one broken run must not hide the others' results
            outcome.errors = [f"{type(exc).__name__}: {exc}"]
        outcome.seconds = time.monotonic() - started
        outcomes.append(outcome)
        say(f"{name}: {outcome.verdict} (expected {entry.expect})")
        write_junit(outcomes, night / "junit.xml", f"kchaos.{matrix.name}")  # after every run: partial is usable
        if interrupted:
            say("the run was interrupted by a signal: no further runs tonight")
            break
    code = exit_code(outcomes)
    (night / "summary.json").write_text(json.dumps({"exit_code": code, "runs": [
        {"name": o.name, "verdict": o.verdict, "expected": o.expected, "run_dir": o.run_dir, "errors": o.errors}
        for o in outcomes]}, indent=2))
    say(f"junit: {night / 'junit.xml'}; index: {render_index(out_root)}; exit {code}")
    return code
