"""Per-second metrics derived from the history: throughput, commit latency, aborts, retries,
rebalances, restarts. Written to ``RUN_DIR/metrics.json`` at the end of a run."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def compute_metrics(ops: list[dict[str, Any]]) -> dict[str, Any]:
    if not ops:
        return {"seconds": [], "totals": {}}
    start = min(op["invoke_time"] for op in ops)
    buckets: dict[int, dict[str, Any]] = defaultdict(lambda: {"inputs": 0, "commits": 0, "aborts": 0, "retries": 0,
                                                              "rebalances": 0, "restarts": 0, "errors": 0,
                                                              "latencies": []})
    sends: dict[tuple[str, int], int] = {}
    for op in ops:
        if op["f"] == "send":
            sends[(op["process"], op["value"].get("txn_seq"))] = len(op["value"].get("inputs", []))
    totals = defaultdict(int)
    latencies_all: list[float] = []
    for op in ops:
        t = op["complete_time"] or op["invoke_time"]
        b = buckets[int(t - start)]
        f, outcome = op["f"], op["outcome"]
        if f in ("commit", "commit_offsets") and outcome == "ok":
            b["commits"] += 1
            b["inputs"] += sends.get((op["process"], op["value"].get("txn_seq")), 0)
            latency = (op["complete_time"] - op["invoke_time"]) * 1000
            b["latencies"].append(latency)
            latencies_all.append(latency)
            b["retries"] += max(0, int(op["value"].get("attempts", 1)) - 1)
        elif f == "abort" and outcome == "ok":
            b["aborts"] += 1
        elif f == "assign":
            b["rebalances"] += 1
        elif f == "worker-restart":
            b["restarts"] += 1
        if outcome in ("fail", "info") and f not in ("worker-exit",):
            b["errors"] += 1
    seconds = []
    for second in range(0, max(buckets) + 1):
        b = buckets.get(second) or {"inputs": 0, "commits": 0, "aborts": 0, "retries": 0, "rebalances": 0,
                                    "restarts": 0, "errors": 0, "latencies": []}
        row = {k: v for k, v in b.items() if k != "latencies"}
        row.update({"second": second, "commit_p50_ms": _percentile(b["latencies"], 0.5),
                    "commit_p99_ms": _percentile(b["latencies"], 0.99)})
        for k in ("inputs", "commits", "aborts", "retries", "rebalances", "restarts", "errors"):
            totals[k] += row[k]
        seconds.append(row)
    duration = max(1, len(seconds))
    return {
        "start_time": start,
        "seconds": seconds,
        "totals": {**totals, "duration_s": duration, "inputs_per_s": round(totals["inputs"] / duration, 1),
                   "commit_p50_ms": _percentile(latencies_all, 0.5), "commit_p99_ms": _percentile(latencies_all, 0.99)},
    }
