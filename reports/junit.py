"""JUnit XML for CI systems: one test case per run.

A run whose verdict is what its matrix entry expects passes (``valid`` by default; a negative
control expects ``invalid``). Otherwise: an unexpected ``invalid`` (or a negative control that
came out ``valid``) is a ``<failure>`` carrying the anomaly summary; ``unknown`` and harness
errors are ``<error>``. The message says which guarantee failed (``invalid (safety valid,
liveness invalid): stalled-pipeline (6 cases), ...``), and system-out gives both verdicts. ``ci/junit.xsd`` is the schema the tests validate against.
"""

from __future__ import annotations

import socket
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.files import atomic_target
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

    @property
    def verdict(self) -> str:
        """The run's judgement (a certification's where it has one), or ``harness-error``."""
        return self.outcome.judgement if self.outcome is not None else "harness-error"

    @property
    def passed(self) -> bool:
        return self.verdict == self.expected

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
        if self.verdict == "valid" and self.expected != "valid":
            return f"valid, but {self.expected} was expected (the negative control was not caught)"
        if self.outcome is not None:
            return self.outcome.summary()[:500]
        return "harness-error: " + "; ".join(self.harness_errors)[:500]


def write_junit(outcomes: list[JudgedRun], path: Path, suite: str) -> Path:
    failures = sum(1 for o in outcomes if not o.passed and o.verdict in ("invalid", "valid"))
    errors = sum(1 for o in outcomes if not o.passed and o.verdict not in ("invalid", "valid"))
    total = round(sum(o.seconds for o in outcomes), 3)
    root = ET.Element("testsuites", name="kchaos", tests=str(len(outcomes)), failures=str(failures),
                      errors=str(errors), time=str(total))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(outcomes)), failures=str(failures),
                       errors=str(errors), skipped="0", time=str(total),
                       timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()), hostname=socket.gethostname())
    for o in outcomes:
        case = ET.SubElement(ts, "testcase", classname=f"kchaos.{o.campaign}", name=o.name, time=f"{o.seconds:.3f}")
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
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(path) as tmp:
        ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    return path
