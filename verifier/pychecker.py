"""Single-process Python checker over a stored run directory.

Reads the dumped topics (``topics/*.parquet``), the final group offsets (``final.json``) and the
merged history, and checks the consume-transform-produce guarantees by the lineage contract
(workloads/lineage.py). It is the reference the Spark verifier is compared with, and the
checker ``kchaos run``/``analyze`` use until that lands. Every case carries its evidence: the
records (topic, partition, offset, lineage), the transaction (transactional.id, producer id and
epoch, worker incarnation, sequence number), the history operations, the faults active then.

Memory is what bounds a single process, so the committed outputs are held as compact records
(model.Output, strings interned), the topics are read in batches, the raw view is held only as
counts per transaction (its records are read again for the few cases that cite them), the raw
inputs only where they differ from the committed ones, and the per-check indexes are built
for the cases found rather than for every record.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from kchaos.verifier import evidence
from kchaos.verifier.acknowledged import seeder_count_cases
from kchaos.verifier.checks import CHECK_NAMES, explain, implements, lost_write_outputs, lost_write_text, output_id, passed_over_evidence, progress_result, reread_evidence, result, run_checks
from kchaos.verifier.coordinator_log import coordinator_records
from kchaos.verifier import driver_checks  # noqa: F401 (its checks register for both engines)
from kchaos.verifier.engine import engine_class
from kchaos.verifier.late_requests import late_request_facts
from kchaos.verifier.markers import commit_marker_facts
from kchaos.verifier.sequences import sequence_reuse_facts
from kchaos.verifier.model import (HistoryIndex, OPEN_TXN_STATES, Output, TXN_NEXT, abandoned_append, abandoned_note,
                                   as_evidence, commits_by_client_tv, coordinator_commits, hanging_cases, in_scope,
                                   pipeline_txids, read_ops, zombie_successor)
from kchaos.verifier import observations
from kchaos.verifier.producer_ids import judge_producer_ids, producer_id_candidates
from kchaos.verifier.results import CheckResult, Results, VALID
from kchaos.verifier.run_data import RunData
from kchaos.verifier.share_checks import share_checks


def check_run(run: Path, ops: list[dict[str, Any]] | None = None) -> Results:
    """Check a stored run; ``ops`` (the paired history) may be passed when the caller has it."""
    results = Results(checker="python")
    try:
        data = RunData(Path(run), ops)
    except Exception as exc:
        results.errors.append(f"could not read the run: {exc!r}")
        return results
    share = run_checks(results, data, PythonEngine())
    results.facts = {**facts(data), **evidence.white_box_facts(data)}
    if share:
        checks, share_facts = share_checks(data)
        results.checks.extend(checks)
        results.facts["share"] = share_facts
    return results


def check_unfinished_run(run: Path, ops: list[dict[str, Any]] | None = None, phase: str | None = None) -> Results:
    """A run stopped before its final reads (aborted, crashed, killed): there are no topic dumps,
    so no check of the taxonomy can be made. Every one is listed as not checked with the reason,
    never passed; what the history says (operations, commits, faults) is kept as facts. The
    verdict is ``unknown``."""
    results = Results(checker="python")
    where = f" (it stopped in phase {phase!r})" if phase else ""
    results.errors.append(f"the run stopped before its final reads{where}: no topic dumps, nothing can be verified")
    reason = "the run stopped before its final reads: no dumps of the topics or of the internal topics"
    results.not_checked = {name: reason for name in CHECK_NAMES}
    history = HistoryIndex(read_ops(Path(run)) if ops is None else ops)
    results.facts = {"transactions": dict(Counter(history.txn_outcome.values())),
                     "transactions_per_txid": history.per_txid_outcomes(), "faults": len(history.faults),
                     "operations": len(history.ops)}
    return results


def _case(data: RunData, explanation: str, records: list[Any], **extra: Any) -> dict[str, Any]:
    txns = sorted({data.txn_key(r) for r in records if r.get("worker")})
    return {"explanation": explanation, "records": as_evidence(records),
            "transactions": [data.txn_evidence(k) for k in txns], **extra}


def _duplicates(data: RunData) -> dict[tuple[int, int, int], int]:
    """(input, slot) -> how many committed outputs, for those with more than one (computed once:
    duplicate and nonmonotonic both need it)."""
    if data.duplicates is None:
        counts = Counter((out["in_partition"], out["in_offset"], out["slot"]) for out in data.outputs_committed)
        data.duplicates = {key: n for key, n in counts.items() if n > 1}
    return data.duplicates


def _outputs_of(data: RunData, keys: set[Any], key: Any) -> dict[Any, list[Output]]:
    """The committed outputs whose ``key(out)`` is one of ``keys``, in record order."""
    found: dict[Any, list[Output]] = defaultdict(list)
    if keys:
        for out in data.outputs_committed:
            k = key(out)
            if k in keys:
                found[k].append(out)
    return found


@implements("duplicate", "python")
def check_duplicate(data: RunData) -> CheckResult:
    dups = _duplicates(data)
    outs = _outputs_of(data, set(dups), lambda out: (out["in_partition"], out["in_offset"], out["slot"]))
    cases = [_case(data, explain("duplicate", p=p, o=o, slot=s, n=n), outs[(p, o, s)],
                   **reread_evidence(data.history, p, outs[(p, o, s)]))
             for (p, o, s), n in sorted(dups.items())]
    return result("duplicate", cases)


def _committed_slots(data: RunData) -> dict[tuple[int, int], Any]:
    """Input -> the slots of its committed outputs: a bit mask while the slots are small
    non-negative integers (the norm, and a twentieth of a set's memory), else a set."""
    if data.slots is None:
        slots: dict[tuple[int, int], Any] = {}
        for out in data.outputs_committed:
            pos, slot = (out["in_partition"], out["in_offset"]), out["slot"]
            have = slots.get(pos, 0)
            if type(have) is int and type(slot) is int and 0 <= slot < 62:
                slots[pos] = have | (1 << slot)
            else:
                slots[pos] = _slot_set(have) | {slot}
        data.slots = slots
    return data.slots


def _slot_set(have: Any) -> set[Any]:
    return {s for s in range(62) if have >> s & 1} if type(have) is int else set(have)


def _unexplained_inputs(data: RunData) -> list[tuple[tuple[int, int], str]]:
    """Committed inputs below the group's final committed offset with no committed output
    (computed once; lost-input and offsets-ahead split them)."""
    if data.unexplained is None:
        slots = _committed_slots(data)
        data.unexplained = [((p, o), in_id) for (p, o), in_id in sorted(data.inputs_committed.items())
                            if o < data.final_offsets.get(p, 0) and not slots.get((p, o))]
    return data.unexplained


def _skipping_commit(data: RunData, p: int, o: int) -> dict[str, Any] | None:
    """The first committed offset commit (decoded __consumer_offsets) that moved past input p@o."""
    for c in data.offset_log or []:
        if c["partition"] == p and c["offset"] > o:
            return c
    return None


@implements("lost-input", "python")
def check_lost_input(data: RunData) -> CheckResult:
    """Inputs the pipeline processed (a transaction included them) whose outputs are gone.
    Without a history (an external pipeline) every unexplained input counts here."""
    cases = []
    for (p, o), in_id in _unexplained_inputs(data):
        ops = data.input_ops.get((p, o), [])
        if data.has_history and not ops:
            continue  # never processed: offsets-ahead
        cases.append({"explanation": explain("lost-input", in_id=in_id, topic=data.workload.input_topic, p=p, o=o,
                                             final=data.final_offsets.get(p)),
                      "input": {"partition": p, "offset": o, "id": in_id},
                      "transactions": [data.txn_evidence((op["process"], op["value"]["txn_seq"])) for op in ops],
                      **passed_over_evidence(data.history, p, o)})
    return result("lost-input", cases)


@implements("offsets-ahead", "python")
def check_offsets_ahead(data: RunData) -> CheckResult:
    """Committed offsets that passed inputs no operation ever processed (loss on restart)."""
    cases = []
    for (p, o), in_id in _unexplained_inputs(data):
        if data.input_ops.get((p, o)):
            continue
        commit = _skipping_commit(data, p, o)
        cases.append({"explanation": explain("offsets-ahead", topic=data.workload.input_topic, p=p, in_id=in_id, o=o),
                      "input": {"partition": p, "offset": o, "id": in_id},
                      "offset_commit": commit or {"partition": p, "offset": data.final_offsets.get(p),
                                                  "source": "final group offsets"}})
    return result("offsets-ahead", cases)


@implements("invalid-txn-transition", "python")
def check_invalid_txn_transition(data: RunData) -> CheckResult:
    last: dict[str, dict[str, Any]] = {}
    before: dict[str, dict[str, Any]] = {}  # the record before ``last``
    cases, abandoned = [], 0
    scope = pipeline_txids(data.campaign, data.history)
    for rec in data.txn_log:
        e = rec["entry"]
        if not in_scope(e.transactional_id, scope):
            continue
        prev = last.get(e.transactional_id)
        if e.producer_id is None:  # tombstone: the transactional id expired
            last.pop(e.transactional_id, None)
            before.pop(e.transactional_id, None)
            continue
        if prev is not None:
            pe = prev["entry"]
            illegal = e.status != pe.status and e.status not in TXN_NEXT.get(pe.status, set())
            backwards = not illegal and e.producer_id == pe.producer_id and e.producer_epoch < pe.producer_epoch
            if illegal or backwards:
                where = {"transactional_id": e.transactional_id, "log": f"__transaction_state-{rec['partition']}",
                         "from": {"offset": prev["offset"], "status": pe.status, "producer_id": pe.producer_id,
                                  "epoch": pe.producer_epoch},
                         "to": {"offset": rec["offset"], "status": e.status, "producer_id": e.producer_id,
                                "epoch": e.producer_epoch}}
                first = before.get(e.transactional_id)
                fe = first["entry"] if first is not None else None
                if fe is not None and abandoned_append((fe.status, fe.producer_id, fe.producer_epoch),
                                                       (pe.status, pe.producer_id, pe.producer_epoch),
                                                       (e.status, e.producer_id, e.producer_epoch)):
                    abandoned += 1
                elif illegal:
                    cases.append({"explanation": explain("invalid-txn-transition.state", txid=e.transactional_id,
                                                         from_status=pe.status, to_status=e.status), **where})
                else:
                    cases.append({"explanation": explain("invalid-txn-transition.epoch", txid=e.transactional_id,
                                                         from_epoch=pe.producer_epoch, to_epoch=e.producer_epoch,
                                                         pid=e.producer_id), **where})
        if prev is not None:
            before[e.transactional_id] = prev
        last[e.transactional_id] = rec
    in_run = [r for r in coordinator_records(data.txn_log) if in_scope(r["transactional_id"], scope)]
    pid_cases, data.producer_id_facts = judge_producer_ids(*producer_id_candidates(in_run))
    found = result("invalid-txn-transition", cases + pid_cases)
    if abandoned:
        found.note = abandoned_note(abandoned)
    return found


@implements("zombie-write", "python")
def check_zombie_write(data: RunData) -> CheckResult:
    """A committed output from a producer whose successor (same transactional.id) had already
    finished init_transactions when this producer invoked the commit: fencing must have stopped it."""
    inits, commits = data.history.zombie_inputs()
    by_txn: dict[tuple[str, int], list[Output]] = defaultdict(list)  # the first 10 outputs: the evidence
    for out in data.outputs_committed:
        if out.get("txid"):
            outs = by_txn[data.txn_key(out)]
            if len(outs) < 10:
                outs.append(out)
    cases = []
    for key, outs in sorted(by_txn.items()):
        commit = commits.get(key)
        if commit is None:
            continue
        txid = outs[0]["txid"]
        successor = zombie_successor(inits, key[0], txid, commit)
        if successor is not None:
            cases.append(_case(data, explain("zombie-write", seq=key[1], process=key[0], txid=txid, epoch=commit.get("epoch"),
                                             successor=successor["process"], successor_epoch=successor.get("epoch")),
                               outs[:10], successor={"process": successor["process"], "epoch": successor.get("epoch"),
                                                     "init_completed": successor["complete_time"]},
                               commit_invoked=commit["invoke_time"]))
    return result("zombie-write", cases)


@implements("hanging-transaction", "python")
def check_hanging_transaction(data: RunData) -> CheckResult:
    open_txns = []
    if not data.liveness.get("stable"):
        latest: dict[str, Any] = {}
        for rec in data.txn_log or []:
            latest[rec["entry"].transactional_id] = rec
        for rec in latest.values():
            e = rec["entry"]
            if e.status in OPEN_TXN_STATES:
                open_txns.append({"transactional_id": e.transactional_id, "status": e.status, "producer_id": e.producer_id,
                                  "epoch": e.producer_epoch, "partitions": e.partitions, "last_update_ms": e.last_update_ms})
    cases, note = hanging_cases(data.workload, data.final, open_txns, pipeline_txids(data.campaign, data.history))
    return result("hanging-transaction", cases) if cases else CheckResult("hanging-transaction", VALID, note=note)


@implements("torn-transaction", "python")
def check_torn_transaction(data: RunData) -> CheckResult:
    k = data.workload.outputs_per_input
    partial = {}
    for key, have in _committed_slots(data).items():
        have = _slot_set(have)
        if 0 < len(have) < k:
            partial[key] = have
    by_input = _outputs_of(data, set(partial), lambda out: (out["in_partition"], out["in_offset"]))
    cases = [_case(data, explain("torn-transaction.slots", p=key[0], o=key[1], have=sorted(have), k=k),
                   by_input[key], missing_slots=sorted(set(range(k)) - have))
             for key, have in sorted(partial.items())]
    if data.workload.delivery == "exactly-once" and data.workload.lineage == "full":
        committed_by_txn = Counter(data.txn_key(o) for o in data.outputs_committed)
        torn = {key: written for key, written in data.raw_per_txn.items()
                if 0 < committed_by_txn.get(key, 0) < written}
        raw = data.raw_outputs_of(set(torn))
        for key, written in sorted(torn.items()):
            committed_ids = {(o["topic"], o["partition"], o["offset"]) for o in data.outputs_committed
                             if data.txn_key(o) == key}
            hidden = [o for o in raw[key] if (o["topic"], o["partition"], o["offset"]) not in committed_ids]
            cases.append(_case(data, explain("torn-transaction.hidden", seq=key[1], process=key[0],
                                             seen=committed_by_txn[key], written=written), hidden[:20]))
    return result("torn-transaction", cases)


@implements("aborted-read", "python")
def check_aborted_read(data: RunData) -> CheckResult:
    """Visible outputs of a transaction its client aborted or saw fail to commit; visible outputs
    made from an aborted input (read_committed hides it, or the seeder aborted it); and inputs the
    seeder aborted that read_committed readers see (the pipeline and the final read see them
    alike, so only the seeder's record tells)."""
    cases = []
    kinds = {"aborted": "aborted-read.transaction", "commit-failed": "aborted-read.failed-commit"}
    coordinator_aborted = data.coordinator_aborted()
    for out in data.outputs_committed:
        key = data.txn_key(out)
        kind = kinds.get(data.txn_outcome.get(key, "")) or coordinator_aborted.get(key)
        if kind:
            cases.append(_case(data, explain(kind, seq=key[1], process=key[0]), [out]))
    ack = data.acknowledged
    aborted_inputs = {**data.inputs_raw_only, **ack.aborted}
    for out in data.outputs_committed:
        pos = (out["in_partition"], out["in_offset"])
        if pos in aborted_inputs:
            cases.append(_case(data, explain("aborted-read.input", p=pos[0], o=pos[1]), [out],
                               input={"partition": pos[0], "offset": pos[1], "id": aborted_inputs[pos]}))
    topic = data.workload.input_topic
    for (p, o), in_id in sorted(ack.aborted.items()):
        if (p, o) in data.input_log:
            cases.append({"explanation": explain("aborted-read.seeder-input", in_id=in_id, topic=topic, p=p, o=o),
                          "input": {"partition": p, "offset": o, "id": in_id, "visible_id": data.input_log[(p, o)]}})
    for in_id, positions in sorted(_exposed_by_id(data).items()):
        p, o = positions[0]
        cases.append({"explanation": explain("aborted-read.seeder-input", in_id=in_id, topic=topic, p=p, o=o),
                      "input": {"partition": p, "offset": o, "id": in_id, "visible_at": [list(x) for x in positions]}})
    return result("aborted-read", cases)


def _exposed_by_id(data: RunData) -> dict[str, list[tuple[int, int]]]:
    """Runs whose seeder recorded ids but no positions: an id it committed once, visible at two
    positions, shows its aborted copy (written, aborted, then written again) -> the positions,
    the earlier (the aborted copy) first."""
    ids = data.acknowledged.committed_ids - data.acknowledged.unknown_ids
    if not ids:
        return {}
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for pos, in_id in data.input_log.items():
        if in_id in ids:
            where[in_id].append(pos)
    return {i: sorted(ps, key=lambda x: (x[1], x[0])) for i, ps in where.items() if len(ps) > 1}


@implements("lost-acknowledged-input", "python")
def check_lost_acknowledged_input(data: RunData) -> CheckResult:
    """Every input the seeder's committed transactions were acknowledged to write is in the
    committed input log, at its position, with its id (by id alone where positions were not recorded)."""
    ack, topic, cases = data.acknowledged, data.workload.input_topic, []
    for (p, o), in_id in sorted(ack.committed.items()):
        got = data.input_log.get((p, o))
        if got == in_id:
            continue
        what = "not in the committed input log" if got is None else f"replaced there by {got}"
        cases.append({"explanation": explain("lost-acknowledged-input", in_id=in_id, where=f"at {topic}/{p}@{o}",
                                             what=what),
                      "input": {"partition": p, "offset": o, "id": in_id, "found": got,
                                "raw_view": data.inputs_raw_only.get((p, o))}})
    if ack.committed_ids:
        present = set(data.input_log.values())
        for in_id in sorted(ack.committed_ids - present):
            cases.append({"explanation": explain("lost-acknowledged-input", in_id=in_id, where="(position not recorded)",
                                                 what="not in the committed input log"),
                          "input": {"id": in_id}})
    cases += seeder_count_cases(data.final, len(data.input_log), topic)
    return result("lost-acknowledged-input", cases)


@implements("input-mismatch", "python")
def check_input_mismatch(data: RunData) -> CheckResult:
    """Every committed output's input reference names the record it was made from: the input log
    holds a record with the output's input id at the output's (in_partition, in_offset)."""
    cases = []
    for out in data.outputs_committed:
        pos = (out["in_partition"], out["in_offset"])
        got = data.inputs_committed.get(pos) or data.inputs_raw_only.get(pos)
        if got == out["in_id"]:
            continue
        found = "no record" if got is None else f"input {got}"
        cases.append(_case(data, explain("input-mismatch", topic=out["topic"], partition=out["partition"],
                                         offset=out["offset"], in_id=out["in_id"], p=pos[0], o=pos[1], found=found),
                           [out], input={"partition": pos[0], "offset": pos[1], "found": got}))
    return result("input-mismatch", cases)


@implements("lost-write", "python")
def check_lost_write(data: RunData) -> CheckResult:
    """Fewer visible outputs than a committed transaction wrote: one the client saw commit, or one
    the coordinator's log shows committed though its client did not see it commit."""
    # distinct outputs (input, slot): a copy written twice (F12) must not hide one never written
    committed_by_txn = Counter(key for key, _ in {(data.txn_key(o), output_id(o)) for o in data.outputs_committed})
    by_coordinator = data.coordinator_committed()
    lost = {}
    for key in sorted(set(data.txn_outcome) | by_coordinator):
        outcome = data.txn_outcome.get(key, "unknown")
        if outcome != "committed" and key not in by_coordinator:
            continue
        expected = (data.txn_ops.get(key) or {}).get("value", {}).get("outputs")
        seen = committed_by_txn.get(key, 0)
        if expected is not None and seen < expected:
            lost[key] = (seen, expected, outcome)
    raw = data.raw_outputs_of(set(lost))
    cases = [_case(data, lost_write_text(key, seen, expected, outcome), raw[key][:20], transaction=data.txn_evidence(key),
                   **lost_write_outputs(seen, expected, len({output_id(o) for o in raw[key]})))
             for key, (seen, expected, outcome) in lost.items()]
    return result("lost-write", cases)


@implements("offsets-behind", "python")
def check_offsets_behind(data: RunData) -> CheckResult:
    cases = []
    for out in data.outputs_committed:
        p, o = out["in_partition"], out["in_offset"]
        final = data.final_offsets.get(p)
        if final is not None and o >= final and (p, o) in data.inputs_committed:
            cases.append(_case(data, explain("offsets-behind", p=p, o=o, final=final), [out]))
    return result("offsets-behind", cases)


@implements("nonmonotonic", "python")
def check_nonmonotonic(data: RunData) -> CheckResult:
    """Within one output partition, the first appearance of the outputs of one input partition
    must follow the input order: an output whose input offset is below one already seen there.
    Re-appearances are duplicates (reported by ``duplicate``), not order violations."""
    dups = _duplicates(data)
    first: dict[tuple[int, int, int], Output] = {}  # of the duplicated (input, slot)s only
    streams: dict[tuple[str, int, int], list[Output]] = defaultdict(list)
    for out in data.outputs_committed:
        key = (out["in_partition"], out["in_offset"], out["slot"])
        if key not in dups:
            streams[(out["topic"], out["partition"], out["in_partition"])].append(out)
            continue
        seen = first.get(key)
        if seen is None or (seen["topic"], seen["partition"], seen["offset"]) > (out["topic"], out["partition"], out["offset"]):
            first[key] = out
    for out in first.values():
        streams[(out["topic"], out["partition"], out["in_partition"])].append(out)
    cases = []
    for (topic, partition, in_partition), outs in sorted(streams.items()):
        highest: dict[str, Any] | None = None
        for out in sorted(outs, key=lambda r: r["offset"]):
            if highest is not None and out["in_offset"] < highest["in_offset"]:
                cases.append(_case(data, explain("nonmonotonic", topic=topic, partition=partition, p=in_partition,
                                                 o=out["in_offset"], earlier=highest["in_offset"]),
                                   [highest, out]))
            if highest is None or out["in_offset"] > highest["in_offset"]:
                highest = out
    return result("nonmonotonic", cases)


@implements("no-progress", "python")
def check_no_progress(data: RunData) -> CheckResult:
    if data.has_history or data.txn_log is None:
        return progress_result(data.history.committed_transactions(), len(data.outputs_committed))
    log = ((r["entry"].transactional_id, r["entry"].status if r["entry"].producer_id is not None else None)
           for r in data.txn_log)
    return progress_result(coordinator_commits(log, data.history.seeder_txids), len(data.outputs_committed),
                           from_log=True)


def facts(data: RunData) -> dict[str, Any]:
    outcomes = Counter(data.txn_outcome.values())
    return {
        "inputs_committed": len(data.inputs_committed),
        "inputs_aborted_or_undecided": len(data.inputs_raw_only),
        "outputs_committed": len(data.outputs_committed),
        "outputs_raw": data.outputs_raw,
        "outputs_without_lineage": data.foreign_outputs,
        "outputs_of_ambiguous_inputs": data.set_aside_outputs,
        "inputs_with_ambiguous_id": data.ambiguous_inputs,
        "transactions": dict(outcomes),
        "transactions_per_txid": data.history.per_txid_outcomes(),
        "final_group_offsets": {str(p): o for p, o in sorted(data.final_offsets.items())},
        "faults": len(data.faults),
        "transaction_log_records": len(data.txn_log) if data.txn_log is not None else None,
        "client_transaction_versions": dict(Counter(str(r["entry"].client_transaction_version)
                                                    for r in data.txn_log or [] if r["entry"].producer_id is not None)),
        "late_requests": late_request_facts(data.run, data.txn_log, data.ops),
        "commit_markers": commit_marker_facts(data.segments, lambda pids: None if data.txn_log is None else
                                              [r for r in data.txn_log if r["entry"].producer_id in pids],
                                              driver_checks.clock_skew_windows(data.history)),
        "sequence_reuse": sequence_reuse_facts(data.segments, data.history.ops),
        "commits_by_client_tv_per_txid": commits_by_client_tv(
            ((r["entry"].transactional_id, r["entry"].status, r["entry"].client_transaction_version, 1)
             for r in data.txn_log or [] if r["entry"].producer_id is not None), data.txid_prefix),
        "liveness": data.liveness,
    }


@implements("inconsistent-offsets", "python")
def check_inconsistent_offsets(data: RunData) -> CheckResult:
    return observations.inconsistent_offsets(data.observed, data.faults_at)


@implements("observed-aborted-read", "python")
def check_observed_aborted_read(data: RunData) -> CheckResult:
    early = []
    if observations.judges_reads_before_commit(data.workload, data.history):
        seen = {(r["topic"], r["partition"], r["offset"]) for r in data.observed.rows}
        owner = {(o["topic"], o["partition"], o["offset"]): key for o in data.outputs_committed
                 if o["worker"] and (o["topic"], o["partition"], o["offset"]) in seen
                 and (key := data.txn_key(o)) in data.txn_ops}
        early = observations.reads_before_commit(data.observed, owner, data.history, data.faults_at)
    early += observations.reads_before_seed(data.observed, observations.seeded_inputs(
        data.history, data.workload.input_topic), data.history, data.faults_at)
    return observations.observed_aborted_reads(data.observed, data.faults_at, early)


@implements("poll-skip", "python")
def check_poll_skip(data: RunData) -> CheckResult:
    return observations.poll_skips(data.observed, data.faults_at)


@implements("nonmonotonic-poll", "python")
def check_nonmonotonic_poll(data: RunData) -> CheckResult:
    return observations.nonmonotonic_polls(data.observed, data.faults_at)


@implements("unseen", "python")
def check_unseen(data: RunData) -> CheckResult:
    return observations.unseen(data.observed)


#: the single-process reference: the queries above and the driver-side checks (verifier/engine.py)
PythonEngine = engine_class("python", "The single-process reference engine (verifier/engine.py).", __name__)
