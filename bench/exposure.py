"""Fault exposure of stored runs, side by side: per fault kind, the committed transactions whose
life overlapped its windows; the share of the run's committed transactions under any fault; the
stalls; the wall time of the run, its drain, and the load average beside them.

    .venv/bin/python bench/exposure.py RUN_DIR [RUN_DIR ...] [--kinds kill partition latency] [--json]

Measured from each run's history with the verifier's own function (verifier/exposure.py), so a
run made before exposure was recorded (landed main before issue 59) is measured the same way as
one made after: the "before" and "after" rows of docs/benchmarks.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.rundir import ENVIRONMENT_FILE, FINAL_FILE, RunDir  # noqa: E402
from kchaos.verifier.exposure import exposure, overlapping_share  # noqa: E402
from kchaos.verifier.model import HistoryIndex, read_ops  # noqa: E402


def measure(run: Path, kinds: list[str]) -> dict[str, Any]:
    history = HistoryIndex(read_ops(run))
    rd = RunDir(run)
    final = rd.read(FINAL_FILE, {})
    found = exposure(history, 10.0, bool(final.get("drained", True)))
    results = rd.results_data({})
    phases = {op["value"].get("phase"): op["invoke_time"] for op in history.ops
              if op["process"] == "harness" and op["f"] == "phase"}
    times = [t for op in history.ops for t in (op["invoke_time"], op["complete_time"]) if t is not None]
    share = overlapping_share(history, kinds)
    return {"run": run.name, "campaign": (rd.campaign_data({}) or {}).get("name"),
            "verdict": results.get("verdict"), "anomalies": results.get("anomaly_types") or [],
            "committed": found["committed"],
            "by_kind": {k: (found["kinds"].get(k) or {}).get("committed", 0) for k in kinds},
            "other_kinds": {k: v["committed"] for k, v in found["kinds"].items() if k not in kinds},
            "share_of_kinds": None if share is None else round(share, 3),
            "share_any_fault": found["share_overlapping"],
            "stalls": found["stalls"]["count"], "longest_stall_s": found["stalls"]["longest_s"],
            "workload_s": round(phases["drain"] - phases["steady"], 1) if {"drain", "steady"} <= phases.keys() else None,
            "drain_s": round(phases["final-reads"] - phases["drain"], 1) if {"final-reads", "drain"} <= phases.keys()
            else None,
            "history_s": round(max(times) - min(times), 1) if times else None,
            "load_average": {"start": (rd.read(ENVIRONMENT_FILE, {}) or {}).get("load_average"),
                             "end": final.get("load_average")}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--kinds", nargs="+", default=["kill", "partition", "latency"],
                        help="the kinds whose windows make the share (the default campaign's requirement)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(run, args.kinds) for run in args.runs]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    head = ["run", "verdict", "committed", *args.kinds, "share", "any fault", "stalls", "longest", "workload", "drain",
            "load"]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for r in rows:
        load = r["load_average"]
        print("| " + " | ".join(str(x) for x in (
            r["run"], r["verdict"] + (f" ({', '.join(r['anomalies'])})" if r["anomalies"] else ""), r["committed"],
            *(r["by_kind"][k] for k in args.kinds),
            "-" if r["share_of_kinds"] is None else f"{r['share_of_kinds']:.0%}",
            "-" if r["share_any_fault"] is None else f"{r['share_any_fault']:.0%}", r["stalls"],
            f"{r['longest_stall_s']}s", f"{r['workload_s']}s", f"{r['drain_s']}s",
            f"{(load.get('start') or ['-'])[0]} / {(load.get('end') or ['-'])[0]}")) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
