"""Benchmark: how fast the verifier checks a run, by size, Spark job vs plain Python reader.

    python bench/verifier_scale.py [--outputs 100000,1000000,5000000] [--master local[2]]
                                   [--engines spark,python] [--keep DIR]

For each size it writes a synthetic, clean run directory in the on-disk format of a real run
(topics as Parquet in both views, lineage JSON values, a client history with the seeder's
acknowledgements and one send and one commit per transaction of 500 inputs, an encoded
__transaction_state log whose records match those transactions, their offset commits in
__consumer_offsets, final offsets: evidence as complete as a real run's), then
checks it with each engine in a process of its own and prints wall time, records verified per
second and peak memory. Both engines must say ``valid`` (a benchmark of a wrong answer is
worthless), and the figures include everything a user waits for: Spark's session start (shown
separately too) and the Python reader's Parquet decoding.

Targets: issue 5, >= 1M output records per minute on 2 cores and 5M in <= 1.2 x 5 x the 1M time;
issue 17, >= 3M/min at 1M and 5M with Spark ``local[2]``, the Python reference <= 4 GB at 5M.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from kchaos.rundir import SPARK_RESULTS_FILE, RunDir  # noqa: E402

PARTITIONS = 6
BATCH = 500
K = 2
TOPICS = ("bench-a", "bench-b")
WORKLOAD = {"input_topic": "bench-in", "output_topics": list(TOPICS), "outputs_per_input": K,
            "delivery": "exactly-once", "group_id": "bench"}
def write_run(run: Path, outputs: int) -> int:
    """Returns the number of output records written (``outputs`` rounded to whole partitions)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # the record encoders the checker tests write their runs with, one definition of the layouts
    from tests.unit.test_checkers import _offset_record, _txn_record

    (run / "topics").mkdir(parents=True)
    inputs = outputs // K
    per_partition = inputs // PARTITIONS

    def table(partitions, offsets, keys, values):
        n = len(offsets)
        return pa.table({"partition": pa.array(partitions, pa.int32()), "offset": pa.array(offsets, pa.int64()),
                         "timestamp": pa.array([0] * n, pa.int64()), "key": pa.array(keys, pa.binary()),
                         "value": pa.array(values, pa.binary())})

    in_p, in_o, in_k = [], [], []
    for p in range(PARTITIONS):
        for o in range(per_partition):
            in_p.append(p)
            in_o.append(o)
            in_k.append(f"in-{p}-{o}".encode())
    t = table(in_p, in_o, in_k, [b"{}"] * len(in_o))
    for view in ("committed", "raw"):
        pq.write_table(t, run / "topics" / f"bench-in.{view}.parquet")
    # The evidence is complete, as a real run's (else the verdict is unknown): the seeder's
    # acknowledgements, each transaction's coordinator records on the history's clock (its output
    # partitions and the offsets topic), and each commit's offsets in __consumer_offsets.
    # Transactions: worker w<p> owns input partition p; BATCH inputs per transaction.
    lines, txn_log, offset_log = [], [], []
    now, op = 1000.0, 0

    def record(process: str, f: str, value: dict, txid: str, pid: int, at: float) -> None:
        nonlocal op
        for kind, t in (("invoke", at), ("ok", at + 0.0005)):
            lines.append(json.dumps({"time": t, "process": process, "op": op, "type": kind, "f": f,
                                     "value": value if kind == "invoke" else {}, "txid": txid, "pid": pid,
                                     "epoch": 0}))
        op += 1

    seeded = [[f"in-{p}-{o}", p, o] for p, o in zip(in_p, in_o)]
    record("seeder", "init", {}, "bench-seeder", 999, now)
    record("seeder", "seed", {"count": len(seeded), "inputs": seeded}, "bench-seeder", 999, now + 0.001)
    for p in range(PARTITIONS):
        process, txid, seq = f"w{p}.1", f"bench-w{p}", 0
        record(process, "init", {}, txid, p, now + 0.002)
        for start in range(0, per_partition, BATCH):
            seq += 1
            now += 0.01
            end = min(start + BATCH, per_partition)
            batch = [[p, o] for o in range(start, end)]
            record(process, "send", {"txn_seq": seq, "inputs": batch, "outputs": K * len(batch)}, txid, p, now)
            record(process, "commit", {"txn_seq": seq, "offsets": {str(p): end}}, txid, p, now + 0.007)
            ongoing = int(now * 1000) + 1
            parts = {**{t: [p] for t in TOPICS}, "__consumer_offsets": [0]}
            for status, at in (("Ongoing", ongoing), ("PrepareCommit", ongoing + 7), ("CompleteCommit", ongoing + 8)):
                txn_log.append(_txn_record(txid, status, pid=p, partitions={} if status == "CompleteCommit" else parts,
                                           update_ms=at, start_ms=ongoing))
            offset_log.append(_offset_record(WORKLOAD["group_id"], WORKLOAD["input_topic"], p, end))
    (run / "history.jsonl").write_text("\n".join(lines) + "\n")
    pq.write_table(table([0] * len(txn_log), list(range(len(txn_log))), [k for k, _ in txn_log], [v for _, v in txn_log]),
                   run / "topics" / "__transaction_state.raw.parquet")
    offsets = table([0] * len(offset_log), list(range(len(offset_log))), [k for k, _ in offset_log],
                    [v for _, v in offset_log])
    for view in ("committed", "raw"):
        pq.write_table(offsets, run / "topics" / f"__consumer_offsets.{view}.parquet")
    for slot, topic in enumerate(TOPICS):
        parts, offs, keys, values = [], [], [], []
        for p in range(PARTITIONS):
            for o in range(per_partition):
                parts.append(p)
                offs.append(o)
                keys.append(f"in-{p}-{o}".encode())
                values.append(('{"in_id":"in-%d-%d","in_topic":"bench-in","in_partition":%d,"in_offset":%d,"slot":%d,'
                               '"slots":2,"worker":"w%d","incarnation":1,"txid":"bench-w%d","txn_seq":%d}'
                               % (p, o, p, o, slot, p, p, o // BATCH + 1)).encode())
        t = table(parts, offs, keys, values)
        for view in ("committed", "raw"):
            pq.write_table(t, run / "topics" / f"{topic}.{view}.parquet")
    RunDir(run).write_campaign({"workload": WORKLOAD})
    (run / "final.json").write_text(json.dumps({
        "group_offsets": {str(p): per_partition for p in range(PARTITIONS)}, "drained": True,
        "liveness": {"stable": True, "waited_s": 0.0, "pinned": {}},
        "compaction": {"__consumer_offsets": {}, "__transaction_state": {}}}))
    return per_partition * PARTITIONS * K


_PYTHON_ENGINE = """
import json, resource, sys, time
from pathlib import Path
from kchaos.verifier.pychecker import check_run
t = time.monotonic()
r = check_run(Path(sys.argv[1])).to_json()
print(json.dumps({"verdict": r["verdict"], "anomalies": r["anomaly_types"], "outputs": r["facts"].get("outputs_committed"),
                  "seconds": time.monotonic() - t, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_engine(engine: str, run: Path, master: str) -> dict:
    started = time.monotonic()
    if engine == "python":
        proc = subprocess.run([sys.executable, "-c", _PYTHON_ENGINE, str(run)], capture_output=True, text=True, cwd=ROOT)
    else:
        proc = subprocess.run([sys.executable, "-m", "kchaos.verifier.spark.job", str(run), "--master", master,
                               "--out", str(run / SPARK_RESULTS_FILE)], capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{proc.stderr[-3000:]}")
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if engine == "spark":
        full = RunDir(run).read(SPARK_RESULTS_FILE)
        return {"verdict": full["verdict"], "anomalies": full["anomaly_types"], "wall_s": wall,
                "session_s": line["timings"].get("session_s"), "checks_s": line["timings"].get("checks_s"),
                "outputs": full["facts"].get("outputs_committed"), "peak_rss_mb_children": peak}
    return {"verdict": line["verdict"], "anomalies": line["anomalies"], "wall_s": wall, "checks_s": line["seconds"],
            "outputs": line["outputs"], "peak_rss_mb": line["peak_rss_mb"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--outputs", default="100000,1000000,5000000")
    parser.add_argument("--engines", default="spark,python")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", type=Path, help="keep the generated run directories here")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="kchaos-bench-verifier-"))
    rows = []
    try:
        for n in [int(x) for x in args.outputs.split(",")]:
            run = base / f"run-{n}"
            if (run / "final.json").exists():
                shutil.rmtree(run)
            t = time.monotonic()
            n = write_run(run, n)
            print(f"# generated {n} outputs in {time.monotonic() - t:.1f}s: {run}", flush=True)
            for engine in args.engines.split(","):
                r = run_engine(engine, run, args.master)
                if r["verdict"] != "valid" or r["outputs"] != n:
                    raise SystemExit(f"{engine} at {n}: verdict {r['verdict']} {r['anomalies']}, outputs {r['outputs']}")
                r.update(engine=engine, outputs=n, per_s_wall=n / r["wall_s"], per_min_wall=n / r["wall_s"] * 60)
                rows.append(r)
                print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print(f"\n{'engine':8} {'outputs':>9} {'wall s':>8} {'checks s':>9} {'outputs/min (wall)':>19}")
    for r in rows:
        print(f"{r['engine']:8} {r['outputs']:>9} {r['wall_s']:>8.1f} {r['checks_s']:>9.1f} {r['per_min_wall']:>19,.0f}")
    for engine in {r["engine"] for r in rows}:
        by_n = {round(r["outputs"], -5): r["wall_s"] for r in rows if r["engine"] == engine}
        if 1_000_000 in by_n and 5_000_000 in by_n:
            print(f"{engine}: 5M / 1M wall time = {by_n[5_000_000] / by_n[1_000_000]:.2f} (target <= 6.0 for 1.2 x 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
