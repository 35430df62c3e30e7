"""Exactly-once pipeline throughput vs the same pipeline in at-least-once mode, one cluster.

Seeds a backlog of N inputs, starts W workers and times from the first worker start until the
group's committed offsets cover every input (drain). Prints inputs/s for both modes and the
ratio (target >= 0.5).

    .venv/bin/python bench/pipeline_throughput.py [--records 50000] [--workers 3] [--nodes 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.clusters import ClusterSpec  # noqa: E402
from kchaos.clusters.local import LocalJvmCluster  # noqa: E402
from kchaos.rundir import RunDir  # noqa: E402
from kchaos.workloads.history import HistoryWriter  # noqa: E402
from kchaos.workloads.spec import WorkloadSpec  # noqa: E402


def measure(cluster, root: Path, delivery: str, records: int, workers: int, batch: int, kind: str = "ctp",
            partitions: int = 6) -> float:
    """Inputs per second from the first worker start until every input is processed."""
    from kchaos.workloads import make_workload

    tag = uuid.uuid4().hex[:6]
    spec = WorkloadSpec(kind=kind, input_topic=f"in-{tag}", output_topics=(f"a-{tag}", f"b-{tag}"), group_id=f"g-{tag}",
                        records=records, rate=1e9, workers=workers, max_batch=batch, delivery=delivery,
                        input_partitions=partitions, abort_fraction=0.0, share_release_fraction=0.0,
                        share_poison_fraction=0.0, drain_timeout_s=1800)
    run = RunDir.create(root, f"{kind}-{delivery}", 1)
    history = HistoryWriter(run.path / "history" / "harness.jsonl", "harness")
    workload = make_workload(spec, cluster, run, 1, history)
    workload.setup()
    # seed the whole backlog first, so that the timing covers only the pipeline
    from kchaos.workloads.seeder import Seeder

    seeder = Seeder(workload.client, spec.input_topic, records, 1e9, 1, run.path / "history" / "seeder.jsonl",
                    f"bench-{tag}-seeder", abort_fraction=0.0)
    seeder.start()
    seeder.wait(600)
    workload.seeder = seeder
    from kchaos.workloads.pool import WorkerPool

    workload.pool = WorkerPool(spec, workload.client, run.path, 1, workload.txid_prefix, history)
    started = time.monotonic()
    workload.pool.start()
    ok = workload.drain(1800)
    elapsed = time.monotonic() - started
    workload.pool.stop()
    history.close()
    if not ok:
        raise SystemExit(f"{delivery}: drain did not finish")
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        cluster = LocalJvmCluster(ClusterSpec.load({"nodes": args.nodes}), Path(tmp) / "cluster")
        cluster.start()
        try:
            eos = measure(cluster, Path(tmp), "exactly-once", args.records, args.workers, args.batch)
            alo = measure(cluster, Path(tmp), "at-least-once", args.records, args.workers, args.batch)
        finally:
            cluster.stop()
    print(f"records={args.records} workers={args.workers} max_batch={args.batch} nodes={args.nodes}")
    print(f"exactly-once   inputs/s={eos:.0f}")
    print(f"at-least-once  inputs/s={alo:.0f}")
    print(f"ratio eos/alo = {eos / alo:.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()
