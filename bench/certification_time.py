"""How long a certification run takes beside the default campaign, each seed's runs one after the
other on this machine (two cores: runs side by side would measure each other), the load average
beside each. Issue 72's target: a certification run in at most 10 minutes.

    .venv/bin/python bench/certification_time.py --seeds 50 51 \\
        [--campaigns default certify-tv-flip certify-tv-flip-exposed] [--out DIR]
    .venv/bin/python bench/certification_time.py --from-runs RUN_DIR ...

Each run's time is cut at its own console lines (``kchaos.log``): setup ("run directory" to the
first "faults: 0s elapsed": the cluster's start, topics, workers), workload (to "healing:"; past
the campaign's ``duration_s`` when faults waited out their pacing or a step ran on), then the
phases after it as ``bench/run_overhead.py`` cuts them (heal, drain, final reads, verify, stop and
report). Printed as a markdown table and written to ``OUT/certification_time.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.run_overhead import _stamp, phases, run_one  # noqa: E402
from kchaos.files import read_json  # noqa: E402
from kchaos.rundir import RunDir  # noqa: E402

#: the console lines that open and close the setup and the workload
OPENED, WORKLOAD, HEALING = "run directory", "faults: 0s elapsed", "healing:"
COLUMNS = ("setup", "workload", "heal", "drain", "final_reads", "verify", "stop_and_report")


def timeline(run: Path) -> dict[str, float] | None:
    """Seconds per phase of a whole run, from its console log; None when a mark is missing."""
    lines = [(t, line[line.index("]") + 2:]) for line in (run / "kchaos.log").read_text(errors="replace").splitlines()
             if (t := _stamp(line)) is not None]
    opened = next((t for t, text in lines if text.startswith(OPENED)), None)
    started = next((t for t, text in lines if text.startswith(WORKLOAD)), None)
    healing = next((t for t, text in lines if text.startswith(HEALING)), None)
    after = phases(run)
    if None in (opened, started, healing) or after is None:
        return None
    out = {"setup": round(started - opened, 1), "workload": round(healing - started, 1), **after}
    out["total"] = round(out["setup"] + out["workload"] + after["overhead"], 1)
    return out


def summarise(run: Path) -> dict[str, Any]:
    record = RunDir(run)
    results = record.results_data({})
    campaign = record.campaign_data({})
    cert = record.certification_data() or {}
    final = read_json(run / "final.json", {})  # the load average at the final reads
    return {"run": str(run), "campaign": campaign.get("name"), "seed": (results.get("run") or {}).get("seed"),
            "planned_workload_s": (campaign.get("run") or {}).get("duration_s"),
            "verdict": results.get("verdict"), "certification": cert.get("overall"),
            "seconds": timeline(run), "load": final.get("load_average")}


def render(rows: list[dict[str, Any]]) -> str:
    head = ["campaign", "seed", "verdict", "gate", *COLUMNS, "all (min)", "wall (min)", "load at the final reads"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        s = r["seconds"] or {}
        workload = f"{s['workload']:.0f} (of {r['planned_workload_s']})" if "workload" in s else "-"
        cells = [r["campaign"] or "?", str(r["seed"]), str(r["verdict"]), (r["certification"] or "-").upper(),
                 f"{s['setup']:.0f}" if "setup" in s else "-", workload,
                 *(f"{s[c]:.0f}" if c in s else "-" for c in COLUMNS[2:]),
                 f"**{s['total'] / 60:.1f}**" if "total" in s else "-",
                 f"{r['wall_s'] / 60:.1f}" if r.get("wall_s") else "-",
                 "/".join(str(x) for x in (r.get("load") or [])) or "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[])
    parser.add_argument("--campaigns", nargs="+", default=["default", "certify-tv-flip"])
    parser.add_argument("--from-runs", nargs="+", default=[], help="run directories already made")
    parser.add_argument("--out", type=Path, default=Path("certification-time"))
    args = parser.parse_args()
    if not args.from_runs and not args.seeds:
        parser.error("give --seeds, or --from-runs")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [summarise(Path(path)) for path in args.from_runs]
    for seed in args.seeds:
        for campaign in args.campaigns:
            started = time.monotonic()
            run, _ = run_one(sys.executable, campaign, seed, [], args.out / campaign)
            if run is not None:
                rows.append({**summarise(run), "wall_s": round(time.monotonic() - started, 1)})
                print(render(rows[-1:]).splitlines()[-1], flush=True)
    (args.out / "certification_time.json").write_text(json.dumps(rows, indent=1))
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
