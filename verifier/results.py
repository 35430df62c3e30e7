"""Checker results are data (as in Elle): a verdict, anomaly cases with evidence, the facts.

Verdicts merge with ``invalid`` > ``unknown`` > ``valid``. A checker that crashes yields
``unknown`` with the error, never a false ``valid``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"
_RANK = {VALID: 0, UNKNOWN: 1, INVALID: 2}

#: the liveness guarantees' checks (verifier/liveness.py, verifier/checks.py): what the run did
#: after the final heal, judged apart from safety; results.json gives ``safety`` and ``liveness``
LIVENESS_CHECKS = ("stalled-pipeline", "unprocessed-assignment", "hung-client-call", "broker-not-rejoined",
                   "hanging-transaction")


def merge_verdicts(*verdicts: str) -> str:
    return max(verdicts, key=lambda v: _RANK[v]) if verdicts else UNKNOWN


@dataclass
class CheckResult:
    name: str
    verdict: str
    cases: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None
    #: the digest of every case's explanation (checks.case_digest), when the engine built them all
    digest: str | None = None
    #: how many cases the check found, when more than it keeps (MAX_CASES): what a reader of the
    #: kept cases alone (the certification's rows) cannot place
    total: int | None = None
    #: where every case falls (model.case_place), when the check found more than it keeps and
    #: built them all: the certification places each, not only the kept ones
    places: list[dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "cases": len(self.cases)}
        if self.note:
            out["note"] = self.note
        if self.digest:
            out["digest"] = self.digest
        if self.total is not None and self.total > len(self.cases):
            out["total"] = self.total
        return out


@dataclass
class Results:
    """What a checker found, and (verifier/verify.py) what the verdict also depends on: the
    cross-check against the other engine, the run's interruption, the engine's own record.
    ``errors`` make a verdict ``unknown`` unless a check found it ``invalid``."""

    checker: str
    checks: list[CheckResult] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: what keeps the liveness verdict (only) from valid: the drain or the cluster's health at the
    #: run's end where no liveness check could say why (verifier/verify.py apply_run_conditions)
    liveness_errors: list[str] = field(default_factory=list)
    not_checked: dict[str, str] = field(default_factory=dict)
    #: the checks the run's workload claims (checks.claimed_checks): one of them not checked
    #: makes the verdict ``unknown``
    required: list[str] = field(default_factory=list)
    cross_check: dict[str, Any] | None = None
    #: where and how a run was stopped early (a graceful stop or a crash), None when it was not
    interruption: dict[str, Any] | None = None
    #: the Spark job's own record (master, timings)
    spark: dict[str, Any] | None = None

    @property
    def required_not_checked(self) -> dict[str, str]:
        """The claimed checks that could not be made, and why: each keeps the verdict from ``valid``."""
        return {name: self.not_checked[name] for name in self.required if name in self.not_checked}

    def _family_verdict(self, liveness: bool) -> str:
        verdicts = [c.verdict for c in self.checks if (c.name in LIVENESS_CHECKS) == liveness]
        errors = self.liveness_errors if liveness else self.errors
        if errors or any((name in LIVENESS_CHECKS) == liveness for name in self.required_not_checked):
            verdicts.append(UNKNOWN)
        return merge_verdicts(*verdicts) if verdicts else UNKNOWN

    @property
    def safety(self) -> str:
        """The safety guarantees' verdict: every check but the liveness ones, and the errors."""
        return self._family_verdict(liveness=False)

    @property
    def liveness(self) -> str:
        """The liveness guarantees' verdict: LIVENESS_CHECKS and the liveness errors."""
        return self._family_verdict(liveness=True)

    @property
    def verdict(self) -> str:
        """The run's verdict: invalid when either guarantee failed, else unknown when either
        could not be judged, else valid."""
        return merge_verdicts(self.safety, self.liveness)

    @property
    def anomalies(self) -> dict[str, list[dict[str, Any]]]:
        return {c.name: c.cases for c in self.checks if c.cases and c.verdict == INVALID}

    def to_json(self) -> dict[str, Any]:
        anomalies = self.anomalies
        out = {
            "verdict": self.verdict,
            "safety": self.safety,
            "liveness": self.liveness,
            "checker": self.checker,
            "anomaly_types": sorted(anomalies),
            "anomalies": anomalies,
            "checks": {c.name: c.to_json() for c in self.checks},
            "case_places": {c.name: c.places for c in self.checks if c.places},
            "not_checked": self.not_checked,
            "required": self.required,
            "required_not_checked": self.required_not_checked,
            "facts": self.facts,
            "errors": [*self.errors, *self.liveness_errors],
            "liveness_errors": self.liveness_errors,
        }
        if self.cross_check is not None:
            out["cross_check"] = self.cross_check
        if self.interruption is not None:
            out["interrupted"] = True
            out["interruption"] = self.interruption
        if self.spark is not None:
            out["spark"] = self.spark
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Results":
        """The typed results back from ``to_json``'s form (the Spark job's output file). The
        verdict is recomputed from the checks and errors, never taken from the file."""
        anomalies, places = data.get("anomalies") or {}, data.get("case_places") or {}
        checks = [CheckResult(name, c["verdict"], list(anomalies.get(name, [])) if c["verdict"] == INVALID else [],
                              note=c.get("note"), digest=c.get("digest"), total=c.get("total"), places=places.get(name))
                  for name, c in (data.get("checks") or {}).items()]
        liveness_errors = list(data.get("liveness_errors") or [])
        return cls(checker=data.get("checker", "unknown"), checks=checks, facts=dict(data.get("facts") or {}),
                   errors=[e for e in data.get("errors") or [] if e not in liveness_errors],
                   liveness_errors=liveness_errors, not_checked=dict(data.get("not_checked") or {}),
                   required=list(data.get("required") or []), cross_check=data.get("cross_check"), interruption=data.get("interruption"), spark=data.get("spark"))
