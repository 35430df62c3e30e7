"""``kchaos ci nightly``: a campaign matrix with fixed and fresh seeds, JUnit XML, an index page.

Matrix file (TOML; default ``campaigns/nightly.toml``)::

    name = "nightly"
    [[entry]]
    campaign = "default.toml"      # relative to the matrix file, or absolute
    seeds = [1, 2]                 # fixed seeds: the same schedule every night
    fresh_seeds = 1                # plus this many new seeds (recorded, so a failure replays)
    set = ["run.duration_s=40"]    # --set overrides for this entry
    expect = "valid"               # "invalid" for a negative control that must be caught
    releases = ["4.0.0", "4.4.0"]  # a release matrix: the entry once per Kafka release (brokers,
                                   # tools and the Java clients), ...
    transaction_versions = [1, 2]  # ... and per transaction.version

Every campaign of the matrix is loaded and validated before any cluster starts. Runs go to
``OUT/<UTC time>-<name>/``, with ``junit.xml`` and ``summary.json`` beside them, and
``OUT/index.html`` (all nights under OUT, with trends) is rendered at the end, and
``releases.md``, the release table (release x client x transaction.version -> verdict, anomalies,
transactions, late requests, run; ci/release_table.py).

Exit code: 1 if any run's verdict was not what its entry expects and it was ``invalid`` or an
uncaught negative control (a correctness finding outranks everything), else 3 if a run failed
with a harness error, else 2 if any run was ``unknown``, else 0.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kchaos.ci.release_table import release_row, write_release_table
from kchaos.clusters.spec import describe_validation_error
from kchaos.errors import ConfigError
from kchaos.harness.campaign import CAMPAIGNS_DIR, load_campaign, read_toml
from kchaos.harness.run import execute_run
from kchaos.harness.runs import exit_code, judge_one
from kchaos.log import say
from kchaos.reports.index import render_index
from kchaos.reports.junit import JudgedRun, write_junit
from kchaos.rundir import EXPECT_FILE, RunDir
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
    releases: list[str] = Field(default_factory=list)
    transaction_versions: list[Literal[1, 2]] = Field(default_factory=list)

    def variants(self) -> list[tuple[str, list[str]]]:
        """(label suffix, --set overrides) per release x transaction.version; the entry's own
        ``set`` comes first, so the matrix' axes win over it."""
        releases = [(f" {r}", [f"cluster.kafka_version={r}", f"workload.java_client_version={r}"])
                    for r in self.releases] or [("", [])]
        tvs = [(f" tv{t}", [f"cluster.transaction_version={t}"]) for t in self.transaction_versions] or [("", [])]
        return [(r_label + t_label, [*self.set, *r_sets, *t_sets]) for r_label, r_sets in releases
                for t_label, t_sets in tvs]


class Matrix(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = "nightly"
    entry: list[MatrixEntry] = Field(min_length=1)


def load_matrix(path: Path) -> tuple[Matrix, list[tuple[MatrixEntry, str, list[str], Path, Campaign]]]:
    """The matrix and its runs' campaigns, one per entry variant (release x transaction.version),
    each loaded and validated with its overrides."""
    data = read_toml(path, "matrix", "pass an existing .toml file or none for the default")
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
        for suffix, sets in entry.variants():
            try:
                campaign = load_campaign(campaign_path, sets)
            except ConfigError as exc:
                raise ConfigError(f"{path}: entry {i}{suffix}: {exc.one_line()}") from None
            resolved.append((entry, (entry.label or campaign.name) + suffix, sets, campaign_path, campaign))
    return matrix, resolved


def run_nightly(matrix_path: Path, out_root: Path, extra_fresh: int = 0) -> int:
    matrix, entries = load_matrix(matrix_path)  # every campaign validated before anything starts
    night = out_root / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{matrix.name}"
    night.mkdir(parents=True, exist_ok=True)
    fresh = random.SystemRandom()
    plan = []
    for entry, label, sets, path, campaign in entries:
        seeds = list(entry.seeds) + [fresh.randrange(2**31) for _ in range(entry.fresh_seeds + extra_fresh)]
        plan += [(entry, label, sets, path, campaign, seed) for seed in seeds]
    (night / "plan.json").write_text(json.dumps([{"campaign": str(p), "seed": s, "set": sets, "expect": e.expect}
                                                 for e, _, sets, p, _, s in plan], indent=2))
    say(f"nightly {matrix.name}: {len(plan)} runs into {night}")
    outcomes: list[JudgedRun] = []
    rows: list[dict] = []
    for entry, label, sets, path, campaign, seed in plan:
        name = f"{label} seed={seed}" + (f" [{' '.join(sets)}]" if sets else "")
        outcome = judge_one(lambda: execute_run(campaign, night, seed=seed, campaign_path=path, overrides=sets),
                            name, label, entry.expect)
        if outcome.run_dir:
            RunDir(outcome.run_dir).write_json(EXPECT_FILE, {"verdict": entry.expect})
            rows.append(release_row(Path(outcome.run_dir), name, outcome.verdict))
            write_release_table(rows, night / "releases.md", f"{matrix.name}: releases")
        interrupted = outcome.interrupted  # a graceful stop (Ctrl-C) ends the night
        outcomes.append(outcome)
        say(f"{name}: {outcome.verdict} (expected {entry.expect})"
            + (f"; {outcome.guarantees}" if outcome.guarantees else "")
            + (f"; {outcome.outcome.exposure}" if outcome.outcome is not None and outcome.outcome.exposure else ""))
        write_junit(outcomes, night / "junit.xml", f"kchaos.{matrix.name}")  # after every run: partial is usable
        if interrupted:
            say("the run was interrupted by a signal: no further runs tonight")
            break
    code = exit_code(outcomes)
    (night / "summary.json").write_text(json.dumps({"exit_code": code, "runs": [
        {"name": o.name, "verdict": o.verdict, "expected": o.expected, "run_dir": o.run_dir, "errors": o.errors,
         "guarantees": o.guarantees, "exposure": o.outcome.exposure if o.outcome is not None else None}
        for o in outcomes], "releases": rows}, indent=2))
    say(f"junit: {night / 'junit.xml'}; index: {render_index(out_root)}; exit {code}")
    return code
