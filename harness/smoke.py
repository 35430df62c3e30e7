"""A cluster smoke test: a transactional write, read back with read_committed.

Used by ``kchaos run`` until the consume-transform-produce workload exists, and by the tests.
It proves the cluster is usable through the client proxies, with transactions, at RF 3.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from kchaos.clusters.base import Cluster
from kchaos.clusters.clients import create_topic, quiet
from kchaos.errors import ClusterError


@dataclass(frozen=True)
class SmokeResult:
    topic: str
    produced: int
    consumed: int
    committed_transactions: int
    seconds: float
    ok: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_smoke(cluster: Cluster, records: int = 1000, batch: int = 100, timeout_s: float = 120.0) -> SmokeResult:
    from confluent_kafka import Consumer, KafkaException, Producer

    started = time.monotonic()
    topic = f"kchaos-smoke-{uuid.uuid4().hex[:8]}"
    rf = min(3, len(cluster.brokers) or 1)
    create_topic(cluster, topic, 3, rf)
    producer = Producer(quiet({**cluster.client_config(), "transactional.id": f"{topic}-tx",
                               "transaction.timeout.ms": 60000}))
    producer.init_transactions(60)
    transactions = 0
    try:
        for start in range(0, records, batch):
            producer.begin_transaction()
            for i in range(start, min(records, start + batch)):
                producer.produce(topic, key=str(i).encode(), value=f"smoke-{i}".encode())
            producer.commit_transaction(60)
            transactions += 1
    except KafkaException as exc:
        raise ClusterError(f"smoke test: transactional produce failed: {exc}") from None
    consumer = Consumer(quiet({**cluster.client_config(), "group.id": f"{topic}-check", "auto.offset.reset": "earliest",
                               "isolation.level": "read_committed", "enable.auto.commit": False}))
    seen: set[bytes] = set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while len(seen) < records and time.monotonic() < deadline:
            for msg in consumer.consume(500, 1.0):
                if msg.error() is None:
                    seen.add(msg.value())
    finally:
        consumer.close()
    expected = {f"smoke-{i}".encode() for i in range(records)}
    return SmokeResult(topic, records, len(seen), transactions, round(time.monotonic() - started, 3), seen == expected)
