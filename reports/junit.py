"""JUnit XML for CI systems: one test case per run, and one per phase x client row of a run's
certification (``certification.json``, read through RunDir).

A run whose verdict is what its matrix entry expects passes (``valid`` by default; a negative
control expects ``invalid``). Otherwise: an unexpected ``invalid`` (or a negative control that
came out ``valid``) is a ``<failure>`` carrying the anomaly summary; ``unknown`` and harness
errors are ``<error>``; a run not made (``skipped``: one that needs root in a process that is not)
is ``<skipped>`` with the reason, neither a pass nor a failure. The message says which guarantee failed (``invalid (safety valid,
liveness invalid): stalled-pipeline (6 cases), ...``), and system-out gives both verdicts. ``ci/junit.xsd`` is the schema the tests validate against.

A certification row (``<run> / <phase> / <client>``, class ``kchaos.<campaign>.certification``)
follows the same convention: a gating ``invalid`` row is a ``<failure>`` (unless its run is a
negative control, which expects it), a gating ``unknown`` row an ``<error>``; ``valid``,
``known-exposure``, ``not-exercised`` and every non-gating row pass. Its system-out says the
verdict, whether it gates, the known exposure, committed transactions, exposure, protocol and
note. A row's fields are read with defaults (``gating`` true when absent): its form grows.
The counts of the suite include the rows; the exit code stays the runs' (harness/runs.py).
"""

from __future__ import annotations

import socket
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.files import atomic_target
from kchaos.rundir import RunDir
from kchaos.verifier.outcome import Outcome


@dataclass
class JudgedRun:
    """One run of a matrix or of ``--count``: what it was expected to be, and its outcome (None: it
    failed before a verdict, a harness error, with ``harness_errors`` saying why)."""

    name: str                      # e.g. "default seed=7"
    campaign: str
    expected: str                  # "valid" | "invalid"
    seconds: float
    outcome: Outcome | None = None
    harness_errors: list[str] = field(default_factory=list)
    #: why it was not run (a run that needs root in a process that is not): neither a pass nor a
    #: failure, and never part of an exit code
    skipped: str | None = None

    @property
    def verdict(self) -> str:
        """The run's judgement (a certification's where it has one), ``skipped``, or ``harness-error``."""
        if self.skipped is not None:
            return "skipped"
        return self.outcome.judgement if self.outcome is not None else "harness-error"

    @property
    def passed(self) -> bool:
        """Not a problem of the night: its verdict as expected, or skipped."""
        return self.skipped is not None or self.verdict == self.expected

    @property
    def run_dir(self) -> str | None:
        return self.outcome.run_dir if self.outcome is not None else None

    @property
    def interrupted(self) -> bool:
        return self.outcome is not None and self.outcome.interrupted

    @property
    def guarantees(self) -> str:
        """``safety valid, liveness invalid``; "" without an outcome that keeps them apart."""
        return self.outcome.guarantees if self.outcome is not None else ""

    @property
    def anomalies(self) -> dict[str, list[dict[str, Any]]]:
        return self.outcome.anomalies if self.outcome is not None else {}

    @property
    def errors(self) -> list[str]:
        if self.outcome is None:
            return list(self.harness_errors)
        return [*self.outcome.errors, *(f"required check {k} not checked: {v}"
                                        for k, v in self.outcome.required_not_checked.items())]

    def summary(self) -> str:
        if self.skipped is not None:
            return f"skipped: {self.skipped}"
        if self.verdict == "valid" and self.expected != "valid":
            return f"valid, but {self.expected} was expected (the negative control was not caught)"
        if self.outcome is not None:
            return self.outcome.summary()[:500]
        return "harness-error: " + "; ".join(self.harness_errors)[:500]


@dataclass(frozen=True)
class CertificationCase:
    """One phase x client row of a run's certification as a test case of its own. The rows' form
    grows (verifier/certify.py): every field is read with a default, an unknown one ignored."""

    run: JudgedRun
    row: dict[str, Any]

    @property
    def verdict(self) -> str:
        return str(self.row.get("verdict") or "unknown")

    @property
    def gating(self) -> bool:
        return bool(self.row.get("gating", True))

    @property
    def name(self) -> str:
        return f"{self.run.name} / {self.row.get('phase', '?')} / {self.row.get('client', '?')}"

    @property
    def problem(self) -> str | None:
        """``failure`` for a gating invalid row (unless its run is a negative control, which must be
        caught), ``error`` for a gating unknown one (the run's own convention), else None: valid,
        known-exposure, not-exercised and every non-gating row pass, saying their verdict."""
        if not self.gating:
            return None
        if self.verdict == "invalid":
            return None if self.run.expected == "invalid" else "failure"
        return "error" if self.verdict == "unknown" else None

    def summary(self) -> str:
        count = self.row.get("case_count")
        return (f"{self.row.get('phase', '?')} / {self.row.get('client', '?')}: {self.verdict}"
                + (f" ({count} cases)" if count else "") + (f": {self.row['note']}" if self.row.get("note") else ""))

    def system_out(self) -> str:
        row = self.row
        lines = [f"run directory: {self.run.run_dir}", f"certification row: phase {row.get('phase', '?')}, client "
                 f"{row.get('client', '?')}: {self.verdict}" + ("" if self.gating else " (not gating: never fails "
                                                                                  "the night)")]
        if row.get("known_exposure") or self.verdict == "known-exposure":
            lines.append(f"known exposure: {row.get('known_exposure') or 'named by the campaign'}")
        for key, label in (("committed_transactions", "committed transactions"), ("case_count", "cases")):
            if row.get(key) is not None:
                lines.append(f"{label}: {row[key]}")
        for key in ("exposure", "protocol"):
            if row.get(key):
                lines.append(f"{key}: {_flat(row[key])}")
        if row.get("note"):
            lines.append(f"note: {row['note']}")
        return "\n".join(lines) + "\n"


def _flat(value: Any) -> str:
    """A row's nested figure on one line: ``committed_by_kind kill 12; short a, b``."""
    if isinstance(value, dict):
        return "; ".join(f"{k} {_flat(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_flat(v) for v in value)
    return str(value)


def certification_cases(run: JudgedRun) -> list[CertificationCase]:
    """The rows of the run's ``certification.json`` (none without one, or when it cannot be read)."""
    if not run.run_dir:
        return []
    data = RunDir(Path(run.run_dir)).certification_data(tolerate=(OSError, ValueError))
    rows = data.get("rows") if isinstance(data, dict) else None
    return [CertificationCase(run, row) for row in rows or [] if isinstance(row, dict)]


def write_junit(outcomes: list[JudgedRun], path: Path, suite: str) -> Path:
    rows = {id(o): certification_cases(o) for o in outcomes}
    cases = [c for o in outcomes for c in rows[id(o)]]
    failures = sum(1 for o in outcomes if not o.passed and o.verdict in ("invalid", "valid")) \
        + sum(1 for c in cases if c.problem == "failure")
    errors = sum(1 for o in outcomes if not o.passed and o.verdict not in ("invalid", "valid")) \
        + sum(1 for c in cases if c.problem == "error")
    skipped = sum(1 for o in outcomes if o.skipped is not None)
    tests = len(outcomes) + len(cases)
    total = round(sum(o.seconds for o in outcomes), 3)
    root = ET.Element("testsuites", name="kchaos", tests=str(tests), failures=str(failures),
                      errors=str(errors), time=str(total))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(tests), failures=str(failures),
                       errors=str(errors), skipped=str(skipped), time=str(total),
                       timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()), hostname=socket.gethostname())
    for o in outcomes:
        _run_case(ts, o)
        for c in rows[id(o)]:
            case = ET.SubElement(ts, "testcase", classname=f"kchaos.{o.campaign}.certification", name=c.name,
                                 time="0.000")
            if c.problem:
                element = ET.SubElement(case, c.problem, message=c.summary()[:1000], type=c.verdict)
                element.text = "\n".join([c.summary(), *(f"{case.get('anomaly', 'case')}: "
                                                          f"{case.get('explanation', '')}"
                                                          for case in (c.row.get("cases") or [])[:3]
                                                          if isinstance(case, dict))])
            ET.SubElement(case, "system-out").text = c.system_out()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(path) as tmp:
        ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    return path


def _run_case(ts: ET.Element, o: JudgedRun) -> None:
    case = ET.SubElement(ts, "testcase", classname=f"kchaos.{o.campaign}", name=o.name, time=f"{o.seconds:.3f}")
    if o.skipped is not None:
        ET.SubElement(case, "skipped", message=o.summary()[:1000])
        ET.SubElement(case, "system-out").text = f"not run: {o.skipped}\n"
        return
    if not o.passed:
        kind = "failure" if o.verdict in ("invalid", "valid") else "error"
        detail = [o.summary()]
        for anomaly, cases in sorted(o.anomalies.items()):
            for c in cases[:3]:
                detail.append(f"{anomaly}: {c.get('explanation', '')}")
        detail += o.errors
        element = ET.SubElement(case, kind, message=o.summary()[:1000], type=o.verdict)
        element.text = "\n".join(detail)
    out = ET.SubElement(case, "system-out")
    replay = o.outcome.replay if o.outcome is not None else None
    out.text = f"run directory: {o.run_dir}\nreport: {o.run_dir}/report.html\nreplay: {replay}\n"
    if o.outcome is not None and o.outcome.guarantees:  # which guarantee failed (the message says it too)
        out.text += f"{o.outcome.guarantees}\n"
    if o.outcome is not None and o.outcome.exposure:  # what the faults hit
        out.text += f"{o.outcome.exposure}\n"
    if o.outcome is not None and o.outcome.signatures:  # a known Kafka bug's signature (a passing run says it here)
        out.text += f"{o.outcome.signature_line}\n"
