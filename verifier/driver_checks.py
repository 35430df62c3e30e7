"""The checks both engines run on the driver, over what each has collected there: the
coordinator's transactions (segmented by the engine: coordinator_log), the group's offset
commits, the client history. One function each, imported by both engine modules (the registry,
verifier/checks.py, finds a check's function in the engine module by name)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kchaos.verifier import evidence
from kchaos.verifier.checks import NOTES, offset_commit_result, result, set_aside_note, split_result
from kchaos.verifier.coordinator_log import (CLOCK_EPS_MS, Skew, coordinator_aborted, judge, on_harness_clock,
                                             stamped_in_skew)
from kchaos.verifier.model import NotApplicable
from kchaos.verifier.offsets_log import lost_offset_commit_cases, offsets_backwards_cases
from kchaos.verifier.results import UNKNOWN, CheckResult


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
