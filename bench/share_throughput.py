"""Share-group pipeline (twice as many workers as input partitions) vs the consumer-group
pipeline (one worker per partition at most), on one cluster, same backlog.

    .venv/bin/python bench/share_throughput.py [--records 20000] [--partitions 3] [--nodes 3]

Both write the same outputs in transactions; the share pipeline then acknowledges records
(at-least-once without KIP-1289), the consumer-group pipeline commits offsets in the
transaction. Prints inputs/s for both and the ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pipeline_throughput import measure  # noqa: E402
from kchaos.clusters import ClusterSpec  # noqa: E402
from kchaos.clusters.local import LocalJvmCluster  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        cluster = LocalJvmCluster(ClusterSpec.load({"nodes": args.nodes}), Path(tmp) / "cluster")
        cluster.start()
        try:
            ctp = measure(cluster, Path(tmp), "exactly-once", args.records, args.partitions, args.batch,
                          kind="ctp", partitions=args.partitions)
            share = measure(cluster, Path(tmp), "exactly-once", args.records, 2 * args.partitions, args.batch,
                            kind="share", partitions=args.partitions)
        finally:
            cluster.stop()
    print(f"records={args.records} partitions={args.partitions} nodes={args.nodes}")
    print(f"consumer group, {args.partitions} workers   inputs/s={ctp:.0f}")
    print(f"share group,    {2 * args.partitions} workers   inputs/s={share:.0f}")
    print(f"ratio share/consumer-group = {share / ctp:.2f}")


if __name__ == "__main__":
    main()
