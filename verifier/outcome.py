"""A judged run's outcome, typed: what every reader of a verdict gets, from one place.

:func:`verifier.verdict.judge_run` returns it as it writes the run's results, and
:func:`load_outcome` reads it back from a run directory for everyone after (``kchaos run``,
``replay`` and ``analyze``, ``--count``, the nightly, JUnit, the release table, the index, the
report), so none of them re-derives an exit code from ``results.json``'s verdict: a
certification's exit code is its own, whichever command asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.errors import VERDICT_EXIT, ConfigError
from kchaos.rundir import CERTIFICATION_JUDGEMENT, RESULTS_FILE, RunDir
from kchaos.verifier.exposure import summary_line
from kchaos.verifier.markers import signatures, signatures_line
from kchaos.verifier.results import LIVENESS_CHECKS


@dataclass(frozen=True)
class Outcome:
    run_dir: str
    #: the checker's verdict: valid | invalid | unknown
    verdict: str
    #: the certification's overall verdict (pass | fail | unknown) for a run with planned steps
    certification: str | None = None
    #: the certification's one line (its verdict, what failed or was not judged, its known risks)
    certification_summary: str | None = None
    #: anomaly -> its cases (at most the checker's MAX_CASES each; the checks' notes carry the counts)
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    not_checked: dict[str, str] = field(default_factory=dict)
    #: the claimed checks that were not checked: each keeps the verdict from valid
    required_not_checked: dict[str, str] = field(default_factory=dict)
    #: per fault kind: planned, attempted, executed, required, and the kinds that fell short
    fault_coverage: dict[str, Any] | None = None
    #: one line: the work the faults hit (verifier/exposure.py), for the nightly, JUnit and the index
    exposure: str | None = None
    interrupted: bool = False
    replay: str | None = None
    #: the safety and the liveness guarantees' verdicts (results.json ``safety``, ``liveness``;
    #: None for results written before they were kept apart)
    safety: str | None = None
    liveness: str | None = None
    #: the known Kafka bugs' signatures the run's facts carry (verifier/markers.py ``signatures``:
    #: finding, count, words); they add words to the summary, never change the judgement
    signatures: tuple[dict[str, Any], ...] = ()

    @property
    def judgement(self) -> str:
        """What the run says: the certification's verdict where there is one (pass is valid),
        else the checker's."""
        return CERTIFICATION_JUDGEMENT[self.certification] if self.certification else self.verdict

    @property
    def exit_code(self) -> int:
        return VERDICT_EXIT[self.judgement]

    @property
    def guarantees(self) -> str:
        """Which guarantee failed or could not be judged: ``safety invalid, liveness valid``; ""
        for results written before the two were kept apart."""
        if self.safety is None or self.liveness is None:
            return ""
        return f"safety {self.safety}, liveness {self.liveness}"

    @property
    def signature_line(self) -> str:
        """The known Kafka bugs' signatures seen, as one clause (``F8's signature seen: ...``); ""."""
        return signatures_line(self.signatures)

    def summary(self) -> str:
        """One line: the judgement and why, then any known Kafka bug's signature the run shows
        (``valid; F8's signature seen: 4 COMMIT markers from a record that did not survive, no
        visible effect``)."""
        seen = f"; {self.signature_line}" if self.signatures else ""
        return self._judged() + seen

    def _judged(self) -> str:
        if self.certification_summary:
            return f"{self.judgement}: certification {self.certification_summary}"
        which = f" ({self.guarantees})" if self.guarantees and self.judgement != "valid" else ""
        if self.judgement == "invalid":
            why = ", ".join(f"{k} ({len(v)} cases)" for k, v in sorted(
                self.anomalies.items(), key=lambda kv: (kv[0] not in LIVENESS_CHECKS, kv[0])))
            return f"invalid{which}: " + (why or f"certification {self.certification}")
        reasons = [*self.errors, *(f"{k} not checked: {v}" for k, v in self.required_not_checked.items())]
        return f"{self.judgement}{which}" + (": " + "; ".join(reasons) if reasons else "")


def outcome_of(run_dir: Path, results: dict[str, Any], certification: dict[str, Any] | None,
               replay: str | None) -> Outcome:
    """The outcome from what the run directory holds (``results.json``'s form)."""
    return Outcome(run_dir=str(run_dir), verdict=results["verdict"],
                   certification=(certification or {}).get("overall"),
                   certification_summary=(certification or {}).get("summary"),
                   anomalies=dict(results.get("anomalies") or {}), errors=tuple(results.get("errors") or ()),
                   not_checked=dict(results.get("not_checked") or {}),
                   required_not_checked=dict(results.get("required_not_checked") or {}),
                   fault_coverage=(results.get("facts") or {}).get("fault_coverage"),
                   exposure=summary_line(exposure) if (exposure := (results.get("facts") or {}).get("exposure")) else None,
                   interrupted=bool(results.get("interrupted")), replay=replay,
                   safety=results.get("safety"), liveness=results.get("liveness"),
                   signatures=tuple(signatures(results)))


def load_outcome(run_dir: Path) -> Outcome:
    """A judged run's outcome; ConfigError (exit 3) when the run directory holds no results."""
    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    try:
        results = rd.results_data()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{run_dir}/{RESULTS_FILE} cannot be read: {exc}", "check the run again: kchaos analyze") \
            from None
    if not results or "verdict" not in results:
        raise ConfigError(f"{run_dir} holds no verdict ({RESULTS_FILE} missing)",
                          f"check it: kchaos analyze {run_dir}")
    return outcome_of(run_dir, results, rd.certification_data(), rd.replay_command())

