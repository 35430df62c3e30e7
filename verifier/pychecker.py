"""Single-process Python checker over a stored run directory.

Reads the dumped topics (``topics/*.parquet``), the final group offsets (``final.json``) and the
merged history, and checks the consume-transform-produce guarantees by the lineage contract
(workloads/lineage.py). It is the reference the Spark verifier is compared with, and the
checker ``kchaos run``/``analyze`` use until that lands. Every case carries its evidence: the
records (topic, partition, offset, lineage), the transaction (transactional.id, producer id and
epoch, worker incarnation, sequence number), the history operations, the faults active then.
"""

from __future__ import annotations

import json
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from verifier.results import INVALID, UNKNOWN, VALID, CheckResult, Results

MAX_CASES = 50  # per anomaly type; the count in facts is exact


def _read_topic(run: Path, topic: str, view: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    path = run / "topics" / f"{topic}.{view}.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the run's final reads did not complete")
    return pq.read_table(path).to_pylist()


def _lineage(record: dict[str, Any], topic: str) -> dict[str, Any]:
    value = json.loads(record["value"])
    return {"topic": topic, "partition": record["partition"], "offset": record["offset"], **value}


class RunData:
    def __init__(self, run: Path):
        from workloads.history import pair_operations, read_lines

        self.run = run
        campaign = json.loads((run / "campaign.json").read_text())
        self.workload = campaign["workload"]
        final = json.loads((run / "final.json").read_text())
        self.final_offsets = {int(p): o for p, o in (final.get("group_offsets") or {}).items()}
        input_topic = self.workload["input_topic"]
        self.inputs_committed = {(r["partition"], r["offset"]): r["key"].decode() for r in
                                 _read_topic(run, input_topic, "committed")}
        self.inputs_raw = {(r["partition"], r["offset"]): r["key"].decode() for r in _read_topic(run, input_topic, "raw")}
        self.outputs_committed: list[dict[str, Any]] = []
        self.outputs_raw: list[dict[str, Any]] = []
        for topic in self.workload["output_topics"]:
            self.outputs_committed += [_lineage(r, topic) for r in _read_topic(run, topic, "committed")]
            self.outputs_raw += [_lineage(r, topic) for r in _read_topic(run, topic, "raw")]
        records = list(read_lines(run / "history.jsonl")) if (run / "history.jsonl").exists() else []
        self.ops = pair_operations(records)
        self.faults = [op for op in self.ops if op["f"].startswith("fault:")]
        # transaction outcome per (process, txn_seq) from the history
        self.txn_ops: dict[tuple[str, int], dict[str, Any]] = {}
        self.txn_outcome: dict[tuple[str, int], str] = {}
        self.input_ops: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
        for op in self.ops:
            seq = op["value"].get("txn_seq")
            if seq is None:
                continue
            key = (op["process"], seq)
            if op["f"] == "send":
                self.txn_ops[key] = op
                for p, o in op["value"].get("inputs", []):
                    self.input_ops[(p, o)].append(op)
            elif op["f"] == "commit":
                self.txn_outcome[key] = {"ok": "committed", "fail": "commit-failed"}.get(op["outcome"], "unknown")
            elif op["f"] == "abort" and op["outcome"] == "ok":
                self.txn_outcome[key] = "aborted"
            elif op["f"] == "commit_offsets":
                self.txn_outcome[key] = "offsets-" + (op["outcome"] or "unknown")

    def txn_key(self, out: dict[str, Any]) -> tuple[str, int]:
        return (f"{out['worker']}.{out['incarnation']}", out["txn_seq"])

    def faults_at(self, t: float | None) -> list[dict[str, Any]]:
        if t is None:
            return []
        return [{"fault": f["f"], "value": f["value"]} for f in self.faults
                if f["invoke_time"] <= t <= (f["complete_time"] or float("inf"))]

    def txn_evidence(self, key: tuple[str, int]) -> dict[str, Any]:
        op = self.txn_ops.get(key)
        ev: dict[str, Any] = {"process": key[0], "txn_seq": key[1], "outcome": self.txn_outcome.get(key, "unknown")}
        if op:
            ev.update({"txid": op.get("txid"), "producer_id": op.get("pid"), "epoch": op.get("epoch"),
                       "history_op": {"process": op["process"], "op": op["op"], "f": op["f"],
                                      "invoke_time": op["invoke_time"], "outcome": op["outcome"]},
                       "faults_active": self.faults_at(op["invoke_time"])})
        return ev


def check_run(run: Path) -> Results:
    results = Results(checker="python")
    results.not_checked = {
        "zombie-write": "needs producer id/epoch per output batch (verifier issue)",
        "nonmonotonic": "needs the decoded offset-commit history (verifier issue)",
        "hanging-transaction": "needs broker-side transaction state after heal (verifier issue)",
        "invalid-txn-transition": "needs the decoded __transaction_state (verifier issue)",
        "offsets-ahead": "needs the decoded __consumer_offsets history (verifier issue)",
    }
    try:
        data = RunData(Path(run))
    except Exception as exc:
        results.errors.append(f"could not read the run: {exc!r}")
        return results
    for check in (check_duplicates, check_lost_input, check_torn, check_aborted_read, check_lost_write,
                  check_offsets_behind, check_progress):
        try:
            results.checks.append(check(data))
        except Exception:
            results.checks.append(CheckResult(check.__name__.removeprefix("check_").replace("_", "-"), UNKNOWN,
                                              note="checker crashed: " + traceback.format_exc(limit=3)))
    results.facts = facts(data)
    return results


def _case(data: RunData, explanation: str, records: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    txns = sorted({data.txn_key(r) for r in records if "worker" in r})
    return {"explanation": explanation, "records": records, "transactions": [data.txn_evidence(k) for k in txns], **extra}


def _result(name: str, cases: list[dict[str, Any]], note: str | None = None) -> CheckResult:
    return CheckResult(name, INVALID if cases else VALID, cases[:MAX_CASES], note=note or (f"{len(cases)} cases" if cases else None))


def check_duplicates(data: RunData) -> CheckResult:
    by_slot: dict[tuple[int, int, int], list[dict[str, Any]]] = defaultdict(list)
    for out in data.outputs_committed:
        by_slot[(out["in_partition"], out["in_offset"], out["slot"])].append(out)
    cases = [_case(data, f"input {p}@{o} slot {s} is visible {len(outs)} times in committed outputs", outs)
             for (p, o, s), outs in sorted(by_slot.items()) if len(outs) > 1]
    return _result("duplicate", cases)


def _committed_slots(data: RunData) -> dict[tuple[int, int], set[int]]:
    slots: dict[tuple[int, int], set[int]] = defaultdict(set)
    for out in data.outputs_committed:
        slots[(out["in_partition"], out["in_offset"])].add(out["slot"])
    return slots


def check_lost_input(data: RunData) -> CheckResult:
    slots = _committed_slots(data)
    cases = []
    for (p, o), in_id in sorted(data.inputs_committed.items()):
        if o < data.final_offsets.get(p, 0) and not slots.get((p, o)):
            ops = data.input_ops.get((p, o), [])
            cases.append({"explanation": f"input {in_id} at {data.workload['input_topic']}/{p}@{o} is below the "
                                         f"group's committed offset {data.final_offsets.get(p)} but has no committed output",
                          "input": {"partition": p, "offset": o, "id": in_id},
                          "transactions": [data.txn_evidence((op["process"], op["value"]["txn_seq"])) for op in ops]})
    return _result("lost-input", cases)


def check_torn(data: RunData) -> CheckResult:
    k = data.workload["outputs_per_input"]
    slots = _committed_slots(data)
    cases = []
    by_input: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for out in data.outputs_committed:
        by_input[(out["in_partition"], out["in_offset"])].append(out)
    for key, have in sorted(slots.items()):
        if 0 < len(have) < k:
            cases.append(_case(data, f"input {key[0]}@{key[1]}: only slots {sorted(have)} of {k} are committed",
                               by_input[key], missing_slots=sorted(set(range(k)) - have)))
    if data.workload["delivery"] == "exactly-once":
        committed_by_txn = Counter(data.txn_key(o) for o in data.outputs_committed)
        raw_by_txn: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        for out in data.outputs_raw:
            raw_by_txn[data.txn_key(out)].append(out)
        for key, outs in sorted(raw_by_txn.items()):
            seen = committed_by_txn.get(key, 0)
            if 0 < seen < len(outs):
                committed_ids = {(o["topic"], o["partition"], o["offset"]) for o in data.outputs_committed
                                 if data.txn_key(o) == key}
                hidden = [o for o in outs if (o["topic"], o["partition"], o["offset"]) not in committed_ids]
                cases.append(_case(data, f"transaction {key[1]} of {key[0]}: {seen} of {len(outs)} outputs are "
                                         "visible to read_committed readers, the rest are not", hidden[:20]))
    return _result("torn-transaction", cases)


def check_aborted_read(data: RunData) -> CheckResult:
    cases = []
    for out in data.outputs_committed:
        key = data.txn_key(out)
        if data.txn_outcome.get(key) == "aborted":
            cases.append(_case(data, f"committed output of transaction {key[1]} of {key[0]}, which the history "
                                     "shows aborted", [out]))
    for out in data.outputs_committed:
        pos = (out["in_partition"], out["in_offset"])
        if pos not in data.inputs_committed and pos in data.inputs_raw:
            cases.append(_case(data, f"committed output derived from input {pos[0]}@{pos[1]}, which belongs to an "
                                     "aborted input transaction (read with read_uncommitted)", [out],
                               input={"partition": pos[0], "offset": pos[1], "id": data.inputs_raw[pos]}))
    return _result("aborted-read", cases)


def check_lost_write(data: RunData) -> CheckResult:
    if data.workload["delivery"] != "exactly-once":
        return CheckResult("lost-write", VALID, note="not transactional: checked as lost-input/torn-transaction")
    committed_by_txn = Counter(data.txn_key(o) for o in data.outputs_committed)
    cases = []
    for key, outcome in sorted(data.txn_outcome.items()):
        if outcome != "committed":
            continue
        expected = (data.txn_ops.get(key) or {}).get("value", {}).get("outputs")
        seen = committed_by_txn.get(key, 0)
        if expected is not None and seen < expected:
            raw = [o for o in data.outputs_raw if data.txn_key(o) == key][:20]
            cases.append(_case(data, f"the client saw transaction {key[1]} of {key[0]} commit, but only {seen} of "
                                     f"its {expected} outputs are visible", raw, transaction=data.txn_evidence(key)))
    return _result("lost-write", cases)


def check_offsets_behind(data: RunData) -> CheckResult:
    cases = []
    for out in data.outputs_committed:
        p, o = out["in_partition"], out["in_offset"]
        final = data.final_offsets.get(p)
        if final is not None and o >= final and (p, o) in data.inputs_committed:
            cases.append(_case(data, f"committed output for input {p}@{o}, at or past the group's committed offset "
                                     f"{final}: a restart would process it again", [out]))
    return _result("offsets-behind", cases)


def check_progress(data: RunData) -> CheckResult:
    committed = sum(1 for o in data.txn_outcome.values() if o in ("committed", "offsets-ok"))
    if not data.outputs_committed or committed == 0:
        return CheckResult("no-progress", UNKNOWN, note=f"vacuous: {committed} committed transactions, "
                                                        f"{len(data.outputs_committed)} committed outputs")
    return CheckResult("no-progress", VALID, note=f"{committed} committed transactions")


def facts(data: RunData) -> dict[str, Any]:
    outcomes = Counter(data.txn_outcome.values())
    per_txid: dict[str, Counter] = defaultdict(Counter)
    for key, outcome in data.txn_outcome.items():
        op = data.txn_ops.get(key)
        per_txid[str(op.get("txid") if op else None)][outcome] += 1
    return {
        "inputs_committed": len(data.inputs_committed),
        "inputs_aborted_or_undecided": len(set(data.inputs_raw) - set(data.inputs_committed)),
        "outputs_committed": len(data.outputs_committed),
        "outputs_raw": len(data.outputs_raw),
        "transactions": dict(outcomes),
        "transactions_per_txid": {k: dict(v) for k, v in sorted(per_txid.items())},
        "final_group_offsets": {str(p): o for p, o in sorted(data.final_offsets.items())},
        "faults": len(data.faults),
    }
