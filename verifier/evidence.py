"""Missing evidence is never valid: what a run lacks, which checks that blinds, and whether the
verdict can still be given.

A check that could not see its data is ``not_checked`` with the reason (``Gap.checks``); where a
guarantee could not be judged at all, the gap is *fatal*: an error on the results, which makes
the verdict ``unknown`` unless a check found the run ``invalid`` (verifier/results.py). Each
rule is one definition for both engines, over what every engine's run object has: ``run``,
``workload``, ``final``, ``history``, ``txn_log_records``, ``acknowledged``,
``foreign_committed``, ``output_processes``, ``unrecorded_output_transactions``, ``compaction`` and
``observer_summary``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.clusters.base import coordinator_partition
from kchaos.clusters.clock_probe import shift_and_tolerance
from kchaos.faults.kinds import KINDS
from kchaos.verifier import exposure, fault_effects
from kchaos.verifier.model import NotApplicable, in_scope, pipeline_txids
from kchaos.clusters.compaction import cleaned_offsets


@dataclass(frozen=True)
class CheckGroups:
    """Which checks read which evidence (the registry, verifier/checks.py, says)."""

    history: tuple[str, ...]          #: the checks that need the client history
    transaction_log: tuple[str, ...]  #: those that read __transaction_state
    offsets_log: tuple[str, ...]      #: those that read __consumer_offsets
    user_topics: tuple[str, ...]      #: those that read the input and output topics
    observations: tuple[str, ...] = ()  #: those that read the observers' reads


#: what a history with a hole blinds beside making the verdict unknown: the offsets its lost
#: transactions sent are not known, so a commit of theirs would look sent by nobody
_UNSENT_UNKNOWN = ("stray-offset-commit",)


@dataclass(frozen=True)
class Gap:
    reason: str
    #: the checks it blinds (not_checked with the reason); () blinds none
    checks: tuple[str, ...] = ()
    #: the verdict cannot be valid: an error on the results
    fatal: bool = True


# -- compaction of the internal logs -----------------------------------------------------------

def compaction_of(run: Path, final: dict[str, Any]) -> dict[str, Any] | None:
    """What the log cleaner removed from the internal topics, per topic and partition (the offset
    it cleaned up to), or None when nobody can tell. Recorded in ``final.json`` by the cluster
    that can read it; for a run recorded before that, read from the run's own broker data when
    the run directory holds it (the local backend's layout)."""
    if final.get("compaction") is not None:
        return final["compaction"]

    return cleaned_offsets(Path(run) / "cluster")


def clean_point(compaction: dict[str, Any] | None, topic: str, partition: int | None) -> int | None:
    """The offset up to which the log cleaner compacted ``topic``'s ``partition``: records below it
    may have been replaced by a later record of the same key; records at or past it, and the last
    record of every key, are as written. 0: nothing cleaned; None: nobody can tell (a cluster that
    did not say). ``partition`` None (not known): the highest point of any partition of the topic."""
    if compaction is None or "error" in compaction:
        return None
    cleaned = {int(p): int(o) for p, o in (compaction.get(topic) or {}).items()}
    if partition is None:
        return max(cleaned.values(), default=0)
    return cleaned.get(int(partition), 0)


def partition_count(final: dict[str, Any], topic: str) -> int | None:
    """How many partitions the final reads found in ``topic`` (None: it was not read)."""
    counts = [len(t.get("end_offsets") or {}) for t in final.get("topics") or [] if t.get("topic") == topic]
    return max(counts) if counts and max(counts) else None


def key_partition(final: dict[str, Any], topic: str, key: str) -> int | None:
    """The partition of an internal topic that holds ``key`` (a group id, a transactional id), as
    the coordinators place it; None when the topic's partition count is not known."""
    n = partition_count(final, topic)
    return coordinator_partition(key, n) if n else None


def view_cut(final: dict[str, Any], topic: str, partition: int) -> tuple[int, int] | None:
    """(end of the committed view, end of the log) of one partition when the committed view stops
    before the log's end (a transaction left open pins its last stable offset), else None."""
    ends = {t.get("view"): t.get("end_offsets") or {} for t in final.get("topics") or [] if t.get("topic") == topic}
    if "committed" not in ends or "raw" not in ends:
        return None
    raw = {int(p): o for p, o in ends["raw"].items()}.get(int(partition), 0)
    committed = {int(p): o for p, o in ends["committed"].items()}.get(int(partition), 0)
    return (committed, raw) if committed < raw else None


def group_offsets_partition(data: Any) -> int | None:
    """The ``__consumer_offsets`` partition of the run's group: where its commits were found, else
    where the group coordinator places the group id; None when neither can tell."""
    found = {c["log_partition"] for c in data.offset_log or []}
    if len(found) == 1:
        return found.pop()
    return key_partition(data.final, "__consumer_offsets", data.workload.group_id)


# -- the rules ---------------------------------------------------------------------------------

def records_history(workload: dict[str, Any]) -> bool:
    """kchaos' own workers (and the Streams driver) record a client history; an external app does not."""
    return not workload.external_command


def history_holes(data: Any) -> dict[str, list[int]]:
    """The processes whose history has a hole: process -> the transactions its committed outputs
    name that its history does not hold. A worker writes a transaction's "send" before its first
    output, each line one write(2) that a killed process leaves whole: an output of a transaction
    its history lacks means the history lost it, and what that transaction did is not known."""
    recorded = {op["process"] for op in data.history.ops}
    return {p: seqs for p, seqs in (data.unrecorded_output_transactions or {}).items() if p in recorded}


def gaps(data: Any, groups: CheckGroups) -> list[Gap]:
    """Every gap in the run's evidence; ``groups``: which checks each kind of evidence feeds."""
    workload, final, history = data.workload, data.final, data.history
    share = workload.kind == "share"
    out: list[Gap] = []

    if not share and (final.get("group_offsets") is None or final.get("group_offsets_error")):
        out.append(Gap(f"the group's final offsets could not be read ({final.get('group_offsets_error') or 'absent'}): "
                       "which inputs the group moved past is unknown",
                       ("lost-input", "offsets-ahead", "offsets-behind", "stalled-pipeline", "unprocessed-assignment")))

    for dump in final.get("topics") or []:
        stopped = dump.get("incomplete_partitions") or []
        if not stopped:
            continue
        topic = dump.get("topic")
        blinds = (groups.transaction_log if topic == "__transaction_state" else groups.offsets_log
                  if topic == "__consumer_offsets" else () if str(topic).startswith("__") else groups.user_topics)
        out.append(Gap(f"the final read of {topic} ({dump.get('view')}) stopped before the end of partitions "
                       f"{', '.join(map(str, stopped))}: its data is partial", blinds))

    for topic, why in sorted((final.get("unreadable_topics") or {}).items()):
        if topic == "__share_group_state" and not share:
            continue  # no check of a ctp run reads it
        blinds = (groups.transaction_log if topic == "__transaction_state" else groups.offsets_log
                  if topic == "__consumer_offsets" else ())
        out.append(Gap(f"{topic} could not be read: {why}. What it records is unknown to this run", blinds))

    own = records_history(workload)
    sent = any(op["f"] == "send" for op in history.ops)
    if own and history.has_history and not sent and (data.outputs_committed_count or 0) > 0:
        out.append(Gap(f"kchaos' own workers recorded no transaction, although {data.outputs_committed_count} committed "
                       "outputs exist: their history is partial", groups.history))
    elif own and not history.has_history:
        out.append(Gap("kchaos' own workers recorded no client history (history.jsonl missing or without their "
                       "operations): what the clients did is unknown", groups.history))
    elif own and data.output_processes is not None:
        recorded = {op["process"] for op in history.ops}
        silent = sorted(p for p in data.output_processes if p not in recorded)
        if silent:
            out.append(Gap(f"committed outputs name {len(silent)} process(es) with no history "
                           f"({', '.join(silent[:5])}{', ...' if len(silent) > 5 else ''}): their transactions are not "
                           "known", _UNSENT_UNKNOWN))
        holes = history_holes(data)
        if holes:
            named = "; ".join(f"{p}: {_ranges(seqs)}" for p, seqs in sorted(holes.items())[:5])
            out.append(Gap(f"committed outputs name {sum(map(len, holes.values()))} transaction(s) that the history "
                           f"of their process does not hold ({named}{'; ...' if len(holes) > 5 else ''}): the history "
                           "has a gap, so what those transactions did is not known", _UNSENT_UNKNOWN))

    seeded = any(op["process"] == "seeder" for op in history.ops)
    if not seeded and (data.inputs_committed_count or 0) > 0:
        out.append(Gap("the input seeder left no history: what it was acknowledged to write is unknown",
                       ("lost-acknowledged-input",)))
    said = (final.get("seeder") or {}).get("committed")
    recorded = len(data.acknowledged.committed) + len(data.acknowledged.committed_ids)
    if seeded and said is not None and recorded < said:
        out.append(Gap(f"the seeder committed {said} inputs by its own count, but its history records the "
                       f"acknowledgements of {recorded}: what it wrote beyond them is not known (its history stops "
                       "early)"))

    if (data.foreign_committed or 0) > 0:
        out.append(Gap(f"{data.foreign_committed} committed output records carry no lineage (or name no known input): "
                       "they cannot be checked"))

    committed = history.committed_transactions()
    if (workload.delivery == "exactly-once" and data.txn_log_records == 0
            and (committed > 0 or (data.outputs_committed_count or 0) > 0)):
        out.append(Gap(f"__transaction_state holds no record although {committed or 'some'} transactions committed: "
                       "the coordinator's own account is missing", groups.transaction_log))

    wanted = data.campaign.observers.count
    if wanted and data.observer_summary is None:
        out.append(Gap(f"the campaign asked for {wanted} observers, but their reads are not in the run directory "
                       "(observers/observations.parquet): what readers saw during the run is unknown",
                       groups.observations))
    elif wanted:
        failed = failed_observers(data.observer_summary)
        if failed:
            out.append(Gap(failed + ": what no reader got cannot be told", ("unseen",), fatal=False))

    measurable = history.has_history or data.txn_log is not None
    out += fault_gaps(Path(data.run), data.campaign, history, final, measurable,
                      lambda: run_exposure(data), lambda: logged_pipeline_transactions(data),
                      lambda: run_fault_effects(data))
    return out


def fault_gaps(run: Path, campaign: Any, history: Any, final: dict[str, Any], measurable: bool,
               exposure_of: Any, logged_of: Any, effects_of: Any) -> list[Gap]:
    """What keeps a run's faults from counting (every workload kind): a schedule none of whose
    faults ran, fewer faults executed than required, faults the recorded cluster could not have
    run, and faults that hit less work than the campaign's ``[faults.exposure]`` (or, without one,
    its floor). ``measurable``: the pipeline's work can be measured (a client history or the
    coordinator's log); ``exposure_of``, ``logged_of``, ``effects_of``: the run's exposure, its
    transactions from the coordinator's log (None with a client history) and its faults' effects,
    computed only when needed."""
    out: list[Gap] = []
    coverage = fault_coverage(run, history.faults, campaign.faults.coverage)
    if coverage["planned"] and not sum(coverage["executed"].values()):
        out.append(Gap(f"the schedule planned {sum(coverage['planned'].values())} faults and the history shows none "
                       "injected: the run says nothing about faults"))
    elif coverage["short"] and not final.get("interrupted"):
        errors = sorted({op.get("error") or "?" for op in history.faults
                         if op["f"].removeprefix("fault:") in coverage["short"] and op["outcome"] != "ok"})
        out.append(Gap("the run executed fewer faults than it requires: "
                       + ", ".join(f"{kind} {n['executed']} of {n['required']} (planned {n['planned']}, attempted "
                                   f"{n['attempted']})" for kind, n in sorted(coverage["short"].items()))
                       + (f" ({'; '.join(errors[:3])})" if errors else "")
                       + ": the run says nothing about them"))

    impossible = impossible_faults(campaign, history)
    if impossible:
        out.append(Gap("the history records faults the recorded cluster could not have run: " + "; ".join(impossible)
                       + ": a record the run cannot have, so nothing it would set aside or count is taken"))

    required = campaign.faults.exposure
    if required.required and coverage["planned"] and not final.get("interrupted"):
        if not measurable:
            out.append(Gap("the campaign requires its faults to hit work, but the pipeline recorded no client history "
                           "and the coordinator's log could not be read: what they overlapped cannot be measured"))
        else:
            short = exposure.shortfall(exposure_of(), required, history, logged_of(), effects_of())
            if short:
                out.append(Gap("the faults hit less work than the campaign requires ([faults.exposure]): "
                               + "; ".join(short) + ": the run says little about those faults"))
    if not required.committed and required.floor and coverage["planned"] and not final.get("interrupted") and measurable:
        short = exposure.floor_shortfall(exposure_of(), required.floor)
        if short:
            out.append(Gap(f"the faults hit next to no work (the campaign requires no kind's, so the floor holds: "
                           f"{required.floor:g} committed transaction per fault of each kind; [faults.exposure] "
                           "floor = 0 lowers it): " + "; ".join(short) + ": the run says little about those faults"))
    return out


def impossible_faults(campaign: Any, history: Any) -> list[str]:
    """Executed faults whose kind needs a cluster setting (faults/kinds: ``needs``, e.g. a clock
    fault libfaketime's ``clock_control``) that the recorded campaign's cluster did not have: the
    fault cannot have done what its record says (a set-aside it would open, exposure it would
    count), each as a phrase."""
    if not history.faults:
        return []
    cluster = campaign.cluster
    external = cluster.backend == "external"
    out = []
    for op in history.faults:
        kind = op["f"].removeprefix("fault:")
        if kind not in KINDS or op.get("outcome") != "ok":
            continue
        needs = KINDS[kind].cluster_needs({})
        table, settings = (("cluster.external", cluster.external) if external else ("cluster", cluster))
        wanted = needs.external if external else needs.cluster
        missing = [key for key, value in wanted.items() if value and not getattr(settings, key, None)]
        if missing:
            index = (op.get("value") or {}).get("index")
            out.append(f"fault {index} {kind} needs {', '.join(f'{table}.{k}' for k in missing)}, which the run's "
                       "cluster did not have")
    return out[:5]


def run_exposure(data: Any) -> dict[str, Any]:
    """The run's fault exposure (verifier/exposure.py), measured once per engine run object: on the
    client history, or (a pipeline that keeps none: Kafka Streams, a user's app) on the
    coordinator's log."""
    cached = getattr(data, "_exposure", None)
    if cached is None:
        cached = exposure.exposure(data.history, data.campaign.faults.exposure.stall_s,
                                   drained=bool(data.final.get("drained", True)),
                                   txns=logged_pipeline_transactions(data), effects=run_fault_effects(data))
        data._exposure = cached
    return cached


def run_fault_effects(data: Any) -> dict[int, dict[str, Any]]:
    """Each executed fault's effect from the cluster's own record (verifier/fault_effects.py), once
    per engine run object."""
    cached = getattr(data, "_fault_effects", None)
    if cached is None:
        ops = data.history.ops
        end = max((op["complete_time"] or op["invoke_time"] for op in ops), default=None)
        cached = fault_effects.run_effects(data.run, data.history.faults, data.campaign.cluster, end, ops)
        data._fault_effects = cached
    return cached


def logged_pipeline_transactions(data: Any) -> list[exposure.Transaction] | None:
    """The pipeline's transactions from the coordinator's log when it keeps no client history (the
    seeder's and, on a shared cluster, other applications' ids left out); None when it keeps one."""
    if data.history.has_history or data.txn_log is None:
        return None
    scope = pipeline_txids(data.campaign, data.history)
    return exposure.logged_transactions([c for c in data.coordinator_transactions()
                                         if in_scope(c.transactional_id, scope)],
                                        excluded=set(data.history.seeder_txids))


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` as ``1-3, 7`` (at most 4 ranges, then how many more)."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    text = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans[:4])
    return text + (f" and {len(spans) - 4} more ranges" if len(spans) > 4 else "")


def failed_observers(summary: dict[str, Any] | None) -> str | None:
    """Which observers failed during the run, and after how many records (None: none did): their
    reads stop there, so the read-side checks judge only what they read before."""
    failed = [o for o in (summary or {}).get("observers") or [] if o.get("error")]
    if not failed:
        return None
    return "observer " + ", ".join(f"{o['observer']} failed ({o['error']}) after {o.get('records', '?')} records"
                                   for o in failed)


def fault_coverage(run: Path, faults: list[dict[str, Any]], required: dict[str, int] | None) -> dict[str, Any]:
    """Per fault kind: how many the schedule planned, how many the nemesis attempted, how many it
    executed (injected: the history's ``ok``), how many the campaign requires (``faults.coverage``;
    None: each planned kind once), and the kinds below their requirement (``short``)."""
    planned = _planned_faults(run)
    attempted = Counter(op["f"].removeprefix("fault:") for op in faults)
    executed = Counter(op["f"].removeprefix("fault:") for op in faults if op["outcome"] == "ok")
    needs = {kind: 1 for kind in planned} if required is None else dict(required)
    short = {kind: {"planned": planned.get(kind, 0), "attempted": attempted.get(kind, 0),
                    "executed": executed.get(kind, 0), "required": n}
             for kind, n in sorted(needs.items()) if executed.get(kind, 0) < n}
    return {"planned": dict(sorted(planned.items())), "attempted": dict(sorted(attempted.items())),
            "executed": dict(sorted(executed.items())), "required": dict(sorted(needs.items())), "short": short}


def _planned_faults(run: Path) -> Counter[str]:
    """The scheduled faults per kind (none when the run has no schedule)."""
    try:
        faults = json.loads((run / "schedule.json").read_text()).get("faults") or []
    except (OSError, ValueError):
        return Counter()
    return Counter(f.get("kind", "?") for f in faults)


def white_box_facts(data: Any) -> dict[str, Any]:
    """The facts of the brokers' own records and the acknowledgements, as both engines report
    them (after the checks: the coordinator's view is computed by the split-transaction check)."""
    ack = data.acknowledged
    return {"acknowledged_inputs": {"committed": len(ack.committed), "aborted": len(ack.aborted),
                                    "committed_without_position": len(ack.committed_ids),
                                    "seed_batches": ack.batches, "batches_recorded": ack.recorded},
            "offset_commits": len(data.offset_log) if data.offset_log is not None else None,
            "coordinator": data.coordinator_facts,
            "producer_ids": data.producer_id_facts,
            "compaction": data.compaction,
            "fault_coverage": fault_coverage(Path(data.run), data.history.faults, data.campaign.faults.coverage),
            "exposure": run_exposure(data) if data.history.has_history or data.txn_log is not None else None}


def broker_clock(data: Any) -> tuple[float, float, str]:
    """How the coordinator's clock maps onto the harness's: (shift ms, tolerance ms, how known).
    A cluster kchaos starts shares this machine's clock; on an external one the run measured it
    (``clock.json``). Raises NotApplicable when it was not measured: a coordinator transaction
    cannot then be placed in its client's window."""
    if data.campaign.cluster.backend != "external":
        return 0.0, 0.0, "the harness's own clock (the cluster runs on this machine)"
    path = Path(data.run) / "clock.json"
    measured = json.loads(path.read_text()).get("measurements", []) if path.exists() else []
    found = shift_and_tolerance(measured)
    if found is None:
        errors = "; ".join(m["error"] for m in measured if m.get("error"))
        raise NotApplicable("the brokers' clocks were not measured against the harness's (clock.json"
                            + (f": {errors}" if errors else " missing") + "), so a coordinator transaction cannot be "
                            "placed in its client's window")
    shift, tolerance = found
    return shift, tolerance, f"measured: the brokers' clocks {shift:+.0f} ms from the harness's, within {tolerance:.0f} ms"
