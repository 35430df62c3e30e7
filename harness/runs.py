"""Runs one after another: ``kchaos run --count N [--exit-first] [--junit FILE]``, and the
one-run step the nightly matrix (ci/nightly.py) repeats.

Each run's outcome is the one :func:`~kchaos.harness.run.execute_run` returns (the verifier's
typed :class:`~kchaos.verifier.outcome.Outcome`), never re-read from ``results.json``; a run that
fails before a verdict is a harness error that does not hide the others.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from kchaos.errors import EXIT_HARNESS_ERROR, VERDICT_EXIT, ConfigError, KchaosError
from kchaos.harness.run import execute_run
from kchaos.log import say
from kchaos.reports.junit import JudgedRun, write_junit
from kchaos.rundir import RunDir
from kchaos.signals import time_limit
from kchaos.verifier.campaign import Campaign
from kchaos.verifier.outcome import Outcome


def judge_one(execute: Callable[[], tuple[RunDir, Outcome]], name: str, campaign: str,
              expected: str = "valid") -> JudgedRun:
    """Execute one run (``execute`` returns its directory and outcome); a run that fails before a
    verdict is a harness error, never hiding the others."""
    started = time.monotonic()
    judged = JudgedRun(name, campaign, expected, 0.0)
    try:
        _, judged.outcome = execute()
    except KchaosError as exc:
        judged.harness_errors = [exc.one_line()]
    except Exception as exc:  # one broken run must not hide the others' results
        judged.harness_errors = [f"{type(exc).__name__}: {exc}"]
    judged.seconds = time.monotonic() - started
    return judged


def exit_code(runs: list[JudgedRun]) -> int:
    """Several runs as one exit code: a run not as expected that is a correctness finding
    (``invalid``, or a negative control that came out ``valid``) outranks a harness error, which
    outranks ``unknown``."""
    unexpected = [r for r in runs if not r.passed]
    if any(r.verdict in ("invalid", "valid") for r in unexpected):
        return VERDICT_EXIT["invalid"]
    if any(r.verdict == "harness-error" for r in unexpected):
        return EXIT_HARNESS_ERROR
    if any(r.verdict == "unknown" for r in unexpected):
        return VERDICT_EXIT["unknown"]
    return VERDICT_EXIT["valid"]


def run_count(campaign: Campaign, out: Path, count: int, *, campaign_path: Path | None = None,
              overrides: list[str] | None = None, exit_first: bool = False, limit_s: float | None = None,
              junit: Path | None = None) -> int:
    """``count`` runs, the first with the campaign's seed and each later one with a fresh seed:
    each run directory on stdout as it ends (the last line is the last run's), the JUnit file
    rewritten after every run, a summary of several; the exit code of the worst (a single run's
    own code, a certification's included). A lone run that failed before a verdict raises."""
    if count < 1:
        raise ConfigError(f"--count {count}: at least one run", "pass --count 1 or more")
    if limit_s is not None and limit_s <= 0:
        raise ConfigError(f"--time-limit {limit_s}: a number of seconds above 0")
    runs: list[JudgedRun] = []
    for i in range(count):
        seed = campaign.run.seed if i == 0 else None

        def execute() -> tuple[RunDir, Outcome]:
            with time_limit(limit_s):
                run, outcome = execute_run(campaign, out, seed=seed, campaign_path=campaign_path, overrides=overrides)
            print(run.path, flush=True)
            return run, outcome

        judged = judge_one(execute, f"{campaign.name} run {i + 1}", campaign.name)
        runs.append(judged)
        if junit is not None:
            write_junit(runs, junit, f"kchaos.{campaign.name}")
        if judged.interrupted or (exit_first and not judged.passed):
            break
    if count > 1:
        say(f"{len(runs)} of {count} runs:")
        for r in runs:
            say(f"  {r.verdict:13} {Path(r.run_dir).name if r.run_dir else '-'}" + (f"  {r.summary()}" if not r.passed
                                                                                  else ""))
    if len(runs) == 1 and runs[0].outcome is None:
        raise KchaosError("; ".join(runs[0].harness_errors) or "the run failed before a verdict")
    return exit_code(runs)
