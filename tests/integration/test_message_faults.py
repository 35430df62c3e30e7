"""Message faults on real brokers: each kind does what it says, read back from the proxy's
events (what the history records), the client's observed behaviour, what a read_committed
reader sees and the brokers' logs.

They run on the shared 3-node cluster (its client links go through the message proxy), with
one librdkafka transactional producer per test and rules aimed at its client id only.
"""

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import NewTopic

from kchaos.waiting import wait_until

# librdkafka times out a coordinator request after socket.timeout.ms: short, so that a test sees
# the client give up on a held or silent request within seconds
CLIENT = {"socket.timeout.ms": 3000, "request.timeout.ms": 3000, "message.timeout.ms": 10000,
          "transaction.timeout.ms": 20000}


@pytest.fixture
def txn(cluster3):
    """A topic, and a transactional producer whose client id the rules aim at."""
    topic = f"mf-{uuid.uuid4().hex[:8]}"
    cluster3.admin().create_topics([NewTopic(topic, 1, 3)])[topic].result()
    client_id = f"kchaos-w9-producer-{topic}"
    producer = Producer({"bootstrap.servers": cluster3.bootstrap_servers, "transactional.id": f"txid-{topic}",
                         "client.id": client_id, "log_level": 0, **CLIENT})
    producer.init_transactions(30)
    return cluster3, topic, client_id, producer


def committed_values(cluster, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest", "log_level": 0})
    consumer.subscribe([topic])
    values: list[bytes] = []

    def enough() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.append(msg.value())
        return len(values) >= expected

    try:
        wait_until(enough, 30, 0, f"{expected} committed records in {topic}")
        end = time.monotonic() + 2  # and nothing more
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def rule(cluster, kind: str, client_id: str, **params):
    return cluster.messages.add_rule({"id": f"t-{uuid.uuid4().hex[:6]}", "kind": kind, "client_prefix": client_id,
                                      **params})


def test_delay_holds_the_commit_for_the_delay_and_records_producer_id_and_epoch(txn):
    cluster, topic, client_id, producer = txn
    r = rule(cluster, "delay", client_id, apis=["EndTxn"], delay_ms=1500)
    producer.begin_transaction()
    producer.produce(topic, b"a")
    started = time.monotonic()
    producer.commit_transaction(30)
    took = time.monotonic() - started
    [event] = cluster.messages.remove_rule(r["id"])
    assert took >= 1.4, took
    assert event["action"] == "delayed" and event["api"] == "EndTxn" and event["committed"] is True
    assert event["transactional_id"] == f"txid-{topic}" and event["producer_id"] >= 0 and event["producer_epoch"] >= 0
    assert event["correlation_id"] >= 0 and 1400 <= event["released_after_ms"] < 3000
    assert event["answer"] == {"error": "NONE"}
    assert committed_values(cluster, topic, 1) == [b"a"]


def test_hold_past_the_client_timeout_commits_the_next_transaction(txn):
    """KAFKA-17754 on the classic protocol: a commit held past the client's timeout is retried
    and answered; the held original is delivered later and commits the *next* transaction of
    the same producer id and epoch, which the client then tries to abort. Its first write is
    visible to read_committed readers: an aborted read."""
    cluster, topic, client_id, producer = txn
    r = rule(cluster, "hold", client_id, apis=["EndTxn"], release_after_ms=6000)
    producer.begin_transaction()
    producer.produce(topic, b"A")
    producer.commit_transaction(15)  # held; librdkafka retries it after 3 s on a new connection
    producer.begin_transaction()
    producer.produce(topic, b"B1")
    producer.flush(10)
    [event] = wait_until(lambda: [e for e in events_of(cluster, r["id"]) if e.get("answer")], 20, 0.2,
                         "the held EndTxn to be delivered and answered")
    with pytest.raises(KafkaException, match="INVALID_TXN_STATE"):
        producer.abort_transaction(15)  # the late commit already ended B
    assert event["action"] == "held" and event["committed"] is True
    assert event["client_connected_at_release"] is False and event["answer"] == {"error": "NONE"}
    assert committed_values(cluster, topic, 2) == [b"A", b"B1"]
    coordinator = cluster.transaction_coordinator(f"txid-{topic}")
    log = (cluster.node(coordinator).logs_dir / "server.log").read_text()
    assert (f"TransactionalId: txid-{topic}'s state is COMPLETE_COMMIT, but received transaction marker "
            "result to send: ABORT") in log
    assert [e["action"] for e in cluster.messages.remove_rule(r["id"])] == ["held"]


def test_a_hold_released_on_an_answer_goes_on_when_its_client_is_answered(txn):
    """release_on: a held Produce goes on the moment the broker answers NONE to an
    InitProducerId of the same client id (here a second producer's, sharing the client id),
    not at release_after_ms; the event names the answer that released it."""
    cluster, topic, client_id, producer = txn
    r = rule(cluster, "hold", client_id, apis=["Produce"], release_on=["InitProducerId"], release_after_ms=25000)
    producer.begin_transaction()
    producer.produce(topic, b"held until an InitProducerId is answered")
    producer.poll(0)
    wait_until(lambda: events_of(cluster, r["id"]), 10, 0.05, "the Produce to be held")
    other = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"other-{topic}",
                      "client.id": client_id, "log_level": 0, **CLIENT})
    other.init_transactions(30)
    [event] = wait_until(lambda: [e for e in events_of(cluster, r["id"]) if e.get("answer")], 20, 0.1,
                         "the held Produce to be delivered and answered")
    assert event["api"] == "Produce" and event["released_after_ms"] < 20000, event
    assert event["released_by"]["api"] == "InitProducerId" and event["released_by"]["error"] == "NONE", event
    assert event["answer"]["error"] == "NONE", event
    producer.commit_transaction(30)
    assert committed_values(cluster, topic, 1) == [b"held until an InitProducerId is answered"]
    cluster.messages.remove_rule(r["id"])


def test_drop_response_the_broker_commits_the_client_never_hears(txn):
    cluster, topic, client_id, producer = txn
    r = rule(cluster, "drop-response", client_id, apis=["EndTxn"])
    producer.begin_transaction()
    producer.produce(topic, b"a")
    started = time.monotonic()
    producer.commit_transaction(30)  # times out after 3 s, retried: the coordinator says it is done
    assert time.monotonic() - started >= 2.5
    [event] = cluster.messages.remove_rule(r["id"])
    assert event["action"] == "sent, response dropped" and event["answer"] == {"error": "NONE"}
    assert committed_values(cluster, topic, 1) == [b"a"]


def test_duplicate_arrives_later_on_another_connection_and_is_answered(txn):
    cluster, topic, client_id, producer = txn
    r = rule(cluster, "duplicate", client_id, apis=["Produce"], duplicate_after_ms=500)
    producer.begin_transaction()
    producer.produce(topic, b"a")
    producer.flush(10)
    copy = wait_until(lambda: [e for e in events_of(cluster, r["id"]) if e["action"] == "duplicate sent"
                               and e.get("answer")], 20, 0.2, "the duplicate Produce to be answered")[0]
    producer.commit_transaction(30)
    events = cluster.messages.remove_rule(r["id"])
    original = next(e for e in events if e["action"] == "sent and duplicated")
    assert original["answer"]["error"] == "NONE"
    # the idempotent producer's sequence numbers make the copy a duplicate the broker recognises
    assert copy["batches"][0]["base_sequence"] == original["batches"][0]["base_sequence"]
    assert copy["answer"]["error"] in ("NONE", "DUPLICATE_SEQUENCE_NUMBER")
    assert copy["connection"] == original["connection"] and copy["time"] - original["time"] >= 0.45
    assert committed_values(cluster, topic, 1) == [b"a"]  # the copy was not appended twice


def test_error_is_answered_by_the_proxy_and_never_reaches_the_broker(txn):
    cluster, topic, client_id, producer = txn
    r = rule(cluster, "error", client_id, apis=["EndTxn"], error="INVALID_TXN_STATE")
    producer.begin_transaction()
    producer.produce(topic, b"a")
    with pytest.raises(KafkaException, match="INVALID_TXN_STATE"):
        producer.commit_transaction(15)
    [event] = cluster.messages.remove_rule(r["id"])
    assert event["action"] == "answered INVALID_TXN_STATE" and "answer" not in event
    # the coordinator never got the commit: the transaction stays open until its timeout aborts it
    assert committed_values(cluster, topic, 0) == []


def events_of(cluster, rule_id: str) -> list[dict]:
    """The proxy's event log, as it happens (the held request is logged again when answered)."""
    path = cluster.work_dir / "messages" / "events.jsonl"
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["rule"] == rule_id]


#: each message fault kind, and the proxy's action it must record on the EndTxn it caught
KIND_ACTIONS = {"message-delay": ("delayed", {"delay_ms": 300}), "message-hold": ("held", {"release_after_ms": 500}),
                "message-drop-response": ("sent, response dropped", {}),
                "message-duplicate": ("sent and duplicated", {"duplicate_after_ms": 300}),
                "message-error": ("answered CONCURRENT_TRANSACTIONS", {"error": "CONCURRENT_TRANSACTIONS"})}


@pytest.mark.parametrize("kind", sorted(KIND_ACTIONS))
def test_each_message_fault_kind_through_the_fault_registry(txn, kind):
    """The path a campaign takes (faults/kinds/messages.py builds the proxy rule from the kind's
    typed parameters), not the proxy's control API alone: the fault catches the commit and its
    heal returns what it did, as the history records it."""
    from kchaos.faults.base import FaultContext
    from kchaos.faults.kinds import make_fault
    from kchaos.faults.schedule import ScheduledFault

    cluster, topic, client_id, producer = txn
    action, params = KIND_ACTIONS[kind]
    worker = int(client_id.split("-")[1][1:])  # the fixture's producer poses as worker slot 9
    fault = make_fault(ScheduledFault(0, 0.0, kind, "all", 5.0, 1, {"worker": worker, **params}),
                       FaultContext(cluster))
    resolved = fault.invoke()
    assert resolved["detail"]["rule"]["client_prefix"] == f"kchaos-w{worker}-"
    producer.begin_transaction()
    producer.produce(topic, b"x")
    try:
        producer.commit_transaction(10)
    except KafkaException:
        pass  # a dropped answer or a forged error: the client's outcome is not this test's subject
    wait_until(lambda: [e for e in events_of(cluster, resolved["detail"]["rule"]["id"])
                        if e.get("api") == "EndTxn"], 20, 0.2, f"{kind} to catch the EndTxn")
    events = fault.heal()["messages"]
    assert events and {e["api"] for e in events} == {"EndTxn"} and action in {e["action"] for e in events}, events


def test_a_conditional_drop_loses_the_heartbeat_answer_that_moves_partitions(cluster3):
    """answer_carries on a real group coordinator (KIP-848's protocol, two librdkafka consumers):
    the first answer that gives a member already in the group a new assignment is lost, and
    every other heartbeat exchange passes and is recorded with both epochs."""
    topic = f"cgh-{uuid.uuid4().hex[:8]}"
    cluster3.admin().create_topics([NewTopic(topic, 4, 3)])[topic].result()
    prefix = f"kchaos-w9-cgh-{topic}"
    r = rule(cluster3, "drop-response", prefix, apis=["ConsumerGroupHeartbeat"], answer_carries="assignment")
    consumers = [Consumer({"bootstrap.servers": cluster3.bootstrap_servers, "group.id": f"g-{topic}",
                           "group.protocol": "consumer", "client.id": f"{prefix}-{name}", "log_level": 0})
                 for name in ("a", "b")]
    try:
        consumers[0].subscribe([topic])
        wait_until(lambda: consumers[0].poll(0.2) is None and len(consumers[0].assignment()) == 4, 30, 0,
                   "the first consumer to own every partition")
        consumers[1].subscribe([topic])

        def dropped() -> list[dict]:
            for c in consumers:
                c.poll(0.1)
            return [e for e in cluster3.messages.rule_events(r["id"]) if e["action"] == "sent, response dropped"]

        [lost, *_] = wait_until(dropped, 40, 0, "an answer carrying a new assignment to be lost")
    finally:
        for c in consumers:
            c.close()
    events = cluster3.messages.remove_rule(r["id"])
    assert lost["api"] == "ConsumerGroupHeartbeat" and lost["member_epoch"] > 0
    # a revocation keeps the member's epoch, a grant bumps it: either way the answer carries partitions
    assert lost["answer"]["member_epoch"] >= lost["member_epoch"] and lost["answer"]["assignment"] is not None
    joins = [e for e in events if e["action"] == "passed" and e["member_epoch"] == 0]
    assert joins and all(e["answer"]["assignment"] is not None for e in joins)  # a join's answer is never dropped
    assert all(e["answer"].get("error") for e in events if e["action"] == "passed")  # each exchange recorded, answered
    # the cluster's record (cluster.record_apis) saw the same exchange beside the fault, the lost
    # answer as not delivered, and keeps recording after the fault's rule is gone
    observed = events_of(cluster3, "kchaos-record")
    assert [e for e in observed if e["correlation_id"] == lost["correlation_id"] and e["client_id"] == lost["client_id"]
            and e["delivered"] is False and e["answer"] == lost["answer"]]
    assert any(spec["id"] == "kchaos-record" for spec in cluster3.messages.rules())
