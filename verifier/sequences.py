"""Sequence numbers used again after an abort, read from the brokers' own batches
(docs/findings.md F21).

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
sequence range was sent between X and Y and not written. The history says X's transaction's send
failed (``failed_sends``), which is when a client gives numbers back; a run where it did not is
not named here (an abort on purpose keeps the numbers: F15's path, a batch never sent, looks the
same in the log).

Small data; both engines call :func:`sequence_reuse_facts`.
"""

from __future__ import annotations

import json
from typing import Any

from kchaos.protocol.log_segments import Batch
from kchaos.verifier.segments import Replicas


def failed_sends(ops: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """(process, txn_seq) of every transaction whose send the history shows failed."""
    return {(op["process"], op["value"]["txn_seq"]) for op in ops
            if op.get("f") == "send" and op.get("outcome") == "fail" and (op.get("value") or {}).get("txn_seq") is not None}


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


def reused_sequences(replicas: Replicas, failed: set[tuple[str, int]]) -> list[dict[str, Any]]:
    """The places where a batch with an aborted batch's sequence range was sent and not written
    (the module's docstring), each with the aborted batch, the empty commit and the next batch."""
    out = []
    for (topic, partition), batches in replicas.items():
        # per producer id: its last data batch, whether an ABORT ended its range, the empty commits since
        state: dict[int, dict[str, Any]] = {}
        for b, _ in batches:
            st = state.get(b.producer_id)
            if b.committed is not None:
                if st is not None:
                    if not b.committed and st["data_since_marker"]:
                        st["aborted"] = True
                    elif b.committed and st["aborted"] and not st["data_since_marker"]:
                        st["empty_commits"].append(b)
                    st["data_since_marker"] = False
                continue
            if b.control or not b.transactional:
                continue
            if st is not None and st["aborted"] and len(st["empty_commits"]) == 1:
                x, empty = st["batch"], st["empty_commits"][0]
                if (b.producer_epoch == x.producer_epoch and b.base_sequence == x.base_sequence + x.count
                        and (aborted := _transaction(x)) in failed):
                    out.append({"topic": topic, "partition": partition, "producer_id": b.producer_id,
                                "producer_epoch": b.producer_epoch,
                                "aborted_batch": {"offset": x.base_offset, "base_sequence": x.base_sequence,
                                                  "count": x.count, "transaction": list(aborted)},
                                "empty_commit": {"offset": empty.base_offset,
                                                 "coordinator_epoch": empty.coordinator_epoch},
                                "next_batch": {"offset": b.base_offset, "base_sequence": b.base_sequence,
                                               "transaction": list(t) if (t := _transaction(b)) else None}})
            state[b.producer_id] = {"batch": b, "aborted": False, "empty_commits": [], "data_since_marker": True}
    return out


def sequence_reuse_facts(replicas: Replicas | None, ops: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``sequence_reuse`` fact of results.json; None when the run holds no broker segments."""
    if replicas is None:
        return None
    data = [b for batches in replicas.values() for b, _ in batches if b.transactional and not b.control]
    return {"transactional_batches": len(data), "unread": sum(1 for b in data if b.first_value is None),
            "reused": reused_sequences(replicas, failed_sends(ops))}


def reuses_for(reused: list[dict[str, Any]], process: str, txn_seq: int) -> list[dict[str, Any]]:
    """The reuses whose empty commit may be this transaction's: the same process, after the
    aborted batch's transaction and before the next batch's (one per partition)."""
    out = []
    for r in reused:
        before, after = r["aborted_batch"]["transaction"], r["next_batch"]["transaction"]
        if before[0] == process and before[1] < txn_seq and (after is None or txn_seq < after[1]):
            out.append(r)
    return out
