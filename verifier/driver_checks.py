"""The checks both engines run on the driver, over what each has collected there: the
coordinator's transactions (segmented by the engine: coordinator_log), the group's offset
commits, the client history. One function each, imported by both engine modules (the registry,
verifier/checks.py, finds a check's function in the engine module by name)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kchaos.verifier import evidence, liveness
from kchaos.verifier.checks import NOTES, explain, offset_commit_result, result, set_aside_note, split_result
from kchaos.verifier.coordinator_log import (CLOCK_EPS_MS, Skew, coordinator_aborted, judge, on_harness_clock,
                                             stamped_in_skew)
from kchaos.verifier.model import NotApplicable, worker_slot
from kchaos.verifier.offsets_log import lost_offset_commit_cases, offsets_backwards_cases
from kchaos.verifier.results import UNKNOWN, VALID, CheckResult


def intact_from(data: Any, coordinator: list[Any], skewed: Skew | None = None) -> dict[str, float]:
    """Per transactional id of the run whose ``__transaction_state`` partition the cleaner compacted
    (or may have: a cluster that does not say), the start (ms) of its first coordinator
    transaction, in log order, that begins at or past the cleaned point: from then on the id's
    records are all as written (infinity: none is known to be). Ids on partitions nothing cleaned
    are left out: judged whole. Another partition's compaction says nothing about this run's ids.

    Log order, not the earliest stamp: a clock fault's moved stamps are not in time order (a
    coordinator set 60 s back stamped a later transaction before the run began, and the earliest
    stamp then judged a compacted transaction as if its records had to be there: hunt-clock seed
    6 on 4.4.0). Transactions stamped in a ``skewed`` window are passed over: the first one after
    them, placed by an unmoved clock, began no earlier than the true boundary, so the set-aside
    can only grow."""
    by_txid: dict[str, list[Any]] = defaultdict(list)
    for ct in coordinator:
        by_txid[ct.transactional_id].append(ct)
    out: dict[str, float] = {}
    for txid in sorted({op["txid"] for op in data.history.txn_ops.values() if op.get("txid")}):
        cts = by_txid.get(txid, [])
        partition = (cts[0].log_partition if cts
                     else evidence.key_partition(data.final, "__transaction_state", txid))
        clean = evidence.clean_point(data.compaction, "__transaction_state", partition)
        if clean == 0:
            continue
        kept = sorted((ct for ct in cts if clean is not None and ct.first_offset >= clean and
                       not stamped_in_skew(ct, skewed)), key=lambda ct: ct.first_offset)
        out[txid] = kept[0].start_ms if kept else float("inf")
    return out


#: beyond a clock fault's own window: the library's re-read of the offset (clusters/faketime.py,
#: measured up to 3 s) and a transaction timeout that the moved clock brought forward
CLOCK_SKEW_MARGIN_MS = 5_000


def clock_skew_windows(history: Any) -> Skew:
    """Harness-clock windows (ms) that a clock fault makes unplaceable, two per fault, each
    widened by CLOCK_SKEW_MARGIN_MS: while it lasted (the transactions that ran then), and where
    its moved stamps land (its start plus the most negative offset it applied, to its heal plus
    the most positive). A step of 8 days ahead sets aside its own seconds and a span 8 days on,
    not the rest of the run."""
    windows: Skew = []
    for op in history.faults:
        if not op["f"].startswith("fault:clock-"):
            continue
        value = op.get("value") or {}
        detail = (value.get("resolved") or {}).get("detail") or {}
        first = detail.get("first_offset_s") or 0.0
        led = detail.get("transaction_log_partitions")
        parts = frozenset(led) if isinstance(led, list) else None
        lo, hi = (value.get("heal") or {}).get("offset_range_s") or [min(0.0, first), max(0.0, first)]
        start = op["invoke_time"] * 1000
        end = op["complete_time"] * 1000 if op.get("complete_time") else float("inf")
        windows.append((start - CLOCK_SKEW_MARGIN_MS, end + CLOCK_SKEW_MARGIN_MS, parts))
        windows.append((start + lo * 1000 - CLOCK_SKEW_MARGIN_MS, end + hi * 1000 + CLOCK_SKEW_MARGIN_MS, parts))
    return windows


def check_split_transactions(data: Any) -> CheckResult:
    """``data.coordinator_transactions()`` (the engine's segmentation of the log) judged against
    the history; the coordinator's facts are kept on ``data`` for the results."""
    shift, tolerance, clock = evidence.broker_clock(data)
    coordinator = on_harness_clock(data.coordinator_transactions(), shift)
    skewed = clock_skew_windows(data.history)
    intact = intact_from(data, coordinator, skewed)
    cases, data.coordinator_facts = judge(coordinator, data.history, data.late_requests(), intact,
                                          CLOCK_EPS_MS + tolerance, skewed)
    data.coordinator_facts["clock"] = {"shift_ms": shift, "tolerance_ms": tolerance, "how": clock}
    found = split_result(cases, data.coordinator_facts)
    skew_aside = data.coordinator_facts.get("clock_skew_set_aside") or {}
    if skew_aside.get("client_transactions") and found.verdict != UNKNOWN:
        if not data.coordinator_facts["client_transactions"] and not cases:
            return CheckResult("split-transaction", UNKNOWN, note=NOTES["split-transaction.all-clock-skewed"].format(
                n=skew_aside["client_transactions"]))
        found.note = (found.note or f"{data.coordinator_facts['attributed']} coordinator transactions attributed") + \
            NOTES["set-aside.clock-skewed"].format(n=skew_aside["client_transactions"],
                                                   m=skew_aside.get("coordinator_transactions", 0))
    aside = data.coordinator_facts["unrecorded_set_aside"]
    if aside and found.verdict != UNKNOWN:
        where = {txid: "nothing kept" if when == float("inf") else f"from {when:.0f} ms"
                 for txid, when in intact.items() if txid in aside}
        found.note = (found.note or f"{data.coordinator_facts['attributed']} coordinator transactions attributed") + \
            set_aside_note([NOTES["set-aside.unrecorded-compacted"].format(
                n=sum(aside.values()), ids=", ".join(sorted(aside)), where="; ".join(f"{t}: {w}" for t, w in where.items()))])
    return found


def check_lost_offset_commits(data: Any) -> CheckResult:
    """Judged on the group's own ``__consumer_offsets`` partition: another group's compaction or
    open transaction there says nothing about this run's commits."""
    partition = evidence.group_offsets_partition(data)
    clean = evidence.clean_point(data.compaction, "__consumer_offsets", partition)
    cut = evidence.view_cut(data.final, "__consumer_offsets", partition) if partition is not None else None
    cases, checked, set_aside = lost_offset_commit_cases(data.history, data.offset_log, data.workload.input_topic,
                                                         clean, cut is not None)
    log = f"__consumer_offsets-{partition if partition is not None else '?'}"
    parts = []
    if set_aside.get("compacted"):
        parts.append(NOTES["set-aside.compacted"].format(n=set_aside["compacted"], log=log,
                                                         clean="up to an unknown offset" if clean is None
                                                         else f"up to offset {clean}"))
    if set_aside.get("past the committed view"):
        parts.append(NOTES["set-aside.past the committed view"].format(n=set_aside["past the committed view"], log=log,
                                                                       view=cut[0], end=cut[1]))
    return offset_commit_result(cases, checked, data.history.committed_transactions(), parts)


def check_offsets_backwards(data: Any) -> CheckResult:
    return result("offsets-backwards", offsets_backwards_cases(data.offset_log, data.workload.input_topic))


def coordinator_aborted_keys(data: Any) -> set[tuple[str, int]]:
    """Client transactions of unknown outcome that the coordinator's log shows aborted (the
    aborted-read explanations); none where the coordinator's clock is not known."""
    try:
        shift, tolerance, _ = evidence.broker_clock(data)
    except NotApplicable:
        return set()
    return coordinator_aborted(on_harness_clock(data.coordinator_transactions(), shift), data.history,
                               CLOCK_EPS_MS + tolerance, clock_skew_windows(data.history))


# -- liveness (verifier/liveness.py): what the run did after the final heal ----------------------

def _when(at: float | None, data: Any) -> str:
    """A moment of the run as the explanations say it: seconds after the final heal where known."""
    drain = liveness.drain_of(data)
    if at is None or not drain.get("started"):
        return "at the final reads"
    return f"{at - drain['started']:.0f} s after the final heal"


def _rates_note(data: Any) -> str:
    before, after = liveness.rates(data)
    parts = ([f"{before:.0f} inputs/s before the first fault"] if before is not None else []) + \
        ([f"{after:.0f} inputs/s in the drain"] if after is not None else [])
    return f" ({', '.join(parts)})" if parts else ""


def check_stalled_pipeline(data: Any) -> CheckResult:
    """The pipeline resumes: every committed input processed within the drain's bound after the
    final heal. A drain that finished proves it (the harness saw every input partition's
    committed offset pass the seeder's last input); one that ran out is judged on the final
    reads, partition by partition."""
    final = data.final
    drain = liveness.drain_of(data)
    if "drained" not in final:
        raise NotApplicable("the run recorded no drain (final.json has no drained)")
    if final.get("interrupted") and not final["drained"]:
        raise NotApplicable("the run was interrupted and its drain cut short: the campaign's bound was not waited out")
    if final["drained"]:
        took = (f" ({drain['ended'] - drain['started']:.0f} s of at most {drain['timeout_s']:.0f} s)"
                if drain["recorded"] and drain.get("started") else "")
        return CheckResult("stalled-pipeline", VALID, note=NOTES["stalled-pipeline.drained"].format(
            took=took, rates=_rates_note(data)))
    stalled = liveness.stalled_partitions(data)
    if not stalled:
        return CheckResult("stalled-pipeline", VALID, note=NOTES["stalled-pipeline.caught-up"].format(
            bound=drain["timeout_s"], rates=_rates_note(data)))
    topic = data.workload.input_topic
    end = drain.get("ended")
    members = liveness.members_at(data, end) if end is not None else []
    view = liveness.group_view(data)
    cases = []
    for s in stalled:
        moved = liveness.last_moved(data, s.partition)
        still = (f" from {end - moved:.0f} s before the drain's end" if moved is not None and end is not None else "")
        what = f"{s.unprocessed} committed inputs" if s.unprocessed is not None else "the committed inputs"
        cases.append({
            "explanation": explain("stalled-pipeline", what=what, topic=topic, p=s.partition, first=s.first,
                                   last=s.last, bound=drain["timeout_s"], progress=(
                                       explain("stalled-pipeline.never") if s.group_offset is None else
                                       explain("stalled-pipeline.stayed", offset=s.group_offset, still=still))),
            "input": {"topic": topic, "partition": s.partition, "group_offset": s.group_offset,
                      "unprocessed": s.unprocessed, "first_unprocessed": s.first, "last_committed": s.last},
            # when its progress stopped: the report shows the brokers' log lines around it
            **({"observed_at": moved} if moved is not None else {}),
            "progress": [{"time": t, "committed_offset": o} for t, o in liveness.partition_progress(data, s.partition)],
            "held_by": [{**m.view(), "errors_in_drain": liveness.last_errors(data, m.process, drain.get("started"))}
                        for m in members if s.partition in m.holds],
            "assigned_by_coordinator": [{"client_id": m.get("client_id"), "member_id": m.get("member_id")}
                                        for m in (view or {}).get("members") or []
                                        if s.partition in (m.get("partitions") or [])] if view else None,
            "drain": drain})
    return result("stalled-pipeline", cases)


def check_unprocessed_assignments(data: Any) -> CheckResult:
    """Every partition with inputs left is held by a member that processes it: for each input
    partition the drain left unprocessed, the group coordinator's view at the drain's end
    (``final.json`` ``group``: describe) against the members' own account (their ``assign`` and
    Streams state events in the history). A case where the coordinator assigns it to a member
    that does not hold it (F10: the instance RUNNING with no task, the group STABLE), assigns it
    to nobody, or, without the coordinator's view, where no running instance holds it."""
    final = data.final
    if "drained" not in final or final.get("interrupted") and not final["drained"]:
        raise NotApplicable("the run recorded no drain that waited out its bound")
    stalled = [] if final["drained"] else liveness.stalled_partitions(data)
    if not stalled:
        return CheckResult("unprocessed-assignment", VALID, note=NOTES["unprocessed-assignment.none-left"])
    drain = liveness.drain_of(data)
    end = drain.get("ended")
    if end is None:
        raise NotApplicable("the run recorded no end of its drain: who held what then is not known")
    members = liveness.members_at(data, end)
    recorded = ((final.get("group") or {}).get("views") or {}).get("drain_end")
    view = liveness.group_view(data)
    # the members' own account: an external app records none, and then only the coordinator's
    # view can say anything (a partition it assigns to nobody)
    accounts = any(op["f"] in ("assign", "revoke") and worker_slot(op["process"]) for op in data.history.ops)
    if not accounts and view is None:
        raise NotApplicable("neither the pipeline's processes (an external app records no assignment) nor the group "
                            "coordinator (not recorded) say who held the partitions left unprocessed")
    topic = data.workload.input_topic
    by_slot = {worker_slot(m.process): m for m in members}
    cases, held = [], 0
    for s in stalled:
        base = {"input": {"topic": topic, "partition": s.partition, "group_offset": s.group_offset,
                          "unprocessed": s.unprocessed}, "observed_at": end,
                "instances": [m.view() for m in members], "group_view": view}
        holders = [m for m in members if s.partition in m.holds]
        if view is not None:
            owners = [m for m in view.get("members") or [] if s.partition in (m.get("partitions") or [])]
            for owner in owners:
                member = by_slot.get(liveness.slot_of_client(owner.get("client_id")))
                if not accounts or member is not None and s.partition in member.holds:
                    continue
                slot = liveness.slot_of_client(owner.get("client_id"))
                cases.append({"explanation": explain(
                    "unprocessed-assignment.not-run", topic=topic, p=s.partition,
                    member=owner.get("client_id") or owner.get("member_id"), group_state=view.get("state") or "?",
                    holds=(f"{sorted(member.holds)}" if member is not None else "nothing (no running instance of it)"),
                    state=f" and is {member.state}" if member is not None and member.state else ""),
                    **base, "member": owner, "heartbeats": liveness.heartbeats_of(data, slot) if slot else []})
            if not owners:
                cases.append({"explanation": explain("unprocessed-assignment.unassigned", topic=topic, p=s.partition,
                                                     group_state=view.get("state") or "?",
                                                     members=len(view.get("members") or [])), **base})
            elif not accounts or all(by_slot.get(liveness.slot_of_client(o.get("client_id"))) in holders
                                     for o in owners):
                held += 1
        elif not holders:
            instances = ", ".join(f"{m.process} holds {sorted(m.holds)}" + (f" ({m.state})" if m.state else "")
                                  for m in members) or "none running"
            cases.append({"explanation": explain("unprocessed-assignment.unowned", topic=topic, p=s.partition,
                                                 instances=instances), **base})
        else:
            held += 1
    note = None
    if not cases and held:
        note = NOTES["unprocessed-assignment.held"].format(n=held)
    found = result("unprocessed-assignment", cases, note=note)
    if view is None:
        why = (recorded or {}).get("error") or "recorded before kchaos kept it"
        found.note = (found.note or NOTES["cases"].format(n=len(cases))) + \
            NOTES["unprocessed-assignment.members-only"].format(why=why)
    return found


def check_brokers_rejoined(data: Any) -> CheckResult:
    """Every broker registered and unfenced, and every partition of the run's topics led, at the
    run's end (F9: a broker whose clock was stepped back stays fenced)."""
    state = liveness.brokers_at_end(data)
    when = (f"{state.after_heal_s:.0f} s after the final heal" if state.after_heal_s is not None
            else "after the final heal")
    said = (explain("broker-not-rejoined.heal-gave-up") if state.source == liveness.HEAL_GAVE_UP
            else explain("broker-not-rejoined.at-end", when=when))
    cases = [{"explanation": explain("broker-not-rejoined", broker=b, when=said), "broker": b, "source": state.source,
              **({"observed_at": state.at} if state.at else {}), "heal": data.final.get("heal"),
              "brokers_at_end": data.final.get("brokers_at_end")}
             for b in state.missing]
    cases += [{"explanation": explain("broker-not-rejoined.leaderless", partition=p, when=when), "partition": p,
               **({"observed_at": state.at} if state.at else {}), "brokers_at_end": data.final.get("brokers_at_end")}
              for p in state.leaderless]
    if cases:
        return result("broker-not-rejoined", cases)
    return CheckResult("broker-not-rejoined", VALID, note=NOTES["broker-not-rejoined.ok"].format(source=state.source))
