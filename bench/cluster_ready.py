"""Time-to-ready of local clusters from cached jars.

Prints, for 1 and 3 nodes, the median (and min/max) seconds from ``Cluster.start()`` to ready
(all brokers registered and an RF=min(3,N) topic writable with acks=all), over several runs.

    .venv/bin/python bench/cluster_ready.py [--runs 5] [--kafka-version 4.2.1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.clusters import ClusterSpec  # noqa: E402
from kchaos.clusters.local import LocalJvmCluster  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--kafka-version", default="4.2.1")
    parser.add_argument("--nodes", type=int, action="append")
    args = parser.parse_args()
    for nodes in args.nodes or [1, 3]:
        times = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
                cluster = LocalJvmCluster(ClusterSpec.load({"nodes": nodes, "kafka_version": args.kafka_version}), Path(tmp))
                cluster.prepare()  # cached jars and toxiproxy: not part of the measurement
                started = time.monotonic()
                try:
                    cluster.start()
                    times.append(time.monotonic() - started)
                finally:
                    cluster.stop()
        print(f"nodes={nodes} kafka={args.kafka_version} runs={len(times)} "
              f"time_to_ready_s median={statistics.median(times):.1f} min={min(times):.1f} max={max(times):.1f}",
              flush=True)


if __name__ == "__main__":
    main()
