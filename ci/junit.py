"""JUnit XML for CI systems: one test case per run.

A run whose verdict is what its matrix entry expects passes (``valid`` by default; a negative
control expects ``invalid``). Otherwise: an unexpected ``invalid`` (or a negative control that
came out ``valid``) is a ``<failure>`` carrying the anomaly summary; ``unknown`` and harness
errors are ``<error>``. ``ci/junit.xsd`` is the schema the tests validate against.
"""

from __future__ import annotations

import socket
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.files import atomic_target


@dataclass
class RunOutcome:
    name: str                      # e.g. "default seed=7"
    campaign: str
    expected: str                  # "valid" | "invalid"
    verdict: str                   # "valid" | "invalid" | "unknown" | "harness-error"
    seconds: float
    run_dir: str | None = None
    replay: str | None = None
    anomalies: dict[str, Any] = field(default_factory=dict)   # type -> cases
    errors: list[str] = field(default_factory=list)
    interrupted: bool = False      # the run was stopped early (a signal, a time limit)

    @property
    def passed(self) -> bool:
        return self.verdict == self.expected

    def summary(self) -> str:
        if self.verdict == "invalid":
            return "invalid: " + ", ".join(f"{k} ({len(v)} cases)" for k, v in sorted(self.anomalies.items()))
        if self.verdict == "valid":
            return f"valid, but {self.expected} was expected (the negative control was not caught)"
        return f"{self.verdict}: " + "; ".join(self.errors)[:500]


def write_junit(outcomes: list[RunOutcome], path: Path, suite: str) -> Path:
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
        out.text = f"run directory: {o.run_dir}\nreport: {o.run_dir}/report.html\nreplay: {o.replay}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(path) as tmp:
        ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    return path
