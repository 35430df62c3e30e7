"""The share-group (KIP-932) delivery ledger and its checks.

Ledger per input record: its acquisitions (history ``acquire``, with delivery counts), its
acknowledgements (history ``ack``: ACCEPT / RELEASE / REJECT and whether the commit succeeded),
its committed outputs (lineage), and its final persisted state (``__share_group_state``,
snapshots and updates replayed; below the start offset a record is complete).

Each check is an entry of the registry (verifier/checks.py, ``LEDGER_CHECKS``, with what it
means) answered here by the function registered for it (``implements(..., "ledger")``); the
ledger's own ``duplicate`` replaces the engines' in a share-group run: an output slot committed
more than once for a record that was delivered only once.

The two state checks judge every write in the log, not only the replayed final state: a write
the coordinator should have refused shows even if a later write covers it up. They judge a
share partition from its first snapshot on (the coordinator prunes what a snapshot replaces);
updates before any snapshot are counted, not judged.

Duplicates *are* expected when the history shows a redelivery: without KIP-1289 a share
pipeline is at-least-once, and the results say so.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from kchaos.protocol.share_state import (DONE_LABELS, SHARE_FINAL_STATES, apply_write, decode_share_state_record,
                                         persisted_label, share_partition_state)
from kchaos.verifier.checks import NOTES, REGISTRY, implementation, implements, result
from kchaos.verifier.model import as_evidence
from kchaos.verifier.results import UNKNOWN, VALID, CheckResult


class ShareLedger:
    def __init__(self, data: Any):
        """``data``: a verifier.run_data.RunData of a share run."""
        self.data = data
        share = data.final.get("share") or {}
        self.limit = int(share.get("delivery_count_limit") or data.workload.share_delivery_count_limit or 5)
        self.mode = (share.get("kip1289") or {}).get("mode", "at-least-once")
        # Ground truth recorded by the workload (workloads/share.py), never recomputed here.
        truth = Path(data.run) / "share_poison.json"
        if not truth.exists():
            raise ValueError("the run directory has no share_poison.json: poison inputs cannot be told apart")
        poison_ids = set(json.loads(truth.read_text())["poison_ids"])
        self.poison = {pos for pos, in_id in data.inputs_committed.items() if in_id in poison_ids}
        self.acquisitions: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
        self.acks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
        for op in data.ops:
            if op["f"] == "acquire":
                for p, o, delivery in op["value"].get("records", []):
                    self.acquisitions[(p, o)].append({"process": op["process"], "time": op["invoke_time"],
                                                      "delivery_count": delivery})
            elif op["f"] == "ack":
                for p, o, kind in op["value"].get("acks", []):
                    self.acks[(p, o)].append({"process": op["process"], "kind": kind, "outcome": op["outcome"],
                                              "invoke_time": op["invoke_time"], "complete_time": op["complete_time"],
                                              "txn_seq": op["value"].get("txn_seq")})
        #: every state write of the group's input partitions, by partition, in log order
        self.writes = self._state_writes(Path(data.run), share.get("input_topic_id"))
        self.state = (None if self.writes is None else
                      {p: share_partition_state([w for _, w in writes]) for p, writes in self.writes.items()})
        self.slots: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
        for out in data.outputs_committed:
            self.slots[(out["in_partition"], out["in_offset"])].append(out)

    def _state_writes(self, run: Path, topic_id: str | None) -> dict[int, list[tuple[int, Any]]] | None:
        """``(log offset, ShareStateRecord)`` per input partition; None without a state dump.
        One share partition's records share a key, hence one log partition: log order is theirs."""
        import pyarrow.parquet as pq

        path = run / "topics" / "__share_group_state.raw.parquet"
        if not path.exists() or topic_id is None:
            return None
        writes: dict[int, list[tuple[int, Any]]] = defaultdict(list)
        group = self.data.workload.group_id
        for r in sorted(pq.read_table(path).to_pylist(), key=lambda r: (r["partition"], r["offset"])):
            rec = decode_share_state_record(r["key"], r["value"])
            if rec is not None and rec.group == group and rec.topic_id == topic_id:
                writes[rec.partition].append((r["offset"], rec))
        return dict(writes)

    def persisted(self, pos: tuple[int, int]) -> str:
        """What the persisted state says of ``pos`` (share_state.persisted_label)."""
        return persisted_label((self.state or {}).get(pos[0]), pos[1])

    def committed_ack(self, pos: tuple[int, int]) -> dict[str, Any] | None:
        """The first ACCEPT or REJECT of ``pos`` whose commit succeeded."""
        return next((a for a in self.acks.get(pos, []) if a["outcome"] == "ok" and a["kind"] in ("accept", "reject")),
                    None)

    def done(self, pos: tuple[int, int]) -> bool:
        return self.committed_ack(pos) is not None or self.persisted(pos) in DONE_LABELS

    def evidence(self, pos: tuple[int, int]) -> dict[str, Any]:
        return {"input": {"partition": pos[0], "offset": pos[1], "id": self.data.inputs_committed.get(pos)},
                "poison": pos in self.poison, "acquisitions": self.acquisitions.get(pos, [])[:10],
                "acknowledgements": self.acks.get(pos, [])[:10], "persisted_state": self.persisted(pos),
                "committed_outputs": as_evidence(self.slots.get(pos, [])[:10])}


@implements("share-lost", "ledger")
def check_share_lost(ledger: ShareLedger) -> CheckResult:
    k = ledger.data.workload.outputs_per_input
    cases = []
    for pos in sorted(ledger.data.inputs_committed):
        if pos in ledger.poison or not ledger.done(pos):
            continue
        have = {o["slot"] for o in ledger.slots.get(pos, [])}
        if len(have) < k:
            ack = ledger.committed_ack(pos)
            why = (f"acknowledged ({ack['kind']}, by {ack['process']})" if ack else
                   f"persisted as {ledger.persisted(pos)}")
            cases.append({"explanation": f"input {pos[0]}@{pos[1]} is done for the share group ({why}) but only "
                                         f"{len(have)} of its {k} outputs are committed", **ledger.evidence(pos)})
    return result("share-lost", cases)


@implements("share-redelivered-after-accept", "ledger")
def check_share_redelivered_after_accept(ledger: ShareLedger) -> CheckResult:
    """A delivery of a record *after* the delivery whose ACCEPT was committed. Order comes from
    the broker's delivery counts, not from when a worker recorded its poll: a worker stopped
    between the broker's answer and its own bookkeeping records an old delivery late (seen
    under worker-pause: delivery 1 recorded after delivery 2 was accepted elsewhere).

    An ACCEPT sent after a later delivery of the record had already reached a worker is stale:
    its lock had expired and the record was given out again. Kafka answers such an
    acknowledgement without error once the record is below the share partition's start offset
    (acknowledged or archived since: 4.4.0's ``SharePartition.acknowledgeBatchRecords`` skips
    those offsets; librdkafka's mock broker copies that on purpose, confluentinc/librdkafka#5414,
    whose review cites Kafka's test ``testAcknowledgeBatchPostLsoMovement``), so its answer says
    nothing about which delivery the group kept. It is not a case, and the note counts it. A
    worker records a delivery only after the broker made it, so a later delivery recorded before
    the ACCEPT was sent was made before it: a real case (the ACCEPT taken, then the record given
    out again) always has its later delivery recorded after the ACCEPT was sent, and is never set
    aside."""
    cases, stale = [], 0
    for pos, acks in sorted(ledger.acks.items()):
        acquisitions = ledger.acquisitions.get(pos, [])
        for ack in acks:
            if ack["kind"] != "accept" or ack["outcome"] != "ok":
                continue
            own = [q for q in acquisitions if q["process"] == ack["process"] and q["time"] <= ack["invoke_time"]]
            if not own:
                continue
            accepted = max(own, key=lambda q: q["time"])["delivery_count"] or 0
            later = [q for q in acquisitions if (q["delivery_count"] or 0) > accepted]
            if any(q["time"] < ack["invoke_time"] for q in later):
                stale += 1
                continue
            if later:
                cases.append({"explanation": f"input {pos[0]}@{pos[1]} was delivered again (delivery "
                                             f"{later[0]['delivery_count']}, to {later[0]['process']}) after delivery "
                                             f"{accepted} was ACCEPTed by {ack['process']} and the acknowledgement "
                                             "committed", **ledger.evidence(pos)})
                break
    found = result("share-redelivered-after-accept", cases)
    if stale:
        tail = NOTES["set-aside.stale-accept"].format(n=stale)
        found.note = (found.note or "no ACCEPT was followed by a delivery") + tail
    return found


@implements("share-delivery-limit", "ledger")
def check_share_delivery_limit(ledger: ShareLedger) -> CheckResult:
    cases = []
    for pos, acquisitions in sorted(ledger.acquisitions.items()):
        worst = max(q["delivery_count"] or 0 for q in acquisitions)
        if worst > ledger.limit:
            cases.append({"explanation": f"input {pos[0]}@{pos[1]} was delivered with delivery count {worst}, above the "
                                         f"limit {ledger.limit}", **ledger.evidence(pos)})
    for p, st in sorted((ledger.state or {}).items()):
        for o, (state, count) in sorted(st["offsets"].items()):
            if count > ledger.limit and not any(c["input"] == {"partition": p, "offset": o,
                                                              "id": ledger.data.inputs_committed.get((p, o))}
                                                for c in cases):
                cases.append({"explanation": f"the persisted share state of {p}@{o} has delivery count {count}, above "
                                             f"the limit {ledger.limit}", **ledger.evidence((p, o))})
    return result("share-delivery-limit", cases)


@implements("share-stuck-acquired", "ledger")
def check_share_stuck_acquired(ledger: ShareLedger) -> CheckResult:
    final = ledger.data.final
    if not final.get("drained", False):
        return CheckResult("share-stuck-acquired", UNKNOWN, note="the drain did not finish: nothing can be called stuck")
    cases = [{"explanation": f"input {pos[0]}@{pos[1]} was neither acknowledged for good nor archived after the drain "
                             f"(persisted state: {ledger.persisted(pos)})", **ledger.evidence(pos)}
             for pos in sorted(ledger.data.inputs_committed) if not ledger.done(pos)]
    return result("share-stuck-acquired", cases)


@implements("duplicate", "ledger")
def check_duplicate(ledger: ShareLedger) -> CheckResult:
    """Output slots committed more than once: allowed only for a record delivered more than once."""
    by_slot: dict[tuple[int, int, int], list[dict[str, Any]]] = defaultdict(list)
    for out in ledger.data.outputs_committed:
        by_slot[(out["in_partition"], out["in_offset"], out["slot"])].append(out)
    cases, explained = [], 0
    for (p, o, slot), outs in sorted(by_slot.items()):
        if len(outs) < 2:
            continue
        deliveries = ledger.acquisitions.get((p, o), [])
        if len(deliveries) > 1 or any((q["delivery_count"] or 1) > 1 for q in deliveries):
            explained += 1
            continue
        cases.append({"explanation": f"input {p}@{o} slot {slot} is committed {len(outs)} times but the record was "
                                     f"delivered {len(deliveries)} time(s): no redelivery explains it",
                      "records": as_evidence(outs[:10]), **{k: v for k, v in ledger.evidence((p, o)).items() if k != "committed_outputs"}})
    found = result("duplicate", cases)
    if not cases:
        found.note = (f"{explained} output slots committed more than once, each explained by a redelivery "
                      f"(share mode {ledger.mode})" if explained else None)
    return found


def judged_writes(writes: list[tuple[int, Any]], deliverable: Any = lambda offset: True
                  ) -> tuple[list[dict[str, Any]], int, list[int]]:
    """Replay one share partition's writes and name each that undoes an earlier one (see the
    module's table). Returns the cases' explanations with their writes, how many updates came
    before the first snapshot (not judged: what they build on was pruned), and the offsets
    undone that hold no deliverable record (``deliverable(offset)`` false: a transaction marker,
    an aborted record under read_committed). Kafka's share partition acquires and releases
    those offsets too, and its state for them has been seen going from archived back to
    available (Kafka 4.4.0); no delivery can follow, so they are set aside, not judged."""
    cases: list[dict[str, Any]] = []
    unjudged = 0
    set_aside: list[int] = []
    state_epoch, leader_epoch, start = None, -1, -1
    offsets: dict[int, tuple[int, int]] = {}

    def case(offset: int, rec: Any, why: str) -> None:
        cases.append({"why": why, "write": {"log_offset": offset, "kind": rec.kind, "leader_epoch": rec.leader_epoch,
                                            "state_epoch": state_epoch, "start_offset": rec.start_offset,
                                            "batches": [[b.first_offset, b.last_offset, b.delivery_state,
                                                         b.delivery_count] for b in rec.batches][:10]}})

    for offset, rec in writes:
        if rec.kind == "tombstone":
            state_epoch, leader_epoch, start, offsets = None, -1, -1, {}
            continue
        if rec.kind == "snapshot":
            if rec.state_epoch != state_epoch:  # first snapshot, or the state was initialised anew
                state_epoch, leader_epoch, start, offsets = rec.state_epoch, -1, -1, {}
        elif state_epoch is None:
            unjudged += 1
            continue
        if 0 <= rec.leader_epoch < leader_epoch:
            case(offset, rec, f"written by a leader of epoch {rec.leader_epoch} after one of epoch {leader_epoch} "
                              "had written: the coordinator should have fenced it")
        leader_epoch = max(leader_epoch, rec.leader_epoch)
        if 0 <= rec.start_offset < start:
            case(offset, rec, f"moves the start offset back from {start} to {rec.start_offset}")
        floor = max(start, rec.start_offset)
        undone = [o for b in rec.batches if b.delivery_state not in SHARE_FINAL_STATES
                  for o in range(max(b.first_offset, floor), b.last_offset + 1)
                  if offsets.get(o, (None,))[0] in SHARE_FINAL_STATES]
        set_aside += [o for o in undone if not deliverable(o)]
        undone = [o for o in undone if deliverable(o)]
        if undone:
            case(offset, rec, f"makes {len(undone)} record(s) deliverable again that an earlier write had "
                              f"acknowledged or archived (offsets {', '.join(map(str, undone[:5]))})")
        start, offsets = apply_write(start, offsets, rec)
    return cases, unjudged, set_aside


@implements("share-state-regressed", "ledger")
def check_share_state_regressed(ledger: ShareLedger) -> CheckResult:
    if not ledger.writes:
        return CheckResult("share-state-regressed", UNKNOWN,
                           note="no share-group state was dumped for the input topic: no state write could be judged")
    data = ledger.data
    # offsets that hold a record a share consumer can be given (the input's raw view minus what
    # read_committed hides)
    records = set(data.inputs_committed) | (set(data.inputs_raw_only) if data.workload.isolation == "read_uncommitted"
                                            else set())
    cases, unjudged, set_aside = [], 0, {}
    for p, writes in sorted(ledger.writes.items()):
        found, skipped, aside = judged_writes(writes, lambda o, p=p: (p, o) in records)
        unjudged += skipped
        if aside:
            set_aside[p] = sorted(set(aside))
        cases += [{"explanation": f"the share state write at __share_group_state offset {c['write']['log_offset']} "
                                  f"for input partition {p} {c['why']}", "input_partition": p, **c}
                  for c in found]
    if unjudged == sum(len(w) for w in ledger.writes.values()):
        return CheckResult("share-state-regressed", UNKNOWN,
                           note=f"all {unjudged} state writes came before any snapshot: none could be judged")
    found = result("share-state-regressed", cases)
    notes = []
    if unjudged:
        notes.append(f"{unjudged} update(s) before a partition's first snapshot were not judged (pruned base)")
    if set_aside:
        where = "; ".join(f"input partition {p}: {', '.join(map(str, offs[:5]))}" for p, offs in set_aside.items())
        notes.append(f"{sum(map(len, set_aside.values()))} offset(s) holding no deliverable record (transaction "
                     f"markers, aborted records) made deliverable again after being archived, set aside ({where})")
    if notes:
        found.note = "; ".join(notes)
    return found


@implements("share-ack-not-persisted", "ledger")
def check_share_ack_not_persisted(ledger: ShareLedger) -> CheckResult:
    """Every acknowledgement answered without error is in the persisted state: Kafka's share
    partition answers an acknowledgement once its state write succeeded."""
    answered = sorted(pos for pos, acks in ledger.acks.items() if ledger.committed_ack(pos) is not None)
    if not answered:
        return CheckResult("share-ack-not-persisted", UNKNOWN if ledger.data.inputs_committed else VALID,
                           note="no acknowledgement was answered without error: nothing to look for")
    states = {pos: ledger.persisted(pos) for pos in answered}
    unseen = [pos for pos, state in states.items() if state == "unknown"]
    cases = []
    for pos, state in states.items():
        if state in ("available", "never-delivered"):
            ack = ledger.committed_ack(pos)
            cases.append({"explanation": f"input {pos[0]}@{pos[1]} was {ack['kind'].upper()}ed by {ack['process']} "
                                         "and the broker answered without error, but the persisted share state "
                                         f"holds it as {state}", **ledger.evidence(pos)})
    if len(unseen) == len(answered):
        return CheckResult("share-ack-not-persisted", UNKNOWN, note=(
            f"none of the {len(answered)} answered acknowledgements has a persisted state to compare with"))
    found = result("share-ack-not-persisted", cases)
    if unseen and not cases:
        found.note = (f"{len(unseen)} of {len(answered)} answered acknowledgements have no persisted state to compare "
                      "with (their partition's state was not dumped)")
    return found


#: share-group checks, by anomaly name
def share_checks(data: Any) -> tuple[list[CheckResult], dict[str, Any]]:
    """Every share-ledger check (and the share variant of ``duplicate``) on a RunData, plus facts.
    A check that crashes yields ``unknown`` with the error, like any other."""
    import traceback

    try:
        ledger = ShareLedger(data)
    except Exception:
        note = "share ledger could not be built: " + traceback.format_exc(limit=3)
        return [CheckResult(check.anomaly, UNKNOWN, note=note) for check in LEDGER], {}
    results = []
    for check in LEDGER:
        try:
            results.append(implementation(check, "ledger")(ledger))
        except Exception:
            results.append(CheckResult(check.anomaly, UNKNOWN, note="checker crashed: " + traceback.format_exc(limit=3)))
    deliveries = [len(v) for v in ledger.acquisitions.values()]
    facts = {"mode": ledger.mode, "kip1289": (data.final.get("share") or {}).get("kip1289"),
             "delivery_count_limit": ledger.limit, "inputs_delivered": len(deliveries),
             "deliveries": sum(deliveries), "inputs_redelivered": sum(1 for d in deliveries if d > 1),
             "poison_inputs": len(ledger.poison),
             "rejected": sum(1 for acks in ledger.acks.values() if any(a["kind"] == "reject" and a["outcome"] == "ok"
                                                                      for a in acks)),
             "released": sum(1 for acks in ledger.acks.values() for a in acks if a["kind"] == "release"),
             "persisted_state_partitions": len(ledger.state or {}),
             "state_writes": sum(len(w) for w in (ledger.writes or {}).values())}
    return results, facts


#: the checks the ledger answers, in registry order: its own ``duplicate``, then its six
LEDGER = tuple(c for c in REGISTRY if c.share_ledger)
