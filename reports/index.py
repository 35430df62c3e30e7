"""``ROOT/index.html``: every run under an output root, one row each, and trends across nights.

Runs are found at ``ROOT/<run>`` (``kchaos run --out ROOT``) and ``ROOT/<night>/<run>``
(``kchaos ci nightly --out ROOT``). A *night* is the directory a nightly campaign wrote; the
trend view shows, night by night, how many runs were valid / invalid / unknown and the median
throughput, so a regression shows as a step.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from kchaos.errors import ConfigError
from kchaos.files import atomic_write
from kchaos.reports.plots import Plot, Series, render_svg
from kchaos.reports.run_report import template_environment
from kchaos.rundir import EXPECT_FILE, METRICS_FILE, REPORT_FILE, RunDir, find_runs
from kchaos.verifier.campaign import load_recorded
from kchaos.verifier.exposure import summary_line
from kchaos.verifier.outcome import load_outcome


#: a torn file of one run reads as missing: it must not hide the other runs
TORN = (ValueError,)


def run_row(run: Path, root: Path) -> dict[str, Any]:
    rd = RunDir(run)
    status = rd.status(TORN)
    results = rd.results_data({}, TORN) if status.complete else {}
    totals = (rd.read(METRICS_FILE, {}, TORN) or {}).get("totals") or {}
    try:
        campaign = load_recorded(run)
        tv = campaign.cluster.transaction_version
        name, seed = campaign.name, campaign.run.seed
        settings = (f"Kafka {campaign.cluster.kafka_version} x{campaign.cluster.nodes}, {campaign.workload.delivery}, "
                    f"{campaign.workload.isolation}, TV {tv if tv is not None else 'default'}")
    except ConfigError as exc:  # a run directory that cannot be read is listed as such, not skipped
        name, seed, settings = "?", None, exc.one_line()
    night = run.parent.relative_to(root).as_posix() if run.parent != root else ""
    outcome = load_outcome(run) if results.get("verdict") else None
    return {
        "run": run.name, "night": night, "link": (run / REPORT_FILE).relative_to(root).as_posix(),
        "has_report": (run / REPORT_FILE).exists(), "campaign": name,
        "verdict": (outcome.judgement if outcome is not None
                    else "incomplete" if not status.complete else "unknown"),
        # a known Kafka bug's signature the run shows (verifier/markers.py), in the outcome's words
        "signature": outcome.signature_line if outcome is not None else "",
        "anomalies": results.get("anomaly_types") or [], "seed": seed,
        "settings": settings,
        "inputs_per_s": totals.get("inputs_per_s"), "outputs": (results.get("facts") or {}).get("outputs_committed"),
        "faults": (results.get("facts") or {}).get("faults"), "expected": rd.read(EXPECT_FILE, {}, TORN).get("verdict"),
        "exposure": summary_line((results.get("facts") or {}).get("exposure")) if results.get("verdict") else None,
        "started": run.name[:16],
    }


def trends(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    nights: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        nights.setdefault(row["night"] or "(ad hoc)", []).append(row)
    out = []
    for night, members in sorted(nights.items()):
        rates = [r["inputs_per_s"] for r in members if r["inputs_per_s"]]
        counts = {v: sum(1 for r in members if r["verdict"] == v) for v in ("valid", "invalid", "unknown", "incomplete")}
        out.append({"night": night, "runs": len(members), **counts,
                    "unexpected": sum(1 for r in members if r["verdict"] != (r["expected"] or "valid")),
                    "signatures": sum(1 for r in members if r.get("signature")),
                    "median_inputs_per_s": round(statistics.median(rates), 1) if rates else None})
    return out


def render_index(root: Path) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root} is not a directory", "pass the --out directory of kchaos run or kchaos ci nightly")
    rows = [run_row(run, root) for run in reversed(find_runs(root))]  # oldest first
    trend = trends(rows)
    plot = ""
    if len(trend) > 1:
        plot = render_svg(Plot("Across nights", "count / inputs per s", [
            Series("median inputs/s", [(i, t["median_inputs_per_s"]) for i, t in enumerate(trend)]),
            Series("unexpected verdicts", [(i, t["unexpected"]) for i, t in enumerate(trend)]),
        ]))
    html = template_environment().get_template("index.html.j2").render(
        root=str(root), rows=list(reversed(rows)), trend=list(reversed(trend)), plot=plot,
        generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    atomic_write(root / "index.html", html)
    return root / "index.html"
