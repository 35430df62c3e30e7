"""The Spark verifier's ingest (Kafka source -> Parquet, both views) against how long a broker may
hold a fetch that finds nothing: Kafka's consumer default (500 ms) beside the ingest's setting
(``spark_ingest.END_OF_LOG_FETCH_WAIT_MS``), in one run, on one cluster.

    .venv/bin/python bench/ingest_fetch_wait.py [--transactions 3150] [--waits 500,10] [--rounds 2]

Starts a 3-node cluster, writes the default run's shape (three 6-partition topics, 4 records per
topic per transaction, one transaction in 21 aborted, so partitions end in transaction markers),
then for each wait starts a Spark session in a process of its own (a cold JVM each, as a run's
verifier has) and ingests every topic ``--rounds`` times: the first round pays the JVM's and the
Kafka source's warm-up, later ones show the steady cost. Prints seconds per round and the load
average beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOPICS = ("bench-input", "bench-invoices", "bench-shipments")
PARTITIONS = 6


def write_transactions(bootstrap: str, transactions: int, producers: int = 3) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until its futures resolve
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in TOPICS]).values():
        future.result()

    def produce(worker: int) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{worker}", "linger.ms": 5})
        producer.init_transactions()
        for txn in range(worker, transactions, producers):
            producer.begin_transaction()
            for i in range(4):
                n = txn * 4 + i
                value = json.dumps({"in_id": str(n), "in_partition": n % PARTITIONS, "in_offset": n, "txn_seq": txn})
                for topic in TOPICS:
                    producer.produce(topic, key=str(n), value=value, partition=n % PARTITIONS)
            if txn % 21 == 20:
                producer.flush()  # an abort must follow the records' delivery
                producer.abort_transaction()
            else:
                producer.commit_transaction()

    with ThreadPoolExecutor(producers) as pool:
        list(pool.map(produce, range(producers)))


def measure(bootstrap: str, wait_ms: int, rounds: int, transactions: int, work: Path) -> list[float]:
    """In this process: one Spark session, ``rounds`` ingests with the given fetch wait."""
    from kchaos.verifier.spark import ingest as spark_ingest
    from kchaos.verifier.spark.env import spark_session

    spark_ingest.END_OF_LOG_FETCH_WAIT_MS = wait_ms
    # sized as the verifier sizes its job (records of both views: C1 only at the default size)
    spark = spark_session(None, records=2 * len(TOPICS) * 4 * transactions)
    try:
        seconds = []
        for _ in range(rounds):
            started = time.monotonic()
            spark_ingest.ingest_topics(spark, bootstrap, work, list(TOPICS))
            seconds.append(round(time.monotonic() - started, 2))
        return seconds
    finally:
        spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transactions", type=int, default=3150)
    parser.add_argument("--waits", default="500,10")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--measure", nargs=2, metavar=("BOOTSTRAP", "WAIT_MS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        with tempfile.TemporaryDirectory(prefix="kchaos-bench-ingest-") as tmp:
            print(json.dumps(measure(args.measure[0], int(args.measure[1]), args.rounds, args.transactions, Path(tmp))))
        return 0

    from kchaos.clusters import ClusterSpec
    from kchaos.clusters.local import LocalJvmCluster

    waits = [int(w) for w in args.waits.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        cluster = LocalJvmCluster(ClusterSpec.load({"nodes": 3}), Path(tmp) / "cluster")
        cluster.start()
        try:
            started = time.monotonic()
            write_transactions(cluster.bootstrap_servers, args.transactions)
            print(f"# wrote {args.transactions} transactions in {time.monotonic() - started:.0f}s", flush=True)
            for wait in waits:
                load = os.getloadavg()[0]
                proc = subprocess.run([sys.executable, __file__, "--measure", cluster.bootstrap_servers, str(wait),
                                       "--rounds", str(args.rounds), "--transactions", str(args.transactions)], capture_output=True, text=True)
                if proc.returncode != 0:
                    raise SystemExit(f"ingest with fetch.max.wait.ms={wait} failed:\n{proc.stderr[-3000:]}")
                rows.append((wait, json.loads(proc.stdout.strip().splitlines()[-1]), load, os.getloadavg()[0]))
                print(f"# fetch.max.wait.ms={wait}: {rows[-1][1]}", flush=True)
        finally:
            cluster.stop()
    print(f"\n{'fetch.max.wait.ms':>17} {'first ingest s':>15} {'later ingests s':>16} {'load before/after':>18}")
    for wait, seconds, before, after in rows:
        later = ", ".join(f"{s:.1f}" for s in seconds[1:]) or "-"
        print(f"{wait:>17} {seconds[0]:>15.1f} {later:>16} {before:>8.1f} / {after:<7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
