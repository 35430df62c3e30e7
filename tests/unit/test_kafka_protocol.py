"""The message proxy's protocol slice and rule checks, on hand-encoded frames (no broker)."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kchaos.clusters.proxy.rules import validate_rule
from kchaos.protocol.api import (API_KEYS, ERROR_CODES, FORGEABLE_APIS, PER_PARTITION_FORGEABLE, NotForgeable,
                                 describe_request, error_response, expects_answer, is_flexible, parse_request_header,
                                 parse_response)
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


#: every version of the forgeable APIs (their schemas' validVersions; Produce: the versions Kafka
#: 4.x brokers accept; TxnOffsetCommit v6: Kafka 4.4's, topics by id)
FORGEABLE_VERSIONS = {"EndTxn": range(0, 6), "AddOffsetsToTxn": range(0, 5), "InitProducerId": range(0, 7),
                      "AddPartitionsToTxn": range(0, 6), "TxnOffsetCommit": range(0, 7), "Produce": range(3, 14)}
TOP_LEVEL_FORGEABLE = ("EndTxn", "AddOffsetsToTxn", "InitProducerId")


def test_every_forgeable_api_has_its_versions():
    assert set(FORGEABLE_APIS) == set(FORGEABLE_VERSIONS)
    assert {api: FORGEABLE_VERSIONS[api] for api in PER_PARTITION_FORGEABLE} == PER_PARTITION_FORGEABLE
    assert set(FORGEABLE_APIS) - set(PER_PARTITION_FORGEABLE) == set(TOP_LEVEL_FORGEABLE)


@pytest.mark.parametrize("api, version", [(api, v) for api in TOP_LEVEL_FORGEABLE for v in FORGEABLE_VERSIONS[api]])
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


def _array(w: Writer, flexible: bool, n: int) -> Writer:
    return w.uvarint(n + 1) if flexible else w.int32(n)


#: a request's topics: (name, or printed uuid where the version names topics by id; its partitions)
Topics = list[tuple[str, list[int]]]


def produce_request(version: int, topics: Topics, acks: int = -1, corr: int = 9) -> bytes:
    """A transactional Produce of one record batch to each partition (ProduceRequest.json)."""
    flexible = version >= 9
    batch = record_batch(pid=42, epoch=3, base_sequence=0, count=2, transactional=True)

    def partition(w: Writer, index: int) -> None:
        w.int32(index)
        w.uvarint(len(batch) + 1) if flexible else w.int32(len(batch))
        w.raw(batch)

    w = string(Writer(), flexible, "tx-1").int16(acks).int32(30000)
    _topics_with(w, flexible, version >= 13, topics, partition)
    return request("Produce", version, corr, "kchaos-w1-producer", w.bytes())


def _topics_with(w: Writer, flexible: bool, by_id: bool, topics: Topics, partition: Any) -> None:
    """A request's ``[]{topic (name or id), []{partition ...}}`` and the request's last tags:
    ``partition(w, index)`` writes each partition's fields."""
    _array(w, flexible, len(topics))
    for topic, partitions in topics:
        w.uuid(topic) if by_id else string(w, flexible, topic)
        _array(w, flexible, len(partitions))
        for index in partitions:
            partition(w, index)
            if flexible:
                w.no_tagged_fields()
        if flexible:
            w.no_tagged_fields()
    if flexible:
        w.no_tagged_fields()


def _topic_array(w: Writer, flexible: bool, topics: Topics) -> Writer:
    """AddPartitionsToTxnTopic's ``[]{name, []int32}``."""
    _array(w, flexible, len(topics))
    for topic, partitions in topics:
        _array(string(w, flexible, topic), flexible, len(partitions))
        for partition in partitions:
            w.int32(partition)
        if flexible:
            w.no_tagged_fields()
    return w


def add_partitions_request(version: int, topics: Topics, corr: int = 9,
                           transactions: list[tuple[str, Topics]] | None = None) -> bytes:
    """A client's AddPartitionsToTxn (v0-3), or a partition leader's verification of
    ``transactions`` (v4+, AddPartitionsToTxnRequest.json)."""
    flexible = version >= 3
    w = Writer()
    if version <= 3:
        _topic_array(string(w, flexible, "tx-1").int64(42).int16(3), flexible, topics)
    else:
        transactions = transactions if transactions is not None else [("tx-1", topics)]
        w.uvarint(len(transactions) + 1)
        for txid, its_topics in transactions:
            _topic_array(w.compact_string(txid).int64(42).int16(3).int8(1), True, its_topics).no_tagged_fields()
    if flexible:
        w.no_tagged_fields()
    client = "kchaos-w1-producer" if version <= 3 else "broker-2-verification"
    return request("AddPartitionsToTxn", version, corr, client, w.bytes())


def txn_offset_commit_request(version: int, topics: Topics, corr: int = 9) -> bytes:
    """TxnOffsetCommit (TxnOffsetCommitRequest.json; v6 names topics by id)."""
    flexible = version >= 3
    w = string(string(Writer(), flexible, "tx-w1"), flexible, "kchaos-ctp").int64(2000).int16(3)
    if version >= 3:
        string(string(w.int32(9), flexible, "member-1"), flexible, None)  # member id, group instance id

    def partition(w: Writer, index: int) -> None:
        w.int32(index).int64(100 + index)
        if version >= 2:
            w.int32(-1)  # committed leader epoch
        string(w, flexible, "")

    _topics_with(w, flexible, version >= 6, topics, partition)
    return request("TxnOffsetCommit", version, corr, "kchaos-w1-producer", w.bytes())


#: (builder, whether the version names topics by id)
PER_PARTITION_REQUESTS = {
    "Produce": (produce_request, lambda v: v >= 13),
    "AddPartitionsToTxn": (add_partitions_request, lambda v: False),
    "TxnOffsetCommit": (txn_offset_commit_request, lambda v: v >= 6),
}
TOPIC_IDS = [Reader(bytes([i] * 16)).uuid() for i in range(1, 4)]
PER_PARTITION_CASES = [(api, v) for api in PER_PARTITION_FORGEABLE for v in FORGEABLE_VERSIONS[api]]


def _kio_answer(api: str, version: int, response: bytes) -> Any:
    """The forged answer as kio (Kafka's schemas, generated) reads it: every byte, nothing left."""
    import importlib

    from kio.serial import entity_reader

    module = importlib.import_module(f"kio.schema.{_KIO_MODULES[api]}.v{version}.response")
    cls = getattr(module, f"{api}Response")
    body = response[5 if cls.__flexible__ else 4:]  # correlation id, (the header's tags)
    read, size = entity_reader(cls)(body, 0)
    assert size == len(body)
    return read


_KIO_MODULES = {"Produce": "produce", "AddPartitionsToTxn": "add_partitions_to_txn",
                "TxnOffsetCommit": "txn_offset_commit"}


def _kio_partition_errors(api: str, version: int, answer: Any) -> dict[str, int]:
    """``topic-partition -> error code`` from kio's reading of an answer."""
    def topic_of(t: Any) -> str:
        raw = getattr(t, "topic_id", None)
        return Reader(raw.bytes).uuid() if raw is not None else t.name

    if api == "Produce":
        return {f"{topic_of(t)}-{p.index}": p.error_code.value for t in answer.responses for p in t.partition_responses}
    if api == "TxnOffsetCommit":
        return {f"{topic_of(t)}-{p.partition_index}": p.error_code.value for t in answer.topics for p in t.partitions}
    results = (answer.results_by_topic_v3_and_below if version <= 3
               else [t for r in answer.results_by_transaction for t in r.topic_results])
    return {f"{t.name}-{p.partition_index}": p.partition_error_code.value
            for t in results for p in t.results_by_partition}


@pytest.mark.parametrize("api, version", PER_PARTITION_CASES)
def test_forged_per_partition_answers_echo_every_partition_in_every_version(api, version):
    """Two topics (three partitions): the forged answer names each, with the error, and reads back
    with parse_response and with kio (Kafka's own schemas) where kio knows the version."""
    build, by_id = PER_PARTITION_REQUESTS[api]
    names = TOPIC_IDS[:2] if by_id(version) else ["kchaos-output", "kchaos-output-b"]
    topics = [(names[0], [0, 5]), (names[1], [2])]
    frame = build(version, topics, corr=4321)
    header = parse_request_header(frame)
    response = error_response(header, "NOT_LEADER_OR_FOLLOWER", frame)
    assert Reader(response).int32() == 4321
    answer = parse_response(response, header)
    expected = {f"{names[0]}-0": "NOT_LEADER_OR_FOLLOWER", f"{names[0]}-5": "NOT_LEADER_OR_FOLLOWER",
                f"{names[1]}-2": "NOT_LEADER_OR_FOLLOWER"}
    assert answer["error"] == "NOT_LEADER_OR_FOLLOWER" and answer["errors"] == expected
    if api == "Produce":
        assert (answer["topic"], answer["partition"], answer["base_offset"]) == (names[0], 0, -1)
    kio_versions = {"TxnOffsetCommit": range(0, 6)}.get(api, FORGEABLE_VERSIONS[api])
    if version in kio_versions:
        kio_answer = _kio_answer(api, version, response)
        assert _kio_partition_errors(api, version, kio_answer) == {k: 6 for k in expected}
        if api == "Produce":
            partition = kio_answer.responses[0].partition_responses[0]
            assert partition.base_offset == -1 and partition.log_append_time is None  # -1: none
            if version >= 5:
                assert partition.log_start_offset == -1
            if version >= 8:
                assert (partition.record_errors, partition.error_message) == ((), None)
            if version >= 10:
                assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (-1, -1)
                assert kio_answer.node_endpoints == ()
        if api == "AddPartitionsToTxn" and version >= 4:
            assert kio_answer.error_code.value == 0
            assert [r.transactional_id for r in kio_answer.results_by_transaction] == ["tx-1"]


def test_kio_knows_no_version_of_a_per_partition_api_that_kchaos_cannot_forge():
    """A new version in Kafka's schemas (kio's next release) must be looked at: its layout may differ."""
    import importlib
    import pkgutil

    for api, module in _KIO_MODULES.items():
        package = importlib.import_module(f"kio.schema.{module}")
        versions = {int(m.name[1:]) for m in pkgutil.iter_modules(package.__path__) if m.name[1:].isdigit()}
        assert versions <= set(PER_PARTITION_FORGEABLE[api]), (api, sorted(versions))


_topic_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=40)
_partitions = st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=6, unique=True)


@given(case=st.sampled_from(PER_PARTITION_CASES), data=st.data(),
       error=st.sampled_from(sorted(ERROR_CODES)), corr=st.integers(0, 2**31 - 1))
def test_any_topics_and_partitions_are_echoed_with_the_error(case, data, error, corr):
    api, version = case
    build, by_id = PER_PARTITION_REQUESTS[api]
    topic = st.binary(min_size=16, max_size=16).map(lambda raw: Reader(raw).uuid()) if by_id(version) else _topic_names
    topics = data.draw(st.lists(st.tuples(topic, _partitions), min_size=1, max_size=4, unique_by=lambda t: t[0]))
    frame = build(version, topics, corr=corr)
    header = parse_request_header(frame)
    response = error_response(header, error, frame)
    answer = parse_response(response, header)
    assert Reader(response).int32() == corr
    assert answer["errors"] == {f"{t}-{p}": error for t, partitions in topics for p in partitions}
    assert answer["error"] == error


def test_a_verification_between_brokers_is_answered_per_transaction():
    """AddPartitionsToTxn v4+ (a partition leader asks the coordinators, KIP-890): each
    transaction's partitions get the error; the top-level error stays NONE."""
    frame = add_partitions_request(5, [], transactions=[("tx-1", [("out", [0, 1])]), ("tx-2", [("out", [1])])])
    header = parse_request_header(frame)
    described = describe_request(frame, header)
    assert [t["transactional_id"] for t in described["transactions"]] == ["tx-1", "tx-2"]
    assert described["transactions"][1]["partitions"] == ["out-1"] and described["transactions"][0]["verify_only"]
    answer = parse_response(error_response(header, "CONCURRENT_TRANSACTIONS", frame), header)
    assert answer["top_error"] == "NONE" and answer["error"] == "CONCURRENT_TRANSACTIONS"
    assert answer["transactions"] == {"tx-1": {"out-0": "CONCURRENT_TRANSACTIONS", "out-1": "CONCURRENT_TRANSACTIONS"},
                                      "tx-2": {"out-1": "CONCURRENT_TRANSACTIONS"}}


def test_a_produce_with_acks_0_is_not_forged_it_gets_no_answer():
    frame = produce_request(9, [("out", [0])], acks=0)
    header = parse_request_header(frame)
    assert not expects_answer(frame, header)
    assert expects_answer(produce_request(9, [("out", [0])], acks=1), header)
    end_txn = request("EndTxn", 3, 1, "c", b"")
    assert expects_answer(end_txn, parse_request_header(end_txn))
    with pytest.raises(NotForgeable, match="acks=0, the client expects no answer"):
        error_response(header, "NOT_LEADER_OR_FOLLOWER", frame)


@pytest.mark.parametrize("frame, message", [
    (produce_request(9, [("out", [0])])[:-20], "the request did not parse"),
    (request("Produce", 14, 1, "c", b""), "knows its layout for v3-v13"),
    (request("Produce", 2, 1, "c", b""), "knows its layout for v3-v13"),
    (request("Fetch", 12, 1, "c", b""), "cannot forge a Fetch response"),
])
def test_a_request_that_cannot_be_answered_is_refused_with_the_reason(frame, message):
    with pytest.raises(NotForgeable, match=message):
        error_response(parse_request_header(frame), "NOT_LEADER_OR_FOLLOWER", frame)


def test_a_per_partition_answer_needs_its_request():
    frame = produce_request(9, [("out", [0])])
    with pytest.raises(NotForgeable, match="without its request"):
        error_response(parse_request_header(frame), "NOT_LEADER_OR_FOLLOWER")


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


@pytest.mark.parametrize("body, message", [
    ({"kind": "stall", "apis": ["EndTxn"]}, "kind must be one of"),
    ({"kind": "hold", "apis": []}, "apis must be a list of API names"),
    ({"kind": "hold", "apis": ["EndTransaction"]}, "got \\['EndTransaction'\\]"),
    ({"kind": "error", "apis": ["EndTxn"], "error": "NOPE"}, "error must be one of"),
    ({"kind": "error", "apis": ["Fetch"], "error": "NOT_LEADER_OR_FOLLOWER"}, "forge an error response for EndTxn"),
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


class _FakeProxy:
    def __init__(self) -> None:
        self.logged: list[dict[str, Any]] = []

    def log(self, event: dict[str, Any]) -> None:
        self.logged.append(event)


class _FakeWriter:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)


def _connection():
    """A message-proxy connection (clusters/proxy/server.py) on fake streams: what it sends the
    broker and the client is collected, nothing listens."""
    from kchaos.clusters.proxy.exchange import Route
    from kchaos.clusters.proxy.server import Connection

    return Connection(_FakeProxy(), Route("n1", 1, "client", None, 0, 0), None, _FakeWriter(), None,  # type: ignore[arg-type]
                      _FakeWriter())


def _taken_by_an_error_rule(conn, frame: bytes, error: str):
    from kchaos.clusters.proxy.filters import Taken
    from kchaos.clusters.proxy.rules import Rule

    header = parse_request_header(frame)
    rule = Rule(validate_rule({"kind": "error", "apis": [header.api], "error": error, "id": "r"}),
                frozenset({header.api_key}))
    assert rule.matches(conn.route, header)
    event = {"api": header.api, "action": f"answered {error}"}
    return rule, Taken(rule, frame, header, event, [{"rule": "watch", "action": "observed"}])


def test_the_proxy_answers_a_produce_with_every_partition_in_error():
    from kchaos.clusters.proxy.filters import ACTIONS

    conn = _connection()
    frame = produce_request(11, [("out", [0, 1])], corr=77)
    rule, taken = _taken_by_an_error_rule(conn, frame, "NOT_LEADER_OR_FOLLOWER")
    assert ACTIONS["error"].answers_itself(conn, taken)
    assert conn.uwriter.written == []  # never reaches the broker
    [sent] = conn.cwriter.written
    answer = parse_response(sent[4:], taken.header)
    assert Reader(sent[4:]).int32() == 77
    assert answer["errors"] == {"out-0": "NOT_LEADER_OR_FOLLOWER", "out-1": "NOT_LEADER_OR_FOLLOWER"}
    assert rule.events == [taken.event] and rule.hits == {"kchaos-w1-producer": 1}
    assert taken.observed[0]["answer"] == {"error": "NOT_LEADER_OR_FOLLOWER", "forged": True}


def test_the_proxy_lets_a_produce_with_acks_0_pass_uncounted():
    """No answer to forge: it goes to the broker, nothing waits for an answer, the rule's count
    is left for a request it can answer, and the event says why."""
    from kchaos.clusters.proxy.filters import ACTIONS

    conn = _connection()
    frame = produce_request(9, [("out", [0])], acks=0)
    rule, taken = _taken_by_an_error_rule(conn, frame, "NOT_LEADER_OR_FOLLOWER")
    assert ACTIONS["error"].answers_itself(conn, taken)
    assert conn.cwriter.written == [] and len(conn.uwriter.written) == 1
    assert not conn.pending
    assert rule.hits == {"kchaos-w1-producer": 0}
    assert taken.event["action"] == "passed" and "acks=0" in taken.event["refused"]
    assert taken.observed[0]["answer"] is None and taken.observed[0]["answer_expected"] is False
    assert rule.matches(conn.route, taken.header)  # still one to affect


def test_a_request_the_proxy_forwards_waits_for_its_answer_unless_acks_is_0():
    conn = _connection()
    for acks in (-1, 1, 0):
        frame = produce_request(9, [("out", [0])], acks=acks)
        conn.forward(frame, parse_request_header(frame), [])
    assert len(conn.uwriter.written) == 3 and len(conn.pending) == 2
