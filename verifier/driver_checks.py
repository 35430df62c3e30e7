"""The checks both engines run on the driver, over what each has collected there: the
coordinator's transactions (segmented by the engine: coordinator_log), the group's offset
commits, the client history. One function each, imported by both engine modules (the registry,
verifier/checks.py, finds a check's function in the engine module by name)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from kchaos.verifier import evidence, liveness
from kchaos.verifier.checks import (NOTES, explain, implements, offset_commit_result, result, set_aside_note,
                                    split_result)
from kchaos.verifier.coordinator_log import (CLOCK_EPS_MS, CLOCK_SKEW_MARGIN_MS, Skew, clock_moves, coordinator_aborted,
                                             coordinator_committed, in_skew, judge, on_harness_clock, stamped_in_skew)
from kchaos.verifier.internal_topics import offset_commit_batches
from kchaos.verifier.model import NotApplicable, worker_slot
from kchaos.verifier.offsets_log import lost_offset_commit_cases, offsets_backwards_cases, stray_offset_commit_cases
from kchaos.verifier.results import UNKNOWN, VALID, CheckResult


def superseded_bounds(data: Any, coordinator: list[Any], shift_ms: float = 0.0,
                      skewed: Skew | None = None) -> dict[str, dict[str, Any]]:
    """Per transactional id of the run whose ``__transaction_state`` partition the cleaner compacted
    (or may have: a cluster that does not say), the time (``before_ms``, harness clock) up to which
    its records may have been removed, and the cleaner's point (``clean``; None: unknown).

    The log cleaner removes a record only when a later record of the same key lies below its own
    point (its ``cleaner-offset-checkpoint``: it maps the keys of the section it cleans, up to that
    point, and keeps each key's latest there). A transactional id's records are one key, so what
    can be gone is what its last record below the point was written after: ``before_ms`` is that
    record's stamp. A transaction the record does not follow (the id's last, or one past the
    point) was never removable; an id with no record below the point is judged whole (left out).
    Another partition's compaction says nothing about this run's ids.

    A stamp a clock fault may have moved (``skewed``), or a tombstone's (it has none), is bounded
    by the next transaction of the id in log order that an unmoved clock stamped (infinity:
    none): the record was written no later than that."""
    txids = sorted({op["txid"] for op in (*data.history.txn_ops.values(), *data.history.seeder_txns.values())
                    if op.get("txid")})
    by_txid: dict[str, list[Any]] = defaultdict(list)
    for ct in coordinator:
        by_txid[ct.transactional_id].append(ct)
    topic = "__transaction_state"
    # the bound of each partition (None: not known); the key None stands for every partition not named
    bounds: dict[int | None, int | None] = {}
    ids: set[str] = set()
    for txid in txids:
        cts = by_txid.get(txid, [])
        partition = (cts[0].log_partition if cts and cts[0].log_partition >= 0
                     else evidence.key_partition(data.final, topic, txid))
        if partition is not None:
            clean = evidence.clean_point(data.compaction, topic, partition)
            if clean != 0:
                bounds[partition] = clean
                ids.add(txid)
        elif evidence.clean_point(data.compaction, topic, 0) is None:
            bounds[None] = None  # nobody can tell where the id is, nor what was cleaned
            ids.add(txid)
        else:  # the id is on one of the partitions; each cleaned up to its own point
            bounds.update({int(p): int(o) for p, o in (data.compaction.get(topic) or {}).items() if int(o)})
            ids.add(txid)
    out: dict[str, dict[str, Any]] = {}
    if not ids:
        return out
    latest = data.latest_txn_records_below(bounds, ids)
    for txid in sorted(ids):
        record = latest.get(txid)
        if record is None:
            continue
        partition = record["partition"]
        stamp = record.get("last_update_ms")
        at = None if stamp is None else stamp - shift_ms
        if at is None or in_skew(at, partition, skewed):
            later = sorted((ct for ct in by_txid.get(txid, []) if ct.first_offset > record["offset"]
                            and not stamped_in_skew(ct, skewed)), key=lambda ct: ct.first_offset)
            at = later[0].start_ms if later else float("inf")
        out[txid] = {"before_ms": at, "clean": bounds.get(partition, bounds.get(None)), "offset": record["offset"]}
    return out


def clock_skew_windows(history: Any) -> Skew:
    """Harness-clock windows (ms) that a clock fault makes unplaceable, two per fault, each
    widened by CLOCK_SKEW_MARGIN_MS: while it lasted (the transactions that ran then), and where
    its moved stamps land (its start plus the most negative offset it applied, to its heal plus
    the most positive). A step of 8 days ahead sets aside its own seconds and a span 8 days on,
    not the rest of the run. Each window affects the ``__transaction_state`` partitions the
    fault's targets led when it resolved them and when it healed; every partition where it did
    not record both (coordinator_log.clock_moves)."""
    windows: Skew = []
    for m in clock_moves(history):
        windows.append((m.start_ms - CLOCK_SKEW_MARGIN_MS, m.end_ms + CLOCK_SKEW_MARGIN_MS, m.partitions))
        windows.append((m.start_ms + m.lo_ms - CLOCK_SKEW_MARGIN_MS, m.end_ms + m.hi_ms + CLOCK_SKEW_MARGIN_MS,
                        m.partitions))
    return windows


@implements("split-transaction", "python", "spark")
def check_split_transaction(data: Any) -> CheckResult:
    """``data.coordinator_transactions()`` (the engine's segmentation of the log) judged against
    the history; the coordinator's facts are kept on ``data`` for the results."""
    shift, tolerance, clock = evidence.broker_clock(data)
    coordinator = on_harness_clock(data.coordinator_transactions(), shift)
    skewed = clock_skew_windows(data.history)
    bounds = superseded_bounds(data, coordinator, shift, skewed)
    cases, data.coordinator_facts = judge(coordinator, data.history, data.late_requests(),
                                          {txid: b["before_ms"] for txid, b in bounds.items()},
                                          CLOCK_EPS_MS + tolerance, skewed, data.visible_transactions)
    data.coordinator_facts["clock"] = {"shift_ms": shift, "tolerance_ms": tolerance, "how": clock}
    # a process whose history has a hole (evidence.gaps says so: the verdict is unknown) ran
    # transactions its history lost, and their coordinator transactions have no client
    # transaction to belong to: one that began within the clocks' tolerance of a kept transaction
    # is taken for a second half of it. Its processes' cases are set aside, counted, not judged
    holed = sorted(evidence.history_holes(data))
    aside_holed = [c for c in cases if {t["process"] for t in c.get("transactions") or []} & set(holed)]
    cases = [c for c in cases if c not in aside_holed]
    found = split_result(cases, data.coordinator_facts)
    if aside_holed:
        found.note = (found.note or f"{data.coordinator_facts['attributed']} coordinator transactions attributed") + \
            set_aside_note([NOTES["set-aside.history-hole"].format(n=len(aside_holed), processes=", ".join(holed))])
        if found.verdict == VALID:
            found.verdict = UNKNOWN
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
        where = "; ".join(f"{txid}: {_bound_text(bounds[txid])}" for txid in sorted(aside))
        found.note = (found.note or f"{data.coordinator_facts['attributed']} coordinator transactions attributed") + \
            set_aside_note([NOTES["set-aside.unrecorded-compacted"].format(
                n=sum(aside.values()), ids=", ".join(sorted(aside)), where=where)])
    return found


def _bound_text(bound: dict[str, Any]) -> str:
    clean = "an unknown offset" if bound["clean"] is None else f"offset {bound['clean']}"
    when = ("at a time no unmoved clock bounds" if bound["before_ms"] == float("inf")
            else f"by {bound['before_ms']:.0f} ms on the harness's clock")
    return f"its last record below {clean} is offset {bound['offset']}, written {when}"


@implements("lost-offset-commit", "python", "spark")
def check_lost_offset_commit(data: Any) -> CheckResult:
    """Judged on the group's own ``__consumer_offsets`` partition: another group's compaction or
    open transaction there says nothing about this run's commits."""
    partition = evidence.group_offsets_partition(data)
    clean = evidence.clean_point(data.compaction, "__consumer_offsets", partition)
    cut = evidence.view_cut(data.final, "__consumer_offsets", partition) if partition is not None else None
    past_view = None
    if cut is not None:
        raw = raw_offset_commits(data)
        past_view = None if raw is None else {(c["partition"], c["offset"]) for c in raw
                                              if c["log_partition"] == partition and c["log_offset"] >= cut[0]}
    cases, checked, set_aside = lost_offset_commit_cases(data.history, data.offset_log, data.workload.input_topic,
                                                         clean, cut is not None, past_view)
    log = f"__consumer_offsets-{partition if partition is not None else '?'}"
    parts = []
    if set_aside.get("compacted"):
        parts.append(NOTES["set-aside.compacted"].format(n=set_aside["compacted"], log=log,
                                                         clean="up to an unknown offset" if clean is None
                                                         else f"up to offset {clean}"))
    if set_aside.get("past the committed view"):
        parts.append(NOTES["set-aside.past the committed view"].format(n=set_aside["past the committed view"], log=log,
                                                                       view=cut[0], end=cut[1]))
    unplaced = set_aside.get("past the committed view, unread")
    return offset_commit_result(cases, checked, data.history.committed_transactions(), parts,
                                NOTES["lost-offset-commit.unplaced"].format(n=unplaced, log=log, view=cut[0], end=cut[1])
                                if unplaced else None)


def raw_offset_commits(data: Any) -> list[dict[str, Any]] | None:
    """The group's offset commits in the raw view of ``__consumer_offsets`` (the client dump, read
    here for both engines alike: only a pinned committed view needs it), or None without one."""
    import pyarrow.parquet as pq

    path = Path(data.run) / "topics" / "__consumer_offsets.raw.parquet"
    if not path.exists():
        return None
    return [r for batch in offset_commit_batches(pq.ParquetFile(path).iter_batches(), data.workload.group_id,
                                                 data.workload.input_topic) for r in batch.to_pylist()]


@implements("offsets-backwards", "python", "spark")
def check_offsets_backwards(data: Any) -> CheckResult:
    return result("offsets-backwards", offsets_backwards_cases(data.offset_log, data.workload.input_topic, data.history))


@implements("stray-offset-commit", "python", "spark")
def check_stray_offset_commit(data: Any) -> CheckResult:
    """Judged on the committed view of the group's offset commits: an aborted transaction's commit
    is not in it, so each one there was carried by a transaction that may have committed."""
    try:
        shift, tolerance, _ = evidence.broker_clock(data)
        clock: tuple[float, float] | None = (shift, tolerance)
    except NotApplicable:
        clock = None
    # a clock fault may have moved a stamp: any group coordinator's (which broker holds the
    # group's partition then is not recorded), so such a commit is matched by value alone
    skewed = clock_skew_windows(data.history)
    cases, recorded, timing = stray_offset_commit_cases(data.history, data.offset_log, data.workload.input_topic,
                                                        clock, lambda ms: any(lo <= ms <= hi for lo, hi, _ in skewed))
    if data.offset_log and not recorded:
        return CheckResult("stray-offset-commit", UNKNOWN, note=NOTES["stray-offset-commit.recorded-nothing"].format(
            n=len(data.offset_log)))
    found = result("stray-offset-commit", cases)
    if clock is not None and timing["by_value_only"]:
        found.note = (found.note or f"{len(data.offset_log)} offset commits matched") + \
            NOTES["stray-offset-commit.by-value"].format(**timing)
    return found


def _decided(data: Any, decide: Any) -> Any:
    try:
        shift, tolerance, _ = evidence.broker_clock(data)
    except NotApplicable:
        return decide([], data.history)
    return decide(on_harness_clock(data.coordinator_transactions(), shift), data.history,
                  CLOCK_EPS_MS + tolerance, clock_skew_windows(data.history))


def coordinator_aborted_kinds(data: Any) -> dict[tuple[str, int], str]:
    """Client transactions the coordinator's log shows aborted whose visible outputs are an
    aborted read of their own kind (coordinator_log.coordinator_aborted); none where the
    coordinator's clock is not known."""
    return _decided(data, coordinator_aborted)


def coordinator_committed_keys(data: Any) -> set[tuple[str, int]]:
    """Client transactions the coordinator's log shows committed though their client did not see
    them commit (coordinator_log.coordinator_committed); none where its clock is not known."""
    return _decided(data, coordinator_committed)


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


def _left_behind(data: Any, p: int, first: int | None, end: float | None, bound: float,
                 held_by: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How a holder of the stalled partition left its first unprocessed input behind after
    aborting it (HistoryIndex.left_behind), when that holder still held it at the drain's end and
    read nothing of it for at least half the drain's ``bound``: an abort just before the end
    explains nothing (the drain ran out on a pipeline still moving), and one left behind for good
    spans the whole drain, whose last inputs come just before it begins."""
    if first is None or end is None:
        return None
    left = data.history.left_behind(p, first, end)
    return left if left and left["process"] in {h["process"] for h in held_by} \
        and end - left["aborted_at"] >= bound / 2 else None


def _left_behind_text(left: dict[str, Any] | None, first: int | None, end: float | None) -> str:
    if not left or end is None:
        return ""
    reset = left.get("reset_offset")
    return explain("stalled-pipeline.left-behind", process=left["process"], seq=left["aborted_txn_seq"], first=first,
                   ago=end - left["aborted_at"],
                   reset=explain("stalled-pipeline.reset-in-place", offset=reset["offset"])
                   if reset and reset.get("rewinds_claim") is False else "")


def _relative_to_end(t: float, end: float) -> str:
    """A moment beside the drain's end; a progress sample may be read after it (the final one)."""
    return (f"{end - t:.0f} s before the drain's end" if t <= end else f"{t - end:.0f} s after the drain's end, "
            "at the sample that first saw it")


@implements("stalled-pipeline", "python", "spark")
def check_stalled_pipeline(data: Any) -> CheckResult:
    """The pipeline resumes: every committed input processed within the drain's bound after the
    final heal, judged on the final reads, partition by partition. The harness's ``drained``
    flag only words the note: a partition the final reads show stalled is a case whatever the
    flag says (the flag summarises that evidence; it cannot outweigh it)."""
    final = data.final
    drain = liveness.drain_of(data)
    if "drained" not in final:
        raise NotApplicable("the run recorded no drain (final.json has no drained)")
    if final.get("interrupted") and not final["drained"]:
        raise NotApplicable("the run was interrupted and its drain cut short: the campaign's bound was not waited out")
    stalled = liveness.stalled_partitions(data)
    if not stalled:
        _no_stall_on_disagreeing_records(data)
    if not stalled and final["drained"]:
        took = (f" ({drain['ended'] - drain['started']:.0f} s of at most {drain['timeout_s']:.0f} s)"
                if drain["recorded"] and drain.get("started") else "")
        return CheckResult("stalled-pipeline", VALID, note=NOTES["stalled-pipeline.drained"].format(
            took=took, rates=_rates_note(data)))
    if not stalled:
        return CheckResult("stalled-pipeline", VALID, note=NOTES["stalled-pipeline.caught-up"].format(
            bound=drain["timeout_s"], rates=_rates_note(data)))
    topic = data.workload.input_topic
    end = drain.get("ended")
    members = liveness.members_at(data, end) if end is not None else []
    view = liveness.group_view(data)
    cases = []
    for s in stalled:
        held_by = [{**m.view(), "errors_in_drain": liveness.last_errors(data, m.process, drain.get("started")),
                    **({"blocked_in": b} if (b := liveness.blocked_in(data, m.process)) else {})}
                   for m in members if s.partition in m.holds]
        blocked = [h for h in held_by if h.get("blocked_in")]
        moved = liveness.last_moved(data, s.partition)
        still = (f" from {end - moved:.0f} s before the drain's end" if moved is not None and end is not None else "")
        what = f"{s.unprocessed} committed inputs" if s.unprocessed is not None else "the committed inputs"
        # its offset last moved within a sixth of the bound from the drain's end: slow, not stuck
        moving = moved is not None and end is not None and end - moved < drain["timeout_s"] / 6
        left = _left_behind(data, s.partition, s.first, end, drain["timeout_s"], held_by)
        cases.append({
            "explanation": explain("stalled-pipeline", what=what, topic=topic, p=s.partition, first=s.first,
                                   last=s.last, bound=drain["timeout_s"],
                                   claimed=explain("stalled-pipeline.claimed-drained") if final["drained"] else "",
                                   blocked=explain("stalled-pipeline.blocked", holders=", ".join(h["process"] for h in blocked),
                                                   calls=", ".join(f"{h['process']} in {h['blocked_in']['f']} for "
                                                                   f"{end - h['blocked_in']['since']:.0f} s"
                                                                   for h in blocked)) if blocked and end else "",
                                   left=_left_behind_text(left, s.first, end),
                                   progress=(
                                       explain("stalled-pipeline.never") if s.group_offset is None else
                                       explain("stalled-pipeline.moving", offset=s.group_offset,
                                               when=_relative_to_end(moved, end))
                                       if moving else
                                       explain("stalled-pipeline.stayed", offset=s.group_offset, still=still))),
            "input": {"topic": topic, "partition": s.partition, "group_offset": s.group_offset,
                      "unprocessed": s.unprocessed, "first_unprocessed": s.first, "last_committed": s.last},
            # when its progress stopped: the report shows the brokers' log lines around it
            **({"observed_at": moved} if moved is not None else {}),
            "progress": [{"time": t, "committed_offset": o} for t, o in liveness.partition_progress(data, s.partition)],
            "held_by": held_by,
            **({"left_behind": left} if left else {}), **({"still_moving": True} if moving else {}),
            "assigned_by_coordinator": [{"client_id": m.get("client_id"), "member_id": m.get("member_id")}
                                        for m in (view or {}).get("members") or []
                                        if s.partition in (m.get("partitions") or [])] if view else None,
            "drain": drain})
    return result("stalled-pipeline", cases)


def _no_stall_on_disagreeing_records(data: Any) -> None:
    """No stall is valid only on records that agree: NotApplicable where final.json's ``drained``
    says the drain ended in time and its own record says it ran out (liveness.drain_overran), or
    where the samples of the group's offsets, which lift the offsets the inputs are held against,
    contradict the group's log (liveness.samples_against_log; a clock fault, or brokers' clocks
    not measured, leave the commits' stamps out)."""
    overran = liveness.drain_overran(data) if data.final["drained"] else []
    if overran:
        raise NotApplicable("final.json's drained says every input was processed within the drain's bound, but "
                            + "; ".join(overran) + ": whether the pipeline resumed within its bound is not known")
    if data.offset_log is None:
        return
    try:
        shift, tolerance, _ = evidence.broker_clock(data)
        settle: float | None = data.workload.transaction_timeout_ms + 30_000 + tolerance
    except NotApplicable:
        shift, settle = 0.0, None
    if clock_skew_windows(data.history):
        settle = None
    disagree = liveness.samples_against_log((data.final.get("progress") or {}).get("samples") or [], data.offset_log,
                                            settle, shift)
    if disagree:
        raise NotApplicable("the harness's samples of the group's offsets (final.json progress.samples) and the "
                            "group's own log (__consumer_offsets) disagree: " + "; ".join(disagree[:3])
                            + (f"; {len(disagree) - 3} more" if len(disagree) > 3 else "")
                            + ": which one the pipeline's progress is, is not known")


@implements("hung-client-call", "python", "spark")
def check_hung_client_call(data: Any) -> CheckResult:
    """No pipeline process hangs in its client: each one that ran into the drain returned from
    every client call within the drain's bound. The pipeline may still drain without it (the group
    gives a silent member's partitions to others, F16's seed 2), but the application's thread is
    stuck for good: the Java client bounds its blocking calls (max.block.ms), and kafka-python's
    commit_transaction() waits without one (F16)."""
    drain = liveness.drain_of(data)
    # a call that hung for the drain's bound is stuck, whether or not the run was cut short;
    # without the drain's record, the history's last moment stands for its end
    end = drain.get("ended") or max((t for op in data.history.ops for t in (op["invoke_time"], op["complete_time"])
                                     if t is not None), default=None)
    if end is None or drain.get("timeout_s") is None:
        raise NotApplicable("the run recorded neither a drain nor a history: how long a call hung cannot be judged")
    bound = float(drain["timeout_s"])
    cases = []
    for hung in liveness.hung_calls(data, drain.get("started"), end, bound):
        call, seq = hung["blocked_in"]["f"], hung["blocked_in"].get("txn_seq")
        cases.append({
            "explanation": explain("hung-client-call", process=hung["process"], client=hung["client"] or "?", call=call,
                                   txn=f" (transaction {seq})" if seq is not None else "",
                                   hung=hung["hung_s"], bound=bound,
                                   ended=explain("hung-client-call.ended", meaning=hung["exit"]["meaning"] or "?")
                                   if "exit" in hung else "",
                                   holds=explain("hung-client-call.holds", partitions=hung["holds"]) if hung["holds"]
                                   else explain("hung-client-call.let-go")),
            **hung, "drain": drain})
    if not cases:
        return CheckResult("hung-client-call", VALID, note=NOTES["hung-client-call.none"].format(bound=bound))
    return result("hung-client-call", cases)


@implements("unprocessed-assignment", "python", "spark")
def check_unprocessed_assignment(data: Any) -> CheckResult:
    """Every partition with inputs left is held by a member that processes it: for each input
    partition the drain left unprocessed, the group coordinator's view at the drain's end
    (``final.json`` ``group``: describe) against the members' own account (their ``assign`` and
    Streams state events in the history). A case where the coordinator assigns it to a member
    that does not hold it (F10: the instance RUNNING with no task, the group STABLE), assigns it
    to nobody, or, without the coordinator's view, where no running instance holds it."""
    final = data.final
    if "drained" not in final or final.get("interrupted") and not final["drained"]:
        raise NotApplicable("the run recorded no drain that waited out its bound")
    stalled = liveness.stalled_partitions(data)  # the final reads, whatever the drained flag says
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


@implements("broker-not-rejoined", "python", "spark")
def check_broker_not_rejoined(data: Any) -> CheckResult:
    """Every broker registered and unfenced, and every partition of the run's topics led, at the
    run's end (F9: a broker whose clock was stepped back stays fenced). Where only registration
    was evidenced (the heal's watch: the metadata read at the end failed), leadership is not
    judged: not checked (unknown), unless a broker is missing."""
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
              for p in state.leaderless or ()]
    if cases:
        return result("broker-not-rejoined", cases)
    if state.leaderless is None:  # registration judged, leadership not: not checked, never valid
        raise NotApplicable(NOTES["broker-not-rejoined.leaders-unread"].format(source=state.source,
                                                                             why=state.leaders_unread))
    disagreement = liveness.controller_disagrees(data, state)  # a second source, where the run holds it
    if disagreement:
        raise NotApplicable(disagreement)
    return CheckResult("broker-not-rejoined", VALID, note=NOTES["broker-not-rejoined.ok"].format(source=state.source))
