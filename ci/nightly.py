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

Fresh seeds are drawn from the night's id (``--night-id``, default the UTC date; ci/shards.py),
so ``--shard I/N`` runs share I of N of the same night on any machine, each run's shard recorded
in its ``expect.json`` and in ``summary.json``; ``kchaos ci merge`` (ci/merge.py) joins them.
``plan.json`` names the night (id, matrix, shard, the fingerprint of its runs) and lists this
shard's runs with their seeds and estimates; ``summary.json`` is rewritten after every run
(``complete`` false until the night ends), so a merge knows which runs a killed shard finished.
``summary.json``'s ``kafka_bug_signatures`` counts the runs with a known Kafka bug's signature
seen (verifier/markers.py ``signatures``: F8's unprepared COMMIT markers), whatever their verdict,
and names them per finding; each run's record carries its ``signatures`` and their line, and the
console says the count at the end.

A run whose campaign needs root (ci/needs.py: disk faults, clock faults without libfaketime, the
Docker backend's partitions) in a process that is not root is not started: it is ``skipped`` with
the reason in the JUnit file (``<skipped>``), summary.json and the console, and counts in no exit
code. ``slim`` (``--slim-expected``) slims every run whose verdict was the expected one to its
evidence after the night (harness/prune.py ``plan_slim_expected``); an unexpected one stays whole.

Exit code: 1 if any run's verdict was not what its entry expects and it was ``invalid`` or an
uncaught negative control (a correctness finding outranks everything), else 3 if a run failed
with a harness error, else 2 if any run was ``unknown``, else 0.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kchaos.ci.needs import is_root
from kchaos.ci.release_table import release_row, write_release_table
from kchaos.ci.shards import (Cost, PlannedRun, ShardSpec, check_night_id, default_night_id, fingerprint, resolve,
                              select, split)
from kchaos.clusters.spec import describe_validation_error
from kchaos.errors import ConfigError
from kchaos.files import atomic_write
from kchaos.harness.campaign import CAMPAIGNS_DIR, load_campaign, read_toml
from kchaos.harness.prune import apply_prune, plan_slim_expected
from kchaos.harness.run import check_out_root, execute_run
from kchaos.harness.runs import exit_code, judge_one
from kchaos.log import say
from kchaos.reports.index import render_index
from kchaos.reports.junit import JudgedRun, write_junit
from kchaos.rundir import EXPECT_FILE, RunDir
from kchaos.verifier.campaign import Campaign

DEFAULT_MATRIX = CAMPAIGNS_DIR / "nightly.toml"
#: a night's own files, beside its run directories
PLAN_FILE, SUMMARY_FILE, JUNIT_FILE, RELEASES_FILE = "plan.json", "summary.json", "junit.xml", "releases.md"


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


def night_record(matrix: Matrix, matrix_path: Path, night_id: str, shard: ShardSpec | None, runs: list[PlannedRun],
                 entries: list[str], labels: list[str], extra_fresh: int, started: str) -> dict[str, Any]:
    """What names a night in its shards' plan.json and summary.json: a merge joins shards whose
    records agree (ci/merge.py)."""
    return {"night_id": night_id, "matrix": matrix.name, "matrix_file": str(matrix_path),
            "shard": str(shard) if shard else None, "shards": shard.count if shard else 1,
            "fingerprint": fingerprint(runs), "resolved_runs": len(runs),
            "selection": {"entry": list(entries), "label": list(labels)}, "extra_fresh_seeds": extra_fresh,
            "started": started}


def resolve_night(matrix_path: Path, night_id: str, extra_fresh: int = 0, entries: list[str] | None = None,
                  labels: list[str] | None = None, cost: Cost | None = None) -> tuple[Matrix, list[PlannedRun]]:
    """The matrix, validated, and the runs of the night (its selection): bad input is a
    ConfigError here, before any cluster starts."""
    check_night_id(night_id)
    if extra_fresh < 0:
        raise ConfigError(f"--fresh-seeds {extra_fresh} is negative", "pass 0 or more extra fresh seeds per entry")
    matrix, variants = load_matrix(matrix_path)  # every campaign validated before anything starts
    runs = select(resolve(matrix.name, variants, night_id, extra_fresh, cost), entries or [], labels or [])
    return matrix, runs


def judged_record(o: JudgedRun, run: PlannedRun, shard: ShardSpec | None) -> dict[str, Any]:
    """One run of summary.json: what a merge needs to rebuild the night from its shards."""
    return {"key": run.key, "shard": str(shard) if shard else None, "name": o.name, "label": o.campaign,
            "seed": run.seed, "fresh": run.fresh, "verdict": o.verdict, "expected": o.expected, "run_dir": o.run_dir,
            "errors": o.errors, "guarantees": o.guarantees, "seconds": round(o.seconds, 3),
            "exposure": o.outcome.exposure if o.outcome is not None else None, "skipped": o.skipped,
            **signature_record(o)}


def signature_record(o: JudgedRun) -> dict[str, Any]:
    """A run's known Kafka bugs' signatures in summary.json: their findings and the outcome's words
    (verifier/markers.py); a run without one, or without an outcome, has none."""
    found = o.outcome.signatures if o.outcome is not None else ()
    return {"signatures": [s["finding"] for s in found], "signature": o.outcome.signature_line if found else None}


def signature_counts(judged: list[dict[str, Any]]) -> dict[str, Any]:
    """summary.json's count of the runs with a known Kafka bug's signature seen, and which: per
    finding, the runs' names."""
    by_finding: dict[str, list[str]] = {}
    for r in judged:
        for finding in r.get("signatures") or []:
            by_finding.setdefault(finding, []).append(r["name"])
    return {"runs": sum(1 for r in judged if r.get("signatures")), "by_finding": by_finding}


def signature_summary(counts: dict[str, Any]) -> str:
    """The console's line for them: ``2 runs with a known Kafka bug's signature seen: F8 in 2
    (default seed=1, default seed=7)``; "" for none."""
    if not counts["runs"]:
        return ""
    return (f"{counts['runs']} run{'' if counts['runs'] == 1 else 's'} with a known Kafka bug's signature seen: "
            + "; ".join(f"{f} in {len(names)} ({', '.join(names)})"
                        for f, names in sorted(counts["by_finding"].items())))


def root_skip(run: PlannedRun, root: bool) -> str | None:
    """Why ``run`` is skipped in this process (it needs root, and the process is not), else None:
    decided per run, before it starts."""
    if not run.needs_root or root:
        return None
    return "needs root, and this process is not (uid " + f"{os.geteuid()}): " + "; ".join(run.needs_root)


def slim_expected(outcomes: list[JudgedRun]) -> str:
    """After a night: every run whose verdict matched its expectation slimmed to its evidence
    (harness/prune.py), every unexpected one kept whole; a line saying what was done."""
    actions = plan_slim_expected([(Path(o.run_dir), o.passed) for o in outcomes if o.run_dir])
    apply_prune(actions)
    slimmed = [a for a in actions if a.action == "slim"]
    whole = sum(1 for a in actions if a.action == "keep" and a.why.startswith("unexpected"))
    return (f"slimmed {len(slimmed)} runs whose verdict was expected ({sum(a.freed for a in slimmed) / 2**20:.0f} MB "
            f"of broker data); {whole} unexpected kept whole")


def close_night(night: Path, record: dict[str, Any], judged: list[dict[str, Any]], rows: list[dict[str, Any]],
                outcomes: list[Any], slim: bool, complete: bool, interrupted: bool = False) -> int:
    """A night's end, whether it ran whole or was merged from shards: its summary with the exit code
    and the runs skipped, the expected runs slimmed (``slim``), the bug signatures seen said."""
    code = exit_code(outcomes)
    write_summary(night, record, judged, rows, code, complete=complete, interrupted=interrupted,
                  skipped=[{"name": o.name, "reason": o.skipped} for o in outcomes if o.skipped is not None])
    if slim:
        say(slim_expected(outcomes))
    seen = signature_summary(signature_counts(judged))
    if seen:
        say(seen)
    return code


def write_summary(night: Path, record: dict[str, Any], judged: list[dict[str, Any]], rows: list[dict[str, Any]],
                  code: int, complete: bool, interrupted: bool = False, **extra: Any) -> Path:
    path = night / SUMMARY_FILE
    atomic_write(path, json.dumps({"night": record, "exit_code": code, "complete": complete,
                                   "interrupted": interrupted, "runs": judged,
                                   "kafka_bug_signatures": signature_counts(judged), "releases": rows, **extra},
                                  indent=2))
    return path


def run_nightly(matrix_path: Path, out_root: Path, extra_fresh: int = 0, *, shard: ShardSpec | None = None,
                night_id: str | None = None, entries: list[str] | None = None, labels: list[str] | None = None,
                cost: Cost | None = None, slim: bool = False, root: bool | None = None) -> int:
    """A night of the matrix, or its shard ``shard`` (``cost``: the estimate the split balances);
    ``slim``: after the night, the runs whose verdict was expected slimmed to their evidence;
    ``root``: whether this process may run what needs root (default: it is root)."""
    root = is_root() if root is None else root
    night_id = night_id or default_night_id()
    matrix, runs = resolve_night(matrix_path, night_id, extra_fresh, entries, labels, cost)
    if shard is not None and cost is None:
        raise ConfigError("a shard needs the runs' estimates to split the night", "run it through `kchaos ci nightly`")
    mine = split(runs, shard.count)[shard.index - 1] if shard else runs
    check_out_root(out_root)
    started = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
    night = out_root / (f"{started}-{matrix.name}" + (f"-shard-{shard.index}-of-{shard.count}" if shard else ""))
    night.mkdir(parents=True, exist_ok=True)
    record = night_record(matrix, matrix_path, night_id, shard, runs, entries or [], labels or [], extra_fresh, started)
    atomic_write(night / PLAN_FILE, json.dumps({**record, "runs": [{**r.to_json(), "shard": record["shard"]}
                                                                    for r in mine]}, indent=2))
    say(f"nightly {matrix.name}, night {night_id}" + (f", shard {shard}" if shard else "")
        + f": {len(mine)} of {len(runs)} runs into {night}"
        + (f" (about {sum(r.estimate_s for r in mine) / 60:.0f} min by the plan)" if cost is not None else ""))
    to_skip = sum(1 for r in mine if root_skip(r, root))
    if to_skip:
        say(f"{to_skip} of these runs need root and this process is not: they are skipped, each with its reason "
            "(run the night as root, or with sudo, to make them)")
    outcomes: list[JudgedRun] = []
    judged: list[dict[str, Any]] = []
    rows: list[dict] = []
    interrupted = False
    for run in mine:
        skip = root_skip(run, root)
        if skip is not None:
            outcome = JudgedRun(run.name, run.label, run.expect, 0.0, skipped=skip)
            outcomes.append(outcome)
            judged.append(judged_record(outcome, run, shard))
            say(f"{run.name}: skipped ({skip})")
            write_junit(outcomes, night / JUNIT_FILE, f"kchaos.{matrix.name}")
            write_summary(night, record, judged, rows, exit_code(outcomes), complete=False)
            continue
        outcome = judge_one(lambda: execute_run(run.campaign, night, seed=run.seed, campaign_path=run.campaign_path,
                                                overrides=run.sets),
                            run.name, run.label, run.expect)
        if outcome.run_dir:
            RunDir(outcome.run_dir).write_json(EXPECT_FILE, {"verdict": run.expect, "night_id": night_id,
                                                             "shard": record["shard"], "key": run.key})
            rows.append(release_row(Path(outcome.run_dir), run.name, outcome.verdict))
            write_release_table(rows, night / RELEASES_FILE, f"{matrix.name}: releases")
        interrupted = outcome.interrupted  # a graceful stop (Ctrl-C) ends the night
        outcomes.append(outcome)
        judged.append(judged_record(outcome, run, shard))
        say(f"{run.name}: {outcome.verdict} (expected {run.expect})"
            + (f"; {outcome.guarantees}" if outcome.guarantees else "")
            + (f"; {outcome.outcome.exposure}" if outcome.outcome is not None and outcome.outcome.exposure else "")
            + (f"; {outcome.outcome.signature_line}" if outcome.outcome is not None and outcome.outcome.signatures
               else ""))
        write_junit(outcomes, night / JUNIT_FILE, f"kchaos.{matrix.name}")  # after every run: partial is usable
        write_summary(night, record, judged, rows, exit_code(outcomes), complete=False)
        if interrupted:
            say("the run was interrupted by a signal: no further runs tonight")
            break
    write_junit(outcomes, night / JUNIT_FILE, f"kchaos.{matrix.name}")
    if not rows:
        write_release_table(rows, night / RELEASES_FILE, f"{matrix.name}: releases")
    code = close_night(night, record, judged, rows, outcomes, slim, complete=True, interrupted=interrupted)
    skipped = sum(1 for o in outcomes if o.skipped is not None)
    say((f"{skipped} skipped (need root; not in the exit code); " if skipped else "")
        + f"junit: {night / JUNIT_FILE}; index: {render_index(out_root)}; exit {code}")
    print(night, flush=True)  # the last line on stdout: this night's directory
    return code
