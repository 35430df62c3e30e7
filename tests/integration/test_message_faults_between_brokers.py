"""A message fault between brokers, on real brokers: a coordinator's transaction markers held on
their way to a partition leader (the message proxy on the inter-broker links,
``proxy_messages_between_brokers``). The commit is answered, the record stays invisible to
read_committed readers while the marker is held, and becomes visible when the fault heals; the
proxy's events name the marker, the link, the coordinator that sent it and the leader's answer."""

from __future__ import annotations

import concurrent.futures
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from kchaos.faults.base import FaultContext
from kchaos.faults.kinds import make_fault
from kchaos.faults.schedule import ScheduledFault
from kchaos.runtime.processes import processes_with_marker
from kchaos.waiting import wait_until
from tests.integration.conftest import start_local
from tests.integration.test_message_faults import events_of


@pytest.fixture(scope="module")
def cluster_between(tmp_path_factory):
    # two brokers are enough for a marker to travel between them, and start sooner than three
    # brokers time their own requests out after 5 s: a marker whose answer was dropped is sent
    # again within the test, not 30 s later
    cluster = start_local(tmp_path_factory.mktemp("between"), nodes=2, proxy_messages=True,
                          proxy_messages_between_brokers=True, broker={"request.timeout.ms": "5000"})
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


def _transaction_across_brokers(cluster, replicas: int = 2) -> tuple[Producer, str, int, int, int]:
    """A transactional producer and a partition led by a broker other than its coordinator
    (markers to the coordinator's own partitions never leave it)."""
    topic, txid = f"ib-{uuid.uuid4().hex[:6]}", f"tx-ib-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topics([NewTopic(topic, 2, replicas)])[topic].result()
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txid, "log_level": 0})
    producer.init_transactions(30)
    coordinator = cluster.transaction_coordinator(txid)
    partition = next(p for p in range(2) if cluster.leader(topic, p) != coordinator)
    return producer, topic, partition, coordinator, cluster.leader(topic, partition)


def test_a_held_transaction_marker_keeps_the_commit_invisible_until_the_heal(cluster_between):
    cluster = cluster_between
    producer, topic, partition, coordinator, leader = _transaction_across_brokers(cluster)
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


#: the other kinds between brokers, and what the proxy must record doing to a marker. (The
#: error kind forges only EndTxn, AddOffsetsToTxn and InitProducerId answers, none of which
#: brokers send each other: campaigns cannot aim it between brokers, docs/faults.md.)
BETWEEN_KINDS = {"message-delay": ("delayed", {"delay_ms": 300.0}),
                 "message-drop-response": ("sent, response dropped", {}),
                 "message-duplicate": ("sent and duplicated", {"duplicate_after_ms": 300.0})}


@pytest.mark.parametrize("kind", sorted(BETWEEN_KINDS))
def test_each_message_fault_kind_between_brokers_acts_on_a_marker_and_the_commit_completes(cluster_between, kind):
    """Through the fault registry: the marker is delayed, answered to no one (the coordinator
    times it out after 5 s and sends it again) or duplicated; the events say so with the
    leader's answer, and the commit becomes readable all the same."""
    cluster = cluster_between
    producer, topic, partition, coordinator, leader = _transaction_across_brokers(cluster)
    action, params = BETWEEN_KINDS[kind]
    index = 10 + sorted(BETWEEN_KINDS).index(kind)
    # every marker (count 0): an earlier test's marker, sent again after a dropped answer, may
    # come first; ours is picked out by its partition
    fault = make_fault(ScheduledFault(index, 0.0, kind, "all", 30.0, 1,
                                      {"apis": ["WriteTxnMarkers"], "link": "inter-broker", "count": 0.0, **params}),
                       FaultContext(cluster))
    fault.invoke()
    producer.begin_transaction()
    producer.produce(topic, kind.encode(), partition=partition)
    producer.commit_transaction(30)
    # past the record and its commit marker; a marker written twice (a duplicate, or one sent
    # again after its answer was dropped) appends a second one, so the end may be 3: once a
    # loaded machine read it only after the duplicate, and a wait for exactly 2 never ended
    wait_until(lambda: _stable_end(cluster, topic, partition) >= 2, 30, 0.2, f"the commit to complete under {kind}")
    name = f"{topic}-{partition}"

    def ours(e: dict) -> bool:
        return e.get("node") == leader and any(name in m["partitions"] for m in e.get("markers", []))

    # what the proxy did, answered (a duplicate's copy too, sent 300 ms after the original)
    wanted = {action, "duplicate sent"} if kind == "message-duplicate" else {action}
    wait_until(lambda: wanted <= {e["action"] for e in events_of(cluster, f"kchaos-fault-{index}")
                                  if ours(e) and e.get("answer")}, 20, 0.2, f"{kind}'s answered events")
    events = [e for e in fault.heal()["messages"] if ours(e)]
    acted = next(e for e in events if e["action"] == action)
    assert (acted["api"], acted["link"], acted["source"]) == ("WriteTxnMarkers", "inter-broker", coordinator), acted
    assert acted["answer"]["errors"][name] == "NONE", acted  # the leader wrote it
    if kind == "message-duplicate":
        copy = next(e for e in events if e["action"] == "duplicate sent")
        assert copy["answer"]["error"] in ("NONE", "INVALID_PRODUCER_EPOCH"), copy  # a second write, or refused stale


@pytest.mark.long
def test_marker_hold_failover_kills_the_sender_of_a_held_marker_and_the_successor_completes_the_commit(tmp_path):
    """marker-hold-failover on three nodes (two could not elect a successor with one killed): a
    marker held on its way to the leader, its sender (the transaction's coordinator) killed; the
    successor reloads the prepared transaction and completes the commit; the held marker reaches
    the leader at the heal, after it, and the killed node starts again."""
    cluster = start_local(tmp_path / "c", nodes=3, proxy_messages=True, proxy_messages_between_brokers=True,
                          broker={"request.timeout.ms": "5000"})
    try:
        # three replicas: with the coordinator's broker dead the partition keeps min.insync.replicas
        producer, topic, partition, coordinator, leader = _transaction_across_brokers(cluster, replicas=3)
        fault = make_fault(ScheduledFault(0, 0.0, "marker-hold-failover", "all", 30.0, 1, {"wait_s": 30.0}),
                           FaultContext(cluster))
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            invoked = pool.submit(fault.invoke)  # it waits for a marker to hold
            producer.begin_transaction()
            producer.produce(topic, b"prepared when its coordinator died", partition=partition)
            producer.commit_transaction(30)  # answered once prepared: the markers go afterwards
            resolved = invoked.result(60)
        detail = resolved["detail"]
        assert detail["killed"] == coordinator and detail["held_request"]["source"] == coordinator, detail
        assert not cluster.node(coordinator).is_running
        wait_until(lambda: _stable_end(cluster, topic, partition) == 2, 90, 0.5,
                   "the successor coordinator to complete the commit")
        events = fault.heal()["messages"]
        late = next(e for e in events if e["action"] == "held" and e.get("markers"))
        # delivered at the heal, after the successor's marker (coordinator epoch + 1): refused as stale
        assert late["source"] == coordinator and late["answer"]["error"] == "TRANSACTION_COORDINATOR_FENCED", late
        assert cluster.node(coordinator).is_running
        cluster.wait_healthy(120)
        assert _stable_end(cluster, topic, partition) == 2  # the late marker changed nothing readable
    finally:
        cluster.stop()
    assert processes_with_marker(str(cluster.work_dir)) == []
