"""KIP-1071's StreamsGroupHeartbeat as the message proxy reads it (hand-made frames), and the
proxy's conditional drop (``answer_carries``) on a scripted broker over loopback: the answer
that carries a member's tasks is the one lost, the others pass and are recorded."""

import asyncio
import json

import pytest

from kchaos.clusters.proxy.exchange import Route, frame_bytes, read_frame
from kchaos.clusters.proxy.rules import validate_rule
from kchaos.clusters.proxy.server import MessageProxy
from kchaos.protocol.api import describe_request, parse_request_header, parse_response
from kchaos.protocol.wire import Writer

GROUP, MEMBER = "kchaos-streams", "csZk-member"


def task_ids(w: Writer, tasks: list[tuple[str, list[int]]] | None) -> Writer:
    if tasks is None:
        return w.uvarint(0)
    w.uvarint(len(tasks) + 1)
    for subtopology, partitions in tasks:
        w.compact_string(subtopology).uvarint(len(partitions) + 1)
        for p in partitions:
            w.int32(p)
        w.no_tagged_fields()
    return w


def heartbeat(epoch: int, owned: list[tuple[str, list[int]]] | None, correlation_id: int = 5, version: int = 0,
              joining: bool = False, client_id: str = "kchaos-w2-StreamThread-1-consumer") -> bytes:
    """A StreamsGroupHeartbeat request (common/message/StreamsGroupHeartbeatRequest.json)."""
    w = Writer().int16(88).int16(version).int32(correlation_id).string(client_id)
    w.no_tagged_fields().compact_string(GROUP).compact_string(MEMBER).int32(epoch).int32(0)
    w.compact_string(None).compact_string(None).int32(-1)  # instance id, rack id, rebalance timeout
    if joining:  # a topology of one subtopology reading one topic; nothing after it is read
        w.int8(1).int32(0).uvarint(2).compact_string("0").uvarint(2).compact_string("kchaos-input")
        return w.bytes()
    w.int8(-1)
    task_ids(w, owned).uvarint(0).uvarint(0)  # owned active, standby, warm-up tasks
    return w.bytes()


def answer(correlation_id: int, epoch: int, tasks: list[tuple[str, list[int]]] | None, version: int = 0,
           error: int = 0) -> bytes:
    """A StreamsGroupHeartbeat answer as the group coordinator writes it (v0: the recovery lag is
    an int32 before the task offset interval; v1: an int64 after it)."""
    w = Writer().int32(correlation_id).no_tagged_fields().int32(0).int16(error).compact_string(None)
    w.compact_string(MEMBER).int32(epoch).int32(2000)
    if version == 0:
        w.int32(1000).int32(60000)
    else:
        w.int32(60000).int64(1000)
    w.uvarint(2).int8(3).compact_string("missing internal topics").no_tagged_fields()  # one status
    task_ids(w, tasks).uvarint(0).uvarint(0)
    return w.int32(0).uvarint(0).no_tagged_fields().bytes()


def test_a_heartbeat_names_its_member_epoch_and_owned_tasks():
    frame = heartbeat(5, [("0", [0])])
    assert describe_request(frame, parse_request_header(frame)) == {
        "group_id": GROUP, "member_id": MEMBER, "member_epoch": 5, "owned_active_tasks": ["0-0"]}
    frame = heartbeat(6, None)  # owned tasks unchanged since the last heartbeat
    assert describe_request(frame, parse_request_header(frame))["owned_active_tasks"] is None


def test_a_joining_heartbeat_is_described_without_reading_its_topology():
    frame = heartbeat(0, None, joining=True)
    assert describe_request(frame, parse_request_header(frame)) == {
        "group_id": GROUP, "member_id": MEMBER, "member_epoch": 0, "topology": True}


@pytest.mark.parametrize("version", [0, 1])
def test_an_answer_carries_the_tasks_or_says_they_did_not_change(version):
    header = parse_request_header(heartbeat(5, None, version=version))
    assert parse_response(answer(5, 6, [("0", [2, 0])], version), header) == {
        "error": "NONE", "member_id": MEMBER, "member_epoch": 6, "assignment": ["0-0", "0-2"]}
    assert parse_response(answer(5, 7, None, version), header)["assignment"] is None
    assert parse_response(answer(5, 6, [], version), header)["assignment"] == []  # no tasks: still carried
    fenced = parse_response(answer(5, 5, None, version, error=110), header)
    assert fenced["error"] == "110" and fenced["member_epoch"] == 5


@pytest.mark.parametrize("body, message", [
    ({"kind": "hold", "apis": ["StreamsGroupHeartbeat"], "answer_carries": "assignment"},
     "answer_carries .* is for kind = 'drop-response'"),
    ({"kind": "drop-response", "apis": ["StreamsGroupHeartbeat"], "answer_carries": "tasks"},
     "answer_carries must be one of assignment"),
    ({"kind": "drop-response", "apis": ["StreamsGroupHeartbeat", "EndTxn"], "answer_carries": "assignment"},
     "StreamsGroupHeartbeat, ConsumerGroupHeartbeat answers only, not EndTxn"),
])
def test_a_conditional_drop_is_refused_where_the_answer_cannot_carry_it(body, message):
    with pytest.raises(ValueError, match=message):
        validate_rule(body)


def run_through_proxy(tmp_path, rules: list[dict], exchange: list[tuple[bytes, bytes]]) -> tuple[list, dict]:
    """A scripted broker answering each request with the next answer of ``exchange``, behind the
    proxy with ``rules``; the client sends each request and waits up to 1 s for its answer.
    Returns the answers the client got (None: none came) and each rule's events."""

    async def scenario() -> tuple[list, dict]:
        answers = iter([a for _, a in exchange])

        async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while (await read_frame(reader)) is not None:
                writer.write(frame_bytes(next(answers)))
                await writer.drain()

        upstream = await asyncio.start_server(broker, "127.0.0.1", 0)
        port = upstream.sockets[0].getsockname()[1]
        proxy = MessageProxy([], tmp_path / "events.jsonl")
        for spec in rules:
            assert (await proxy.route("POST", "/rules", spec))[0] == 200
        route = Route("n3", 3, "client", None, 0, port)
        front = await asyncio.start_server(lambda r, w: proxy.client_connected(route, r, w), "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", front.sockets[0].getsockname()[1])
        got = []
        for request, _ in exchange:
            writer.write(frame_bytes(request))
            try:
                got.append(await asyncio.wait_for(read_frame(reader), 1.0))
            except asyncio.TimeoutError:
                got.append(None)
        events = {spec["id"]: (await proxy.route("DELETE", f"/rules/{spec['id']}", None))[1]["events"]
                  for spec in rules}
        writer.close()
        front.close()
        upstream.close()
        return got, events

    return asyncio.run(scenario())


def test_only_the_answer_that_carries_tasks_is_dropped_and_the_exchange_is_recorded(tmp_path):
    """The lead of docs/findings.md F7: the coordinator moves a member to epoch 6 with a new task,
    the answer saying so is lost, the member asks again at epoch 5 and is told epoch 6 without
    its tasks. Here the broker is scripted; the proxy must drop the second answer only, and
    record all three exchanges."""
    exchange = [(heartbeat(5, [("0", [0])], 1), answer(1, 5, None)),
                (heartbeat(5, None, 2), answer(2, 6, [("0", [0, 2])])),
                (heartbeat(5, None, 3), answer(3, 6, None))]
    rule = {"id": "drop", "kind": "drop-response", "apis": ["StreamsGroupHeartbeat"], "answer_carries": "assignment",
            "client_prefix": "kchaos-w2-"}
    got, events = run_through_proxy(tmp_path, [rule], exchange)
    assert got[0] is not None and got[1] is None and got[2] is None  # the dropped answer's connection stays silent
    assert [(e["action"], e["member_epoch"], e["answer"]["member_epoch"], e["answer"]["assignment"], e.get("delivered"))
            for e in events["drop"]] == [("passed", 5, 5, None, True),
                                         ("sent, response dropped", 5, 6, ["0-0", "0-2"], None),
                                         ("passed", 5, 6, None, False)]
    logged = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["action"] for e in logged] == [e["action"] for e in events["drop"]]  # each recorded once, answered


def test_a_conditional_drop_counts_only_the_answers_it_dropped(tmp_path):
    """count = 1: answers without tasks pass and do not use the rule up."""
    exchange = [(heartbeat(5, None, 1), answer(1, 5, None)), (heartbeat(5, None, 2), answer(2, 5, None)),
                (heartbeat(5, None, 3), answer(3, 6, [("0", [1])]))]
    rule = {"id": "drop", "kind": "drop-response", "apis": ["StreamsGroupHeartbeat"], "answer_carries": "assignment"}
    exchange.append((heartbeat(6, None, 4), answer(4, 7, [("0", [1, 3])])))
    got, events = run_through_proxy(tmp_path, [rule], exchange)
    assert got[0] is not None and got[1] is not None and got[2] is None
    dropped = [e for e in events["drop"] if e["action"] == "sent, response dropped"]
    assert [e["answer"]["assignment"] for e in dropped] == [["0-1"]]  # the second answer with tasks: over the count
    assert [e["action"] for e in events["drop"]] == ["passed", "passed", "sent, response dropped", "passed"]


def test_a_joining_members_answer_is_not_what_a_conditional_drop_waits_for(tmp_path):
    """A lost answer to a join is asked for again with epoch 0, and the join's answer always
    carries the tasks: only an answer to a member already in the group (epoch above 0) is dropped."""
    exchange = [(heartbeat(0, None, 1, joining=True), answer(1, 1, [])),
                (heartbeat(1, [], 2), answer(2, 2, [("0", [4])]))]
    rule = {"id": "drop", "kind": "drop-response", "apis": ["StreamsGroupHeartbeat"], "answer_carries": "assignment"}
    got, events = run_through_proxy(tmp_path, [rule], exchange)
    assert got[0] is not None and got[1] is None
    assert [(e["action"], e["member_epoch"]) for e in events["drop"]] == [("passed", 0), ("sent, response dropped", 1)]


TOPIC = bytes(range(16))
TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"


def partitions(w: Writer, owned: list[int] | None) -> Writer:
    if owned is None:
        return w.uvarint(0)
    w.uvarint(2).raw(TOPIC).uvarint(len(owned) + 1)
    for p in owned:
        w.int32(p)
    return w.no_tagged_fields()


def consumer_heartbeat(version: int, epoch: int, owned: list[int] | None) -> bytes:
    """A ConsumerGroupHeartbeat request (v1 adds the subscribed topic regex)."""
    w = Writer().int16(68).int16(version).int32(3).string("kchaos-w1-consumer").no_tagged_fields()
    w.compact_string("kchaos-ctp").compact_string("m-1").int32(epoch).compact_string(None).compact_string(None)
    w.int32(-1).uvarint(2).compact_string("kchaos-input")  # rebalance timeout, subscribed topic names
    if version >= 1:
        w.compact_string(None)
    w.compact_string(None)  # server assignor
    return partitions(w, owned).no_tagged_fields().bytes()


@pytest.mark.parametrize("version", [0, 1])
def test_a_consumer_group_heartbeat_and_its_answer_name_epochs_and_partitions(version):
    """KIP-848's heartbeat, for the same conditional drop on the consumer protocol (whose
    coordinator answers a full request, owned partitions included, with the full assignment)."""
    frame = consumer_heartbeat(version, 7, [2, 0])
    header = parse_request_header(frame)
    assert describe_request(frame, header) == {"group_id": "kchaos-ctp", "member_id": "m-1", "member_epoch": 7,
                                               "owned_partitions": [f"{TOPIC_ID}-0", f"{TOPIC_ID}-2"]}
    assert describe_request(consumer_heartbeat(version, 8, None), header)["owned_partitions"] is None

    def answer_of(epoch: int, assigned: list[int] | None) -> bytes:
        w = Writer().int32(3).no_tagged_fields().int32(0).int16(0).compact_string(None).compact_string("m-1")
        w.int32(epoch).int32(2000)
        if assigned is None:
            w.int8(-1)
        else:
            partitions(w.int8(1), assigned).no_tagged_fields()
        return w.no_tagged_fields().bytes()

    assert parse_response(answer_of(8, [0, 2, 4]), header) == {
        "error": "NONE", "member_id": "m-1", "member_epoch": 8,
        "assignment": [f"{TOPIC_ID}-0", f"{TOPIC_ID}-2", f"{TOPIC_ID}-4"]}
    assert parse_response(answer_of(8, None), header)["assignment"] is None


def test_an_observe_rule_records_every_exchange_beside_a_drop_and_outlives_a_reset(tmp_path):
    """cluster.record_apis: an observe rule records each heartbeat and its answer (and whether
    the client got it) beside the fault that takes the request; the final heal's reset removes
    the fault's rule, not the record."""
    exchange = [(heartbeat(5, [("0", [0])], 1), answer(1, 5, None)),
                (heartbeat(5, None, 2), answer(2, 6, [("0", [0, 2])])),
                (heartbeat(5, None, 3), answer(3, 6, None))]

    async def reset_keeps_observe() -> list[str]:
        proxy = MessageProxy([], tmp_path / "reset.jsonl")
        for spec in ({"id": "record", "kind": "observe", "apis": ["StreamsGroupHeartbeat"], "count": 0},
                     {"id": "fault", "kind": "hold", "apis": ["EndTxn"]}):
            await proxy.route("POST", "/rules", spec)
        await proxy.route("POST", "/reset", None)
        return list(proxy.rules)

    assert asyncio.run(reset_keeps_observe()) == ["record"]
    rules = [{"id": "record", "kind": "observe", "apis": ["StreamsGroupHeartbeat"], "count": 0},
             {"id": "drop", "kind": "drop-response", "apis": ["StreamsGroupHeartbeat"], "answer_carries": "assignment"}]
    got, events = run_through_proxy(tmp_path, rules, exchange)
    assert got[0] is not None and got[1] is None
    assert events["record"] == []  # a whole run's record is kept in events.jsonl only
    observed = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    observed = [e for e in observed if e["rule"] == "record"]
    assert [(e["member_epoch"], e["answer"]["member_epoch"], e["answer"]["assignment"], e["delivered"])
            for e in observed] == [(5, 5, None, True), (5, 6, ["0-0", "0-2"], False), (5, 6, None, False)]


def test_an_observed_request_never_answered_is_recorded_when_its_connection_ends(tmp_path):
    """A heartbeat sent to a coordinator that dies before answering is part of the exchange: the
    record says it was sent and that no answer came."""

    async def scenario() -> list[dict]:
        async def mute_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_frame(reader)
            writer.close()  # the broker dies with the request unanswered

        upstream = await asyncio.start_server(mute_broker, "127.0.0.1", 0)
        proxy = MessageProxy([], tmp_path / "events.jsonl")
        await proxy.route("POST", "/rules", {"id": "record", "kind": "observe", "apis": ["StreamsGroupHeartbeat"],
                                             "count": 0})
        route = Route("n3", 3, "client", None, 0, upstream.sockets[0].getsockname()[1])
        front = await asyncio.start_server(lambda r, w: proxy.client_connected(route, r, w), "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", front.sockets[0].getsockname()[1])
        writer.write(frame_bytes(heartbeat(5, None, 9)))
        assert await asyncio.wait_for(read_frame(reader), 5) is None  # closed without an answer
        writer.close()
        for _ in range(50):
            if (tmp_path / "events.jsonl").read_text():
                break
            await asyncio.sleep(0.05)
        front.close()
        upstream.close()
        return [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]

    [event] = asyncio.run(scenario())
    assert (event["action"], event["member_epoch"], event["answer"], event["delivered"]) == ("observed", 5, None, False)


def test_the_heal_of_a_drop_closes_the_connection_it_silenced(tmp_path):
    """A client that never gives up a connection (KafkaJS) must not stay deaf after the fault
    heals: removing the rule closes the connection it silenced, and leaves the others open."""

    async def scenario() -> tuple[bytes | None, bytes | None, bool, bool]:
        async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while (frame := await read_frame(reader)) is not None:
                writer.write(frame_bytes(answer(parse_request_header(frame).correlation_id, 5, None)))
                await writer.drain()

        upstream = await asyncio.start_server(broker, "127.0.0.1", 0)
        proxy = MessageProxy([], tmp_path / "events.jsonl")
        rule = {"id": "drop", "kind": "drop-response", "apis": ["StreamsGroupHeartbeat"], "client_prefix": "kchaos-w2-"}
        assert (await proxy.route("POST", "/rules", rule))[0] == 200
        route = Route("n3", 3, "client", None, 0, upstream.sockets[0].getsockname()[1])
        front = await asyncio.start_server(lambda r, w: proxy.client_connected(route, r, w), "127.0.0.1", 0)
        port = front.sockets[0].getsockname()[1]
        (silenced_r, silenced_w), (other_r, other_w) = [await asyncio.open_connection("127.0.0.1", port)
                                                        for _ in range(2)]
        silenced_w.write(frame_bytes(heartbeat(5, None, 1)))
        other_w.write(frame_bytes(heartbeat(5, None, 2, client_id="kchaos-w1-consumer")))
        try:
            lost = await asyncio.wait_for(read_frame(silenced_r), 1.0)
        except asyncio.TimeoutError:
            lost = None
        heard = await asyncio.wait_for(read_frame(other_r), 1.0)
        await proxy.route("DELETE", "/rules/drop", None)
        closed = await asyncio.wait_for(silenced_r.read(1), 1.0) == b""
        other_w.write(frame_bytes(heartbeat(5, None, 3, client_id="kchaos-w1-consumer")))
        still_open = await asyncio.wait_for(read_frame(other_r), 1.0) is not None
        for w in (silenced_w, other_w):
            w.close()
        front.close()
        upstream.close()
        return lost, heard, closed, still_open

    lost, heard, closed, still_open = asyncio.run(scenario())
    assert lost is None and heard is not None  # the rule took w2's answer only
    assert closed and still_open
