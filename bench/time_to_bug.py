"""Time to bug: for a hunt campaign and N seeds, the share of seeds whose run detects the anomaly,
and the wall minutes per run and per detection, cut into phases (setup, workload with its faults,
drain, final reads and verification).

Each seed is one ``kchaos run CAMPAIGN --seed S`` through the CLI (the path a user takes), one
after another (two cores: runs side by side would measure each other). A run *detects* when its
verdict is INVALID and, with ``--anomaly``, that anomaly is among its anomaly types. An UNKNOWN
run detects nothing and is counted as such. The load average is printed beside each run.

Detections are also counted by how they were seen (verifier/checks.detection_kind): by the end
state (the committed topics and offsets against the clients' history: what any Kafka user could
check), or only white-box (the brokers' own logs: a split transaction, say) or only by the
observers during the run.

    .venv/bin/python bench/time_to_bug.py hunt-kip890-java --seeds 13 14 15 \\
        [--set cluster.transaction_version=1 ...] [--anomaly split-transaction] [--out DIR]
    .venv/bin/python bench/time_to_bug.py --from-runs RUN_DIR [RUN_DIR ...] [--anomaly ...]

``--from-runs`` summarises run directories that exist (no run is made). The summary is printed
and written to ``OUT/time_to_bug.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.rundir import RunDir  # noqa: E402
from kchaos.verifier.checks import detection_kind  # noqa: E402


def _first_verdict_time(run: Path) -> float | None:
    """When the run's own verification ended: its console log's first "verdict:" line (UTC).
    ``results.json``'s ``verified`` moves when ``kchaos analyze`` checks the run again."""
    from datetime import datetime, timezone

    log = run / "kchaos.log"
    if not log.exists():
        return None
    for line in log.read_text(errors="replace").splitlines():
        if "] verdict:" in line and line.startswith("[kchaos "):
            stamp = line[len("[kchaos "):line.index("]")]
            try:
                return datetime.fromisoformat(stamp).replace(tzinfo=timezone.utc).timestamp()
            except ValueError:
                return None
    return None


def _phases(run: Path) -> dict[str, float] | None:
    """Seconds per phase from the run's harness history, console log and results (None when
    incomplete). The run's clock starts at its first history operation, after the cluster
    started: ``setup`` is the time from there to the workload (epoch ageing included)."""
    results = RunDir(run).results_data()
    if results is None:
        return None
    times: dict[str, float] = {}
    for line in (run / "history" / "harness.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op.get("f") == "phase" and op.get("type") == "ok":
            times.setdefault(op["value"]["phase"], op["time"])
    meta = results["run"]
    started, verified = meta.get("started"), _first_verdict_time(run) or meta.get("verified")
    steady, drain, final = times.get("steady"), times.get("drain"), times.get("final-reads")
    if None in (started, verified, steady, drain, final):
        return None
    return {"setup": steady - started, "workload": drain - steady, "drain": final - drain,
            "final_reads_and_verify": verified - final, "total": verified - started}


def _coverage(run: Path) -> tuple[str | None, dict[str, int]]:
    """The run's Kafka release and the faults it executed, by kind (the harness history's
    ``fault:<kind>`` operations that completed ``ok``; a fault that failed did not happen)."""
    release = ((RunDir(run).campaign_data(None) or {}).get("cluster") or {}).get("kafka_version")
    executed: dict[str, int] = {}
    harness = run / "history" / "harness.jsonl"
    for line in harness.read_text().splitlines() if harness.exists() else ():
        op = json.loads(line)
        f = op.get("f") or ""
        if f.startswith("fault:") and op.get("type") == "ok":
            executed[f[len("fault:"):]] = executed.get(f[len("fault:"):], 0) + 1
    return release, dict(sorted(executed.items()))


def summarise_run(run: Path, anomaly: str | None) -> dict[str, Any]:
    """One run's row: verdict, anomaly types, whether it detected, its phases in seconds, its
    release and the faults it executed."""
    results = RunDir(run).results_data({})
    verdict = results.get("verdict", "none")
    kinds = results.get("anomaly_types", [])
    detected = verdict == "invalid" and (anomaly is None or anomaly in kinds)
    release, faults = _coverage(run)
    return {"run": run.name, "seed": (results.get("run") or {}).get("seed"), "verdict": verdict,
            "anomalies": {k: len(v) for k, v in (results.get("anomalies") or {}).items()},
            "detected": detected, "seen_by": detection_kind(kinds) if detected else None,
            "seconds": _phases(run) if results else None, "release": release, "faults": faults}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Detections of the runs, and wall minutes per run and per detection (None with none)."""
    timed = [r["seconds"]["total"] for r in rows if r["seconds"]]
    detections = sum(1 for r in rows if r["detected"])
    total_min = sum(timed) / 60
    # a run made here is also timed from outside: the CLI's start, the cluster's start, the report
    walls = [r["wall_s"] for r in rows if r.get("wall_s") is not None]
    faults: dict[str, int] = {}
    releases: dict[str, int] = {}
    for r in rows:
        for kind, n in (r.get("faults") or {}).items():
            faults[kind] = faults.get(kind, 0) + n
        if r.get("release"):
            releases[r["release"]] = releases.get(r["release"], 0) + 1
    # what a hunt that found nothing reports (issue 45): runs, minutes, faults executed per kind
    coverage = {"runs_by_release": dict(sorted(releases.items())), "faults_executed": dict(sorted(faults.items())),
                "minutes": round(total_min, 1) if timed else None,
                "verdicts": {v: sum(1 for r in rows if r["verdict"] == v) for v in sorted({r["verdict"] for r in rows})}}
    return {"runs": len(rows), "detected": detections, "coverage": coverage,
            "detected_by": {kind: sum(1 for r in rows if r.get("seen_by") == kind)
                            for kind in ("end-state", "white-box", "read-side")},
            "wall_minutes_per_run": round(sum(walls) / 60 / len(walls), 2) if walls else None,
            "share": round(detections / len(rows), 3) if rows else None,
            "minutes_per_run": round(total_min / len(timed), 2) if timed else None,
            "minutes_per_detection": round(total_min / detections, 2) if detections and timed else None,
            "phase_minutes_mean": {k: round(sum(r["seconds"][k] for r in rows if r["seconds"]) / 60 / len(timed), 2)
                                   for k in ("setup", "workload", "drain", "final_reads_and_verify")} if timed else {}}


def render(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = [f"{'seed':>6}  {'verdict':<8} {'detected':<10} {'min':>5}  {'setup':>5} {'work':>5} {'drain':>5} "
             f"{'read+v':>6}  load  anomalies"]
    for r in rows:
        s = r["seconds"] or {}
        m = {k: f"{s[k] / 60:5.1f}" if k in s else "    -" for k in ("total", "setup", "workload", "drain",
                                                                      "final_reads_and_verify")}
        lines.append(f"{r['seed']!s:>6}  {r['verdict']:<8} {r.get('seen_by') or 'no':<10} {m['total']}  "
                     f"{m['setup']} {m['workload']} {m['drain']} {m['final_reads_and_verify']:>6}  "
                     f"{r.get('load', '-'):>4}  " + (", ".join(f"{k} {n}" for k, n in r["anomalies"].items()) or "-"))
    by = summary.get("detected_by") or {}
    lines.append(f"detected {summary['detected']} of {summary['runs']} (end state {by.get('end-state', 0)}, only "
                 f"white-box {by.get('white-box', 0)}, only read-side {by.get('read-side', 0)}); "
                 f"{summary['minutes_per_run']} min a run; "
                 f"{summary['minutes_per_detection']} min per detection; mean phases (min) {summary['phase_minutes_mean']}")
    cov = summary.get("coverage") or {}
    lines.append(f"coverage: {summary['runs']} runs ({', '.join(f'{k} {n}' for k, n in cov.get('verdicts', {}).items())}) "
                 f"on {', '.join(f'{k} x{n}' for k, n in cov.get('runs_by_release', {}).items()) or 'releases not recorded'}, "
                 f"{cov.get('minutes')} run minutes; faults executed: "
                 + (", ".join(f"{k} {n}" for k, n in cov.get("faults_executed", {}).items()) or "none"))
    return "\n".join(lines)


def run_seed(campaign: str, seed: int, sets: list[str], out: Path) -> tuple[Path | None, bool]:
    """``kchaos run`` for one seed: its run directory (the CLI prints it last on stdout), and
    whether the series was interrupted. Ctrl-C reaches the child too (one process group): it
    winds its run down itself (heal, stop the cluster), so it is waited for, never killed."""
    argv = [sys.executable, "-m", "kchaos.cli", "run", campaign, "--seed", str(seed), "--out", str(out)]
    for s in sets:
        argv += ["--set", s]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    interrupted = False
    while True:
        try:
            stdout, stderr = child.communicate()
            break
        except KeyboardInterrupt:
            interrupted = True
    interrupted = interrupted or child.returncode in (-signal.SIGINT, -signal.SIGTERM, 128 + signal.SIGINT, 128 + signal.SIGTERM)
    path = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    if not path or not Path(path).is_dir():
        print(f"seed {seed}: no run directory (exit {child.returncode}): {stderr.strip()[-400:]}", file=sys.stderr)
        return None, interrupted
    return Path(path), interrupted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("campaign", nargs="?")
    parser.add_argument("--seeds", type=int, nargs="+", default=[])
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument("--anomaly", help="count a run as a detection only when it names this anomaly")
    parser.add_argument("--from-runs", type=Path, nargs="+", default=[])
    parser.add_argument("--out", type=Path, default=Path("time-to-bug"))
    args = parser.parse_args()
    if not args.from_runs and not (args.campaign and args.seeds):
        parser.error("give a campaign and --seeds, or --from-runs")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for run in args.from_runs:
        rows.append(summarise_run(run, args.anomaly))
    for seed in args.seeds:
        started = time.monotonic()
        run, interrupted = run_seed(args.campaign, seed, args.sets, args.out)
        row = summarise_run(run, args.anomaly) if run else {"run": None, "seed": seed, "verdict": "none",
                                                              "anomalies": {}, "detected": False, "seconds": None}
        row["load"] = f"{os.getloadavg()[0]:.1f}"
        row["wall_s"] = round(time.monotonic() - started, 1)
        rows.append(row)
        print(render([row], summarise([row])).splitlines()[1], flush=True)
        if interrupted:
            print(f"interrupted during seed {seed}: the series stops here", file=sys.stderr)
            break
    summary = summarise(rows)
    (args.out / "time_to_bug.json").write_text(json.dumps({"campaign": args.campaign, "sets": args.sets,
                                                           "anomaly": args.anomaly, "rows": rows,
                                                           "summary": summary}, indent=2))
    print(render(rows, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
