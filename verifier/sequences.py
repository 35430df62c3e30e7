"""Sequence numbers used again after an abort, read from the brokers' own batches
(docs/findings.md F21; issue 76, librdkafka).

An idempotent producer numbers its records per partition, and the broker keeps, per producer,
the last batches it wrote: a batch with the same producer id, epoch, base sequence and record
count as one of them is a duplicate, answered with that batch's offset and not written. A client
whose Produce went unanswered cannot know the broker wrote it; if it gives the sequence numbers
back and, after aborting, sends the next transaction's batch with them under the same epoch, the
broker takes it for the aborted batch and writes nothing. The transaction then commits without
those records.

What the log shows, per partition and producer (segments.py's merged batches), in offset order:
a data batch X, an ABORT marker ending X's range, exactly one COMMIT marker ending a range that
holds no data batch of the producer (a transaction added the partition and wrote nothing there),
and the producer's next data batch Y, same epoch, whose base sequence is X's plus X's record
count. Had the client given X's numbers back and sent nothing, Y would start at X's base; had X's
numbers stood, the empty transaction's batch would be in the log. So a batch with exactly X's
sequence range was sent between X and Y and not written.

The log alone does not say the numbers were given back: F15's path (KafkaJS drops a batch it
never sends, and an abort on purpose keeps the numbers) looks the same. Each reuse is named only
with the evidence of a way a client gives them back, its ``path``:

- ``failed-send`` (F21, KafkaJS): the history says X's transaction's send failed
  (``failed_sends``): KafkaJS gives a failed Produce's numbers back, whatever the failure;
- ``aborted-unanswered`` (issue 76, librdkafka): X's send did not fail, the history shows the
  client aborting X's transaction (``aborts``, for any reason: an error elsewhere, or on
  purpose), and the segments show that X's answer may never have come: the partition's leader
  changed between X and the ABORT marker ending it (the marker's leader epoch is above X's: the
  broker that wrote X was replaced before the abort), and not between that ABORT and the empty
  COMMIT (the batch sent again went to the leader that held X and took it for a duplicate; F15's
  drop follows a leader move during the committed transaction's send). librdkafka moves an
  unanswered batch back to its partition queue for a retry (``rd_kafka_toppar_retry_msgq``), and
  its abort purges that queue and advances the partition's ``epoch_base_msgid`` past the purged
  messages (``rd_kafka_toppar_purge_queues`` with ``RD_KAFKA_PURGE_F_ABORT_TXN``), whether or not
  they were written, with no epoch bump.

Small data; both engines call :func:`sequence_reuse_facts` on the same merged segments and the
same paired history.
"""

from __future__ import annotations

import json
from typing import Any

from kchaos.protocol.log_segments import Batch
from kchaos.verifier.segments import Replicas, Segments, as_segments, partial_field

#: how a reuse's numbers were given back (the module's docstring)
PATHS = ("failed-send", "aborted-unanswered")


def failed_sends(ops: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """(process, txn_seq) of every transaction whose send the history shows failed."""
    return {(op["process"], op["value"]["txn_seq"]) for op in ops
            if op.get("f") == "send" and op.get("outcome") == "fail" and (op.get("value") or {}).get("txn_seq") is not None}


def aborts(ops: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """(process, txn_seq) -> the history's first abort of that transaction by its client (any
    reason, any outcome): ``op`` and ``reason``."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for op in ops:
        seq = (op.get("value") or {}).get("txn_seq")
        if op.get("f") == "abort" and seq is not None:
            out.setdefault((op["process"], seq), {"op": op.get("op"), "outcome": op.get("outcome"),
                                                 "reason": (op.get("value") or {}).get("reason")})
    return out


def _transaction(batch: Batch) -> tuple[str, int] | None:
    """(process, txn_seq) of a data batch, from its first record's lineage; None when unread."""
    if batch.first_value is None:
        return None
    try:
        v = json.loads(batch.first_value)
    except ValueError:
        return None
    if isinstance(v, dict) and v.get("worker") and v.get("incarnation") is not None and v.get("txn_seq") is not None:
        return f"{v['worker']}.{v['incarnation']}", int(v["txn_seq"])
    return None


def _path(x: Batch, abort: Batch, empty: Batch, aborted: tuple[str, int] | None, failed: set[tuple[str, int]],
          aborted_by_client: dict[tuple[str, int], dict[str, Any]]) -> str | None:
    """Which way X's numbers were given back (the module's docstring), None when no evidence says."""
    if aborted is None:
        return None
    if aborted in failed:
        return "failed-send"
    if aborted in aborted_by_client and abort.leader_epoch > x.leader_epoch and empty.leader_epoch == abort.leader_epoch:
        return "aborted-unanswered"
    return None


def reused_sequences(replicas: Replicas, failed: set[tuple[str, int]],
                     aborted_by_client: dict[tuple[str, int], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The places where a batch with an aborted batch's sequence range was sent and not written
    (the module's docstring), each with its path, the aborted batch, its ABORT marker, the empty
    commit and the next batch. ``failed``: failed_sends; ``aborted_by_client``: aborts (without
    it, only the failed-send path is named)."""
    aborted_by_client = aborted_by_client or {}
    out = []
    for (topic, partition), batches in replicas.items():
        # per producer id: its last data batch, the ABORT that ended its range, the empty commits since
        state: dict[int, dict[str, Any]] = {}
        for b, _ in batches:
            st = state.get(b.producer_id)
            if b.committed is not None:
                if st is not None:
                    if not b.committed and st["data_since_marker"]:
                        st["aborted"] = b
                    elif b.committed and st["aborted"] is not None and not st["data_since_marker"]:
                        st["empty_commits"].append(b)
                    st["data_since_marker"] = False
                continue
            if b.control or not b.transactional:
                continue
            if st is not None and st["aborted"] is not None and len(st["empty_commits"]) == 1:
                x, abort, empty = st["batch"], st["aborted"], st["empty_commits"][0]
                aborted = _transaction(x)
                if (b.producer_epoch == x.producer_epoch and b.base_sequence == x.base_sequence + x.count
                        and (path := _path(x, abort, empty, aborted, failed, aborted_by_client))):
                    found = {"topic": topic, "partition": partition, "producer_id": b.producer_id,
                             "producer_epoch": b.producer_epoch, "path": path,
                             "aborted_batch": {"offset": x.base_offset, "base_sequence": x.base_sequence,
                                               "count": x.count, "transaction": list(aborted),
                                               "leader_epoch": x.leader_epoch},
                             "abort_marker": {"offset": abort.base_offset, "leader_epoch": abort.leader_epoch,
                                              "coordinator_epoch": abort.coordinator_epoch},
                             "empty_commit": {"offset": empty.base_offset,
                                              "coordinator_epoch": empty.coordinator_epoch,
                                              "leader_epoch": empty.leader_epoch},
                             "next_batch": {"offset": b.base_offset, "base_sequence": b.base_sequence,
                                            "transaction": list(t) if (t := _transaction(b)) else None}}
                    if aborted in aborted_by_client:
                        found["abort"] = aborted_by_client[aborted]
                    out.append(found)
            state[b.producer_id] = {"batch": b, "aborted": None, "empty_commits": [], "data_since_marker": True}
    return out


def sequence_reuse_facts(read: Segments | Replicas | None, ops: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``sequence_reuse`` fact of results.json; None when the run holds no broker segments.
    ``by_path``: how many reuses took each path (PATHS); ``partial``: what of the segments was
    not read (segments.py)."""
    segments = as_segments(read)
    if segments is None:
        return None
    data = [b for batches in segments.replicas.values() for b, _ in batches if b.transactional and not b.control]
    reused = reused_sequences(segments.replicas, failed_sends(ops), aborts(ops))
    return {"transactional_batches": len(data), "unread": sum(1 for b in data if b.first_value is None),
            "reused": reused, "by_path": {p: sum(1 for r in reused if r["path"] == p) for p in PATHS},
            **partial_field(segments)}


def reuses_for(reused: list[dict[str, Any]], process: str, txn_seq: int) -> list[dict[str, Any]]:
    """The reuses whose empty commit may be this transaction's: the same process, after the
    aborted batch's transaction and before the next batch's (one per partition)."""
    out = []
    for r in reused:
        before, after = r["aborted_batch"]["transaction"], r["next_batch"]["transaction"]
        if before[0] == process and before[1] < txn_seq and (after is None or txn_seq < after[1]):
            out.append(r)
    return out
