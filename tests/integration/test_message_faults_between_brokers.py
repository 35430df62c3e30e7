"""A message fault between brokers, on real brokers: a coordinator's transaction markers held on
their way to a partition leader (the message proxy on the inter-broker links,
``proxy_messages_between_brokers``). The commit is answered, the record stays invisible to
read_committed readers while the marker is held, and becomes visible when the fault heals; the
proxy's events name the marker, the link, the coordinator that sent it and the leader's answer."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from kchaos.clusters.processes import processes_with_marker
from kchaos.faults.base import FaultContext
from kchaos.faults.kinds import make_fault
from kchaos.faults.schedule import ScheduledFault
from kchaos.waiting import wait_until
from tests.integration.conftest import start_local
from tests.integration.test_message_faults import events_of


@pytest.fixture(scope="module")
def cluster_between(tmp_path_factory):
    # two brokers are enough for a marker to travel between them, and start sooner than three
    cluster = start_local(tmp_path_factory.mktemp("between"), nodes=2, proxy_messages=True,
                          proxy_messages_between_brokers=True)
    yield cluster
    cluster.stop()
    assert processes_with_marker(str(cluster.work_dir)) == []


def _stable_end(cluster, topic: str, partition: int) -> int:
    """Where a read_committed reader of the partition stops now: its last stable offset."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "log_level": 0})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return high  # asked with read_committed: the last stable offset
    finally:
        consumer.close()


def test_a_held_transaction_marker_keeps_the_commit_invisible_until_the_heal(cluster_between):
    cluster = cluster_between
    topic, txid = f"ib-{uuid.uuid4().hex[:6]}", f"tx-ib-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topics([NewTopic(topic, 2, 2)])[topic].result()
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txid, "log_level": 0})
    producer.init_transactions(30)
    coordinator = cluster.transaction_coordinator(txid)
    # a partition led by another broker: markers to the coordinator's own partitions never leave it
    partition = next(p for p in range(2) if cluster.leader(topic, p) != coordinator)
    leader = cluster.leader(topic, partition)
    fault = make_fault(ScheduledFault(0, 0.0, "message-hold", "all", 30.0, 1,
                                      {"apis": ["WriteTxnMarkers"], "link": "inter-broker"}), FaultContext(cluster))
    resolved = fault.invoke()
    assert resolved["detail"]["rule"]["link"] == "inter-broker" and resolved["detail"]["rule"]["client_prefix"] == ""
    producer.begin_transaction()
    producer.produce(topic, b"held until the heal", partition=partition)
    producer.commit_transaction(30)  # answered once the coordinator prepared it; the markers go afterwards
    held = wait_until(lambda: [e for e in events_of(cluster, "kchaos-fault-0") if e["action"] == "held"], 20, 0.2,
                      "the proxy to hold a marker")
    assert _stable_end(cluster, topic, partition) == 0
    time.sleep(2)  # the marker is held, not slow: still nothing readable
    assert _stable_end(cluster, topic, partition) == 0
    events = fault.heal()["messages"]
    marker = next(e for e in events if e["api"] == "WriteTxnMarkers" and e["node"] == leader)
    assert (marker["link"], marker["source"], marker["committed"]) == ("inter-broker", coordinator, True), marker
    assert f"{topic}-{partition}" in marker["markers"][0]["partitions"]
    assert marker["answer"]["error"] == "NONE", marker
    # the record and its commit marker: the partition is stable past both
    wait_until(lambda: _stable_end(cluster, topic, partition) == 2, 20, 0.2, "the commit to become readable")
    assert held
