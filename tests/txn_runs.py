"""Hand-made run directories of the ``txn`` workload (issue 77, item 2): each worker's history as
workloads/txn_worker.py writes it, the topic's two dumps and final.json as the final reads write
them. Shared by the reference's tests (tests/unit/test_txn_workload.py) and the Spark engine's
(tests/unit/test_isolation_spark.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kchaos.verifier.campaign import Campaign
from kchaos.workloads.history import HistoryWriter, merge_history

TOPIC = "kchaos-txn"


# --- the history, as the worker writes it ---------------------------------------------------------


def invoke(w: HistoryWriter, seq: int, plan: list[dict], at: float) -> int:
    return w.invoke("txn", {"txn_seq": seq, "topic": TOPIC, "plan": plan}, worker=w.process.split(".")[0],
                    incarnation=1, txid=f"kchaos-x-{w.process.split('.')[0]}", pid=1000, epoch=0)


def complete(w: HistoryWriter, op: int, seq: int, outcome: str, end: str, ops: list[dict], **extra) -> None:
    w.complete(op, "txn", outcome, {"txn_seq": seq, "end": end, "ops": ops, **extra}, error=extra.get("abort_reason"))


def send(p: int, value: str, offset: int | None = None) -> dict:
    return {"f": "send", "partition": p, "value": value, "offset": offset}


def poll(*records: tuple[int, int, str]) -> dict:
    return {"f": "poll", "records": [list(r) for r in records]}


# --- the dumps ------------------------------------------------------------------------------------


def write_view(run: Path, view: str, rows: list[tuple[int, int, str | None]], topic: str = TOPIC) -> None:
    (run / "topics").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({
        "partition": pa.array([r[0] for r in rows], pa.int32()), "offset": pa.array([r[1] for r in rows], pa.int64()),
        "timestamp": pa.array([0] * len(rows), pa.int64()), "key": pa.array([b"k"] * len(rows), pa.binary()),
        "value": pa.array([None if r[2] is None else r[2].encode() for r in rows], pa.binary())}),
        run / "topics" / f"{topic}.{view}.parquet")


def write_final(run: Path, ends: dict[int, int], partitions: int, incomplete: tuple[int, ...] = ()) -> None:
    topics = [{"topic": TOPIC, "view": "raw", "partitions": partitions, "records": 0, "incomplete_partitions": [],
               "end_offsets": {}},
              {"topic": TOPIC, "view": "committed", "partitions": partitions, "records": 0,
               "incomplete_partitions": list(incomplete), "end_offsets": {str(p): o for p, o in ends.items()}}]
    (run / "final.json").write_text(json.dumps({"topics": topics, "drained": True}))


# --- a run directory ------------------------------------------------------------------------------


def txn_run(tmp_path: Path, name: str, history: list[tuple[str, int, float, float, str, list[dict]]],
            raw: list[tuple[int, int, str]], committed: list[tuple[int, int, str]]) -> Path:
    """A run directory of a txn run: its campaign, each worker's history, the merged history, the dumps."""
    run = tmp_path / name
    (run / "history").mkdir(parents=True)
    campaign = Campaign.model_validate({"name": name, "workload": {"kind": "txn", "workers": 2,
                                                                  "txn_partitions": 2}})
    (run / "campaign.json").write_text(json.dumps(campaign.model_dump(mode="json")))
    writers: dict[str, HistoryWriter] = {}
    for process, seq, _, _, outcome, ops in history:
        w = writers.setdefault(process, HistoryWriter(run / "history" / f"{process}.jsonl", process))
        op = invoke(w, seq, [o for o in ops if o["f"] == "send"], 0)
        complete(w, op, seq, outcome, {"ok": "committed", "fail": "aborted", "info": "commit-unknown"}[outcome], ops)
    for w in writers.values():
        w.close()
    merge_history(run / "history", run)
    write_view(run, "raw", raw)
    write_view(run, "committed", committed)
    write_final(run, {0: 10, 1: 10}, partitions=2)
    return run


def stable(run: Path, pinned: dict | None = None) -> None:
    """final.json's stability wait after the heal: every partition stable, or these ``pinned``."""
    final = json.loads((run / "final.json").read_text())
    final["liveness"] = {"stable": not pinned, "waited_s": 0.4, "pinned": pinned or {}, "timeout_s": 60}
    (run / "final.json").write_text(json.dumps(final))
