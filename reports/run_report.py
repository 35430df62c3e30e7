"""``RUN_DIR/report.html``: one self-contained page per run, rendered from the run directory alone.

    kchaos report RUN_DIR       # (re-)render; `kchaos run` renders it after verifying

Sections: verdict banner with the safety and liveness verdicts and what went wrong (each
anomaly's first case, liveness first); what was tested and how to replay it; timelines with every fault drawn
as a band; one section per anomaly type with each case's evidence and the broker log lines
around it; transactions; LSO lag after heal; the facts behind a valid verdict. A run that never
finished is rendered too, saying so (its results are not claimed).
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.files import atomic_write
from kchaos.reports.plots import Band, Phase, Plot, Series, render_svg
from kchaos.reports.what_ran import seeder_client, workers_client, workload_line
from kchaos.rundir import CLUSTER_FILE, ENVIRONMENT_FILE, FINAL_FILE, METRICS_FILE, REPLAY_FILE, RunDir
from kchaos.text import by_version, cells, durations, human, properties
from kchaos.verifier.attribution import WORDS as ATTRIBUTION_WORDS
from kchaos.verifier.campaign import load_recorded
from kchaos.verifier.model import case_time_and_slots
from kchaos.verifier.exposure import summary_line
from kchaos.verifier.outcome import load_outcome
from kchaos.verifier.results import LIVENESS_CHECKS
from kchaos.workloads.history import pair_operations, read_lines

LOG_WINDOW_S = 2.0
LOG_LINES_PER_NODE = 12


#: a torn file reads as missing: the page shows what it can
TORN = (ValueError,)


@dataclass
class BrokerLog:
    """A broker's server.log indexed by line time, for excerpts around a moment."""

    node: str
    path: Path
    times: list[float]
    lines: list[str]

    @classmethod
    def load(cls, node: str, path: Path) -> "BrokerLog":
        times, lines = [], []
        last = 0.0
        with open(path, errors="replace") as fh:
            for line in fh:
                if line.startswith("[") and len(line) > 24 and line[11] == "T":
                    try:
                        last = time.mktime(time.strptime(line[1:20], "%Y-%m-%dT%H:%M:%S")) + int(line[21:24]) / 1000
                    except ValueError:
                        pass
                times.append(last)
                lines.append(line.rstrip("\n"))
        return cls(node, path, times, lines)

    def around(self, t: float) -> tuple[int, list[str]]:
        lo = bisect.bisect_left(self.times, t - LOG_WINDOW_S)
        hi = bisect.bisect_right(self.times, t + LOG_WINDOW_S)
        return lo + 1, self.lines[lo:min(hi, lo + LOG_LINES_PER_NODE)]


def _fault_bands(ops: list[dict[str, Any]], start: float, end: float) -> list[dict[str, Any]]:
    bands = []
    for op in ops:
        if not op["f"].startswith("fault:"):
            continue
        value = op.get("value") or {}
        resolved = value.get("resolved") or {}
        target = value.get("target", "")
        where = resolved.get("role") or ""
        nodes = resolved.get("nodes")
        label = f"{value.get('kind', op['f'][6:])} {target}" + (f" -> {where}" if where else "") + (
            f" (nodes {','.join(map(str, nodes))})" if nodes else "")
        bands.append({"key": str(len(bands) + 1), "start": op["invoke_time"] - start, "end": (op["complete_time"] or end) - start,
                      "label": label, "outcome": op["outcome"] or "unknown", "value": value})
    return bands


def _step_bands(ops: list[dict[str, Any]], start: float, end: float) -> list[dict[str, Any]]:
    """Planned steps (feature flips, rolling upgrades) drawn like faults, labelled ``step``."""
    return [{"key": f"s{op['value'].get('index')}", "start": op["invoke_time"] - start, "end": max((op["complete_time"] or end), op["invoke_time"] + 0.5) - start,
             "label": f"step {op['value'].get('index')}: {op['value'].get('describe', op['f'])}",
             "outcome": op["outcome"] or "unknown", "value": op["value"]}
            for op in ops if op["f"].startswith("step:")]


#: the harness's phase marks (history ``phase`` operations) and what the report calls them
PHASE_NAMES = {"steady": "workload", "drain": "drain", "final-reads": "final reads"}


def run_phases(ops: list[dict[str, Any]], start: float, end: float) -> list[dict[str, Any]]:
    """The run's phases in seconds from ``start``, in order: setup, the ageing of transactional
    ids (its ``age-epoch`` operations) when there was one, then each phase the harness marked.
    Each phase lasts until the next begins; the last until ``end``."""
    marks: list[tuple[float, str]] = []
    ageing = [op for op in ops if op["f"] == "age-epoch"]
    if ageing:
        marks.append((min(op["invoke_time"] for op in ageing), "id ageing"))
    for op in ops:
        name = PHASE_NAMES.get((op.get("value") or {}).get("phase")) if op["f"] == "phase" else None
        if name:
            marks.append((op["invoke_time"], name))
    marks.sort()
    if not marks:
        return []
    if marks[0][0] - start > 1.0:
        marks.insert(0, (start, "setup"))
    return [{"label": label, "start": t - start, "end": (marks[i + 1][0] if i + 1 < len(marks) else max(end, t)) - start}
            for i, (t, label) in enumerate(marks)]


def group_cases(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cases with one explanation are one finding seen in several outputs (a transaction's
    outputs in two topics, say): one entry each, in first-seen order, with its cases."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        groups.setdefault(case.get("explanation", ""), []).append(case)
    return [{"explanation": explanation, "cases": members} for explanation, members in groups.items()]


def output_places(case: dict[str, Any]) -> list[str]:
    """``topic-partition@offset`` of each output record a case names."""
    return [f"{r['topic']}-{r['partition']}@{r['offset']}" for r in case.get("records") or []
            if isinstance(r, dict) and {"topic", "partition", "offset"} <= r.keys()]


def _certification(run: Path, start: float) -> dict[str, Any] | None:
    cert = RunDir(run).certification_data(TORN)
    if not cert:
        return None
    phases = {p["name"]: p for p in cert.get("phases") or []}
    rows = []
    for row in cert.get("rows") or []:
        phase = phases.get(row["phase"], {})
        rows.append({**row, "from": (phase.get("start") or start) - start, "to": (phase.get("end") or start) - start,
                     "transaction_version": phase.get("transaction_version"), "kafka": phase.get("kafka_versions")})
    steps = [{**s, "from": (s.get("start") or start) - start, "to": ((s.get("end") or start) - start) if s.get("end") else None}
             for s in cert.get("steps") or []]
    return {**cert, "rows": rows, "steps": steps}


def _plots(metrics: dict[str, Any], bands: list[dict[str, Any]], phases: list[dict[str, Any]]) -> list[str]:
    seconds = metrics.get("seconds") or []
    if not seconds:
        return []
    fault_bands = [Band(b["start"], b["end"], b["label"], b["key"]) for b in bands]
    marks = [Phase(p["start"], p["end"], p["label"]) for p in phases]

    def series(label: str, key: str) -> Series:
        return Series(label, [(s["second"], s.get(key)) for s in seconds])

    return [render_svg(p) for p in (
        Plot("Throughput", "inputs/s", [series("inputs committed", "inputs")], fault_bands, marks),
        Plot("Commit latency", "ms", [series("p50", "commit_p50_ms"), series("p99", "commit_p99_ms")], fault_bands,
             marks),
        Plot("Aborts and errors", "per second", [series("aborts", "aborts"), series("errors", "errors"),
                                                 series("retries", "retries"), series("restarts", "restarts")],
             fault_bands, marks),
    )]


def evidence_rows(case: dict[str, Any]) -> list[dict[str, Any]]:
    """A case's evidence as rows of a table: a list of records becomes a nested table, anything else text."""
    return [{"key": key.replace("_", " "), "table": cells(value), "text": human(value)}
            for key, value in case.items() if key != "explanation"]


def _observers(run: Path, final: dict[str, Any], start: float, bands: list[dict[str, Any]],
               phases: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the observers read, per partition against what the final log committed, and their
    reads per second over the run (a plot with the fault bands)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    summary = final.get("observers")
    path = run / "observers" / "observations.parquet"
    if not summary or not path.exists():
        return None
    table = pq.read_table(path, columns=["observer", "topic", "partition", "time"])
    seen: dict[tuple[str, int], dict[int, int]] = {}
    for row in table.group_by(["topic", "partition", "observer"]).aggregate([("time", "count")]).to_pylist():
        seen.setdefault((row["topic"], row["partition"]), {})[row["observer"]] = row["time_count"]
    partitions = []
    for topic in sorted({t for t, _ in seen} | {p.name.split(".")[0] for p in (run / "topics").glob("*.committed.parquet")
                                                  if not p.name.startswith("__")}):
        committed_path = run / "topics" / f"{topic}.committed.parquet"
        counts: dict[int, int] = {}
        if committed_path.exists():
            for row in pq.read_table(committed_path, columns=["partition"]).group_by("partition").aggregate(
                    [("partition", "count")]).to_pylist():
                counts[row["partition"]] = row["partition_count"]
        for partition in sorted(set(counts) | {p for t, p in seen if t == topic}):
            by_observer = seen.get((topic, partition), {})
            partitions.append({"partition": f"{topic}-{partition}", "committed": counts.get(partition, 0),
                               "read": [by_observer.get(o["observer"], 0) for o in summary.get("observers") or []]})
    plot = None
    if table.num_rows:
        seconds = pc.floor(pc.subtract(table.column("time"), start)).cast("int64")
        per = {}
        for observer, second in zip(table.column("observer").to_pylist(), seconds.to_pylist()):
            per.setdefault(observer, {}).setdefault(second, 0)
            per[observer][second] += 1
        last = max(seconds.to_pylist())
        series = [Series(f"observer {o}", [(s, per[o].get(s, 0)) for s in range(0, last + 1)]) for o in sorted(per)]
        plot = render_svg(Plot("Observer reads", "records/s", series,
                               [Band(b["start"], b["end"], b["label"], b["key"]) for b in bands],
                               [Phase(p["start"], p["end"], p["label"]) for p in phases]))
    return {"summary": summary, "partitions": partitions, "plot": plot}


def gather(run: Path) -> dict[str, Any]:
    """Everything the page shows, from the run directory alone."""

    campaign = load_recorded(run)
    rd = RunDir(run)
    status = rd.status(TORN)
    results = rd.results_data(None, TORN) if status.complete else None
    outcome = load_outcome(run) if results else None  # the verdict as every reader gets it
    metrics = rd.read(METRICS_FILE, {}, TORN)
    final = rd.read(FINAL_FILE, {}, TORN)
    ops = pair_operations(list(read_lines(run / "history.jsonl"))) if (run / "history.jsonl").exists() else []
    start = metrics.get("start_time") or (min((op["invoke_time"] for op in ops), default=0.0))
    end = max((op["complete_time"] or op["invoke_time"] for op in ops), default=start)
    bands = _fault_bands(ops, start, end)
    phases = run_phases(ops, start, end)
    logs = []
    for log in sorted((run / "cluster").glob("node-*/logs/server.log")):
        logs.append(BrokerLog.load(log.parent.parent.name, log))
    anomalies = []
    for name, cases in sorted(((results or {}).get("anomalies") or {}).items()):
        rendered = []
        for group in group_cases(cases):
            first = group["cases"][0]
            t, _ = case_time_and_slots(first)
            excerpts = []
            if t is not None:
                for log in logs:
                    first_line, lines = log.around(t)
                    if lines:
                        excerpts.append({"node": log.node, "path": str(log.path.relative_to(run)), "line": first_line,
                                         "lines": lines})
            rendered.append({"explanation": group["explanation"], "time": t - start if t else None,
                             "count": len(group["cases"]),
                             "outputs": [place for case in group["cases"] for place in output_places(case)],
                             "evidence": [evidence_rows(case) for case in group["cases"]],
                             "excerpts": excerpts})
        count = (results or {}).get("checks", {}).get(name, {}).get("note", "")
        anomalies.append({"name": name, "cases": rendered, "count": count,
                          "attribution": ((results or {}).get("attribution") or {}).get("by_anomaly", {}).get(name)})
    # the first screen: each anomaly's first case, the liveness ones first (what stopped, then what broke)
    headline = [{"name": a["name"], "family": "liveness" if a["name"] in LIVENESS_CHECKS else "safety",
                 "count": a["count"], "first": a["cases"][0]["explanation"] if a["cases"] else "",
                 "more": len(a["cases"]) - 1}
                for a in sorted(anomalies, key=lambda a: (a["name"] not in LIVENESS_CHECKS, a["name"]))]
    stable = rd.read("topics/stable_offsets.json", {}, TORN)
    lso_lag = [{"partition": f"{topic}-{p}", "high": v["high"], "lso": v["lso"], "lag": v["high"] - v["lso"]}
               for topic, parts in sorted(stable.items()) for p, v in sorted(parts.items(), key=lambda kv: int(kv[0]))]
    cluster_info = rd.read(CLUSTER_FILE, {}, TORN)
    facts = (results or {}).get("facts") or {}
    environment = rd.read(ENVIRONMENT_FILE, {}, TORN)
    # the run's confluent-kafka: a run made before environment.json named it apart had it as "client"
    confluent = environment.get("confluent_kafka") or environment.get("client") or "confluent-kafka (librdkafka)"
    return {
        "run": run.name, "path": str(run), "campaign": campaign, "status": status, "results": results,
        "verdict": outcome.judgement if outcome else ("incomplete" if not status.complete else "unknown"),
        # a known Kafka bug's signature the run shows: the outcome's one line says it on the first screen
        "signatures": list(outcome.signatures) if outcome else [],
        "verdict_line": outcome.summary() if outcome else None,
        "required_not_checked": outcome.required_not_checked if outcome else {},
        "fault_coverage": outcome.fault_coverage if outcome else None,
        # what each fault overlapped of the work (verifier/exposure.py), by the schedule's index
        "exposure": facts.get("exposure"),
        "exposure_of": {f["index"]: f for f in (facts.get("exposure") or {}).get("faults") or []},
        "exposure_line": summary_line(facts.get("exposure")) if facts.get("exposure") else None,
        "replay": rd.read(REPLAY_FILE, {}, TORN), "seed": (run / "seed").read_text().strip() if (run / "seed").exists() else None,
        "environment": environment, "cluster_info": cluster_info,
        "what_ran": {"client": workers_client(campaign.workload, confluent), "workload": workload_line(campaign.workload),
                     "seeder": seeder_client(confluent)},
        "plots": _plots(metrics, bands + _step_bands(ops, start, end), phases), "phases": phases, "faults": bands, "totals": metrics.get("totals") or {},
        "anomalies": anomalies, "attribution_words": ATTRIBUTION_WORDS, "headline": headline, "liveness_checks": LIVENESS_CHECKS, "facts": facts,
        "lso_lag": lso_lag,
        "broker_transactions": final.get("broker_transactions") or {},
        "observers": _observers(run, final, start, bands, phases),
        "recovery": final.get("recovery"),
        "checks": (results or {}).get("checks") or {}, "not_checked": (results or {}).get("not_checked") or {},
        "errors": (results or {}).get("errors") or [], "cross_check": (results or {}).get("cross_check"),
        "spark": (results or {}).get("spark"), "heal": rd.read("heal.json", None, TORN),
        "certification": _certification(run, start) if status.complete else None,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def template_environment() -> Any:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("kchaos.reports", "templates"), autoescape=select_autoescape(["html", "j2"]),
                      trim_blocks=True, lstrip_blocks=True)
    from jinja2 import Undefined

    env.filters["human"] = lambda v: "-" if isinstance(v, Undefined) else human(v)
    env.filters["durations"] = durations
    env.filters["by_version"] = by_version
    env.filters["properties"] = properties
    env.filters["cells"] = lambda v: None if isinstance(v, Undefined) else cells(v)
    return env


def render_run_report(run: Path) -> Path:
    """Write ``RUN_DIR/report.html`` (atomically) and return its path."""
    run = Path(run)
    load_recorded(run)  # not a run directory, or an unreadable record: ConfigError (exit 3) before rendering
    html = template_environment().get_template("run.html.j2").render(**gather(run))
    atomic_write(run / "report.html", html)
    return run / "report.html"
