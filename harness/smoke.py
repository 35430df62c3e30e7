"""A cluster smoke test: a transactional write, read back with read_committed.

Used by ``kchaos run`` until the consume-transform-produce workload exists, and by the tests.
It proves the cluster is usable through the client proxies, with transactions, at RF 3.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from clusters.base import Cluster
from harness.errors import ClusterError


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


def quiet(conf: dict[str, Any]) -> dict[str, Any]:
    """librdkafka logs every refused connection at info level; keep warnings and errors only."""
    return {"log_level": 3, **conf}


def create_topic(cluster: Cluster, topic: str, partitions: int, replication: int, config: dict[str, str] | None = None,
                 timeout_s: float = 30.0) -> None:
    from confluent_kafka.admin import NewTopic

    fut = cluster.admin().create_topics([NewTopic(topic, partitions, replication, config=config or {})],
                                         request_timeout=timeout_s)[topic]
    try:
        fut.result()
    except Exception as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise ClusterError(f"could not create topic {topic}: {exc}") from None
    # The controller has it; wait until the brokers' metadata shows a leader for every partition.
    from harness.waiting import WaitTimeout, wait_until

    def visible() -> bool:
        md = cluster.admin().list_topics(topic=topic, timeout=5).topics.get(topic)
        return (md is not None and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values()))

    try:
        wait_until(visible, timeout_s, 0.2, f"topic {topic} has no leader for every partition", retry_on=(Exception,))
    except WaitTimeout as exc:
        raise ClusterError(str(exc)) from None


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
