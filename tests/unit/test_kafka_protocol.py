"""The message proxy's protocol slice and rule checks, on hand-encoded frames (no broker)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kchaos.clusters.proxy.rules import validate_rule
from kchaos.protocol.api import (API_KEYS, ERROR_CODES, FORGEABLE_APIS, describe_request, error_response,
                                 is_flexible, parse_request_header, parse_response)
from kchaos.protocol.wire import Reader, Writer


def request(api: str, version: int, correlation_id: int, client_id: str | None, body: bytes) -> bytes:
    key = API_KEYS[api]
    w = Writer().int16(key).int16(version).int32(correlation_id).string(client_id)
    if is_flexible(key, version):
        w.no_tagged_fields()
    return w.raw(body).bytes()


def string(w: Writer, flexible: bool, value: str | None) -> Writer:
    return w.compact_string(value) if flexible else w.string(value)


def end_txn_body(version: int, txid: str, pid: int, epoch: int, committed: bool) -> bytes:
    flexible = version >= 3
    w = string(Writer(), flexible, txid).int64(pid).int16(epoch).int8(int(committed))
    if flexible:
        w.no_tagged_fields()
    return w.bytes()


@given(version=st.integers(0, 5), txid=st.text(min_size=1, max_size=40), pid=st.integers(0, 2**62),
       epoch=st.integers(0, 32767), committed=st.booleans(), corr=st.integers(0, 2**31 - 1),
       client=st.one_of(st.none(), st.text(max_size=30)))
def test_end_txn_requests_of_every_version_read_back(version, txid, pid, epoch, committed, corr, client):
    frame = request("EndTxn", version, corr, client, end_txn_body(version, txid, pid, epoch, committed))
    header = parse_request_header(frame)
    assert (header.api, header.api_version, header.correlation_id, header.client_id) == ("EndTxn", version, corr, client)
    assert describe_request(frame, header) == {"transactional_id": txid, "producer_id": pid, "producer_epoch": epoch,
                                               "committed": committed}


def record_batch(pid: int, epoch: int, base_sequence: int, count: int, transactional: bool) -> bytes:
    w = Writer().int64(0).int32(49 + 10).int32(0).int8(2).int32(0).int16(0x10 if transactional else 0)
    w.int32(count - 1).int64(1).int64(2).int64(pid).int16(epoch).int32(base_sequence).int32(count)
    return w.raw(b"\x00" * 10).bytes()


@pytest.mark.parametrize("version", [7, 9, 11, 13])
def test_produce_request_names_the_batches_producer_and_sequence(version):
    flexible = version >= 9
    batch = record_batch(pid=42, epoch=3, base_sequence=17, count=4, transactional=True)
    w = string(Writer(), flexible, "tx-1").int16(-1).int32(30000)
    w.uvarint(2) if flexible else w.int32(1)  # one topic
    if version >= 13:
        w.raw(bytes(range(16)))
    else:
        string(w, flexible, "out")
    w.uvarint(2) if flexible else w.int32(1)  # one partition
    w.int32(5)
    w.uvarint(len(batch) + 1) if flexible else w.int32(len(batch))
    w.raw(batch)
    if flexible:
        w.no_tagged_fields().no_tagged_fields().no_tagged_fields()
    frame = request("Produce", version, 9, "kchaos-w0-producer", w.bytes())
    described = describe_request(frame, parse_request_header(frame))
    assert described["transactional_id"] == "tx-1"
    assert (described["producer_id"], described["producer_epoch"]) == (42, 3)
    [b] = described["batches"]
    assert (b["partition"], b["base_sequence"], b["records"], b["transactional"]) == (5, 17, 4, True)
    assert b["topic"] == ("AAECAwQFBgcICQoLDA0ODw" if version >= 13 else "out")


def test_a_truncated_body_is_reported_not_raised():
    frame = request("EndTxn", 1, 1, "c", b"\x00\x04tx")
    assert "parse_error" in describe_request(frame, parse_request_header(frame))


#: every version of the forgeable APIs (their schemas' validVersions)
FORGEABLE_VERSIONS = {"EndTxn": range(0, 6), "AddOffsetsToTxn": range(0, 5), "InitProducerId": range(0, 7)}


@pytest.mark.parametrize("api, version", [(api, v) for api in FORGEABLE_APIS for v in FORGEABLE_VERSIONS[api]])
def test_forged_error_responses_read_back_as_the_broker_would_write_them(api, version):
    frame = request(api, version, 1234, "c", b"")
    header = parse_request_header(frame)
    response = error_response(header, "CONCURRENT_TRANSACTIONS")
    assert Reader(response).int32() == 1234
    assert parse_response(response, header) == {"error": "CONCURRENT_TRANSACTIONS"}
    # size: correlation id, (tags), throttle, error, [producer id and epoch], (tags)
    flexible = is_flexible(API_KEYS[api], version)
    expected = 4 + 4 + 2 + (2 if flexible else 0)
    expected += {"InitProducerId": 10 + (10 if version >= 6 else 0), "EndTxn": 10 if version >= 5 else 0}.get(api, 0)
    assert len(response) == expected


@pytest.mark.parametrize("version", [1, 4])
def test_a_granted_init_producer_id_reads_back_with_its_producer_id_and_epoch(version):
    """The answer that rotates a producer id (the message proxy's release_on evidence)."""
    header = parse_request_header(request("InitProducerId", version, 77, "c", b""))
    flexible = is_flexible(API_KEYS["InitProducerId"], version)
    answer = Writer().int32(77)
    if flexible:
        answer.uvarint(0)
    answer.int32(0).int16(0).int64(4242).int16(0)
    if flexible:
        answer.uvarint(0)
    assert parse_response(answer.bytes(), header) == {"error": "NONE", "producer_id": 4242, "producer_epoch": 0}


def test_responses_cannot_be_forged_for_per_partition_apis():
    header = parse_request_header(request("Produce", 9, 1, "c", b""))
    with pytest.raises(ValueError, match="cannot forge a Produce response"):
        error_response(header, "NOT_LEADER_OR_FOLLOWER")


@pytest.mark.parametrize("body, message", [
    ({"kind": "stall", "apis": ["EndTxn"]}, "kind must be one of"),
    ({"kind": "hold", "apis": []}, "apis must be a list of API names"),
    ({"kind": "hold", "apis": ["EndTransaction"]}, "got \\['EndTransaction'\\]"),
    ({"kind": "error", "apis": ["EndTxn"], "error": "NOPE"}, "error must be one of"),
    ({"kind": "error", "apis": ["Produce"], "error": "NOT_COORDINATOR"}, "forge an error response for EndTxn"),
    ({"kind": "delay", "apis": ["Fetch"], "delay_ms": -1}, ">= 0"),
    ({"kind": "hold", "apis": ["WriteTxnMarkers"], "link": "replication"}, "link must be one of"),
    ({"kind": "hold", "apis": ["EndTxn"], "sources": [1]}, "sources .* are for link = 'inter-broker'"),
    ({"kind": "delay", "apis": ["Produce"], "release_on": ["InitProducerId"]}, "release_on .* is for kind = 'hold'"),
    ({"kind": "hold", "apis": ["Produce"], "release_on": ["InitProducerIds"]}, "apis must be a list of API names"),
])
def test_the_proxy_refuses_bad_rules_with_the_reason(body, message):
    with pytest.raises(ValueError, match=message):
        validate_rule(body)


def test_every_rule_kind_the_proxy_accepts_has_its_filter():
    from kchaos.clusters.proxy.filters import ACTIONS, Observe
    from kchaos.clusters.proxy.rules import RULE_KINDS

    assert set(ACTIONS) | {Observe.kind} == set(RULE_KINDS)
    assert all(kind == action.kind for kind, action in ACTIONS.items())


def test_a_valid_rule_gets_its_defaults():
    rule = validate_rule({"kind": "hold", "apis": ["EndTxn", "Produce"], "nodes": [2], "id": "r"})
    assert rule == {"id": "r", "kind": "hold", "apis": ["EndTxn", "Produce"], "nodes": [2], "client_prefix": "",
                    "count": 1, "total": 0, "delay_ms": 0, "release_after_ms": 0, "duplicate_after_ms": 0, "error": None,
                    "link": "client", "sources": [], "release_on": [], "answer_carries": None}
    assert set(ERROR_CODES) >= {"NOT_COORDINATOR", "CONCURRENT_TRANSACTIONS", "PRODUCER_FENCED"}


def _write_txn_markers_request(version: int) -> bytes:
    """WriteTxnMarkers as a coordinator sends it (common/message/WriteTxnMarkersRequest.json):
    one commit marker for two partitions of one topic."""
    marker = (Writer().int64(4242).int16(32767).int8(1).uvarint(2).compact_string("out").uvarint(3).int32(0)
              .int32(2).no_tagged_fields().int32(5))
    if version >= 2:
        marker.int8(2)
    marker.no_tagged_fields()
    return (Writer().int16(27).int16(version).int32(11).string("broker-3-txn-marker-sender").no_tagged_fields()
            .uvarint(2).raw(marker.bytes()).no_tagged_fields().bytes())


@pytest.mark.parametrize("version", [1, 2])
def test_a_transaction_marker_between_brokers_is_described(version):
    frame = _write_txn_markers_request(version)
    header = parse_request_header(frame)
    assert (header.api, header.client_id) == ("WriteTxnMarkers", "broker-3-txn-marker-sender")
    described = describe_request(frame, header)
    assert (described["producer_id"], described["producer_epoch"], described["committed"]) == (4242, 32767, True)
    assert described["markers"][0]["partitions"] == ["out-0", "out-2"]
    assert described["markers"][0]["coordinator_epoch"] == 5
    assert described["markers"][0].get("transaction_version") == (2 if version >= 2 else None)


def test_a_marker_answer_names_the_partition_that_refused_it():
    answer = (Writer().int32(11).no_tagged_fields().uvarint(2).int64(4242).uvarint(2).compact_string("out")
              .uvarint(3).int32(0).int16(0).no_tagged_fields().int32(2).int16(47).no_tagged_fields()
              .no_tagged_fields().no_tagged_fields().no_tagged_fields().bytes())
    header = parse_request_header(_write_txn_markers_request(1))
    assert parse_response(answer, header) == {"error": "INVALID_PRODUCER_EPOCH",
                                              "errors": {"out-0": "NONE", "out-2": "INVALID_PRODUCER_EPOCH"}}


def test_message_proxy_routes_for_clients_and_between_brokers():
    from kchaos.clusters.proxy.exchange import Route

    assert Route.parse("3=4000:4001") == Route("n3", 3, "client", None, 4000, 4001)
    assert Route.parse("1>3=4002:4003") == Route("n1>n3", 3, "inter-broker", 1, 4002, 4003)


def test_a_rule_with_a_total_affects_that_many_requests_over_every_client_id():
    """count bounds each client id; total bounds the rule (marker-hold-failover: the dead
    coordinator's marker held, the successor's, from another broker's client id, let through)."""
    from kchaos.protocol.api import RequestHeader
    from kchaos.clusters.proxy.exchange import Route
    from kchaos.clusters.proxy.rules import Rule

    def header(client: str) -> RequestHeader:
        return RequestHeader(API_KEYS["WriteTxnMarkers"], 1, 7, client, 0)

    route = Route("n2>n1", 1, "inter-broker", 2, 0, 0)
    spec = validate_rule({"kind": "hold", "apis": ["WriteTxnMarkers"], "link": "inter-broker", "id": "r", "total": 1})
    rule = Rule(spec, frozenset({API_KEYS["WriteTxnMarkers"]}))
    assert rule.matches(route, header("broker-2-txn-marker-sender"))
    assert not rule.matches(route, header("broker-3-txn-marker-sender"))
    per_client = Rule(validate_rule({**spec, "total": 0}), frozenset({API_KEYS["WriteTxnMarkers"]}))
    assert per_client.matches(route, header("broker-2-txn-marker-sender"))
    assert per_client.matches(route, header("broker-3-txn-marker-sender"))


def _txn_offset_commit_request(version: int) -> bytes:
    flexible = version >= 3
    topic_id = bytes(range(16))
    w = Writer().int16(28).int16(version).int32(9).string("kchaos-w1-producer")
    if flexible:
        w.no_tagged_fields()
    string(string(w, flexible, "tx-w1"), flexible, "kchaos-ctp").int64(2000).int16(3)
    if version >= 3:
        string(w.int32(9), flexible, "member-1")
        string(w, flexible, None)  # group instance id
    w.uvarint(2) if flexible else w.int32(1)
    w.raw(topic_id) if version >= 6 else string(w, flexible, "kchaos-input")
    w.uvarint(2) if flexible else w.int32(1)
    w.int32(7).int64(49)
    if version >= 2:
        w.int32(-1)
    string(w, flexible, "")
    if flexible:
        w.no_tagged_fields().no_tagged_fields().no_tagged_fields()
    return w.bytes()


@pytest.mark.parametrize("version", range(7))
def test_a_txn_offset_commit_names_its_offsets_in_every_version(version):
    """Kafka 4.4's clients send v6, which names the topic by id: read as a name, the uuid's first
    byte became a string length and the offsets were lost from the evidence."""
    frame = _txn_offset_commit_request(version)
    described = describe_request(frame, parse_request_header(frame))
    assert "parse_error" not in described
    assert (described["transactional_id"], described["producer_id"], described["producer_epoch"]) == ("tx-w1", 2000, 3)
    topic = {"topic_id": "AAECAwQFBgcICQoLDA0ODw"} if version >= 6 else {"topic": "kchaos-input"}
    assert described["offsets"] == [{**topic, "partition": 7, "offset": 49}]
    assert described.get("member_id") == ("member-1" if version >= 3 else None)


@pytest.mark.parametrize("version", [3, 6])
def test_a_txn_offset_commit_answer_names_each_partitions_error(version):
    """The answer to a late TxnOffsetCommit says whether the group took it (NONE) or refused it,
    and why (a stale member epoch, no ongoing transaction)."""
    frame = _txn_offset_commit_request(version)
    topic = bytes(range(16))
    w = Writer().int32(9).no_tagged_fields().int32(0).uvarint(2)
    w.raw(topic) if version >= 6 else w.compact_string("kchaos-input")
    w.uvarint(3).int32(7).int16(0).no_tagged_fields().int32(6).int16(113).no_tagged_fields()
    answer = parse_response(w.no_tagged_fields().no_tagged_fields().bytes(), parse_request_header(frame))
    name = "AAECAwQFBgcICQoLDA0ODw" if version >= 6 else "kchaos-input"
    assert answer == {"error": "STALE_MEMBER_EPOCH", "errors": {f"{name}-7": "NONE", f"{name}-6": "STALE_MEMBER_EPOCH"}}


def _write_share_state_request(version: int) -> bytes:
    topic = bytes(range(16))
    w = Writer().int16(85).int16(version).int32(12).string("broker-2-share-persister").no_tagged_fields()
    w.compact_string("kchaos-share").uvarint(2).raw(topic).uvarint(2)
    w.int32(1).int32(0).int32(7).int64(120)
    if version >= 1:
        w.int32(3)
    w.uvarint(3)
    for first, last, state, count in ((120, 121, 2, 1), (122, 122, 0, 2)):
        w.int64(first).int64(last).int8(state).int16(count).no_tagged_fields()
    return w.no_tagged_fields().no_tagged_fields().no_tagged_fields().bytes()


@pytest.mark.parametrize("version", [0, 1])
def test_a_share_state_write_between_brokers_is_described_with_its_leader_epoch(version):
    frame = _write_share_state_request(version)
    header = parse_request_header(frame)
    assert header.api == "WriteShareGroupState"
    described = describe_request(frame, header)
    assert (described["group_id"], described["partition"], described["leader_epoch"]) == ("kchaos-share", 1, 7)
    write = described["writes"][0]
    assert write["start_offset"] == 120 and write["batches"] == [[120, 121, 2, 1], [122, 122, 0, 2]]
    assert write.get("delivery_complete_count") == (3 if version >= 1 else None)


def test_a_share_state_write_answer_names_a_fenced_leader_epoch():
    answer = (Writer().int32(12).no_tagged_fields().uvarint(2).raw(bytes(range(16))).uvarint(2).int32(1).int16(74)
              .compact_string("stale").no_tagged_fields().no_tagged_fields().no_tagged_fields().bytes())
    header = parse_request_header(_write_share_state_request(0))
    parsed = parse_response(answer, header)
    assert parsed["error"] == "FENCED_LEADER_EPOCH" and list(parsed["errors"].values()) == ["FENCED_LEADER_EPOCH"]


def test_recorded_apis_need_the_local_message_proxy_and_known_names():
    """cluster.record_apis: a campaign's load turns the message proxy on; an unknown API name or a
    backend without the proxy is refused before anything starts."""
    from kchaos.clusters.spec import ClusterSpec
    from kchaos.errors import ConfigError
    from kchaos.harness.campaign import load_campaign

    campaign = load_campaign(None, ['cluster.record_apis=["StreamsGroupHeartbeat"]', "faults.enabled=false"])
    assert campaign.cluster.proxy_messages and campaign.cluster.record_apis == ("StreamsGroupHeartbeat",)
    with pytest.raises(ConfigError, match="apis must be a list of API names"):
        load_campaign(None, ['cluster.record_apis=["StreamsHeartbeat"]'])
    with pytest.raises(ValueError, match="record_apis needs the message proxy"):
        ClusterSpec(record_apis=("StreamsGroupHeartbeat",))


TOPIC_ID = bytes(range(16, 32))


def _share_fetch_request(version: int, acks: list[tuple[int, int, list[int]]]) -> bytes:
    """A share consumer's fetch of partitions 0 and 2 of one topic, acknowledging ``acks`` on 0."""
    w = Writer().int16(78).int16(version).int32(41).string("kchaos-w1").no_tagged_fields()
    w.compact_string("kchaos-share").compact_string("m-1").int32(5).int32(500).int32(1).int32(1 << 20)
    w.int32(500).int32(100)  # max records, batch size
    if version >= 2:
        w.int8(0).int8(0)
    w.uvarint(2).raw(TOPIC_ID).uvarint(3)
    for partition, batches in ((0, acks), (2, [])):
        w.int32(partition).uvarint(len(batches) + 1)
        for first, last, types in batches:
            w.int64(first).int64(last).uvarint(len(types) + 1)
            for t in types:
                w.int8(t)
            w.no_tagged_fields()
        w.no_tagged_fields()
    w.no_tagged_fields().uvarint(1)  # topics' tags, no forgotten topics
    return w.no_tagged_fields().bytes()


def _share_fetch_answer(version: int, partitions: list[tuple[int, int, int, bytes, list[tuple[int, int, int]]]]) -> bytes:
    """(partition, fetch error, acknowledge error, record bytes, acquired ranges) per partition."""
    w = Writer().int32(41).no_tagged_fields().int32(0).int16(0).compact_string(None)
    if version >= 1:
        w.int32(15000)
    w.uvarint(2).raw(TOPIC_ID).uvarint(len(partitions) + 1)
    for partition, error, ack_error, records, acquired in partitions:
        w.int32(partition).int16(error).compact_string(None).int16(ack_error).compact_string(None)
        w.int32(3).int32(2).no_tagged_fields()  # current leader: node 3, epoch 2
        w.uvarint(len(records) + 1).raw(records).uvarint(len(acquired) + 1)
        for first, last, count in acquired:
            w.int64(first).int64(last).int16(count).no_tagged_fields()
        w.no_tagged_fields()
    w.no_tagged_fields().uvarint(1)  # no node endpoints
    return w.no_tagged_fields().bytes()


@pytest.mark.parametrize("version", [1, 2])
def test_a_share_fetch_names_its_partitions_and_the_acknowledgements_it_carries(version):
    frame = _share_fetch_request(version, [(100, 104, [1]), (105, 106, [1, 2])])
    header = parse_request_header(frame)
    described = describe_request(frame, header)
    topic = Reader(TOPIC_ID).uuid()
    assert (described["member_id"], described["share_session_epoch"], described["max_records"]) == ("m-1", 5, 500)
    assert described["partitions"] == [f"{topic}-0", f"{topic}-2"]
    # one type for a range is kept as that type, mixed types as the list
    assert described["acknowledgements"] == {f"{topic}-0": [[100, 104, 1], [105, 106, [1, 2]]]}


@pytest.mark.parametrize("version", [1, 2])
def test_a_share_fetch_answer_names_what_was_acquired_and_what_failed(version):
    header = parse_request_header(_share_fetch_request(version, []))
    topic = Reader(TOPIC_ID).uuid()
    answer = parse_response(_share_fetch_answer(version, [
        (0, 0, 0, b"\x00" * 70, [(200, 209, 1), (215, 215, 3)]),  # the record bytes are skipped, not read
        (2, 6, 121, b"", []),  # NOT_LEADER_OR_FOLLOWER, and an acknowledgement refused: INVALID_RECORD_STATE
    ]), header)
    assert answer["error"] == "NOT_LEADER_OR_FOLLOWER" and answer["lock_timeout_ms"] == 15000
    assert answer["acquired_records"] == 11
    assert answer["partitions"][f"{topic}-0"] == {"error": "NONE", "leader": [3, 2],
                                                 "acquired": [[200, 209, 1], [215, 215, 3]], "acquired_records": 11}
    assert answer["partitions"][f"{topic}-2"]["ack_error"] == "INVALID_RECORD_STATE"


def test_an_empty_share_fetch_answer_is_a_fetch_that_found_nothing():
    header = parse_request_header(_share_fetch_request(1, []))
    answer = parse_response(_share_fetch_answer(1, [(0, 0, 0, b"", [])]), header)
    assert answer["error"] == "NONE" and answer["acquired_records"] == 0
    assert parse_response(_share_fetch_answer(1, [(0, 0, 0, b"", [])])[:-9], header) == {}  # cut short: unread


def _share_acknowledge_request(version: int) -> bytes:
    w = Writer().int16(79).int16(version).int32(43).string("kchaos-w1").no_tagged_fields()
    w.compact_string("kchaos-share").compact_string("m-1").int32(6)
    if version >= 2:
        w.int8(0)
    w.uvarint(2).raw(TOPIC_ID).uvarint(2).int32(0).uvarint(2)
    w.int64(282).int64(284).uvarint(4).int8(1).int8(1).int8(1).no_tagged_fields()
    return w.no_tagged_fields().no_tagged_fields().no_tagged_fields().bytes()


def _share_acknowledge_answer(version: int, top: int, partition: int) -> bytes:
    w = Writer().int32(43).no_tagged_fields().int32(0).int16(top).compact_string(None)
    if version >= 2:
        w.int32(15000)
    w.uvarint(2).raw(TOPIC_ID).uvarint(2).int32(0).int16(partition).compact_string(None)
    w.int32(1).int32(0).no_tagged_fields().no_tagged_fields().no_tagged_fields()
    return w.uvarint(1).no_tagged_fields().bytes()


@pytest.mark.parametrize("version", [1, 2])
def test_a_share_acknowledge_and_its_answer_read_back(version):
    """What a member acknowledged, and whether the leader took it: a refused acknowledgement
    (INVALID_RECORD_STATE: the record's lock expired and it went to another member) is told
    apart from one the leader took, and a top-level error (an unknown share session) from both."""
    frame = _share_acknowledge_request(version)
    header = parse_request_header(frame)
    topic = Reader(TOPIC_ID).uuid()
    described = describe_request(frame, header)
    assert (described["member_id"], described["share_session_epoch"]) == ("m-1", 6)
    assert described["acknowledgements"] == {f"{topic}-0": [[282, 284, 1]]}
    taken = parse_response(_share_acknowledge_answer(version, 0, 0), header)
    assert taken == {"error": "NONE", "errors": {f"{topic}-0": "NONE"}, "top_error": "NONE"}
    refused = parse_response(_share_acknowledge_answer(version, 0, 121), header)
    assert refused["error"] == "INVALID_RECORD_STATE" and refused["top_error"] == "NONE"
    lost = parse_response(_share_acknowledge_answer(version, 122, 0), header)
    assert lost["error"] == "SHARE_SESSION_NOT_FOUND"
