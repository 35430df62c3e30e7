"""The release table of a matrix night: one row per run, release x client x transaction.version
-> verdict, anomalies, transactions, late requests, seed, run directory.

Read from what each run recorded (``campaign.json``, ``results.json``), never from the matrix
file, so a row says what ran. Rows of runs that ended without results say so; a missing figure
is ``-``, never zero. Written as ``releases.md`` beside the night's ``junit.xml`` and in
``summary.json`` (``releases``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kchaos.files import atomic_write
from kchaos.reports.what_ran import app_name, native_library_ran
from kchaos.rundir import ENVIRONMENT_FILE, RunDir

COLUMNS = ("release", "client", "TV", "seed", "verdict", "anomalies", "committed txns",
           "late accepted / ended / against", "run")


def client_of(workload: dict[str, Any], environment: dict[str, Any] | None = None) -> str:
    """The client a row names: a user's app by its name; kchaos' workers by the clients and releases
    the run recorded (environment.json's ``fleet``: ``java 4.2.1``, a fleet as ``confluent 2.16.1 +
    java 3.9.1``, labels of workloads/registry.py); for a run recorded before that, a native client's
    worker by its library release (environment.json's ``workers``), the Java drivers by their
    kafka-clients release, else the kind."""
    if workload.get("external_command"):
        return f"app {app_name(workload['external_command'])}"
    fleet = (environment or {}).get("fleet")
    if fleet:
        return " + ".join(str(group.get("label")) for group in fleet)
    native = native_library_ran((environment or {}).get("workers"))
    if native:
        return native
    client = str(workload.get("client", "?"))
    if client == "fleet" and workload.get("fleet"):
        return " + ".join(
            f"{e.get('client')} {e.get('version') or (workload.get('java_client_version') if e.get('client') == 'java' else '')}"
            .strip() for e in workload["fleet"] if isinstance(e, dict))
    if client in ("java", "streams", "external") and workload.get("java_client_version"):
        return f"{client} {workload['java_client_version']}"
    return client


def release_row(run_dir: Path, name: str, verdict: str) -> dict[str, Any]:
    """One run's row; ``verdict`` is the matrix' (a harness error has no results to read)."""
    rd = RunDir(run_dir)
    campaign = rd.campaign_data(None) or {}  # as recorded (a partial one too): no typed Campaign here
    results = rd.results_data() or {}
    cluster, workload = campaign.get("cluster") or {}, campaign.get("workload") or {}
    facts = results.get("facts") or {}
    late = facts.get("late_requests") or {}
    seed = (results.get("run") or {}).get("seed")
    return {
        "name": name,
        "release": cluster.get("kafka_version"),
        "client": client_of(workload, rd.read(ENVIRONMENT_FILE, None, tolerate=(ValueError,)))
        if workload else None,
        "transaction_version": cluster.get("transaction_version"),
        "seed": seed,
        "verdict": verdict,
        "anomalies": {kind: len(cases) for kind, cases in sorted((results.get("anomalies") or {}).items())},
        "committed": (facts.get("transactions") or {}).get("committed"),
        "late": {key: late.get(key) for key in ("accepted", "ended_a_transaction", "ended_against_the_client")}
        if late else None,
        "run_dir": str(run_dir),
    }


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def render_markdown(rows: list[dict[str, Any]], title: str) -> str:
    ordered = sorted(rows, key=lambda r: (_cell(r["release"]), _cell(r["client"]),
                                          _cell(r["transaction_version"]), _cell(r["seed"])))
    lines = [f"# {title}", "", "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for row in ordered:
        anomalies = ", ".join(f"{kind} {count}" for kind, count in row["anomalies"].items()) or "-"
        late = row["late"]
        late_cell = " / ".join(_cell(late[k]) for k in ("accepted", "ended_a_transaction",
                                                       "ended_against_the_client")) if late else "-"
        verdict = row["verdict"].upper() if row["verdict"] == "invalid" else row["verdict"]
        lines.append("| " + " | ".join([
            _cell(row["release"]), _cell(row["client"]), _cell(row["transaction_version"]), _cell(row["seed"]),
            verdict, anomalies, _cell(row["committed"]), late_cell, f"`{Path(row['run_dir']).name}`",
        ]) + " |")
    return "\n".join(lines) + "\n"


def write_release_table(rows: list[dict[str, Any]], path: Path, title: str) -> Path:
    atomic_write(path, render_markdown(rows, title))
    return path
