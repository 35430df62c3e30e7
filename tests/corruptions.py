"""Offline corruptions of a stored run: each edits the evidence a real run recorded (its topic
dumps, its history, final.json) the way a broker bug would have left it, and says what the
verifier must then report. The classes are the ones the end state and the client's word alone
could not see (issue: "trust only what can be checked"):

* the input side: an acknowledged input lost, an input replaced under an output, an input the
  seeder aborted exposed and processed;
* the client's word against the brokers': a commit the client saw fail that took effect, a
  transaction split across two coordinator transactions, an offset commit lost or moved back;
* what readers got during the run: a record an observer read, rewritten in the final log;
* liveness after the final heal: a broker fenced at the end, a partition's inputs never processed;
* missing evidence: the group's offsets unreadable, an empty transaction log, a worker's history
  gone, a dump that stopped early, a faulted run that injected nothing, the observers' reads gone;
* partial evidence that must not hide an anomaly or pass for complete (issue 42): a lost offset
  commit beside another group's compacted or pinned ``__consumer_offsets`` partition, a lost input
  with a seeder history that stops after its init, an observer that failed mid-run, a commit the
  coordinator never recorded beside another ``__transaction_state`` partition's compaction, a
  planned fault kind never attempted in a run that went to its end.

Each function takes a run directory (a copy: it is edited in place) and returns what must follow:
``("anomaly", name, fragment)`` (the verdict is invalid, names it, and one of its cases' explanations
holds ``fragment``: the kind of case) or ``("unknown", text)`` (the verdict is unknown, with ``text``
in an error or in a required check's reason for not being checked). Picks are deterministic (the
first suitable record).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import pyarrow.parquet as pq

from kchaos.verifier.decoders import OffsetCommit, decode_offsets_record, decode_transaction_record
from kchaos.verifier.coordinator_log import coordinator_records, coordinator_transactions
from tests.unit.test_checkers import _offset_record, _txn_record, _write_topic

Expectation = tuple[str, ...]


def _rows(run: Path, topic: str, view: str) -> list[dict[str, Any]]:
    return pq.read_table(run / "topics" / f"{topic}.{view}.parquet").to_pylist()


def _write(run: Path, topic: str, view: str, rows: list[dict[str, Any]]) -> None:
    _write_topic(run, topic, view, [(r["partition"], r["offset"], r["key"], r["value"]) for r in rows])


def _campaign(run: Path) -> dict[str, Any]:
    return json.loads((run / "campaign.json").read_text())["workload"]


def _history(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]


def _write_history(run: Path, lines: list[dict[str, Any]]) -> None:
    (run / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def _final(run: Path) -> dict[str, Any]:
    return json.loads((run / "final.json").read_text())


def _write_final(run: Path, final: dict[str, Any]) -> None:
    (run / "final.json").write_text(json.dumps(final))


def _outputs_by_input(run: Path) -> dict[tuple[int, int], list[dict[str, Any]]]:
    out: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for topic in _campaign(run)["output_topics"]:
        for r in _rows(run, topic, "committed"):
            value = json.loads(r["value"])
            out[(value["in_partition"], value["in_offset"])].append(value)
    return out


# -- the input side ----------------------------------------------------------------------------

def lose_acknowledged_input(run: Path) -> Expectation:
    """The last input of a partition, which the seeder was acknowledged to commit, is gone from the log."""
    topic = _campaign(run)["input_topic"]
    committed = _rows(run, topic, "committed")
    last = max((r for r in committed if r["partition"] == committed[0]["partition"]), key=lambda r: r["offset"])
    for view in ("committed", "raw"):
        _write(run, topic, view, [r for r in _rows(run, topic, view)
                                  if (r["partition"], r["offset"]) != (last["partition"], last["offset"])])
    return "anomaly", "lost-acknowledged-input", "is not in the committed input log"


def replace_input(run: Path) -> Expectation:
    """The input record at a processed input's position is another record (a diverged log)."""
    topic = _campaign(run)["input_topic"]
    target = min(_outputs_by_input(run))
    for view in ("committed", "raw"):
        rows = _rows(run, topic, view)
        for r in rows:
            if (r["partition"], r["offset"]) == target:
                r["key"] = b"in-replaced-" + r["key"]
        _write(run, topic, view, rows)
    return "anomaly", "input-mismatch", "but the input log holds"


def expose_aborted_input(run: Path) -> Expectation:
    """An input the seeder aborted is visible to read_committed readers and was processed: it is
    in the committed input view, and a committed transaction's outputs were made from it."""
    workload = _campaign(run)
    topic = workload["input_topic"]
    committed = _rows(run, topic, "committed")
    at = {(r["partition"], r["offset"]) for r in committed}
    aborted = next(r for r in _rows(run, topic, "raw") if (r["partition"], r["offset"]) not in at)
    _write(run, topic, "committed", sorted([*committed, aborted], key=lambda r: (r["partition"], r["offset"])))
    template = next(iter(_outputs_by_input(run).values()))
    for value in template:
        out_topic = workload["output_topics"][value["slot"] % len(workload["output_topics"])]
        value = {**value, "in_id": aborted["key"].decode(), "in_partition": aborted["partition"],
                 "in_offset": aborted["offset"]}
        for view in ("committed", "raw"):
            rows = _rows(run, out_topic, view)
            end = max((r["offset"] for r in rows if r["partition"] == 0), default=-1) + 1
            _write(run, out_topic, view, [*rows, {"partition": 0, "offset": end, "key": aborted["key"],
                                                  "value": json.dumps(value).encode()}])
    return "anomaly", "aborted-read", "which the seeder's transaction aborted"


# -- the client's word against the brokers' ------------------------------------------------------

def fail_a_commit(run: Path) -> Expectation:
    """A transaction whose commit the client saw fail has its outputs committed."""
    lines = _history(run)
    line = next(x for x in lines if x["f"] == "commit" and x["type"] == "ok" and x["process"].startswith("w"))
    line["type"] = "fail"
    line["error"] = "KafkaError{code=INVALID_TXN_STATE}"
    _write_history(run, lines)
    return "anomaly", "aborted-read", "whose commit the client saw fail"


def _offset_commits(run: Path, view: str) -> list[tuple[dict[str, Any], OffsetCommit]]:
    workload = _campaign(run)
    out = []
    for r in _rows(run, "__consumer_offsets", view):
        c = decode_offsets_record(r["key"], r["value"])
        if isinstance(c, OffsetCommit) and c.group == workload["group_id"] and c.topic == workload["input_topic"] \
                and c.offset is not None:
            out.append((r, c))
    return out


def _middle_commit(run: Path) -> tuple[tuple[int, int], int]:
    """(log partition, log offset) of a commit with one of its partition before it and one after,
    and the offset the one before committed."""
    by_partition: dict[int, list[tuple[dict[str, Any], OffsetCommit]]] = defaultdict(list)
    for r, c in _offset_commits(run, "committed"):
        by_partition[c.partition].append((r, c))
    commits = next(commits for _, commits in sorted(by_partition.items()) if len(commits) >= 3)
    (r, _), (_, before) = commits[len(commits) // 2], commits[len(commits) // 2 - 1]
    return (r["partition"], r["offset"]), before.offset


def drop_offset_commit(run: Path) -> Expectation:
    """One transaction's offset commit is missing from __consumer_offsets, hidden by the next one."""
    where, _ = _middle_commit(run)
    for view in ("committed", "raw"):
        _write(run, "__consumer_offsets", view, [r for r in _rows(run, "__consumer_offsets", view)
                                                 if (r["partition"], r["offset"]) != where])
    return "anomaly", "lost-offset-commit", "is not in the group's committed offsets log"


def move_offset_back(run: Path) -> Expectation:
    """A committed offset moves back between two commits (the next one hides it)."""
    where, before = _middle_commit(run)
    for view in ("committed", "raw"):
        rows = _rows(run, "__consumer_offsets", view)
        for r in rows:
            if (r["partition"], r["offset"]) == where:
                c = decode_offsets_record(r["key"], r["value"])
                r["key"], r["value"] = _offset_record(c.group, c.topic, c.partition, max(0, before - 1))
        _write(run, "__consumer_offsets", view, rows)
    return "anomaly", "offsets-backwards", "moved back from"


def split_a_transaction(run: Path) -> Expectation:
    """A client transaction the coordinator carried as two: its outputs' transaction ended (a late
    abort) before its offsets opened a second one, which its own commit committed."""
    rows = _rows(run, "__transaction_state", "raw")
    records = coordinator_records([{"partition": r["partition"], "offset": r["offset"],
                                    "entry": decode_transaction_record(r["key"], r["value"])}
                                   for r in rows if decode_transaction_record(r["key"], r["value"]) is not None])
    # this run's transactional ids only: the shared cluster's log holds other tests' too
    prefix = next(x["value"]["txid_prefix"] for x in _history(run) if x["f"] == "setup")
    target = next(ct for ct in coordinator_transactions(records) if ct.completed == "commit"
                  and ct.transactional_id.startswith(prefix)
                  and any(p.startswith("__consumer_offsets") for p in ct.partitions)
                  and any(not p.startswith("__") for p in ct.partitions) and len(ct.records) >= 3
                  and not ct.transactional_id.endswith("seeder"))
    offsets = {o for o, *_ in target.records}
    first, last = min(offsets), max(offsets)
    outputs: dict[str, list[int]] = defaultdict(list)
    consumer: dict[str, list[int]] = defaultdict(list)
    for name in target.partitions:
        topic, p = name.rsplit("-", 1)
        (consumer if topic == "__consumer_offsets" else outputs)[topic].append(int(p))
    t0, t1 = target.start_ms, target.prepare_ms
    mid = t0 + max(1, (t1 - t0) // 2)
    txid, pid, epoch = target.transactional_id, target.producer_id, target.epoch
    steps = [("Ongoing", outputs, t0, t0), ("PrepareAbort", outputs, t0 + 1, t0), ("CompleteAbort", {}, t0 + 2, t0),
             ("Ongoing", consumer, mid, mid), ("PrepareCommit", consumer, t1, mid), ("CompleteCommit", {}, t1 + 1, mid)]
    new = [_txn_record(txid, status, epoch, pid, parts, at, start) for status, parts, at, start in steps]
    part = target.log_partition
    kept, added = [], False
    for r in rows:
        if r["partition"] == part and first <= r["offset"] <= last and \
                decode_transaction_record(r["key"], r["value"]).transactional_id == txid:
            if not added:
                kept += [{"partition": part, "offset": -1, "key": k, "value": v} for k, v in new]
                added = True
            continue
        kept.append(r)
    renumbered, next_offset = [], defaultdict(int)  # log order kept, offsets made consecutive again
    for r in kept:
        renumbered.append({**r, "offset": next_offset[r["partition"]]})
        next_offset[r["partition"]] += 1
    _write(run, "__transaction_state", "raw", renumbered)
    return "anomaly", "split-transaction", "was carried by 2 coordinator transactions"


# -- missing evidence ----------------------------------------------------------------------------

def replace_an_observed_record(run: Path) -> Expectation:
    """A record the observer read, different in the final log (a broker that rewrote it after it
    was served): its value gains a trailing space, so its lineage still parses and only the bytes
    differ from what was read."""
    topic = _campaign(run)["output_topics"][0]
    seen = {(r["partition"], r["offset"]) for r in pq.read_table(run / "observers" / "observations.parquet").to_pylist()
            if r["topic"] == topic}
    for view in ("committed", "raw"):
        rows = _rows(run, topic, view)
        target = min((r["partition"], r["offset"]) for r in rows if (r["partition"], r["offset"]) in seen)
        for r in rows:
            if (r["partition"], r["offset"]) == target:
                r["value"] = r["value"] + b" "
        _write(run, topic, view, rows)
    return "anomaly", "inconsistent-offsets", "but the final log holds another record at that offset"


def unreadable_group_offsets(run: Path) -> Expectation:
    final = _final(run)
    final.pop("group_offsets", None)
    final["group_offsets_error"] = "KafkaException(KafkaError{code=_TIMED_OUT})"
    _write_final(run, final)
    return "unknown", "final offsets could not be read"


def empty_transaction_log(run: Path) -> Expectation:
    _write(run, "__transaction_state", "raw", [])
    return "unknown", "__transaction_state holds no record"


def drop_a_workers_history(run: Path) -> Expectation:
    lines = _history(run)
    gone = sorted({x["process"] for x in lines if x["process"].startswith("w")})[0]
    _write_history(run, [x for x in lines if x["process"] != gone])
    return "unknown", "with no history"


def stop_a_dump_early(run: Path) -> Expectation:
    final = _final(run)
    dump = next(t for t in final["topics"] if t["topic"] in _campaign(run)["output_topics"])
    dump["incomplete_partitions"] = [0]
    _write_final(run, final)
    return "unknown", "stopped before the end of partitions 0"


def lose_the_observations(run: Path) -> Expectation:
    (run / "observers" / "observations.parquet").unlink()
    return "unknown", "their reads are not in the run directory"


def inject_nothing(run: Path) -> Expectation:
    """A faulted campaign's schedule, and a history without one fault in it."""
    (run / "schedule.json").write_text(json.dumps({"seed": 1, "faults": [
        {"index": 0, "at_s": 5.0, "kind": "kill", "target": "txn-coordinator", "hold_s": 4.0, "seed": 1, "params": {}}]}))
    _write_history(run, [x for x in _history(run) if not x["f"].startswith("fault:")])
    return "unknown", "planned 1 faults and the history shows none injected"


# -- partial evidence: judged where it can be, never VALID where it cannot --------------------

def _group_log_partition(run: Path) -> int:
    return _offset_commits(run, "committed")[0][0]["partition"]


def _other_partition(run: Path, topic: str, mine: int) -> int:
    count = max(len(t.get("end_offsets") or {}) for t in _final(run)["topics"] if t["topic"] == topic)
    return next(p for p in range(count) if p != mine)


def drop_offset_commit_beside_another_groups_compaction(run: Path) -> Expectation:
    """A lost offset commit of the run's group, while the cleaner compacted another group's
    __consumer_offsets partition: that compaction says nothing about this group's commits."""
    expectation = drop_offset_commit(run)
    final = _final(run)
    other = _other_partition(run, "__consumer_offsets", _group_log_partition(run))
    final["compaction"] = {"__consumer_offsets": {str(other): 10_000}, "__transaction_state": {}}
    _write_final(run, final)
    return expectation


def drop_offset_commit_beside_another_apps_open_transaction(run: Path) -> Expectation:
    """A lost offset commit of the run's group, while another application's open transaction pins
    another __consumer_offsets partition's committed view."""
    expectation = drop_offset_commit(run)
    final = _final(run)
    other = str(_other_partition(run, "__consumer_offsets", _group_log_partition(run)))
    for dump in final["topics"]:
        if dump["topic"] == "__consumer_offsets":
            ends = dump.setdefault("end_offsets", {})
            ends[other] = 5 if dump["view"] == "committed" else 9
    _write_final(run, final)
    return expectation


def lose_an_input_with_the_seeders_history_cut_short(run: Path) -> Expectation:
    """An acknowledged input gone from the log, and the seeder's history stops after its init (no
    acknowledgement survives): the seeder's own count in final.json still tells."""
    lose_acknowledged_input(run)
    _write_history(run, [x for x in _history(run) if not (x["process"] == "seeder" and x["f"] == "seed")])
    return "anomaly", "lost-acknowledged-input", "the seeder committed"


def fail_the_observer_mid_run(run: Path) -> Expectation:
    """The observer failed half way: its summary says so and its reads stop there. What it read is
    judged; what nobody read cannot be told (unseen, claimed: unknown)."""
    path = run / "observers" / "observations.parquet"
    rows = pq.read_table(path).to_pylist()
    kept = rows[:len(rows) // 2]
    import pyarrow as pa
    pq.write_table(pa.Table.from_pylist(kept, schema=pq.read_schema(path)), path)
    final = _final(run)
    for o in final["observers"]["observers"]:
        o.update(error="KafkaException(KafkaError{code=_TRANSPORT})", caught_up=True, records=len(kept))
    _write_final(run, final)
    return "unknown", "observer 0 failed (KafkaException(KafkaError{code=_TRANSPORT}))"


def unrecord_a_commit_beside_another_partitions_compaction(run: Path) -> Expectation:
    """A transaction the client saw commit is not in __transaction_state at all, while the cleaner
    compacted another __transaction_state partition than the one that holds its id."""
    rows = _rows(run, "__transaction_state", "raw")
    decoded = [{"partition": r["partition"], "offset": r["offset"], "entry": decode_transaction_record(r["key"], r["value"])}
               for r in rows]
    records = coordinator_records([d for d in decoded if d["entry"] is not None])
    prefix = next(x["value"]["txid_prefix"] for x in _history(run) if x["f"] == "setup")
    target = next(ct for ct in coordinator_transactions(records) if ct.completed == "commit"
                  and ct.transactional_id.startswith(prefix) and not ct.transactional_id.endswith("seeder")
                  and any(not p.startswith("__") for p in ct.partitions))
    first = target.first_offset
    complete = next(o for o, status, *_ in target.records if status == "CompleteCommit")
    gone = {(target.log_partition, o) for o in range(first, complete + 1)}
    kept = [r for r, d in zip(rows, decoded) if (r["partition"], r["offset"]) not in gone
            or d["entry"] is None or d["entry"].transactional_id != target.transactional_id]
    _write(run, "__transaction_state", "raw", kept)
    final = _final(run)
    final["compaction"] = {"__consumer_offsets": {}, "__transaction_state": {
        str(_other_partition(run, "__transaction_state", target.log_partition)): 10_000}}
    _write_final(run, final)
    return "anomaly", "split-transaction", "but the coordinator's log holds no transaction of it"


def plan_a_fault_kind_never_tried(run: Path) -> Expectation:
    """The schedule planned a kill and a partition; the history shows the kill injected and the
    partition never attempted, and the run went to its end."""
    (run / "schedule.json").write_text(json.dumps({"seed": 1, "faults": [
        {"index": 0, "at_s": 5.0, "kind": "kill", "target": "txn-coordinator", "hold_s": 4.0, "seed": 1, "params": {}},
        {"index": 1, "at_s": 15.0, "kind": "partition", "target": "isolate-leader", "hold_s": 4.0, "seed": 1,
         "params": {}}]}))
    lines = [x for x in _history(run) if not x["f"].startswith("fault:")]
    t = lines[len(lines) // 2]["time"]
    lines += [{"time": t, "process": "harness", "op": 10**6, "type": "invoke", "f": "fault:kill", "value": {"index": 0}},
              {"time": t + 4, "process": "harness", "op": 10**6, "type": "ok", "f": "fault:kill", "value": {"index": 0}}]
    _write_history(run, lines)
    return "unknown", "partition 0 of 1 (planned 1, attempted 0)"


# -- liveness: what the run did after the final heal -------------------------------------------

def fence_a_broker_at_the_end(run: Path) -> Expectation:
    """F9's end state: the brokers' metadata at the run's end without one of them."""
    final = _final(run)
    record = final["brokers_at_end"]
    record["registered"] = [b for b in record["registered"] if b != record["expected"][0]]
    _write_final(run, final)
    return "anomaly", "broker-not-rejoined", f"broker {record['expected'][0]} was not registered at the run's end"


def stall_a_partition(run: Path) -> Expectation:
    """Two more inputs the seeder committed on one input partition, acknowledged, that the
    pipeline never processed, and the drain's bound ran out: its workers held the partition."""
    topic = _campaign(run)["input_topic"]
    rows = _rows(run, topic, "committed")
    partition = rows[0]["partition"]
    end = max(r["offset"] for r in _rows(run, topic, "raw") if r["partition"] == partition) + 2  # past a marker
    added = [{**rows[0], "offset": end + i, "key": f"in-stalled-{i}".encode()} for i in range(2)]
    for view in ("committed", "raw"):
        _write(run, topic, view, _rows(run, topic, view) + added)
    lines = _history(run)
    t = lines[-1]["time"]
    inputs = [[r["key"].decode(), partition, r["offset"]] for r in added]
    lines += [{"time": t, "process": "seeder", "op": 10**6, "type": "invoke", "f": "seed",
               "value": {"first": 10**6, "last": 10**6 + 1, "abort": False}},
              {"time": t + 0.1, "process": "seeder", "op": 10**6, "type": "ok", "f": "seed",
               "value": {"count": 2, "inputs": inputs}}]
    _write_history(run, lines)
    final = _final(run)
    final["drained"] = False
    for dump in final["topics"]:
        if dump["topic"] == topic:
            dump["records"] = (dump.get("records") or 0) + 2
            dump.setdefault("end_offsets", {})[str(partition)] = end + 2
    _write_final(run, final)
    return "anomaly", "stalled-pipeline", f"2 committed inputs of {topic}/{partition} (offsets {end} to {end + 1})"


#: every corruption, each checked on its own copy of a clean run
ANOMALIES: tuple[Callable[[Path], Expectation], ...] = (
    lose_acknowledged_input, replace_input, expose_aborted_input, fail_a_commit, drop_offset_commit, move_offset_back,
    split_a_transaction, replace_an_observed_record, drop_offset_commit_beside_another_groups_compaction,
    drop_offset_commit_beside_another_apps_open_transaction, lose_an_input_with_the_seeders_history_cut_short,
    unrecord_a_commit_beside_another_partitions_compaction, fence_a_broker_at_the_end, stall_a_partition)
GAPS: tuple[Callable[[Path], Expectation], ...] = (
    unreadable_group_offsets, empty_transaction_log, drop_a_workers_history, stop_a_dump_early, inject_nothing,
    lose_the_observations, fail_the_observer_mid_run, plan_a_fault_kind_never_tried)
