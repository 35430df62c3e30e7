"""What the liveness checks read: the streams group's describe as its tool prints it, the
heal's wording of missing brokers, and the members' own account of what they hold (hand-made
input; the checks themselves are in tests/unit/test_checkers.py, run by both engines)."""

from __future__ import annotations

from types import SimpleNamespace

from kchaos.runtime.kafka_tools import parse_streams_members
from kchaos.verifier.liveness import _named_brokers, members_at, slot_of_client

MEMBERS = """\
GROUP      MEMBER                  PROCESS  CLIENT-ID                          MEMBER-EPOCH  TARGET-ASSIGNMENT-EPOCH  ASSIGNMENTS
kchaos-ctp m-2                     p-2      kchaos-w2-StreamThread-1-consumer  4             4                        ACTIVE: 0:[0,5]; TARGET-ACTIVE: 0:[0,5];
kchaos-ctp m-0                     p-0      kchaos-w0-StreamThread-1-consumer  4             4                        ACTIVE: ; TARGET-ACTIVE: 0:[1,3];
"""


def test_a_streams_groups_members_are_read_with_the_input_partitions_of_their_active_tasks():
    members = parse_streams_members(MEMBERS)
    assert [(m["member_id"], m["client_id"], m["partitions"], m["target_partitions"]) for m in members] == [
        ("m-2", "kchaos-w2-StreamThread-1-consumer", [0, 5], [0, 5]),
        ("m-0", "kchaos-w0-StreamThread-1-consumer", [], [1, 3])]
    assert parse_streams_members("") == [] and parse_streams_members("no members\n") == []
    assert slot_of_client(members[0]["client_id"]) == "w2" and slot_of_client("kchaos-w10-consumer") == "w10"
    assert slot_of_client("kchaos-seeder") is None


def test_the_heals_wording_of_missing_brokers():
    assert _named_brokers("brokers [2] not registered") == [2]
    assert _named_brokers("cluster did not become healthy: brokers [1, 3] not registered") == [1, 3]
    assert _named_brokers("4 partitions under-replicated") == [] and _named_brokers(None) == []


def _op(f, t, value, process="harness"):
    return {"f": f, "invoke_time": t, "value": value, "process": process}


def test_members_hold_what_their_events_say_a_streams_instance_its_whole_set():
    ops = [_op("worker-start", 1, {"slot": "w0", "incarnation": 1, "client": "confluent"}),
           _op("worker-start", 1, {"slot": "w1", "incarnation": 1, "client": "streams"}),
           _op("assign", 2, {"partitions": [0, 1]}, "w0.1"), _op("assign", 3, {"partitions": [2]}, "w0.1"),
           _op("revoke", 4, {"partitions": [0]}, "w0.1"),
           _op("assign", 2, {"partitions": [3, 4]}, "w1.1"), _op("assign", 5, {"partitions": []}, "w1.1"),
           _op("streams-state", 5, {"from": "REBALANCING", "to": "RUNNING"}, "w1.1"),
           _op("worker-start", 6, {"slot": "w2", "incarnation": 1, "client": "confluent"}),
           _op("worker-exit", 7, {"slot": "w2", "incarnation": 1, "meaning": "fatal"})]
    data = SimpleNamespace(history=SimpleNamespace(ops=ops))
    members = {m.process: m for m in members_at(data, 10)}
    assert sorted(members) == ["w0.1", "w1.1"]  # w2.1 exited
    assert members["w0.1"].holds == {1, 2} and members["w1.1"].holds == set() and members["w1.1"].state == "RUNNING"
    assert members_at(data, 2.5)[0].holds == {0, 1}


def test_a_revoke_without_partitions_gives_up_everything_held():
    """KafkaJS's eager rebalance (its REBALANCING event) names no partitions: the member holds
    nothing until its next assignment, never what it held before piled on the new one."""
    ops = [_op("worker-start", 1, {"slot": "w0", "incarnation": 1, "client": "kafkajs"}),
           _op("assign", 2, {"partitions": [2, 5]}, "w0.1"), _op("revoke", 3, {"partitions": None}, "w0.1"),
           _op("assign", 4, {"partitions": [0, 3]}, "w0.1")]
    data = SimpleNamespace(history=SimpleNamespace(ops=ops))
    assert members_at(data, 3.5)[0].holds == set() and members_at(data, 5)[0].holds == {0, 3}
