"""The checks both engines run on the driver, over what each has collected there: the
coordinator's transactions (segmented by the engine: coordinator_log), the group's offset
commits, the client history. One function each, imported by both engine modules (the registry,
verifier/checks.py, finds a check's function in the engine module by name)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from kchaos.verifier import evidence
from kchaos.verifier.checks import NOTES, offset_commit_result, result, set_aside_note, split_result
from kchaos.verifier.coordinator_log import (CLOCK_EPS_MS, Skew, coordinator_aborted, coordinator_committed, in_skew,
                                             judge, on_harness_clock, stamped_in_skew)
from kchaos.verifier.internal_topics import offset_commit_batches
from kchaos.verifier.model import NotApplicable
from kchaos.verifier.offsets_log import lost_offset_commit_cases, offsets_backwards_cases
from kchaos.verifier.results import UNKNOWN, CheckResult


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
    txids = sorted({op["txid"] for op in data.history.txn_ops.values() if op.get("txid")})
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
    bounds = superseded_bounds(data, coordinator, shift, skewed)
    cases, data.coordinator_facts = judge(coordinator, data.history, data.late_requests(),
                                          {txid: b["before_ms"] for txid, b in bounds.items()},
                                          CLOCK_EPS_MS + tolerance, skewed, data.visible_transactions)
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


def check_lost_offset_commits(data: Any) -> CheckResult:
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


def check_offsets_backwards(data: Any) -> CheckResult:
    return result("offsets-backwards", offsets_backwards_cases(data.offset_log, data.workload.input_topic))


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
