"""A transaction left open on a new topic of a real cluster: what the KIP-664 queries must list
(tests/integration/test_local_cluster.py, bench/transactions_queries.py)."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Producer

from kchaos.clusters.clients import create_topic, quiet


def open_transaction(cluster: Any) -> tuple[Producer, str, str]:
    """(its producer, the topic, the transactional id): one record written, not committed; the
    caller ends it (``producer.abort_transaction``)."""
    topic, txid = f"open-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, 1, 3)
    producer = Producer(quiet({**cluster.client_config(), "transactional.id": txid}))
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, value=b"open")
    producer.flush(30)
    return producer, topic, txid
