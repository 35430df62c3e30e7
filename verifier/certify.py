"""Certification of a run with planned steps (feature flips, rolling upgrades): a verdict per
phase and per client, and an overall pass / fail / unknown that is the run's exit code.

Phases are cut at the ``step:*`` operations of the harness history: *before* the first step,
*during* a step that took time (a rolling upgrade; a feature flip is an instant boundary),
*after* each step until the next one. Everything is computed from the run directory alone
(``certification.json``), so ``kchaos analyze`` re-certifies a stored run.

Per phase and client (``confluent`` = librdkafka, classic protocol; ``java`` = kafka-clients):

* committed transactions (client history, by completion time) and, from the decoded
  transaction log, the transactions that completed per **client transaction version** (the
  protocol the coordinator saw: 2 = KIP-890);
* the verifier's anomaly cases whose evidence falls in the phase (the earliest history time in
  the case) and names the client's workers; cases with no time are listed as *unattributed*;
* a verdict: ``invalid`` with cases; ``unknown`` when the client committed nothing there (a
  phase nobody exercised certifies nothing; the seconds while a feature flip is applied are
  exempt: ``not-exercised``); ``valid`` otherwise.

Overall: ``fail`` if the verifier found anything; ``unknown`` if the run's verdict is unknown, a
step failed, a phase was not exercised, or a phase with ``transaction.version`` 2 saw no Java
transaction under TV2 (KIP-890 never tested); ``pass`` otherwise.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kchaos.errors import VERDICT_EXIT
from kchaos.rundir import CERTIFICATION_JUDGEMENT, RunDir
from kchaos.verifier.campaign import Campaign, load_recorded
from kchaos.verifier.internal_topics import decoded_txn_log
from kchaos.verifier.model import case_time_and_slots, read_ops, worker_slot

#: a step shorter than this is a boundary, not a phase of its own
INSTANT_STEP_S = 2.0
CERT_EXIT = {overall: VERDICT_EXIT[judgement] for overall, judgement in CERTIFICATION_JUDGEMENT.items()}


@dataclass
class Phase:
    name: str
    start: float
    end: float
    transaction_version: int | None
    kafka_versions: str
    #: must every client commit here? Not while a feature flip is being applied (seconds).
    required: bool = True

    def contains(self, t: float) -> bool:
        return self.start <= t < self.end


def build_phases(ops: list[dict[str, Any]], kafka_version: str = "") -> tuple[list[Phase], list[dict[str, Any]]]:
    """Phases from the ``step:*`` operations; also the steps as recorded."""
    steps = sorted((op for op in ops if op["f"].startswith("step:")), key=lambda op: op["invoke_time"])
    times = [t for op in ops for t in (op["invoke_time"], op["complete_time"]) if t is not None]
    steady = next((op["invoke_time"] for op in ops if op["f"] == "phase" and op["value"].get("phase") == "steady"),
                  min(times, default=0.0))
    end = next((op["invoke_time"] for op in ops if op["f"] == "phase" and op["value"].get("phase") == "final-reads"),
               max(times, default=steady)) + 1e-6

    def tv(features: Any) -> int | None:
        if isinstance(features, dict) and "error" not in features:
            return int(features.get("transaction.version", 0))
        return None

    current_tv = tv(steps[0]["value"].get("features_before")) if steps else None
    kafka = kafka_version
    phases: list[Phase] = []
    cursor, label = steady, "before any step"
    for i, op in enumerate(steps):
        value = op["value"]
        describe = value.get("describe", op["f"])
        phases.append(Phase(label, cursor, op["invoke_time"], current_tv, kafka))
        finished = op["complete_time"] if op["complete_time"] is not None else end
        upgraded_to = value.get("version") if op["f"] == "step:rolling-upgrade" and op["outcome"] == "ok" else None
        if finished - op["invoke_time"] >= INSTANT_STEP_S:
            during = f"{kafka} -> {value.get('version')} (mixed)" if op["f"] == "step:rolling-upgrade" else kafka
            phases.append(Phase(f"during step {i}: {describe}", op["invoke_time"], finished, current_tv, during,
                                required=op["f"] != "step:feature"))
        kafka = upgraded_to or kafka
        after_tv = tv(value.get("features_after"))
        current_tv = after_tv if after_tv is not None else current_tv
        cursor, label = finished, f"after step {i}: {describe}"
    phases.append(Phase(label, cursor, end, current_tv, kafka))
    return [p for p in phases if p.end > p.start], [
        {"index": op["value"].get("index"), "action": op["f"].split(":", 1)[1], "describe": op["value"].get("describe"),
         "start": op["invoke_time"], "end": op["complete_time"], "outcome": op["outcome"], "error": op.get("error"),
         "features_before": op["value"].get("features_before"), "features_after": op["value"].get("features_after")}
        for op in steps]


def certify(run_path: Path, campaign: Campaign | None = None, results: dict[str, Any] | None = None,
            ops: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The certification of a verified run (its ``results``, ``campaign`` and paired history
    ``ops``, read from the run directory where not given)."""
    run_path = Path(run_path)
    results = results if results is not None else RunDir(run_path).results_data(required=True)
    ops = ops if ops is not None else read_ops(run_path)
    campaign = campaign if campaign is not None else load_recorded(run_path)
    phases, steps = build_phases(ops, campaign.cluster.kafka_version)
    slot_client: dict[str, str] = {}
    for op in ops:
        if op["f"] == "worker-start":
            slot_client[op["value"]["slot"]] = op["value"].get("client", "confluent")
    clients = sorted(set(slot_client.values())) or ["confluent"]
    prefix = next((op["value"].get("txid_prefix") for op in ops if op["f"] == "setup"), None)

    def phase_of(t: float | None) -> Phase | None:
        if t is None:
            return None
        return next((p for p in phases if p.contains(t)), None)

    commits: dict[tuple[str, str], int] = Counter()
    java_v2_commits: dict[str, int] = Counter()
    for op in ops:
        if op["f"] == "commit" and op["outcome"] == "ok" and op["complete_time"] is not None:
            phase, slot = phase_of(op["complete_time"]), worker_slot(op["process"])
            if phase is not None and slot in slot_client:
                commits[(phase.name, slot_client[slot])] += 1
                if op.get("txn_v2"):
                    java_v2_commits[phase.name] += 1

    protocol: dict[tuple[str, str], Counter] = defaultdict(Counter)
    txn_log = decoded_txn_log(run_path) or []
    for rec in txn_log:
        e = rec["entry"]
        if e.status != "CompleteCommit" or not prefix or not str(e.transactional_id).startswith(f"{prefix}-"):
            continue
        slot = str(e.transactional_id)[len(prefix) + 1:]
        client = slot_client.get(slot, "seeder" if slot == "seeder" else None)
        phase = phase_of(e.last_update_ms / 1000)
        if client and phase is not None:
            protocol[(phase.name, client)][str(e.client_transaction_version)] += 1

    cases_in: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    unattributed: list[dict[str, Any]] = []
    for anomaly, cases in (results.get("anomalies") or {}).items():
        for case in cases:
            t, slots = case_time_and_slots(case)
            phase = phase_of(t)
            summary = {"anomaly": anomaly, "explanation": str(case.get("explanation", ""))[:300], "time": t}
            named = sorted({slot_client[s] for s in slots if s in slot_client})
            if phase is None or not named:
                unattributed.append({**summary, "phase": phase.name if phase else None, "clients": named})
                continue
            for client in named:
                cases_in[(phase.name, client)].append(summary)

    rows = []
    reasons: list[str] = []
    for phase in phases:
        for client in clients:
            key = (phase.name, client)
            found = cases_in.get(key, [])
            n = commits.get(key, 0)
            verdict = "invalid" if found else ("valid" if n > 0 else "unknown")
            note = None
            if verdict == "unknown" and not phase.required:
                verdict, note = "not-exercised", "no commit while the feature change was applied (not required)"
            elif verdict == "unknown":
                note = f"the {client} client committed no transaction in this phase: nothing was certified"
                reasons.append(f"{phase.name} / {client}: not exercised")
            if client == "java" and phase.transaction_version == 2 and n > 0 and java_v2_commits.get(phase.name, 0) == 0:
                note = "transaction.version is 2 but no Java transaction ran under TV2 (KIP-890 not exercised)"
                reasons.append(f"{phase.name} / java: TV2 not exercised")
                if verdict == "valid":
                    verdict = "unknown"
            if verdict == "valid" and results["verdict"] == "unknown":  # no phase is valid where the run is not judged
                unchecked = sorted(results.get("required_not_checked") or {})
                verdict, note = "unknown", ("the verifier could not judge the run (the reasons below)"
                                            + (f"; required checks not checked: {', '.join(unchecked)}" if unchecked
                                               else "") + ": not certified")
            rows.append({"phase": phase.name, "client": client, "verdict": verdict, "committed_transactions": n,
                         "tv2_commits": java_v2_commits.get(phase.name, 0) if client == "java" else 0,
                         "client_transaction_versions": dict(protocol.get(key, {})), "cases": found[:20],
                         "case_count": len(found), "note": note})
    failed_steps = [s for s in steps if s["outcome"] != "ok"]
    for s in failed_steps:
        reasons.append(f"step {s['index']} ({s['describe']}) {s['outcome'] or 'did not finish'}: {s['error']}")
    if results["verdict"] == "invalid":
        overall = "fail"
    elif results["verdict"] == "unknown" or reasons:
        overall = "unknown"
        if results["verdict"] == "unknown":
            why = [*(results.get("errors") or []), *(f"required check {name} not checked ({reason})" for name, reason
                                                     in (results.get("required_not_checked") or {}).items())]
            reasons.insert(0, "the verifier's verdict is unknown: " + "; ".join(why)[:300])
    else:
        overall = "pass"
    return {
        "overall": overall,
        "exit_code": CERT_EXIT[overall],
        "run_verdict": results["verdict"],
        "reasons": reasons,
        "clients": clients,
        "steps": steps,
        "phases": [asdict(p) for p in phases],
        "rows": rows,
        "unattributed_cases": unattributed[:50],
        "committed_transactions": sum(commits.values()),
        "seeder_protocol": {p.name: dict(protocol.get((p.name, "seeder"), {})) for p in phases},
    }
