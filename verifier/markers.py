"""COMMIT markers the transaction coordinator's log never prepared: what the brokers' own segments
hold against what the surviving ``__transaction_state`` says.

A coordinator writes a COMMIT marker to a partition only after it appended (and replicated) a
``PrepareCommit`` for that producer, so the producer's latest record in the log at the marker's
time is a ``PrepareCommit`` or ``CompleteCommit``. A marker whose producer's latest record then is
anything else (``Ongoing``, ``PrepareAbort``, ``CompleteAbort``) was written by a coordinator
acting on a record the log no longer holds: docs/findings.md F8, where a restarted broker acts on
``__transaction_state`` records above its high watermark that the next leader truncates. The
consumer's view (an output visible whose transaction the log aborted: aborted-read) cannot say
why; the marker and its coordinator epoch can. A late EndTxn (KAFKA-17754) does not do this: the
coordinator prepares what it applies, so its markers agree with its log.

What may look like this and is not judged:

- a producer with no record in the log at or before the marker (the log cleaner removes a key's
  older records first, so a removed ``PrepareCommit`` leaves no earlier record of it behind);
- markers or records stamped while a clock fault moved a broker's clock (``skewed``);
- a run whose brokers' segments are not in the run directory (a cluster kchaos did not start, the
  docker backend): the fact is None.

Markers are read from every node's replica of every partition, merged by offset (segments.py).
Small data both engines read through this one function.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kchaos.verifier.coordinator_log import Skew, in_skew
from kchaos.verifier.segments import Replicas, Segments, as_segments, partial_field

#: the log records after which a COMMIT marker is what the coordinator prepared
COMMIT_STATES = ("PrepareCommit", "CompleteCommit")


def read_commit_markers(replicas: Replicas) -> list[dict[str, Any]]:
    """Every COMMIT marker of the merged batches (segments.py), each with the first offset of its
    producer's records it ends on that partition (``covers_from``: one past the producer's
    previous marker there) and the nodes that hold it."""
    out = []
    for (topic, partition), batches in replicas.items():
        previous: dict[int, int] = {}
        for b, nodes in batches:
            if b.committed is None:
                continue
            if b.committed:
                out.append({"topic": topic, "partition": partition, "offset": b.base_offset,
                            "producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
                            "coordinator_epoch": b.coordinator_epoch, "time_ms": b.max_timestamp,
                            "covers_from": previous.get(b.producer_id, -1) + 1, "nodes": nodes})
            previous[b.producer_id] = b.base_offset
    return out


def _log_state_at(records: list[dict[str, Any]], stamps: list[int], ms: float) -> dict[str, Any] | None:
    """The producer's latest log record stamped at or before ``ms`` (``records`` in stamp order,
    ``stamps`` their stamps); of several stamped in that same millisecond, a commit if there is
    one (the next transaction's first record can share the millisecond of its predecessor's last
    marker). The coordinator stamps a Prepare record before it is replicated and its markers are
    sent, and the partition leader stamps the marker when it appends it, both on this machine's
    clock, so no slack is needed."""
    end = bisect_right(stamps, ms)
    if not end:
        return None
    same = records[bisect_left(stamps, stamps[end - 1]):end]
    return next((r for r in same if r["entry"].status in COMMIT_STATES), same[-1])


def unprepared_commit_markers(markers: list[dict[str, Any]], entries: list[dict[str, Any]],
                              skewed: Skew | None = None) -> dict[str, Any]:
    """The fact: of ``markers`` (read_commit_markers), those whose producer's latest record in the
    transaction log ``entries`` ({partition, offset, entry}) at the marker's time is not a commit
    (COMMIT_STATES), each with that record; and what could not be judged."""
    by_producer: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in sorted(entries, key=lambda r: (r["entry"].last_update_ms, r["partition"], r["offset"])):
        if r["entry"].producer_id is not None:
            by_producer[r["entry"].producer_id].append(r)
    stamps = {pid: [r["entry"].last_update_ms for r in records] for pid, records in by_producer.items()}
    unprepared, no_record, skew_aside = [], 0, 0
    for m in markers:
        pid = m["producer_id"]
        state = _log_state_at(by_producer.get(pid, []), stamps.get(pid, []), m["time_ms"])
        if state is None:
            no_record += 1
            continue
        e = state["entry"]
        if in_skew(m["time_ms"], None, skewed) or in_skew(e.last_update_ms, state["partition"], skewed):
            skew_aside += 1
            continue
        if e.status not in COMMIT_STATES:
            unprepared.append({**m, "log": {"transactional_id": e.transactional_id, "status": e.status,
                                            "producer_epoch": e.producer_epoch, "last_update_ms": e.last_update_ms,
                                            "partition": state["partition"], "offset": state["offset"],
                                            "before_marker_ms": m["time_ms"] - e.last_update_ms}})
    return {"commit_markers": len(markers), "unprepared": unprepared,
            "no_log_record_before": no_record, "clock_skew_set_aside": skew_aside}


def commit_marker_facts(read: Segments | Replicas | None,
                        entries_of: Callable[[set[int]], list[dict[str, Any]] | None],
                        skewed: Skew | None = None) -> dict[str, Any] | None:
    """The ``commit_markers`` fact of results.json from the run's merged batches
    (segments.run_segments; ``partial``: what of them was not read): None when the run holds no
    broker segments or no transaction log (``entries_of``: the log's records of some producer
    ids, or None)."""
    segments = as_segments(read)
    if segments is None:
        return None
    markers = read_commit_markers(segments.replicas)
    entries = entries_of({m["producer_id"] for m in markers}) if markers else []
    if entries is None:
        return None
    nodes = sorted({n for batches in segments.replicas.values() for _, held in batches for n in held})
    return {"nodes": nodes, **unprepared_commit_markers(markers, entries, skewed), **partial_field(segments)}


def covering_marker(unprepared: list[dict[str, Any]], topic: str, partition: int, offset: int,
                    producer_ids: set[int]) -> dict[str, Any] | None:
    """The unprepared COMMIT marker that made the record at ``offset`` visible: on its partition,
    of one of ``producer_ids`` (any, when empty), ending a range that holds it."""
    return next((m for m in unprepared if (m["topic"], m["partition"]) == (topic, partition)
                 and m["covers_from"] <= offset < m["offset"]
                 and (not producer_ids or m["producer_id"] in producer_ids)), None)


#: the finding whose signature unprepared COMMIT markers are (docs/findings.md)
F8 = "F8"


def made_visible(unprepared: list[dict[str, Any]], anomalies: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The unprepared markers that made a record of a listed aborted-read case visible (the range
    a marker ends holds it, on its partition). Cases are listed up to the checker's cap, so this
    is what the run's listed cases show."""
    records = [(r.get("topic"), r.get("partition"), r.get("offset"))
               for case in (anomalies or {}).get("aborted-read") or [] if isinstance(case, dict)
               for r in case.get("records") or [] if isinstance(r, dict) and isinstance(r.get("offset"), int)]
    return [m for m in unprepared if any((t, p) == (m["topic"], m["partition"]) and m["covers_from"] <= o < m["offset"]
                                         for t, p, o in records)]


def signatures(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The known Kafka bugs' signatures a judged run's results carry, each with its finding, its
    count and the words every reader says (the console's verdict line, the outcome's summary, the
    report's first screen, JUnit, the nightly): today F8's, COMMIT markers the coordinator's
    surviving log never prepared (the ``commit_markers`` fact). A signature changes no verdict.

    Its effect: "no visible effect" where the run is valid (every claimed check made, no anomaly);
    else how many of the markers made a listed aborted read visible, or that none did, or that it
    was not judged where aborted-read was not checked. (A broker refused registration while it sent
    markers, the rest of F8's window, is in the brokers' logs only: no fact carries it yet.)"""
    fact = (results.get("facts") or {}).get("commit_markers") or {}
    unprepared = fact.get("unprepared") or []
    if not unprepared:
        return []
    n = len(unprepared)
    visible = made_visible(unprepared, results.get("anomalies"))
    if visible:
        effect = f"{len(visible)} of them made aborted reads visible"
    elif results.get("verdict") == "valid":
        effect = "no visible effect"
    elif "aborted-read" in (results.get("not_checked") or {}):
        effect = "their effect not judged (aborted-read not checked)"
    else:
        effect = "none made an aborted read visible"
    line = (f"{F8}'s signature seen: {n} COMMIT marker{'' if n == 1 else 's'} from a record that did not "
            f"survive, {effect}" + (f" (on partial segments: {len(fact['partial'])} gaps, facts.commit_markers.partial)"
                                    if fact.get("partial") else ""))
    return [{"finding": F8, "what": "COMMIT markers the coordinator's surviving log never prepared",
             "count": n, "made_visible": len(visible), "line": line}]


def signatures_line(found: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> str:
    """The signatures (signatures) as one clause of a verdict line; "" for none."""
    return "; ".join(s["line"] for s in found)
