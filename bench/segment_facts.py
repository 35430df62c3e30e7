"""Benchmark: what reading the brokers' own segments costs the verifier (verifier/segments.py),
per stored run: the merged read without record values (enough for the COMMIT markers) against the
read with each uncompressed data batch's first value (what the sequence-reuse fact needs too, and
what each engine does once), then the two facts on that read. Side by side, alternating for
``--rounds``, on run directories kchaos left (their ``cluster/node-*/data``).

    .venv/bin/python bench/segment_facts.py RUN_DIR [RUN_DIR ...] [--rounds 3]

Prints per run the batches read and the mean wall seconds of each step, with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.rundir import RunDir  # noqa: E402
from kchaos.verifier.internal_topics import decoded_txn_log  # noqa: E402
from kchaos.verifier.markers import commit_marker_facts  # noqa: E402
from kchaos.verifier.model import read_ops  # noqa: E402
from kchaos.verifier.segments import read_replicas  # noqa: E402
from kchaos.verifier.sequences import sequence_reuse_facts  # noqa: E402


def _timed(step):
    start = time.perf_counter()
    out = step()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print("| run | batches | read, headers only (s) | read, with values (s) | both facts (s) |")
    print("| --- | --- | --- | --- | --- |")
    for run in args.runs:
        dirs = RunDir(run).node_data_dirs()
        log = decoded_txn_log(run) or []
        ops = read_ops(run)
        plain, valued, facts = [], [], []
        for _ in range(args.rounds):
            t, replicas = _timed(lambda: read_replicas(dirs))
            plain.append(t)
            t, replicas = _timed(lambda: read_replicas(dirs, values=True))
            valued.append(t)
            t, _ = _timed(lambda: (commit_marker_facts(replicas, lambda p: [r for r in log if r["entry"].producer_id in p]),
                                   sequence_reuse_facts(replicas, ops)))
            facts.append(t)
        batches = sum(len(b) for b in replicas.values())
        print(f"| {run.name} | {batches} | {statistics.mean(plain):.2f} | {statistics.mean(valued):.2f} "
              f"| {statistics.mean(facts):.2f} |")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
