"""What each check of the consume-transform-produce workload means, defined once for both engines.

The Python reference (verifier/pychecker.py) and the Spark job (verifier/spark_job.py) each hold
only their *query*: which records, transactions or log entries make a case. Everything else is
here: the registry (anomaly name, the engine function that queries it, what it means), when a
check cannot be made on a run and what it says then (``requires``), the explanation of every
case and every note. So two engines cannot word, gate or count the same check differently, and
``case_keys`` can compare them case by case (tests/integration/test_differential.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kchaos.verifier.model import MAX_CASES, ORDER_PROMISED_DELIVERY, NotApplicable
from kchaos.verifier.results import INVALID, UNKNOWN, VALID, CheckResult

#: One template per kind of case; ``explain(kind, **fields)`` fills it. Both engines call it
#: with the same fields, so a case reads the same whichever engine found it.
EXPLANATIONS = {
    "duplicate": "input {p}@{o} slot {slot} is visible {n} times in committed outputs",
    "lost-input": ("input {in_id} at {topic}/{p}@{o} is below the group's committed offset {final} and was processed, "
                   "but has no committed output"),
    "offsets-ahead": ("the group's committed offset for {topic}/{p} moved past input {in_id} at offset {o}, which no "
                      "transaction ever processed"),
    "torn-transaction.slots": "input {p}@{o}: only slots {have} of {k} are committed",
    "torn-transaction.hidden": ("transaction {seq} of {process}: {seen} of {written} outputs are visible to "
                                "read_committed readers, the rest are not"),
    "aborted-read.transaction": "committed output of transaction {seq} of {process}, which the history shows aborted",
    "aborted-read.input": ("committed output derived from input {p}@{o}, which belongs to an aborted input "
                           "transaction (read with read_uncommitted)"),
    "lost-write": "the client saw transaction {seq} of {process} commit, but only {seen} of its {expected} outputs are visible",
    "offsets-behind": ("committed output for input {p}@{o}, at or past the group's committed offset {final}: a restart "
                       "would process it again"),
    "invalid-txn-transition.state": ("{txid}: {from_status} -> {to_status} is not a transition the transaction "
                                     "coordinator's state machine allows"),
    "invalid-txn-transition.epoch": "{txid}: producer epoch went backwards ({from_epoch} -> {to_epoch}) for producer id {pid}",
    "zombie-write": ("transaction {seq} of {process} ({txid}, epoch {epoch}) was committed after {successor} had "
                     "initialised the same transactional.id (epoch {successor_epoch}): a fenced producer's write "
                     "became visible"),
    "nonmonotonic": "{topic}-{partition}: output of input {p}@{o} appears after an output of input {p}@{earlier}",
}

#: Notes on a check's result that are not cases.
NOTES = {
    "cases": "{n} cases",
    "no-progress.vacuous": "vacuous: {committed} committed transactions, {outputs} committed outputs",
    "no-progress.ok": "{committed} committed transactions",
    "no-progress.from-log": " (counted in the coordinator's log: the pipeline left no client history)",
}


def explain(kind: str, **fields: Any) -> str:
    return EXPLANATIONS[kind].format(**fields)


@dataclass(frozen=True)
class Requirement:
    """What a check needs from the run, and what it says when the run does not have it: a
    verdict with a note, or (verdict None) ``not_checked`` with the note as the reason."""

    needs: str
    verdict: str | None
    note: str


@dataclass(frozen=True)
class CheckDef:
    anomaly: str
    function: str  # the engine module's function that runs the query
    meaning: str
    requires: tuple[Requirement, ...] = ()


_NO_HISTORY = "no client history (external pipeline)"

CHECKS: tuple[CheckDef, ...] = (
    CheckDef("duplicate", "check_duplicates",
             "an (input, slot) whose output is visible more than once to read_committed readers"),
    CheckDef("lost-input", "check_lost_input",
             "an input below the group's committed offset that a transaction processed, with no committed output"),
    CheckDef("offsets-ahead", "check_offsets_ahead",
             "the group's committed offset passed an input that no transaction processed",
             (Requirement("history", VALID, f"{_NO_HISTORY}: reported as lost-input"),)),
    CheckDef("torn-transaction", "check_torn",
             "some but not all outputs of one input, or of one transaction, are visible"),
    CheckDef("aborted-read", "check_aborted_read",
             "a visible output of a transaction the client aborted, or derived from an aborted input"),
    CheckDef("lost-write", "check_lost_write",
             "a transaction the client saw commit with fewer visible outputs than it wrote",
             (Requirement("transactional", VALID, "not transactional: checked as lost-input/torn-transaction"),
              Requirement("history", None, f"{_NO_HISTORY}: nothing says which transactions the client saw commit"))),
    CheckDef("offsets-behind", "check_offsets_behind",
             "a visible output of an input at or past the group's final committed offset"),
    CheckDef("invalid-txn-transition", "check_txn_transitions",
             "a __transaction_state step the coordinator's state machine forbids, or an epoch going backwards",
             (Requirement("transaction-log", UNKNOWN, "no __transaction_state dump in the run directory"),)),
    CheckDef("hanging-transaction", "check_hanging",
             "a partition whose last stable offset stayed behind its high watermark after heal and drain",
             (Requirement("liveness", UNKNOWN, "no liveness snapshot after heal in final.json"),)),
    CheckDef("zombie-write", "check_zombie_write",
             "a committed output of a producer whose transactional.id a successor had already initialised",
             (Requirement("history", VALID, f"{_NO_HISTORY}: not checkable"),)),
    CheckDef("nonmonotonic", "check_nonmonotonic",
             "within one output partition, outputs of one input partition out of input order",
             (Requirement("order-promised", None, "order is not promised under delivery={delivery} "
                                                  "(re-processing after a restart re-appends earlier inputs)"),)),
    CheckDef("no-progress", "check_progress",
             "no committed transaction or no committed output: a run that proves nothing"),
)

CHECK_NAMES = tuple(c.anomaly for c in CHECKS)

#: What identity lineage (an unmodified app: outputs carry only their input's id) cannot check,
#: beside what its lack of client history already rules out (lost-write, zombie-write).
IDENTITY_NOT_CHECKED = {
    "torn-transaction (per transaction)": "identity lineage: an output does not name the transaction that wrote it, "
                                          "so only the per-input half (all K outputs or none) is checked",
    "aborted-read (client-aborted transaction)": "identity lineage: no transaction named; outputs of aborted input "
                                                 "copies (the seeder's marked ids) are checked",
}


def has(data: Any, needs: str) -> bool:
    """Whether the run (an engine's run object: ``workload``, ``final``, ``history``, ``txn_log``)
    has what a requirement names."""
    delivery = data.workload["delivery"]
    if needs == "history":
        return bool(data.history.has_history)
    if needs == "transactional":
        return delivery == "exactly-once"
    if needs == "transaction-log":
        return data.txn_log is not None
    if needs == "liveness":
        return data.final.get("liveness") is not None
    if needs == "order-promised":
        return delivery in ORDER_PROMISED_DELIVERY
    raise ValueError(f"unknown requirement {needs!r}")


def run_checks(results: Any, data: Any, engine: Any, pool: Any = None) -> bool:
    """Run every registered check on ``data`` into ``results`` with ``engine``'s queries: a check
    whose requirement the run does not meet says so as the registry defines; one that does not
    apply goes to ``not_checked`` with its reason; a crash is ``unknown`` with the traceback. For a
    share-group run the consumer-group-only checks (and ``duplicate``, which the share ledger
    replaces) are skipped. Returns whether it is a share-group run.

    With ``pool`` (a ``concurrent.futures`` executor) the checks run concurrently, and their
    results are still recorded in registry order: an engine whose queries mostly wait (Spark's
    driver planning one job while the executors run another) gains; its shared intermediate
    results must then be built once under a lock."""
    import traceback

    share = data.workload.get("kind") == "share"
    if share:
        from kchaos.verifier.share_checks import NOT_FOR_SHARE

        results.not_checked.update(NOT_FOR_SHARE)
    if data.workload.get("lineage") == "id":
        results.not_checked.update(IDENTITY_NOT_CHECKED)

    def run_one(check: CheckDef) -> Any:
        try:
            return getattr(engine, check.function)(data)
        except NotApplicable as reason:
            return reason
        except Exception:
            return CheckResult(check.anomaly, UNKNOWN, note="checker crashed: " + traceback.format_exc(limit=3))

    # (check, its outcome or None to run it), in registry order, which the results keep
    planned: list[tuple[CheckDef, Any]] = []
    for check in CHECKS:
        name = check.anomaly
        if share and (name in NOT_FOR_SHARE or name == "duplicate"):
            continue
        unmet = next((r for r in check.requires if not has(data, r.needs)), None)
        if unmet is None:
            planned.append((check, None))
            continue
        note = unmet.note.format(delivery=data.workload["delivery"])
        planned.append((check, NotApplicable(note) if unmet.verdict is None else CheckResult(name, unmet.verdict, note=note)))
    runnable = [check for check, outcome in planned if outcome is None]
    ran = iter(pool.map(run_one, runnable) if pool is not None else map(run_one, runnable))
    for check, outcome in planned:
        outcome = next(ran) if outcome is None else outcome
        if isinstance(outcome, NotApplicable):
            results.not_checked[check.anomaly] = str(outcome)
        else:
            results.checks.append(outcome)
    return share


def result(name: str, cases: list[dict[str, Any]], total: int | None = None, note: str | None = None) -> CheckResult:
    """A query's result: invalid with at most MAX_CASES cases when it found any (the note carries
    the exact count), valid otherwise."""
    total = len(cases) if total is None else total
    return CheckResult(name, INVALID if total else VALID, cases[:MAX_CASES],
                       note=note or (NOTES["cases"].format(n=total) if total else None))


def progress_result(committed: int, outputs: int, from_log: bool = False) -> CheckResult:
    """no-progress from the two counts (the engines count them their own way). ``committed``
    comes from the client history, or, for a pipeline that records none (an external app), from
    the coordinator's log (``from_log``: model.coordinator_commits)."""
    where = NOTES["no-progress.from-log"] if from_log else ""
    if not outputs or committed == 0:
        return CheckResult("no-progress", UNKNOWN, note=NOTES["no-progress.vacuous"].format(committed=committed,
                                                                                           outputs=outputs) + where)
    return CheckResult("no-progress", VALID, note=NOTES["no-progress.ok"].format(committed=committed) + where)


def case_keys(results: dict[str, Any]) -> dict[str, list[str]]:
    """Per anomaly, the sorted explanations of its cases (results.json form). Explanations come
    from one template per kind filled with the case's identifying fields, so two engines that
    found the same cases have equal keys."""
    return {name: sorted(c["explanation"] for c in cases) for name, cases in (results.get("anomalies") or {}).items()}
