"""Committed transactions per second on this machine: the ceiling behind a certification
campaign's volume.

Seeds a backlog, then runs the exactly-once pipeline with ``max_batch`` inputs per transaction
(default 1: one transaction per input, the most transactions the pipeline can make) for W
workers of a client, faultless, and counts the transactions the workers' own histories record
as committed, divided by the time from the first worker start until every input is processed.
It also prints the harness's load average, so a figure is read next to how busy the 2 cores were.

    .venv/bin/python bench/transaction_rate.py [--workers 2 --workers 4 --workers 8]
        [--client confluent|java|mixed] [--records 3000] [--batch 1] [--nodes 3]
        [--transaction-version 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.clusters import ClusterSpec  # noqa: E402
from kchaos.clusters.local import LocalJvmCluster  # noqa: E402
from kchaos.rundir import RunDir  # noqa: E402
from kchaos.workloads.history import HistoryWriter, read_lines  # noqa: E402
from kchaos.workloads.spec import WorkloadSpec  # noqa: E402


def committed_transactions(history_dir: Path) -> int:
    """Commits the workers recorded as ok (not the seeder's, not the harness's)."""
    count = 0
    for path in history_dir.glob("w*.jsonl"):
        count += sum(1 for r in read_lines(path) if r["f"] == "commit" and r["type"] == "ok")
    return count


def measure(cluster, root: Path, client: str, workers: int, records: int, batch: int) -> dict[str, float]:
    from kchaos.workloads import make_workload
    from kchaos.workloads.pool import WorkerPool
    from kchaos.workloads.seeder import Seeder

    tag = uuid.uuid4().hex[:6]
    spec = WorkloadSpec(input_topic=f"in-{tag}", output_topics=(f"a-{tag}", f"b-{tag}"), group_id=f"g-{tag}",
                        client=client, records=records, rate=1e9, workers=workers, max_batch=batch,
                        input_partitions=max(workers, 2), abort_fraction=0.0, drain_timeout_s=1800)
    run = RunDir.create(root, f"txn-{client}-{workers}", 1)
    history = HistoryWriter(run.path / "history" / "harness.jsonl", "harness")
    workload = make_workload(spec, cluster, run, 1, history)
    workload.setup()
    seeder = Seeder(workload.client, spec.input_topic, records, 1e9, 1, run.path / "history" / "seeder.jsonl",
                    f"bench-{tag}-seeder", abort_fraction=0.0)
    seeder.start()
    seeder.wait(600)
    workload.seeder = seeder
    workload.pool = WorkerPool(spec, workload.client, run.path, 1, workload.txid_prefix, history)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    workload.pool.start()
    ok = workload.drain(1800)
    elapsed = time.monotonic() - started
    load_after = os.getloadavg()[0]
    workload.pool.stop()
    history.close()
    if not ok:
        raise SystemExit(f"{client} x{workers}: drain did not finish")
    commits = committed_transactions(run.path / "history")
    return {"elapsed_s": elapsed, "commits": commits, "txn_per_s": commits / elapsed,
            "inputs_per_s": records / elapsed, "load": max(load_before, load_after)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, action="append")
    parser.add_argument("--client", choices=("confluent", "java", "mixed"), default="confluent")
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--transaction-version", type=int, default=None)
    args = parser.parse_args()
    spec: dict = {"nodes": args.nodes}
    if args.transaction_version is not None:
        spec["transaction_version"] = args.transaction_version
    rows = []
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        cluster = LocalJvmCluster(ClusterSpec.load(spec), Path(tmp) / "cluster")
        cluster.start()
        try:
            for workers in args.workers or [2, 4, 8]:
                rows.append((workers, measure(cluster, Path(tmp), args.client, workers, args.records, args.batch)))
        finally:
            cluster.stop()
    print(f"client={args.client} records={args.records} max_batch={args.batch} nodes={args.nodes} "
          f"cpus={os.cpu_count()}")
    print(f"{'workers':>7} {'commits':>8} {'seconds':>8} {'txn/s':>7} {'inputs/s':>9} {'load':>5}")
    for workers, m in rows:
        print(f"{workers:>7} {m['commits']:>8} {m['elapsed_s']:>8.1f} {m['txn_per_s']:>7.1f} "
              f"{m['inputs_per_s']:>9.1f} {m['load']:>5.1f}")


if __name__ == "__main__":
    main()
