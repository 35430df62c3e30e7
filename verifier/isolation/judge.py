"""The isolation-cycle check of a stored ``txn`` run (workloads/txn_worker.py) as the verifier's
results: its history and final log read by history.py, judged by cycles.py at read_committed.

The level judged is always read_committed, whatever the workers' consumers were set to: that is
what a transactional pipeline is promised, and a run whose workers poll at read_uncommitted is the
negative control (campaigns/negative-txn-read-uncommitted.toml): its reads of open transactions'
sends must be named as wr-only cycles and G1a, never allowed because the workers asked for them.

One check, ``isolation-cycles``, whose cases are the anomalies Kafka forbids (each case names its
class: ``wr-only``, ``wr-only-process``, ``G1a``, ``G1b``, ...); what Kafka allows (G0, G1c that
needs a ww edge) and what it does not promise (G-single, G2) are counted in the facts, never
cases. What the history did not let the checker see (a key the dumps did not read whole, records
still undecided at the final reads, an ambiguous value) is the check's ``not_checked``: with no
anomaly, the check is ``unknown`` when any of it could hide one, never ``valid``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from kchaos.rundir import FINAL_FILE, RunDir
from kchaos.verifier import exposure, fault_effects
from kchaos.verifier.campaign import load_recorded
from kchaos.verifier.checks import TXN_ISOLATION_CHECK as ISOLATION_CHECK
from kchaos.verifier.evidence import fault_gaps
from kchaos.verifier.isolation.cycles import Key, check
from kchaos.verifier.isolation.history import read_txn_run
from kchaos.verifier.model import HistoryIndex, read_ops
from kchaos.verifier.results import INVALID, UNKNOWN, VALID, CheckResult

#: the level a txn run is judged at (the module's docstring)
JUDGED_AT = "read_committed"
#: the not_checked reason of records left out of the log because their transactions were open
UNDECIDED = "undecided-at-final-reads"


def isolation_check(run: Path, ops: list[dict[str, Any]] | None = None) -> tuple[CheckResult, dict[str, Any]]:
    """The check's result and its facts (counts per class, edges, what was looked at and not)."""
    txns, dumped = read_txn_run(run, ops)
    out = check(txns, dumped.log, isolation=JUDGED_AT)
    return isolation_result(out, len(txns), dumped.undecided, dumped.incomplete, dumped.end_from)


def isolation_result(out: dict[str, Any], transactions: int, undecided: Mapping[Key, Sequence[int]],
                     incomplete: Sequence[Key], end_from: str | None) -> tuple[CheckResult, dict[str, Any]]:
    """The check's result and facts from a judgement (cycles.judge's ``out``) and what the log
    left out (records still undecided at the final reads, keys a dump did not read whole, where
    the committed view's end was known): one definition for both engines."""
    cases = [{"class": name, **case} for name in out["anomaly_types"] for case in out["anomalies"][name]]
    unseen = list(out["not_checked"])
    if undecided:
        unseen.append({"reason": UNDECIDED, "count": sum(len(v) for v in undecided.values()),
                       "explanation": "records past the committed view's end when the topic was read (a transaction "
                                      "still open): left out of the log",
                       "keys": [list(k) for k in undecided]})
    verdict = out["valid"]
    if verdict == "valid" and undecided:
        verdict = "unknown"  # a left-out record could be the version a read names
    counts = out["counts"]
    note = (f"{transactions} transactions; " + (", ".join(f"{name} {n}" for name, n in counts.items()) or "no cycle")
            + f"; judged at {JUDGED_AT}")
    facts = {"isolation": {"judged_at": JUDGED_AT, "counts": counts, "judgements": out["judgements"],
                           "allowed": {k: counts[k] for k in out["allowed"]},  # exact counts, not the kept cases
                           "not_judged": {k: counts[k] for k in out["not_judged"]},
                           "edges": out["edges"], "searched": out["searched"], "checked": out["checked"],
                           "not_checked": unseen[:50], "log_from": end_from,
                           "incomplete_keys": [list(k) for k in incomplete]}}
    total = sum(counts.get(name, 0) for name in out["anomaly_types"])
    return CheckResult(ISOLATION_CHECK, verdict, cases, note=note, total=total if total > len(cases) else None), facts


def _case_key(case: Mapping[str, Any]) -> tuple[Any, ...]:
    """What names a case: its class and cycle, or the read a direct case is."""
    if "cycle" in case:
        return (case.get("class"), tuple(case["cycle"]))
    return (case.get("class"), case.get("reader"), case.get("writer"), tuple(case.get("key") or ()),
            case.get("offset"), case.get("value"))


def isolation_disagreements(a: tuple[CheckResult, dict[str, Any]], b: tuple[CheckResult, dict[str, Any]],
                            names: tuple[str, str] = ("spark", "python")) -> list[str]:
    """Where two engines' isolation checks of one run differ (each: :func:`isolation_result`'s
    pair): the verdict and note, the cases kept (class and cycle, or the read), the edges per kind,
    the counts per class, what was looked at, the not_checked reasons (reason, class, count), the
    keys left out. Empty when they agree."""
    (ra, fa), (rb, fb) = a, b
    ia, ib = fa.get("isolation") or {}, fb.get("isolation") or {}
    x, y = names
    problems = []
    if (ra.verdict, ra.note) != (rb.verdict, rb.note):
        problems.append(f"{ISOLATION_CHECK}: {x} {(ra.verdict, ra.note)} vs {y} {(rb.verdict, rb.note)}")
    ca, cb = sorted(map(_case_key, ra.cases), key=repr), sorted(map(_case_key, rb.cases), key=repr)
    if ca != cb:
        problems.append(f"{ISOLATION_CHECK} cases: only {x}: {[c for c in ca if c not in cb][:3]}; "
                        f"only {y}: {[c for c in cb if c not in ca][:3]}")

    def gaps(facts: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((e["reason"], e.get("class", ""), e["count"]) for e in facts.get("not_checked") or ())

    for label, get in (("edges per kind", lambda f: f.get("edges")), ("counts per class", lambda f: f.get("counts")),
                       ("checked", lambda f: f.get("checked")), ("not checked", gaps),
                       ("incomplete keys", lambda f: f.get("incomplete_keys"))):
        if get(ia) != get(ib):
            problems.append(f"isolation {label}: {x} {get(ia)} vs {y} {get(ib)}")
    return problems


def txn_run_checks(run: Path, final: dict[str, Any],
                   ops: list[dict[str, Any]] | None = None) -> tuple[list[CheckResult], dict[str, Any]]:
    """Every check a txn run gets: the isolation cycles; ``no-progress`` (a run whose committed
    transactions read nothing of each other proves nothing about isolation: unknown, never valid);
    ``hanging-transaction`` from the final reads' stability wait (a partition of the txn topic whose
    last stable offset stayed behind its high watermark: the registry's meaning, read from the
    workload's own record since the verifier's run data is the pipeline's)."""
    isolation, facts = isolation_check(run, ops)
    edges, checked = facts["isolation"]["edges"], facts["isolation"]["checked"]
    committed = int(checked.get("committed", 0))
    if committed and edges.get("wr", 0):
        progress = CheckResult("no-progress", VALID, note=f"{committed} committed transactions, {edges['wr']} of their "
                                                          "reads of each other's sends (wr edges)")
    else:
        progress = CheckResult("no-progress", UNKNOWN, note=f"vacuous: {committed} committed transactions, "
                                                            f"{edges.get('wr', 0)} reads of each other's sends")
    liveness = final.get("liveness") or {}
    if "stable" not in liveness:
        hanging = CheckResult("hanging-transaction", UNKNOWN, note="no stability wait after heal in final.json")
    elif liveness["stable"]:
        hanging = CheckResult("hanging-transaction", VALID,
                              note=f"every partition stable {liveness.get('waited_s')} s after the heal")
    else:
        cases = [{"partition": name, **value, "explanation": (
            f"{name}: last stable offset {value.get('lso')} behind the high watermark {value.get('high')} "
            f"{liveness.get('timeout_s')} s after the heal: a transaction left open")}
            for name, value in sorted((liveness.get("pinned") or {}).items())]
        hanging = CheckResult("hanging-transaction", INVALID, cases)
    return [isolation, progress, hanging], facts


def txn_fault_evidence(run: Path, ops: list[dict[str, Any]] | None = None) -> tuple[list[str], dict[str, Any]]:
    """What the run's faults hit (verifier/exposure.py, on the workers' own history: each txn
    transaction's commit and abort are history operations, as the ctp worker's) and what keeps them
    from counting (evidence.fault_gaps: none ran, fewer than required, below the exposure bar or its
    floor): the errors that keep the verdict from valid, and the ``exposure`` fact."""
    campaign = load_recorded(run)
    ops = read_ops(run) if ops is None else ops
    history = HistoryIndex(ops)
    end = max((op["complete_time"] or op["invoke_time"] for op in ops), default=None)
    effects = fault_effects.run_effects(run, history.faults, campaign.cluster, end, ops)
    final = RunDir(run).read(FINAL_FILE, {})
    measured = exposure.exposure(history, campaign.faults.exposure.stall_s, drained=True, effects=effects)
    found = fault_gaps(run, campaign, history, final, history.has_history, lambda: measured, lambda: None,
                       lambda: effects)
    return [gap.reason for gap in found if gap.fatal], ({"exposure": measured} if history.faults else {})
