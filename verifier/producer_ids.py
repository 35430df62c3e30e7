"""Producer ids and epochs in the coordinator's log: KIP-890's rotation, and what breaks it.

Under ``transaction.version`` 2 every transaction end bumps the producer epoch; at an exhausted
epoch (32766, ``Short.MAX_VALUE - 1``) the coordinator moves the transactional id to a new
producer id with epoch 0: in the ``Complete*`` record after a ``Prepare*`` at epoch 32767 (an end
under TV2), or in the ``Empty`` record of an InitProducerId (any version). A transactional id
changes producer id for no other reason while it lives (an expired id is a tombstone first).
Three Kafka bugs sit at that move (docs/findings.md F5); what they leave in the log:

- a **negative epoch**: an epoch bumped past 32767 wraps (KAFKA-19367: InitProducerId during an
  ongoing transaction bumped twice near the boundary);
- a **producer id change that is not a rotation**: from an epoch below 32766, or to an epoch other
  than 0 (KAFKA-18660: the wrong producer id or epoch on overflow);
- a **retired producer id used again** by the id that rotated away from it, or one producer id
  held by two transactional ids (a producer-id block handed out twice).

Both engines find the candidate records (a change of producer id between two consecutive records
of one id, a negative epoch, a producer id of two ids; Python by walking the decoded log, Spark
with a window over it) and :func:`judge_producer_ids` judges them: the rules live here once.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from kchaos.verifier.checks import explain

#: Short.MAX_VALUE - 1: the coordinator rotates the producer id of an id at this epoch or above
EXHAUSTED_EPOCH = 32766
PREPARED = ("PrepareCommit", "PrepareAbort")
#: rotations listed one by one in the facts (all are counted)
MAX_LISTED = 100


def producer_id_candidates(records: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                        list[dict[str, Any]], int, list[dict[str, Any]]]:
    """The Python reference's candidates from decoded records (``coordinator_records``' shape):
    ``(changes, negative, shared, max_epoch, bumped_twice)``. A change is ``{transactional_id, log_partition,
    from_offset, from_pid, from_epoch, from_status, to_offset, to_pid, to_epoch, to_status, at_ms}``
    between two consecutive records of one id (a tombstone between them starts the id afresh); a
    negative is ``{transactional_id, log_partition, offset, producer_id, epoch, status}``; a
    shared is ``{producer_id, transactional_ids}``; a bumped-twice is a ``Prepare*`` two epochs
    above the ``Ongoing`` before it (same producer id): ``{transactional_id, log_partition, offset,
    status, from_epoch, to_epoch}``."""
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_id[r["transactional_id"]].append(r)
    changes, negative, bumped_twice = [], [], []
    holders: dict[int, set[str]] = defaultdict(set)
    max_epoch = -1
    for txid, recs in by_id.items():
        prev: dict[str, Any] | None = None
        for r in sorted(recs, key=lambda r: (r["partition"], r["offset"])):
            if r["producer_id"] is None:
                prev = None
                continue
            holders[r["producer_id"]].add(txid)
            max_epoch = max(max_epoch, r["producer_epoch"])
            if r["producer_epoch"] < 0:
                negative.append({"transactional_id": txid, "log_partition": r["partition"], "offset": r["offset"],
                                 "producer_id": r["producer_id"], "epoch": r["producer_epoch"], "status": r["status"]})
            if (prev is not None and prev["producer_id"] == r["producer_id"] and prev["status"] == "Ongoing"
                    and r["status"] in PREPARED and r["producer_epoch"] - prev["producer_epoch"] == 2):
                bumped_twice.append({"transactional_id": txid, "log_partition": r["partition"], "offset": r["offset"],
                                     "status": r["status"], "from_epoch": prev["producer_epoch"],
                                     "to_epoch": r["producer_epoch"]})
            if prev is not None and prev["producer_id"] != r["producer_id"]:
                changes.append({"transactional_id": txid, "log_partition": r["partition"],
                                "from_offset": prev["offset"], "from_pid": prev["producer_id"],
                                "from_epoch": prev["producer_epoch"], "from_status": prev["status"],
                                "to_offset": r["offset"], "to_pid": r["producer_id"], "to_epoch": r["producer_epoch"],
                                "to_status": r["status"], "at_ms": r["last_update_ms"]})
            prev = r
    shared = [{"producer_id": pid, "transactional_ids": sorted(ids)} for pid, ids in holders.items() if len(ids) > 1]
    return changes, negative, shared, max_epoch, bumped_twice


def judge_producer_ids(changes: Iterable[dict[str, Any]], negative: Iterable[dict[str, Any]],
                       shared: Iterable[dict[str, Any]], max_epoch: int | None,
                       bumped_twice: Iterable[dict[str, Any]] = ()) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The invalid-txn-transition cases of producer ids and epochs, and the facts: how many
    rotations the log shows (``epoch_rollovers``), which ids rotated and when, the highest epoch
    seen, and the transactions prepared two epochs above their own (``bumped_twice``: an epoch
    fence and an end bump both applied, KAFKA-19367's mechanism under TV2 before 4.1.0; harmless
    below 32766, a wrapped epoch at it, which is a negative-epoch case)."""
    cases: list[dict[str, Any]] = []
    rotated: dict[str, int] = defaultdict(int)
    rotations: list[dict[str, Any]] = []
    retired: dict[str, set[int]] = defaultdict(set)
    for c in sorted(changes, key=lambda c: (c["transactional_id"], c["log_partition"], c["to_offset"])):
        txid = c["transactional_id"]
        where = {"transactional_id": txid, "log": f"__transaction_state-{c['log_partition']}",
                 "from": {"offset": c["from_offset"], "status": c["from_status"], "producer_id": c["from_pid"],
                          "epoch": c["from_epoch"]},
                 "to": {"offset": c["to_offset"], "status": c["to_status"], "producer_id": c["to_pid"],
                        "epoch": c["to_epoch"]}}
        retired[txid].add(c["from_pid"])
        if c["to_pid"] in retired[txid]:
            cases.append({"explanation": explain("invalid-txn-transition.pid-reused", txid=txid, pid=c["to_pid"],
                                                 from_pid=c["from_pid"]), **where})
        elif c["from_epoch"] < EXHAUSTED_EPOCH or c["to_epoch"] != 0:
            cases.append({"explanation": explain("invalid-txn-transition.rotation", txid=txid, from_pid=c["from_pid"],
                                                 from_epoch=c["from_epoch"], to_pid=c["to_pid"], to_epoch=c["to_epoch"],
                                                 exhausted=EXHAUSTED_EPOCH), **where})
        else:
            rotated[txid] += 1
            rotations.append({"transactional_id": txid, "from_pid": c["from_pid"], "to_pid": c["to_pid"],
                              "via": f"{c['from_status']} -> {c['to_status']}", "at_ms": c.get("at_ms")})
    for n in sorted(negative, key=lambda n: (n["transactional_id"], n["log_partition"], n["offset"])):
        cases.append({"explanation": explain("invalid-txn-transition.negative-epoch", txid=n["transactional_id"],
                                             pid=n["producer_id"], epoch=n["epoch"], status=n["status"]),
                      "transactional_id": n["transactional_id"], "log": f"__transaction_state-{n['log_partition']}",
                      "record": {"offset": n["offset"], "status": n["status"], "producer_id": n["producer_id"],
                                 "epoch": n["epoch"]}})
    for s in sorted(shared, key=lambda s: s["producer_id"]):
        cases.append({"explanation": explain("invalid-txn-transition.pid-shared", pid=s["producer_id"],
                                             txids=", ".join(s["transactional_ids"])),
                      "producer_id": s["producer_id"], "transactional_ids": s["transactional_ids"]})
    facts = {"epoch_rollovers": sum(rotated.values()), "rotated_ids": dict(sorted(rotated.items())),
             # when each happened (the coordinator's clock), to set beside the faults active then
             "rotations": rotations[:MAX_LISTED],
             "max_epoch": max_epoch if max_epoch is not None and max_epoch >= 0 else None}
    twice = sorted(bumped_twice, key=lambda b: (b["transactional_id"], b["log_partition"], b["offset"]))
    facts["bumped_twice"] = len(twice)
    if twice:
        facts["bumped_twice_examples"] = twice[:5]
    return cases, facts
