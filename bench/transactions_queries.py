"""Benchmark: the KIP-664 queries kchaos asks after every run (``list``, and ``find-hanging``
for each broker), from one JVM (kchaos/runtime/java/KchaosTransactionsBatch.java) against one JVM per
query two at a time (the way before), side by side on one cluster, alternating for ``--rounds``.

    .venv/bin/python bench/transactions_queries.py [--rounds 4] [--kafka-version 4.4.0]

Prints per way the mean wall seconds and the mean CPU seconds of the JVMs (user + system, from
``getrusage(RUSAGE_CHILDREN)``), with the load average. CPU is the figure that matters on a
machine whose two cores the brokers, the workers and Spark share. Both ways must answer the
same transactions.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.clusters import ClusterSpec  # noqa: E402
from kchaos.clusters.local import LocalJvmCluster  # noqa: E402
from kchaos.runtime.kafka_tools import parse_tool_table, run_tool, run_transactions_batch, tool_args  # noqa: E402
from tests.open_transaction import open_transaction  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _listed(stdout: str) -> set[str]:
    return {row["TransactionalId"] for row in parse_tool_table(stdout)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--kafka-version", default="4.4.0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        cluster = LocalJvmCluster(ClusterSpec.load({"nodes": 3, "kafka_version": args.kafka_version}), Path(tmp))
        cluster.start()
        try:
            producer, _, txid = open_transaction(cluster)
            server, version = tool_args(cluster)
            argvs = [[*server, "list"], *([*server, "find-hanging", "--broker-id", str(b)] for b in (1, 2, 3))]

            def batch() -> str:
                results, how = run_transactions_batch(argvs, version)
                assert how == "one JVM", how
                return results[0].stdout

            def alone() -> str:
                with ThreadPoolExecutor(max_workers=2) as pool:
                    results = list(pool.map(lambda argv: run_tool("transactions", argv, version, check=False), argvs))
                return results[0].stdout

            measured: dict[str, list[tuple[float, float]]] = {"one JVM": [], "one JVM per query": []}
            for _ in range(args.rounds):
                for name, way in (("one JVM", batch), ("one JVM per query", alone)):
                    wall, cpu = time.monotonic(), _children_cpu()
                    listed = _listed(way())
                    measured[name].append((time.monotonic() - wall, _children_cpu() - cpu))
                    assert txid in listed, (name, listed)
            producer.abort_transaction(60)
        finally:
            cluster.stop()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"kafka={args.kafka_version} queries={len(argvs)} rounds={args.rounds} load={load}")
    for name, samples in measured.items():
        print(f"  {name:18s} wall_s mean={statistics.mean(w for w, _ in samples):.2f} "
              f"cpu_s mean={statistics.mean(c for _, c in samples):.2f} "
              f"(min {min(c for _, c in samples):.2f}, max {max(c for _, c in samples):.2f})")


if __name__ == "__main__":
    main()
