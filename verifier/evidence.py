"""Missing evidence is never valid: what a run lacks, which checks that blinds, and whether the
verdict can still be given.

A check that could not see its data is ``not_checked`` with the reason (``Gap.checks``); where a
guarantee could not be judged at all, the gap is *fatal*: an error on the results, which makes
the verdict ``unknown`` unless a check found the run ``invalid`` (verifier/results.py). Each
rule is one definition for both engines, over what every engine's run object has: ``run``,
``workload``, ``final``, ``history``, ``txn_log_records``, ``acknowledged``,
``foreign_committed``, ``output_processes``, ``compaction`` and ``observer_summary``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.clusters.local import cleaned_offsets


@dataclass(frozen=True)
class CheckGroups:
    """Which checks read which evidence (the registry, verifier/checks.py, says)."""

    history: tuple[str, ...]          #: the checks that need the client history
    transaction_log: tuple[str, ...]  #: those that read __transaction_state
    offsets_log: tuple[str, ...]      #: those that read __consumer_offsets
    user_topics: tuple[str, ...]      #: those that read the input and output topics
    observations: tuple[str, ...] = ()  #: those that read the observers' reads


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


def compaction_note(compaction: dict[str, Any] | None, topic: str) -> str | None:
    """Why commits of ``topic`` may be missing without anything being lost, or None when the
    cleaner removed nothing from it."""
    if compaction is None:
        return (f"whether the log cleaner compacted {topic} is unknown (the cluster did not say): a commit it removed "
                "would look lost")
    if "error" in compaction:
        return f"whether the log cleaner compacted {topic} is unknown: {compaction['error']}"
    cleaned = {p: o for p, o in (compaction.get(topic) or {}).items() if o > 0}
    if cleaned:
        return (f"the log cleaner compacted {topic} (partitions cleaned up to: "
                f"{', '.join(f'{p}@{o}' for p, o in sorted(cleaned.items()))}): commits it removed look lost")
    return None


def offsets_view_cut(final: dict[str, Any]) -> str | None:
    """Why commits may be missing from ``__consumer_offsets``' committed view without being lost:
    a transaction left open (hanging) pins a partition's last stable offset, and the view ends
    there while the log goes on. None when the view reaches the log's end (or either is absent:
    the offsets-log requirement speaks for that)."""
    ends = {t.get("view"): t.get("end_offsets") or {} for t in final.get("topics") or []
            if t.get("topic") == "__consumer_offsets"}
    if "committed" not in ends or "raw" not in ends:
        return None
    cut = {p: (ends["committed"].get(p, 0), end) for p, end in ends["raw"].items() if ends["committed"].get(p, 0) < end}
    if not cut:
        return None
    return ("the committed view of __consumer_offsets stops before its log ends ("
            + ", ".join(f"partition {p}: {view} of {end}" for p, (view, end) in sorted(cut.items()))
            + "): a transaction left open pins it, so a commit past that point would look lost")


# -- the rules ---------------------------------------------------------------------------------

def records_history(workload: dict[str, Any]) -> bool:
    """kchaos' own workers (and the Streams driver) record a client history; an external app does not."""
    return not workload.external_command


def gaps(data: Any, groups: CheckGroups) -> list[Gap]:
    """Every gap in the run's evidence; ``groups``: which checks each kind of evidence feeds."""
    workload, final, history = data.workload, data.final, data.history
    share = workload.kind == "share"
    out: list[Gap] = []

    if not share and (final.get("group_offsets") is None or final.get("group_offsets_error")):
        out.append(Gap(f"the group's final offsets could not be read ({final.get('group_offsets_error') or 'absent'}): "
                       "which inputs the group moved past is unknown",
                       ("lost-input", "offsets-ahead", "offsets-behind")))

    for dump in final.get("topics") or []:
        stopped = dump.get("incomplete_partitions") or []
        if not stopped:
            continue
        topic = dump.get("topic")
        blinds = (groups.transaction_log if topic == "__transaction_state" else groups.offsets_log
                  if topic == "__consumer_offsets" else () if str(topic).startswith("__") else groups.user_topics)
        out.append(Gap(f"the final read of {topic} ({dump.get('view')}) stopped before the end of partitions "
                       f"{', '.join(map(str, stopped))}: its data is partial", blinds))

    own = records_history(workload)
    if own and not history.has_history:
        out.append(Gap("kchaos' own workers recorded no client history (history.jsonl missing or without their "
                       "operations): what the clients did is unknown", groups.history))
    elif own and data.output_processes is not None:
        recorded = {op["process"] for op in history.ops}
        silent = sorted(p for p in data.output_processes if p not in recorded)
        if silent:
            out.append(Gap(f"committed outputs name {len(silent)} process(es) with no history "
                           f"({', '.join(silent[:5])}{', ...' if len(silent) > 5 else ''}): their transactions are not "
                           "known"))

    seeded = any(op["process"] == "seeder" for op in history.ops)
    if not seeded and (data.inputs_committed_count or 0) > 0:
        out.append(Gap("the input seeder left no history: what it was acknowledged to write is unknown",
                       ("lost-acknowledged-input",)))

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
        failed = [o for o in data.observer_summary.get("observers") or [] if o.get("error")]
        if failed:
            out.append(Gap("observer " + ", ".join(f"{o['observer']} failed ({o['error']})" for o in failed)
                           + ": its reads stop there", fatal=False))

    planned = _planned_faults(Path(data.run))
    injected = Counter(op["f"].removeprefix("fault:") for op in history.faults if op["outcome"] == "ok")
    if planned and not sum(injected.values()):
        out.append(Gap(f"the schedule planned {sum(planned.values())} faults and the history shows none injected: "
                       "the run says nothing about faults"))
    elif planned:
        attempted = {op["f"].removeprefix("fault:") for op in history.faults}
        # a kind tried and never once injected; one never tried was not due yet (an interrupted
        # or time-limited run stops its schedule early, and says so itself)
        never = sorted(kind for kind in planned if kind in attempted and not injected.get(kind))
        if never:  # e.g. a hunt whose message faults all failed: it did not test what it is named for
            errors = sorted({op.get("error") or "?" for op in history.faults
                             if op["f"].removeprefix("fault:") in never and op["outcome"] != "ok"})
            out.append(Gap(f"the schedule planned {', '.join(f'{planned[k]} {k}' for k in never)} faults and not one "
                           f"was injected ({'; '.join(errors[:3])}): the run says nothing about them"))
    return out


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
            "compaction": data.compaction}
