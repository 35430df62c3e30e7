"""A run's verdict, decided and written in one place.

:func:`judge_run` is the one entry point from a stored run directory to an exit code: it checks
the run (verifier/verify.py), computes its metrics, certifies it when it has planned steps
(verifier/certify.py), writes ``results.json``, ``certification.json`` and the final
``status.json``, and returns the run's typed :class:`~kchaos.verifier.outcome.Outcome` (its exit
code: 0 valid / pass, 1 invalid / fail, 2 unknown; a certification's own where the run has one).
``kchaos run`` calls it while the cluster is still up (the Spark job then reads the topics
through Kafka); ``kchaos analyze`` calls it on a stored run. Nothing else writes a verdict.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import ValidationError

from kchaos.clusters.spec import describe_validation_error
from kchaos import kchaos_version
from kchaos.errors import VERDICT_EXIT, ConfigError
from kchaos.log import say
from kchaos.text import by_version, counts
from kchaos.rundir import CLUSTER_FILE, ENVIRONMENT_FILE, FINAL_FILE, HISTORY_FILE, METRICS_FILE, RunDir
from kchaos.verifier.attribution import attribute
from kchaos.verifier.campaign import Campaign
from kchaos.verifier.certify import certify, switch_lines
from kchaos.verifier.exposure import summary_line
from kchaos.verifier.markers import signatures, signatures_line
from kchaos.verifier.spec import VerifierSpec
from kchaos.verifier.model import run_seed
from kchaos.verifier.outcome import Outcome, outcome_of
from kchaos.verifier.verify import SparkJob, verify_run, write_results
from kchaos.workloads.history import pair_operations, read_lines
from kchaos.workloads.metrics import compute_metrics
from kchaos.workloads.registry import library_label



def verifier_spec(campaign: Campaign, overrides: dict[str, Any] | None) -> VerifierSpec:
    """The campaign's ``[verifier]`` table with ``overrides`` (``kchaos analyze --engine ...``)
    applied for this check only; ConfigError when they do not validate."""
    if not overrides:
        return campaign.verifier
    try:
        return VerifierSpec.model_validate({**campaign.verifier.model_dump(), **overrides})
    except ValidationError as exc:
        raise ConfigError(f"bad verifier settings: {describe_validation_error(exc, 'verifier')}") from None


#: version of results.json's layout; raised when a field changes meaning or moves
RESULTS_SCHEMA_VERSION = 2


def run_block(run: RunDir, campaign: Campaign, ops: list[dict[str, Any]] | None, exit_code: int,
              checker: str, fault_coverage: dict[str, Any] | None = None,
              exposure: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a CI system needs about the run, in results.json itself (no other file to join)."""
    cluster = run.read(CLUSTER_FILE, {}) or {}
    environment = run.read(ENVIRONMENT_FILE, {}) or {}
    times = [t for op in ops or [] for t in (op["invoke_time"], op["complete_time"]) if t is not None]
    fleet = ran_clients(campaign, environment)
    return {"schema_version": RESULTS_SCHEMA_VERSION, "kchaos_version": kchaos_version(), "run_id": run.path.name,
            "campaign": campaign.name, "seed": run_seed(run.path, campaign),
            "kafka_version": cluster.get("kafka_version") or campaign.cluster.kafka_version,
            "kafka_tools_version": cluster.get("admin_tools_version") or cluster.get("kafka_version"),
            "backend": campaign.cluster.backend, "clients": [g["library"] for g in fleet],
            "fleet": [{k: g[k] for k in ("client", "version", "label", "slots")} for g in fleet],
            "started": min(times, default=None), "ended": max(times, default=None), "verified": time.time(),
            "checker": checker, "exit_code": exit_code, "faults": fault_coverage,
            "exposure": _exposure_block(exposure)}


def ran_clients(campaign: Campaign, environment: dict[str, Any]) -> list[dict[str, Any]]:
    """Every client and release the run's workers ran, with its slots: as environment.json recorded
    them (the run's own installed releases), else from the campaign (workloads/registry.py). A
    user's app is one entry, named as the environment names it."""
    if campaign.workload.external_command:
        return [{"client": "app", "version": None, "label": "app", "slots": [],
                 "library": environment.get("client") or "the user's app"}]
    if environment.get("fleet"):
        return [dict(g) for g in environment["fleet"]]
    confluent = environment.get("client") or "confluent-kafka (librdkafka)"
    return [{"client": slot.client, "version": slot.version, "label": slot.label, "slots": slots,
             "library": confluent if slot.client == "confluent" else library_label(slot.client, slot.version)}
            for slot, slots in campaign.workload.fleet_groups()]


def _exposure_block(measured: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run block's exposure: per fault kind the committed transactions its windows overlapped,
    the share of all committed transactions under a fault, the stalls, and the one line."""
    if not measured:
        return None
    return {"committed_by_kind": {k: v["committed"] for k, v in sorted(measured["kinds"].items())},
            "committed": measured["committed"], "share_overlapping": measured["share_overlapping"],
            "stalls": (measured.get("stalls") or {}).get("count", 0), "summary": summary_line(measured)}


def row_line(row: dict[str, Any]) -> str:
    """One certification row as the console and the nightly say it."""
    exposure = (row.get("exposure") or {}).get("committed_by_kind") or {}
    return (f"{row['verdict']:14} {row['client']:18} {row['phase']}{'' if row.get('gating', True) else ' (baseline)'}: "
            f"{row['committed_transactions']} committed"
            + (f", protocol {row['protocol']['seen']}" if row.get("protocol") else "")
            + (f" ({by_version(row['client_transaction_versions'])})" if row.get("client_transaction_versions") else "")
            + (f", under faults {', '.join(f'{k} {v}' for k, v in exposure.items())}" if exposure else "")
            + (f", {row['case_count']} anomaly cases" if row.get("case_count") else "")
            + (f"; {row['note']}" if row.get("note") and row["verdict"] != "valid" else ""))


def judge_run(run: RunDir, campaign: Campaign, bootstrap: str | None = None,
              overrides: dict[str, Any] | None = None, spark_job: SparkJob | None = None) -> Outcome:
    """Check a run directory, certify it when it has steps, write the results and the final
    status; return the outcome. ``bootstrap``: a live cluster the Spark job reads the topics
    from; ``spark_job``: that job, started ahead by the harness (verify.start_spark_job_ahead).
    Progress and the verdict lines go to the log (kchaos/log.py)."""
    spec = verifier_spec(campaign, overrides)
    stopped_in = run.status().phase
    kept = run.keep_previous()
    if kept:
        before = run.previous_results_data()
        say(f"a new check of this run: the previous {', '.join(kept)} (checker {before.get('checker')}, verdict "
            f"{before.get('verdict')}) are kept as *.previous.json")
    run.set_status("verify")
    ops = None
    if (run.path / HISTORY_FILE).exists():
        ops = pair_operations(list(read_lines(run.path / HISTORY_FILE)))  # read once, for every reader
        run.write_json(METRICS_FILE, compute_metrics(ops))
    checked = verify_run(run.path, spec, bootstrap, ops, stopped_in, spark_job)
    results = checked.to_json()
    code = VERDICT_EXIT[results["verdict"]]
    facts = results.get("facts", {})
    seen = signatures_line(signatures(results))  # a known Kafka bug's signature: words, never the verdict
    say(f"verdict: {results['verdict'].upper()} (safety {results['safety']}, liveness {results['liveness']})"
        + (f": {', '.join(results['anomaly_types'])}" if results["anomaly_types"] else "")
        + (f"; {seen}" if seen else "")
        + "; " + (isolation_said(facts) if facts.get("workload_kind") == "txn" else
                  f"inputs {facts.get('inputs_committed')}, committed outputs {facts.get('outputs_committed')}, "
                  + transactions_said(facts)))
    for name, reason in results.get("not_checked", {}).items():
        required = name in results.get("required_not_checked", {})
        say(f"not checked{' (required: the verdict cannot be valid)' if required else ''}: {name} ({reason})")
    if facts.get("exposure"):
        say(summary_line(facts["exposure"]))
    short = (facts.get("fault_coverage") or {}).get("short") or {}
    if short:
        say("fault coverage short of what the campaign requires: "
            + ", ".join(f"{k} executed {n['executed']} of {n['required']}" for k, n in sorted(short.items())))
    attribution = attribute(results)
    if attribution:
        say(f"attribution of the anomaly cases: {attribution['summary']}")
    status: dict[str, Any] = {"verdict": results["verdict"], "safety": results["safety"],
                              "liveness": results["liveness"]}
    cert = certify(run.path, campaign, results, ops) if campaign.steps else None
    if cert is not None:
        code, status["certification"] = cert["exit_code"], cert["overall"]
    written = write_results(run.path, checked, extra={"run": run_block(run, campaign, ops, code, checked.checker,
                                                                         facts.get("fault_coverage"),
                                                                         facts.get("exposure")),
                                                       **({"attribution": attribution} if attribution else {})})
    if cert is not None:
        run.write_certification(cert)
        say(f"certification: {cert['overall'].upper()} ({cert['committed_transactions']} committed transactions over "
            f"{len(cert['phases'])} phases, clients {', '.join(cert['clients'])})")
        for row in cert["rows"]:
            say("  " + row_line(row))
        for line in switch_lines(cert.get("switches") or []):
            say(f"  {line}")
        for reason in cert["reasons"]:
            say(f"  why not pass: {reason}")
        for risk in cert.get("known_risks") or []:
            say(f"  known risk: {risk}")
    # complete: the run reached its final reads (a run that stopped before them stays incomplete,
    # whatever a later check of it says)
    run.set_status("done", complete=(run.path / FINAL_FILE).exists(), exit_code=code, **status)
    outcome = outcome_of(run.path, written, cert, run.replay_command())
    assert outcome.exit_code == code, (outcome, code)  # one exit code, whoever reads the outcome
    return outcome


def isolation_said(facts: dict[str, Any]) -> str:
    """The verdict line's figures for a txn run: its committed transactions, their reads of each
    other (wr edges) and the cycle classes found that Kafka allows or does not promise to prevent."""
    iso = facts.get("isolation") or {}
    checked, edges = iso.get("checked") or {}, iso.get("edges") or {}
    allowed = ", ".join(f"{k} {v}" for k, v in sorted((iso.get("allowed") or {}).items()))
    unjudged = ", ".join(f"{k} {v}" for k, v in sorted((iso.get("not_judged") or {}).items()))
    return (f"transactions committed {checked.get('committed', 0)}, {edges.get('wr', 0)} reads of each other's "
            f"sends; allowed (writes are not isolated): {allowed or 'none'}; not judged (no serializability "
            f"promised): {unjudged or 'none'}")


def transactions_said(facts: dict[str, Any]) -> str:
    """The verdict line's transactions: the client history's counts, or, for a pipeline that keeps
    none (a user's app, Streams), what the coordinator's log committed."""
    exposure = facts.get("exposure") or {}
    if not facts.get("transactions") and exposure.get("evidence") == "coordinator log":
        return f"transactions (the coordinator's log): committed {exposure.get('committed', 0)}"
    return f"transactions: {counts(facts.get('transactions'))}"
