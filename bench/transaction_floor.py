"""Where librdkafka's per-transaction floor comes from: one transactional producer, one
transaction after another (produce one record, send offsets, commit), with its ``debug=eos``
log read for CONCURRENT_TRANSACTIONS answers and the retry delays librdkafka chose, for each
``retry.backoff.ms`` given. Prints transactions/s, retries per transaction and the delays.

    .venv/bin/python bench/transaction_floor.py [--backoff 100 --backoff 10] [--transactions 100]
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from kchaos.clusters import ClusterSpec
from kchaos.clusters.clients import create_topic
from kchaos.clusters.local import LocalJvmCluster

_RETRY = re.compile(r"Retrying (\w+) .* in (\d+)ms")


class EosLog(logging.Handler):
    """Counts CONCURRENT_TRANSACTIONS answers per request type and the retry delays chosen."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.concurrent: Counter[str] = Counter()
        self.retries: Counter[tuple[str, int]] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "CONCURRENT_TRANSACTIONS" in message or "concurrent operation" in message:
            self.concurrent[message.split(" ", 1)[0]] += 1
        match = _RETRY.search(message)
        if match:
            self.retries[(match.group(1), int(match.group(2)))] += 1


def measure(cluster: LocalJvmCluster, topic: str, backoff_ms: int, transactions: int) -> tuple[float, EosLog]:
    log_handler = EosLog()
    logger = logging.getLogger(f"floor-{backoff_ms}-{uuid.uuid4().hex[:4]}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(log_handler)
    producer = Producer({**cluster.client_config(), "transactional.id": f"floor-{uuid.uuid4().hex[:8]}",
                         "acks": "all", "linger.ms": 5, "retry.backoff.ms": backoff_ms,
                         "debug": "eos,protocol", "logger": logger, "log_level": 7})
    producer.init_transactions(60)
    consumer = Consumer({**cluster.client_config(), "group.id": f"floor-{uuid.uuid4().hex[:8]}", "log_level": 3})
    metadata = consumer.consumer_group_metadata()
    started = time.monotonic()
    for i in range(transactions):
        producer.begin_transaction()
        producer.produce(topic, key=str(i).encode(), value=b"x")
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, i + 1)], metadata, 30)
        producer.commit_transaction(30)
        producer.poll(0)
    elapsed = time.monotonic() - started
    consumer.close()
    producer.flush(5)
    return transactions / elapsed, log_handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backoff", type=int, action="append", help="retry.backoff.ms values (default 100, 10)")
    parser.add_argument("--transactions", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        cluster = LocalJvmCluster(ClusterSpec.load({"nodes": 3}), Path(tmp) / "cluster")
        cluster.start()
        try:
            topic = f"floor-{uuid.uuid4().hex[:6]}"
            create_topic(cluster, topic, 3, 3)
            for backoff in args.backoff or [100, 10]:
                rate, seen = measure(cluster, topic, backoff, args.transactions)
                per_txn = {k: round(v / args.transactions, 2) for k, v in sorted(seen.concurrent.items())}
                delays = {f"{req} {ms}ms": n for (req, ms), n in sorted(seen.retries.items())}
                print(f"retry.backoff.ms={backoff:>4}: {rate:5.1f} txn/s; CONCURRENT_TRANSACTIONS per transaction "
                      f"{per_txn}; retries {delays}; load {os.getloadavg()[0]:.1f}")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
