"""The time a run spends after its workload (heal, drain, final reads, verification, the cluster's
stop and the report), for two checkouts of kchaos side by side: each seed is run by one checkout
and then by the other, one run at a time (two cores: runs side by side would measure each other),
the load average beside each.

    .venv/bin/python bench/run_overhead.py --before /tmp/before/.venv/bin/python --seeds 21 22 \\
        [--campaign default] [--set K=V ...] [--out DIR]
    .venv/bin/python bench/run_overhead.py --from-runs before:RUN_DIR after:RUN_DIR ...

``--before`` is the interpreter of the other checkout's environment (a worktree of the commit to
compare with, installed into its own venv); the runs "after" use this interpreter. The phases come
from each run's own console log (``kchaos.log``), whose lines both sides print:

- heal: "healing:" (the workload phase ended) to "cluster healthy again";
- drain: to "drained" (or "drain timed out");
- final reads: to "verifying with Spark";
- verify: to the first "verdict:" line;
- stop and report: to "report:".

The sum is the overhead after the workload. Printed as a table and written to
``OUT/run_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.files import read_json  # noqa: E402
from kchaos.rundir import SPARK_RESULTS_FILE, RunDir  # noqa: E402

#: (phase, the console line that ends it), in the order a run prints them
MARKS = [("heal", ("cluster healthy again", "cluster NOT healthy")),
         ("drain", ("drained", "drain timed out")),
         ("final_reads", ("verifying with Spark",)),
         ("verify", ("verdict:",)),
         ("stop_and_report", ("report:",))]
START = "healing:"


def _stamp(line: str) -> float | None:
    if not line.startswith("[kchaos "):
        return None
    try:
        return datetime.fromisoformat(line[len("[kchaos "):line.index("]")]).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def phases(run: Path) -> dict[str, float] | None:
    """Seconds per phase after the workload, from the run's console log; None when it lacks a mark."""
    lines = [(t, line[line.index("]") + 2:]) for line in (run / "kchaos.log").read_text(errors="replace").splitlines()
             if (t := _stamp(line)) is not None]
    start = next((t for t, text in lines if text.startswith(START)), None)
    if start is None:
        return None
    out: dict[str, float] = {}
    at = start
    for phase, ends in MARKS:
        end = next((t for t, text in lines if t >= at and text.startswith(ends)), None)
        if end is None:
            return None
        out[phase], at = round(end - at, 1), end
    out["overhead"] = round(at - start, 1)
    return out


def summarise_run(side: str, run: Path) -> dict[str, Any]:
    record = RunDir(run)
    results = record.results_data({})
    spark = read_json(run / SPARK_RESULTS_FILE, {})
    final = read_json(run / "final.json", {})  # the load average at the final reads
    return {"side": side, "run": str(run), "seed": (results.get("run") or {}).get("seed"),
            "verdict": results.get("verdict"), "seconds": phases(run),
            "spark": (spark.get("spark") or {}).get("timings"), "load": final.get("load_average")}


def run_one(python: str, campaign: str, seed: int, sets: list[str], out: Path) -> tuple[Path | None, float]:
    """One ``kchaos run`` by ``python``'s kchaos: its run directory (the CLI prints it last) and wall seconds."""
    argv = [python, "-m", "kchaos.cli", "run", campaign, "--seed", str(seed), "--out", str(out)]
    for s in sets:
        argv += ["--set", s]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    path = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if not path or not Path(path).is_dir():
        print(f"seed {seed} ({python}): no run directory (exit {done.returncode}): {done.stderr.strip()[-400:]}",
              file=sys.stderr)
        return None, time.monotonic() - started
    return Path(path), time.monotonic() - started


def render(rows: list[dict[str, Any]]) -> str:
    names = [p for p, _ in MARKS] + ["overhead"]
    lines = [f"{'side':<7} {'seed':>5} {'verdict':<8} " + " ".join(f"{n[:11]:>11}" for n in names) + "  load (1/5/15)"]
    for r in rows:
        s = r["seconds"] or {}
        lines.append(f"{r['side']:<7} {r['seed']!s:>5} {r['verdict']!s:<8} "
                     + " ".join(f"{s.get(n, float('nan')):>11.1f}" for n in names)
                     + f"  {'/'.join(str(x) for x in (r.get('load') or [])) or '-'}")
    for side in ("before", "after"):
        timed = [r["seconds"] for r in rows if r["side"] == side and r["seconds"]]
        if timed:
            lines.append(f"{side} mean over {len(timed)}: "
                         + ", ".join(f"{n} {sum(t[n] for t in timed) / len(timed):.1f}s" for n in names))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="the other checkout's Python (its venv's bin/python)")
    parser.add_argument("--campaign", default="default")
    parser.add_argument("--seeds", type=int, nargs="+", default=[])
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument("--from-runs", nargs="+", default=[], help="SIDE:RUN_DIR, SIDE before or after")
    parser.add_argument("--out", type=Path, default=Path("run-overhead"))
    args = parser.parse_args()
    if not args.from_runs and not (args.before and args.seeds):
        parser.error("give --before and --seeds, or --from-runs")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [summarise_run(side, Path(path)) for side, path in (entry.split(":", 1) for entry in args.from_runs)]
    for seed in args.seeds:
        for side, python in (("before", args.before), ("after", sys.executable)):
            run, wall = run_one(python, args.campaign, seed, args.sets, args.out / side)
            if run is not None:
                rows.append({**summarise_run(side, run), "wall_s": round(wall, 1)})
                print(render(rows[-1:]).splitlines()[-1], flush=True)
    (args.out / "run_overhead.json").write_text(json.dumps(rows, indent=1))
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
