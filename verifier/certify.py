"""Certification of a run with planned steps (feature flips, rolling upgrades): a verdict per
phase and per client, and an overall pass / fail / unknown that is the run's exit code: a gate a
team can put in front of its change.

Phases are cut at the ``step:*`` operations of the harness history: *before* the first step (the
baseline), *during* a step that took time (a rolling upgrade; a flip with its workers' restarts),
*after* each step until the next one. Everything is computed from the run directory alone
(``certification.json``), so ``kchaos analyze`` re-certifies a stored run.

The evidence of a row (phase x client) is the brokers' own record, the same for kchaos' workers,
Kafka Streams and a user's app: the coordinator's log (``__transaction_state``) gives each
committed transaction of the row's transactional ids, its life (its start to its CompleteCommit)
and the client transaction version the coordinator saw (2: KIP-890's protocol). From it:

* **commits**: the row's committed transactions, placed in the phase by their CompleteCommit time
  (the client history's own count is shown beside it; without a log it is the only count, and
  says so);
* **protocol**: classic, tv2 or mixed, per row; per client, when its first TV2 transaction
  committed after a flip to TV2 and whether its process had been restarted since the flip;
* **exposure**: per fault kind, the row's committed transactions whose life overlapped a window
  of that kind (verifier/exposure.py's windows); ``[certification] exposure`` (and
  ``exposure_during``) set what a gating row must have;
* **cases**: the verifier's anomaly cases placed by the earliest history time their evidence names
  and the clients (worker slots, transactional ids) it names.

A row's verdict: ``invalid`` with cases a known exposure does not cover; ``known-exposure`` when
``[[certification.known_exposure]]`` covers every case (named, not failed); ``unknown`` when the
client committed nothing there, its committed work fell short of the exposure required, a client
that speaks KIP-890 committed nothing under TV2 in a TV2 phase, or the verifier could not judge
the run; ``not-exercised`` for the seconds a flip is applied when nothing committed (not
required); ``valid`` otherwise. Only gating rows decide the gate: the baseline (the phase before
the change) is reported and gates only with ``gate = "all"``.

Overall: ``fail`` when a gating row is invalid or a case could not be placed in a non-gating
row; ``unknown`` when the verifier's verdict is unknown, a step failed, or a gating row is
unknown; ``pass`` otherwise, naming the rows that carry a known exposure or failed in the
baseline (``known_risks``).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kchaos.errors import VERDICT_EXIT
from kchaos.rundir import CERTIFICATION_JUDGEMENT, RunDir
from kchaos.verifier.campaign import Campaign, load_recorded
from kchaos.verifier.checks import NOTES
from kchaos.verifier.coordinator_log import CoordinatorTxn, coordinator_records, coordinator_transactions
from kchaos.verifier.exposure import Transaction, effective, logged_transactions, windows
from kchaos.verifier.fault_effects import run_effects
from kchaos.verifier.internal_topics import decoded_txn_log
from kchaos.verifier.model import HistoryIndex, case_place, read_ops, worker_slot
from kchaos.verifier.results import LIVENESS_CHECKS
from kchaos.verifier.spec import CertificationSpec, KnownExposure
from kchaos.workloads.registry import speaks_tv2

#: a step shorter than this is a boundary, not a phase of its own
INSTANT_STEP_S = 2.0
CERT_EXIT = {overall: VERDICT_EXIT[judgement] for overall, judgement in CERTIFICATION_JUDGEMENT.items()}
#: the client label of transactions no client of the run is known to have made
UNPLACED = "*"


@dataclass
class Phase:
    name: str
    start: float
    end: float
    transaction_version: int | None
    kafka_versions: str
    #: must every client commit here? Not while a feature flip is being applied (seconds).
    required: bool = True
    #: before (the baseline), during or after a step
    kind: str = "before"
    #: a phase during a flip: the level it goes to (the phase has both)
    transaction_version_to: int | None = None

    def contains(self, t: float) -> bool:
        return self.start <= t < self.end

    def has_tv(self, level: int) -> bool:
        return level in (self.transaction_version, self.transaction_version_to)


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
    cursor, label, kind = steady, "before any step", "before"
    for i, op in enumerate(steps):
        value = op["value"]
        describe = value.get("describe", op["f"])
        start = op["invoke_time"]
        if i and start - cursor < INSTANT_STEP_S:
            # back-to-back steps (the campaign ran one right after the other, as Kafka's upgrade test
            # raises metadata.version right after the binaries): no phase between them, it would
            # certify nothing; the next phase starts where the last one ended
            start = cursor
        else:
            phases.append(Phase(label, cursor, start, current_tv, kafka, kind=kind))
        finished = op["complete_time"] if op["complete_time"] is not None else end
        upgraded_to = value.get("version") if op["f"] == "step:rolling-upgrade" and op["outcome"] == "ok" else None
        after_tv = tv(value.get("features_after"))
        held = finished - op["invoke_time"] >= INSTANT_STEP_S
        if held:
            during = f"{kafka} -> {value.get('version')} (mixed)" if op["f"] == "step:rolling-upgrade" else kafka
            # a flip's seconds certify nothing by themselves (not required), unless the step held a
            # fault over the change: then that fault's exposure is asked of it ([certification] exposure_during)
            phases.append(Phase(f"during step {i}: {describe}", start, finished, current_tv, during,
                                required=op["f"] != "step:feature" or bool(value.get("fault")), kind="during",
                                transaction_version_to=after_tv if after_tv != current_tv else None))
        kafka = upgraded_to or kafka
        current_tv = after_tv if after_tv is not None else current_tv
        # an instant step is a boundary: the phase after it starts where it started (no gap)
        cursor, label, kind = finished if held else start, f"after step {i}: {describe}", "after"
    phases.append(Phase(label, cursor, end, current_tv, kafka, kind=kind))
    return [p for p in phases if p.end > p.start], [
        {"index": op["value"].get("index"), "action": op["f"].split(":", 1)[1], "describe": op["value"].get("describe"),
         "start": op["invoke_time"], "end": op["complete_time"], "outcome": op["outcome"], "error": op.get("error"),
         "features_before": op["value"].get("features_before"), "features_after": op["value"].get("features_after")}
        for op in steps]


# -- who the clients are ---------------------------------------------------------------------
@dataclass(frozen=True)
class Client:
    label: str            #: the row's name: "java 4.2.1", "franz-go 1.22.3", "confluent", "app"
    implementation: str   #: the registry's name (java, confluent, ...), "streams" or "app"
    version: str | None


@dataclass
class Fleet:
    """Which client made what: worker slots and transactional ids to clients (from the history's
    ``worker-start`` events and the run's transactional id prefix)."""

    by_slot: dict[str, Client]
    prefix: str | None
    seeder_txids: set[str]
    #: the client of transactional ids no slot names (a user's app, Kafka Streams), or None
    other: Client | None

    @property
    def clients(self) -> list[Client]:
        seen = {c.label: c for c in self.by_slot.values()}
        if self.other is not None:
            seen.setdefault(self.other.label, self.other)
        return [seen[k] for k in sorted(seen)]

    def of_txid(self, txid: str) -> Client | None:
        if txid in self.seeder_txids or (self.prefix and txid == f"{self.prefix}-seeder"):
            return None
        if self.prefix and txid.startswith(f"{self.prefix}-"):
            slot = self.by_slot.get(txid[len(self.prefix) + 1:])
            if slot is not None:
                return slot
            # per-partition ids: the fleet's one client, if it has one
            uniform = {c.label for c in self.by_slot.values()}
            if len(uniform) == 1:
                return next(iter(self.by_slot.values()))
        return self.other


def fleet_of(ops: list[dict[str, Any]], campaign: Campaign, history: HistoryIndex) -> Fleet:
    workload = campaign.workload
    app = Client(campaign.certification.app_label, "app", None)
    by_slot: dict[str, Client] = {}
    for op in ops:
        if op["f"] == "worker-start":
            value = op["value"]
            implementation = value.get("client", "confluent")
            version = value.get("client_version")
            # a user's app runs in the pool's slots too (with the slot's transactional id in its env)
            by_slot[value["slot"]] = app if workload.external_command else \
                Client(value.get("label") or implementation, implementation, version)
    other = None
    if workload.external_command:
        other = app
    elif workload.client == "streams":
        other = Client(f"streams {workload.java_client_version}", "streams", workload.java_client_version)
    return Fleet(by_slot, history.txid_prefix, set(history.seeder_txids), other)


# -- the coordinator's record ---------------------------------------------------------------
def protocol_word(tvs: Counter) -> str:
    """classic, tv2, mixed or none, from committed transactions' client transaction versions."""
    tv2, classic = tvs.get("2", 0), sum(n for k, n in tvs.items() if k != "2")
    return "mixed" if tv2 and classic else "tv2" if tv2 else "classic" if classic else "none"


def switches(ops: list[dict[str, Any]], steps: list[dict[str, Any]], fleet: Fleet,
             txns: list[Transaction]) -> list[dict[str, Any]]:
    """Per worker slot and flip to TV2: when the coordinator first logged a TV2 commit of the
    slot's transactional id (seconds after the step began), and whether the slot's process
    had been restarted since the flip began (the no-restart question, docs/certification.md)."""
    out = []
    starts = [(op["invoke_time"], op["value"]["slot"]) for op in ops if op["f"] == "worker-start"]
    for i, step in enumerate(steps):
        after, before = step.get("features_after"), step.get("features_before")
        if not (isinstance(after, dict) and isinstance(before, dict) and after.get("transaction.version") == 2
                and before.get("transaction.version") != 2 and step["end"] is not None):
            continue
        until = next((s["start"] for s in steps[i + 1:]), float("inf"))
        for slot, client in sorted(fleet.by_slot.items()):
            txid = f"{fleet.prefix}-{slot}"
            first = min((t.ended for t in txns if t.txid == txid and t.committed and t.client_tv == 2
                         and step["start"] <= t.ended < until), default=None)
            restarts = [t for t, s in starts if s == slot and step["start"] <= t < (first if first else until)]
            out.append({"slot": slot, "client": client.label, "step": step["index"],
                        "first_tv2_s": None if first is None else round(first - step["start"], 1),
                        "restarted_before": bool(restarts) if first is not None else None,
                        "switched_without_restart": first is not None and not restarts})
    return out


# -- known exposures ---------------------------------------------------------------------------
def covers(known: KnownExposure, client: Client | None, phase: Phase | None, protocol: str, anomaly: str) -> bool:
    if anomaly in LIVENESS_CHECKS or anomaly not in known.anomalies:
        return False
    if known.client != "*" and (client is None or known.client not in (client.label, client.implementation)):
        return False
    if phase is None:
        return known.phase == "any" and known.transaction_version is None and known.protocol is None
    if known.phase != "any" and known.phase != phase.kind:
        return False
    if known.transaction_version is not None and not phase.has_tv(known.transaction_version):
        return False
    if known.protocol == "classic" and protocol not in ("classic", "mixed"):
        return False
    return not (known.protocol == "tv2" and protocol != "tv2")


def covering(spec: CertificationSpec, client: Client | None, phase: Phase | None, protocol: str,
             anomaly: str) -> KnownExposure | None:
    return next((k for k in spec.known_exposure if covers(k, client, phase, protocol, anomaly)), None)


# -- the certification -------------------------------------------------------------------------
def _exposure(mine: list[Transaction], wins: list[Any], required: dict[str, int]) -> dict[str, Any]:
    committed = [t for t in mine if t.committed]
    by_kind = {kind: sum(1 for t in committed if any(t.began <= w.end and t.ended >= w.start for w in wins
                                                     if w.kind == kind))
               for kind in sorted({w.kind for w in wins} | set(required))}
    short = [f"{kind}: {by_kind.get(kind, 0)} committed transactions under its windows, {n} required"
             for kind, n in sorted(required.items()) if by_kind.get(kind, 0) < n]
    return {"committed_by_kind": by_kind, "required": dict(required), "short": short}


def certify(run_path: Path, campaign: Campaign | None = None, results: dict[str, Any] | None = None,
            ops: list[dict[str, Any]] | None = None,
            coordinator: list[CoordinatorTxn] | None = None) -> dict[str, Any]:
    """The certification of a verified run (its ``results``, ``campaign``, paired history ``ops``
    and the coordinator's transactions, segmented from its log; read from the run directory where
    not given)."""
    run_path = Path(run_path)
    results = results if results is not None else RunDir(run_path).results_data(required=True)
    ops = ops if ops is not None else read_ops(run_path)
    campaign = campaign if campaign is not None else load_recorded(run_path)
    spec = campaign.certification
    if coordinator is None:
        decoded = decoded_txn_log(run_path)
        coordinator = None if decoded is None else coordinator_transactions(coordinator_records(decoded))
    history = HistoryIndex(ops)
    phases, steps = build_phases(ops, campaign.cluster.kafka_version)
    fleet = fleet_of(ops, campaign, history)
    clients = fleet.clients or [Client("confluent", "confluent", None)]
    # a fault the cluster's record shows did nothing covers no row (verifier/fault_effects.py)
    end = max((op["complete_time"] or op["invoke_time"] for op in ops), default=None)
    wins = effective(windows(history)[0], run_effects(run_path, history.faults, campaign.cluster, end, ops))

    def phase_of(t: float | None) -> Phase | None:
        if t is None:
            return None
        return next((p for p in phases if p.contains(t)), None)

    # the coordinator's record, per row
    logged = logged_transactions(coordinator) if coordinator is not None else []
    in_row: dict[tuple[str, str], list[Transaction]] = defaultdict(list)
    for t in logged:
        client, phase = fleet.of_txid(t.txid), phase_of(t.ended)
        if client is not None and phase is not None:
            in_row[(phase.name, client.label)].append(t)
    # the clients' own word, beside it
    said: Counter = Counter()
    for op in ops:
        if op["f"] == "commit" and op["outcome"] == "ok" and op["complete_time"] is not None:
            phase, slot = phase_of(op["complete_time"]), worker_slot(op["process"])
            if phase is not None and slot in fleet.by_slot:
                said[(phase.name, fleet.by_slot[slot].label)] += 1

    def protocol_of(key: tuple[str, str]) -> Counter:
        return Counter(str(t.client_tv) for t in in_row.get(key, []) if t.committed)

    # the anomaly cases, per row. A check that found more cases than the checker keeps (50)
    # carries every case's place (results' case_places): all of them are counted where they fall,
    # and the kept ones are the row's examples. A case without a history time (a user's app keeps
    # none) is placed by the brokers' timestamps of the records it names.
    anomalies = results.get("anomalies") or {}
    full = {a: places for a, places in (results.get("case_places") or {}).items() if places}
    kept = [(a, case, case_place(case)) for a, cases in anomalies.items() for case in cases]
    every_place = [place for places in full.values() for place in places] + [place for _, _, place in kept]
    stamped = record_times(run_path, {tuple(ref) for place in every_place if place["t"] is None
                                      for ref in place.get("refs", [])})

    def locate(place: dict[str, Any]) -> tuple[Phase | None, list[str], dict[str, Any]]:
        t, placed_by = place["t"], "history"
        if t is None:
            stamps = [stamped[tuple(ref)] for ref in place.get("refs", []) if tuple(ref) in stamped]
            t, placed_by = (min(stamps), "record timestamps") if stamps else (None, None)
        named = {fleet.by_slot[s].label for s in place["slots"] if s in fleet.by_slot}
        named |= {c.label for txid in place["txids"] if (c := fleet.of_txid(txid)) is not None}
        return phase_of(t), sorted(named), {"time": t, "placed_by": placed_by}

    # per row: how many cases of each anomaly fell there (every place where the check recorded
    # them all, else its kept cases), and up to 20 examples (kept cases)
    counted: dict[tuple[str, str], Counter] = defaultdict(Counter)
    examples: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    unplaced: list[dict[str, Any]] = []

    def count(anomaly: str, located: tuple[Phase | None, list[str], dict[str, Any]], explanation: str) -> None:
        phase, named, when = located
        if phase is None or not named:
            known = covering(spec, None, phase, "none", anomaly)
            gating = phase is None or phase.kind != "before" or spec.gate == "all"
            unplaced.append({"anomaly": anomaly, "explanation": explanation, **when,
                             "phase": phase.name if phase else None, "clients": named, "gating": gating,
                             "known_exposure": known.reason if known else None})
            return
        for label in named:
            counted[(phase.name, label)][anomaly] += 1

    for anomaly, places in full.items():
        for place in places:
            count(anomaly, locate(place), "(a case the checker did not keep)")
    for anomaly, case, place in kept:
        located = locate(place)
        explanation = str(case.get("explanation", ""))[:300]
        if anomaly not in full:
            count(anomaly, located, explanation)
        phase, named, when = located
        for label in named if phase is not None else []:
            examples[(phase.name, label)].append({"anomaly": anomaly, "explanation": explanation, **when})

    # cases the checker found but did not keep and whose places it did not record (results written
    # before case_places, or a check that does not build every case): no row can be said clean of them
    not_kept = {a: n for a, n in cases_not_kept(results).items() if a not in full}

    rows = []
    reasons: list[str] = []
    for phase in phases:
        gating = phase.kind != "before" or spec.gate == "all"
        required = spec.exposure_during if phase.kind == "during" else spec.exposure
        for client in clients:
            key = (phase.name, client.label)
            mine = in_row.get(key, [])
            tvs = protocol_of(key)
            protocol = protocol_word(tvs)
            found = counted.get(key, Counter())
            n = sum(1 for t in mine if t.committed) if coordinator is not None else said.get(key, 0)
            exposure = _exposure(mine, wins, required if gating and phase.required else {})
            known = {a: covering(spec, client, phase, protocol, a) for a in found}
            notes: list[str] = []
            reasons_known = None
            if found and all(known.values()):
                verdict = "known-exposure"
                reasons_known = "; ".join(sorted({k.reason for k in known.values() if k}))
                notes.append(f"known exposure: {reasons_known}")
            elif found:
                verdict = "invalid"
                uncovered = sorted(a for a, k in known.items() if k is None)
                notes.append(f"{', '.join(uncovered)} not covered by a known exposure")
            elif n == 0 and not phase.required:
                verdict = "not-exercised"
                notes.append("no commit while the feature change was applied (not required)")
            elif n == 0:
                verdict = "unknown"
                notes.append(f"{client.label} committed no transaction in this phase "
                             f"({'the coordinator log' if coordinator is not None else 'its own history'}): nothing was "
                             "certified")
            elif exposure["short"]:
                verdict = "unknown"
                notes.append("exposure short: " + "; ".join(exposure["short"]))
            else:
                verdict = "valid"
            if verdict == "known-exposure" and exposure["short"]:
                # its cases are all known, but a fault kind hit too little of its work: what that kind
                # would have shown there is not known either (certify-tv-flip-exposed seed 33)
                verdict = "unknown"
                notes.insert(0, "exposure short: " + "; ".join(exposure["short"]))
            hidden = {a: counts for a, counts in not_kept.items() if covering(spec, client, phase, protocol, a) is None}
            if hidden and verdict in ("valid", "known-exposure"):
                verdict = "unknown"
                notes.insert(0, "cases the checker did not keep may fall here: " + ", ".join(
                    f"{a}: {n} of {total} not kept" for a, (n, total) in sorted(hidden.items())))
            elif not_kept and verdict == "valid" and n > 0:
                notes.append("cases the checker did not keep may fall here, each under a known exposure: " + ", ".join(
                    f"{a}: {k} of {total}" for a, (k, total) in sorted(not_kept.items())))
            tv2_expected = (phase.kind != "during" and phase.transaction_version == 2 and client.implementation != "app"
                            and speaks_tv2("java" if client.implementation == "streams" else client.implementation,
                                           client.version))
            if tv2_expected and n > 0 and coordinator is not None and not tvs.get("2"):
                notes.append(f"transaction.version is 2 and {client.label} speaks KIP-890, but the coordinator logged "
                             "none of its transactions under TV2 (KIP-890 not exercised)")
                if verdict == "valid":
                    verdict = "unknown"
            elif phase.kind != "during" and phase.transaction_version == 2 and protocol in ("classic", "mixed") \
                    and not tv2_expected and coordinator is not None:
                notes.append(f"{client.label} stays on the classic protocol under TV2: exposed to late requests "
                             "(KAFKA-17754)")
            if coordinator is None:
                notes.append("no coordinator log: commits are the client's own history, the protocol is not seen")
            if verdict == "valid" and results["verdict"] == "unknown":  # no row is valid where the run is not judged
                unchecked = sorted(results.get("required_not_checked") or {})
                verdict = "unknown"
                notes.append("the verifier could not judge the run (the reasons below)"
                             + (f"; required checks not checked: {', '.join(unchecked)}" if unchecked else "")
                             + ": not certified")
            if gating and verdict == "unknown":
                reasons.append(f"{phase.name} / {client.label}: {notes[0] if notes else 'unknown'}")
            rows.append({"phase": phase.name, "phase_kind": phase.kind, "client": client.label,
                         "implementation": client.implementation, "client_version": client.version,
                         "gating": gating, "verdict": verdict, "committed_transactions": n,
                         "client_reported_commits": said.get(key, 0) if client.implementation != "app" else None,
                         "client_transaction_versions": dict(sorted(tvs.items())),
                         "protocol": {"seen": protocol, "kip890_expected": bool(tv2_expected)},
                         "exposure": exposure, "known_exposure": reasons_known if verdict == "known-exposure" else None,
                         "cases": examples.get(key, [])[:20], "case_count": sum(found.values()),
                         "case_counts": dict(sorted(found.items())), "note": "; ".join(notes) or None})
    for s in steps:
        if s["outcome"] != "ok":
            reasons.append(f"step {s['index']} ({s['describe']}) {s['outcome'] or 'did not finish'}: {s['error']}")
    for planned in campaign.steps[len(steps):]:
        reasons.append(f"step {planned.describe()} was planned but never ran: the change was not certified")
    if not any(r["gating"] for r in rows):
        reasons.append("no phase gates: nothing was certified")
    failing = [r for r in rows if r["gating"] and r["verdict"] == "invalid"]
    failing_unplaced = [c for c in unplaced if c["gating"] and c["known_exposure"] is None]
    if results["verdict"] == "unknown":
        why = [*(results.get("errors") or []), *(f"required check {name} not checked ({reason})" for name, reason
                                                 in (results.get("required_not_checked") or {}).items())]
        reasons.insert(0, "the verifier's verdict is unknown: " + "; ".join(why)[:300])
    if failing or failing_unplaced:
        overall = "fail"
        reasons[:0] = [f"{r['phase']} / {r['client']}: invalid ({r['note']})" for r in failing] + \
            [f"{c['anomaly']} case not placed in a phase and client ({c['explanation'][:120]})" for c in
             failing_unplaced[:5]]
    elif results["verdict"] == "unknown" or reasons:
        overall = "unknown"
    else:
        overall = "pass"
    risks = [f"{r['phase']} / {r['client']}: {r['known_exposure']}" for r in rows if r["verdict"] == "known-exposure"]
    risks += [f"{r['phase']} / {r['client']} (baseline, not gating): invalid: "
              f"{', '.join(sorted(r['case_counts']))}" for r in rows
              if not r["gating"] and r["verdict"] == "invalid"]
    return {
        "overall": overall,
        "exit_code": CERT_EXIT[overall],
        "run_verdict": results["verdict"],
        "gate": spec.gate,
        "reasons": reasons,
        "known_risks": risks,
        "summary": gate_line(overall, reasons, risks),
        "evidence": "coordinator log" if coordinator is not None else "client history",
        "clients": [c.label for c in clients],
        "steps": steps,
        "phases": [asdict(p) for p in phases],
        "rows": rows,
        "switches": switches(ops, steps, fleet, logged),
        "unattributed_cases": unplaced[:50],
        "committed_transactions": sum(r["committed_transactions"] for r in rows),
        "seeder_protocol": {p.name: dict(Counter(str(t.client_tv) for t in logged if t.committed
                                                 and t.txid in fleet.seeder_txids and p.contains(t.ended)))
                            for p in phases},
    }


def cases_not_kept(results: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Per anomaly, (how many of its cases the checker found but did not keep in the results, how
    many it found): the check's ``total`` beside its kept cases (it keeps MAX_CASES)."""
    out = {}
    for name, check in (results.get("checks") or {}).items():
        total, kept = check.get("total"), len((results.get("anomalies") or {}).get(name) or [])
        if total is None and (said := re.fullmatch(NOTES["cases"].format(n=r"(\d+)"), check.get("note") or "")):
            total = int(said.group(1))  # results written before the checks carried their total
        if isinstance(total, int) and total > kept:
            out[name] = (total - kept, total)
    return out


def record_times(run_path: Path, refs: set[tuple[str, int, int]]) -> dict[tuple[str, int, int], float]:
    """The broker's timestamp (seconds) of each record in ``refs``, from the run's dump of the
    committed records (``topics/<topic>.committed.parquet``); a record or topic not dumped is left out."""
    out: dict[tuple[str, int, int], float] = {}
    for topic in sorted({ref[0] for ref in refs}):
        path = Path(run_path) / "topics" / f"{topic}.committed.parquet"
        if not path.exists():
            continue
        wanted = {(p, o) for t, p, o in refs if t == topic}
        table = pq.read_table(path, columns=["partition", "offset", "timestamp"])
        table = table.filter(pc.is_in(table["offset"], value_set=pa.array(sorted({o for _, o in wanted}), pa.int64())))
        for row in table.to_pylist():
            if (row["partition"], row["offset"]) in wanted and row["timestamp"] is not None:
                out[(topic, row["partition"], row["offset"])] = row["timestamp"] / 1000.0
    return out


def switch_lines(found: list[dict[str, Any]]) -> list[str]:
    """One line per flip to TV2: when each worker slot's first TV2 commit came (the coordinator's
    log), and whether it needed a restart; the answer the no-restart path is run for."""
    by_step: dict[int, list[str]] = defaultdict(list)
    for s in found:
        if s["first_tv2_s"] is None:
            said = "no TV2 commit"
        else:
            said = f"TV2 from {s['first_tv2_s']}s, " + ("without a restart" if s["switched_without_restart"]
                                                         else "after its restart")
        by_step[s["step"]].append(f"{s['slot']} ({s['client']}) {said}")
    return [f"switch to KIP-890 after step {step}: " + "; ".join(parts) for step, parts in sorted(by_step.items())]


def gate_line(overall: str, reasons: list[str], risks: list[str]) -> str:
    """One line: the gate's verdict, what failed or was not judged, and the risks it passed with."""
    line = overall
    if overall != "pass" and reasons:
        line += ": " + "; ".join(reasons[:3]) + (f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else "")
    if risks:
        line += f"; {len(risks)} rows with a known risk: " + "; ".join(risks[:3]) \
            + (f" (+{len(risks) - 3} more)" if len(risks) > 3 else "")
    return line
