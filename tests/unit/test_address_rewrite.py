"""The front's rewriting of broker addresses, on responses encoded by hand from Kafka 4.4.0's
message schemas and on random responses encoded by kio (Kafka's schemas as Python, the test
extra's oracle): every address-carrying answer in every layout the front reads comes out with
the front's addresses and every other byte as the broker wrote it; what it cannot read is an
error, never passed on; ApiVersions is capped to what it reads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchaos.protocol.address_rewrite import (READABLE, RewriteError, cap_api_versions, carries_addresses,
                                             rewrite_response)
from kchaos.protocol.wire import Reader, Writer

FRONT = {1: 40001, 2: 40002, 3: 40003}


def advertise(node_id: int, host: str, port: int) -> tuple[str, int]:
    SEEN.append((node_id, host, port))
    return "127.0.0.1", FRONT[node_id]


SEEN: list = []


@pytest.fixture(autouse=True)
def _clear():
    SEEN.clear()


def s(w: Writer, text, flexible: bool) -> Writer:
    return w.compact_string(text) if flexible else w.string(text)


def arr(w: Writer, n: int, flexible: bool) -> Writer:
    return w.uvarint(n + 1) if flexible else w.int32(n)


def header(flexible: bool, correlation: int = 7) -> Writer:
    w = Writer().int32(correlation)
    return w.no_tagged_fields() if flexible else w


def metadata(version: int, brokers, tail: bytes = b"TOPICS-AND-MORE") -> bytes:
    flexible = version >= 9
    w = header(flexible)
    if version >= 3:
        w.int32(5)
    arr(w, len(brokers), flexible)
    for nid, host, port in brokers:
        s(w.int32(nid), host, flexible).int32(port)
        if version >= 1:
            s(w, "rack-a", flexible)
        if flexible:
            w.no_tagged_fields()
    return w.raw(tail).bytes()


def brokers_of(frame: bytes, version: int) -> list:
    flexible = version >= 9
    r = Reader(frame)
    r.int32()
    if flexible:
        r.tagged_fields()
    if version >= 3:
        r.int32()
    out = []
    for _ in range(r.uvarint() - 1 if flexible else r.int32()):
        nid = r.int32()
        host = r.compact_string() if flexible else r.string()
        port = r.int32()
        if version >= 1:
            assert (r.compact_string() if flexible else r.string()) == "rack-a"
        if flexible:
            r.tagged_fields()
        out.append((nid, host, port))
    assert r.rest() == b"TOPICS-AND-MORE"
    return out


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_brokers_are_the_fronts_in_every_version(version):
    brokers = [(1, "kafka-1.staging.internal", 9092), (2, "10.0.0.12", 9093), (3, "b3", 19092)]
    out = rewrite_response(3, version, metadata(version, brokers), advertise)
    assert brokers_of(out, version) == [(1, "127.0.0.1", 40001), (2, "127.0.0.1", 40002), (3, "127.0.0.1", 40003)]
    assert SEEN == brokers  # the front learns each broker's real address from the answer


@settings(max_examples=60, deadline=None)
@given(version=st.integers(0, 13), hosts=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=3),
       tail=st.binary(max_size=64))
def test_any_hosts_and_trailing_bytes_survive_a_metadata_rewrite(version, hosts, tail):
    brokers = [(i + 1, h, 9000 + i) for i, h in enumerate(hosts)]
    out = rewrite_response(3, version, metadata(version, brokers, b"TOPICS-AND-MORE" + tail), advertise)
    r_tail = out[-len(tail):] if tail else b""
    assert r_tail == tail
    assert brokers_of(out[:len(out) - len(tail)] if tail else out, version) == [
        (b[0], "127.0.0.1", FRONT[b[0]]) for b in brokers]


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_single_and_batched(version):
    flexible = version >= 3
    w = header(flexible)
    if version >= 4:
        w.int32(0).uvarint(3)  # two coordinators
        for key, nid, host in (("g1", 2, "b2"), ("tx-1", -1, "")):  # -1: not available yet, left alone
            w.compact_string(key).int32(nid).compact_string(host).int32(9092 if nid >= 0 else -1)
            w.int16(0 if nid >= 0 else 15).compact_string(None).no_tagged_fields()
        w.no_tagged_fields()
    else:
        if version >= 1:
            w.int32(0)
        w.int16(0)
        if version >= 1:
            s(w, None, flexible)
        s(w.int32(2), "b2", flexible).int32(9092)
        if flexible:
            w.no_tagged_fields()
    frame = w.bytes()
    out = rewrite_response(10, version, frame, advertise)
    assert SEEN == [(2, "b2", 9092)]
    assert b"b2" not in out and (b"\x00\x00\x9c\x42" in out)  # port 40002
    if version >= 4:
        assert out.endswith(Writer().compact_string("tx-1").int32(-1).compact_string("").int32(-1).int16(15)
                            .compact_string(None).no_tagged_fields().no_tagged_fields().bytes())


@pytest.mark.parametrize("version, endpoint_type, rewritten", [(0, None, True), (1, 1, True), (2, 1, True),
                                                                (1, 2, False)])
def test_describe_cluster_rewrites_brokers_not_controllers(version, endpoint_type, rewritten):
    w = header(True).int32(0).int16(0).compact_string(None)
    if version >= 1:
        w.int8(endpoint_type)
    w.compact_string("cluster-x").int32(1).uvarint(2)
    w.int32(1).compact_string("b1").int32(9092).compact_string(None)
    if version >= 2:
        w.int8(0)
    w.no_tagged_fields().int32(-2147483648).no_tagged_fields()
    frame = w.bytes()
    out = rewrite_response(60, version, frame, advertise)
    assert (out != frame) is rewritten and (b"b1" in out) is not rewritten
    assert out.endswith(b"\x80\x00\x00\x00\x00")


def produce(version: int, endpoints, other_tag: bytes | None = b"\x01\x02") -> bytes:
    w = header(True).uvarint(2)  # one topic
    if version >= 13:
        w.raw(bytes(range(16)))
    else:
        w.compact_string("out")
    w.uvarint(2).int32(0).int16(6).int64(-1).int64(-1).int64(0)  # NOT_LEADER_OR_FOLLOWER
    w.uvarint(2).int32(0).compact_string("batch 0").no_tagged_fields()  # a record error
    w.compact_string(None)
    w.uvarint(1).uvarint(0).uvarint(9).int32(2).int32(7).no_tagged_fields()  # current leader (tag 0)
    w.no_tagged_fields().int32(0)
    tags = {}
    if endpoints is not None:
        e = Writer().uvarint(len(endpoints) + 1)
        for nid, host, port in endpoints:
            e.int32(nid).compact_string(host).int32(port).compact_string(None).no_tagged_fields()
        tags[0] = e.bytes()
    if other_tag is not None:
        tags[5] = other_tag  # a tag from a later release: kept as it is
    w.uvarint(len(tags))
    for tag in sorted(tags):
        w.uvarint(tag).uvarint(len(tags[tag])).raw(tags[tag])
    return w.bytes()


@pytest.mark.parametrize("version", [10, 11, 12, 13])
def test_produce_node_endpoints_kip_951(version):
    frame = produce(version, [(2, "kafka-2.staging.internal", 9092)])
    out = rewrite_response(0, version, frame, advertise)
    assert b"staging" not in out and SEEN == [(2, "kafka-2.staging.internal", 9092)]
    assert out.endswith(b"\x05\x02\x01\x02")  # tag 5 kept
    # no endpoints tag: unchanged
    assert rewrite_response(0, version, produce(version, None), advertise) == produce(version, None)


def fetch(version: int, endpoints, records: bytes | None = b"RECORDBATCH" * 20) -> bytes:
    w = header(True).int32(0).int16(0).int32(99).uvarint(2).raw(bytes(16)).uvarint(3)
    for p in (0, 1):
        w.int32(p).int16(0 if p == 0 else 6).int64(10).int64(10).int64(0)
        w.uvarint(2).int64(1000).int64(3).no_tagged_fields()  # one aborted transaction
        w.int32(-1)
        if records is None or p == 1:
            w.uvarint(0)
        else:
            w.uvarint(len(records) + 1).raw(records)
        w.no_tagged_fields()
    w.no_tagged_fields()
    e = Writer().uvarint(len(endpoints) + 1)
    for nid, host, port in endpoints:
        e.int32(nid).compact_string(host).int32(port).compact_string("r").no_tagged_fields()
    return w.uvarint(1).uvarint(0).uvarint(len(e.bytes())).raw(e.bytes()).bytes()


@pytest.mark.parametrize("version", [16, 17, 18])
def test_fetch_node_endpoints_with_records_and_aborted_transactions(version):
    out = rewrite_response(1, version, fetch(version, [(1, "b1", 9092), (3, "b3", 9092)]), advertise)
    assert [n for n, _, _ in SEEN] == [1, 3]
    assert b"RECORDBATCH" * 20 in out and b"b1" not in out and b"b3" not in out
    assert not carries_addresses(1, 15) and rewrite_response(1, 15, b"anything", advertise) == b"anything"


@pytest.mark.parametrize("api, version", [(78, 1), (78, 2), (79, 1), (79, 2)])
def test_share_fetch_and_acknowledge_node_endpoints(api, version):
    w = header(True).int32(0).int16(0).compact_string(None)
    if api == 78 or version >= 2:
        w.int32(30000)
    w.uvarint(2).raw(bytes(16)).uvarint(2).int32(0).int16(0).compact_string(None)
    if api == 78:
        w.int16(0).compact_string(None)
    w.int32(2).int32(4).no_tagged_fields()  # current leader
    if api == 78:
        w.uvarint(5).raw(b"recs").uvarint(2).int64(0).int64(9).int16(1).no_tagged_fields()
    w.no_tagged_fields().no_tagged_fields()
    w.uvarint(2).int32(2).compact_string("b2").int32(9092).compact_string(None).no_tagged_fields()
    w.no_tagged_fields()
    out = rewrite_response(api, version, w.bytes(), advertise)
    assert SEEN == [(2, "b2", 9092)] and b"b2" not in out


def test_what_the_front_cannot_read_is_an_error_not_a_pass():
    with pytest.raises(RewriteError, match="beyond"):
        rewrite_response(3, 14, metadata(13, [(1, "b1", 9092)]), advertise)
    with pytest.raises(RewriteError):
        rewrite_response(3, 12, metadata(12, [(1, "b1", 9092)])[:20], advertise)
    with pytest.raises(RewriteError, match="after the tagged fields"):
        rewrite_response(0, 11, produce(11, [(1, "b1", 9092)]) + b"junk", advertise)


@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_api_versions_are_capped_to_what_the_front_reads(version):
    flexible = version >= 3
    w = Writer().int32(1).int16(0)
    apis = [(0, 3, 13), (1, 4, 19), (3, 0, 14), (18, 0, 4), (78, 0, 0), (79, 1, 3), (26, 0, 5)]
    arr(w, len(apis), flexible)
    for key, low, high in apis:
        w.int16(key).int16(low).int16(high)
        if flexible:
            w.no_tagged_fields()
    if version >= 1:
        w.int32(0)
    if flexible:
        w.uvarint(1).uvarint(1).uvarint(8).int64(42)  # finalized features epoch, kept
    out = Reader(cap_api_versions(w.bytes(), version))
    out.int32(), out.int16()
    got = {}
    for _ in range(out.uvarint() - 1 if flexible else out.int32()):
        key, low, high = out.int16(), out.int16(), out.int16()
        if flexible:
            out.tagged_fields()
        got[key] = (low, high)
    # Fetch 19 and Metadata 14 capped; ShareFetch v0 only: taken out; others as the broker said
    assert got == {0: (3, 13), 1: (4, 18), 3: (0, 13), 18: (0, 4), 79: (1, 2), 26: (0, 5)}
    assert READABLE[78] == (1, 2)
    if flexible:
        assert out.int32() == 0 and out.tagged_fields() == {1: (42).to_bytes(8, "big")}


# -- against an oracle: kio (the test extra), Kafka's message schemas as Python --------------------

KIO_RESPONSES = {  # api key -> (kio module, response class, versions the front reads that kio has)
    3: ("metadata", "MetadataResponse", range(0, 14)),
    10: ("find_coordinator", "FindCoordinatorResponse", range(0, 7)),
    60: ("describe_cluster", "DescribeClusterResponse", range(0, 3)),
    0: ("produce", "ProduceResponse", range(10, 14)),
    1: ("fetch", "FetchResponse", range(16, 19)),
    78: ("share_fetch", "ShareFetchResponse", range(1, 3)),
    79: ("share_acknowledge", "ShareAcknowledgeResponse", range(1, 3)),
}
CASES = [(api, v) for api, (_, _, versions) in KIO_RESPONSES.items() for v in versions]


def _kio_class(api: int, version: int):
    import importlib

    module, name, _ = KIO_RESPONSES[api]
    return getattr(importlib.import_module(f"kio.schema.{module}.v{version}.response"), name)


def _front_port(node_id: int) -> int:
    return 30000 + abs(int(node_id)) % 30000


def _in_utc(value):
    """``value`` with every timestamp as the same instant in UTC. The wire carries milliseconds
    since the epoch, no zone: kio reads a timestamp back in UTC, and Python's ``==`` between zones
    is False for a local time in a repeated hour (a daylight-saving fold, PEP 495), e.g. 00:00 on
    28 October 3128 in Atlantic/Azores, even though the instants are the same."""
    import dataclasses
    import datetime

    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.timezone.utc)
    if isinstance(value, tuple):
        return tuple(_in_utc(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _in_utc(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    return value


def _as_the_front_says(api: int, response):
    """What the client must read: every broker address the front's (a node id below 0, "none yet",
    is left alone), the rest untouched (timestamps as kio reads them: in UTC)."""
    import dataclasses

    response = _in_utc(response)

    def moved(endpoint):
        if endpoint.node_id < 0:
            return endpoint
        return dataclasses.replace(endpoint, host="127.0.0.1", port=type(endpoint.port)(_front_port(endpoint.node_id)))

    if api == 3:
        return dataclasses.replace(response, brokers=tuple(moved(b) for b in response.brokers))
    if api == 10:
        if hasattr(response, "coordinators"):
            return dataclasses.replace(response, coordinators=tuple(moved(c) for c in response.coordinators))
        return moved(response)
    if api == 60:
        if getattr(response, "endpoint_type", 1) != 1:
            return response
        return dataclasses.replace(response, brokers=tuple(
            b if b.broker_id < 0 else dataclasses.replace(b, host="127.0.0.1", port=type(b.port)(_front_port(b.broker_id)))
            for b in response.brokers))
    return dataclasses.replace(response, node_endpoints=tuple(moved(e) for e in response.node_endpoints))


@pytest.mark.parametrize("api, version", CASES, ids=[f"{KIO_RESPONSES[a][1]}-v{v}" for a, v in CASES])
def test_every_layout_against_kio_encoded_responses(api, version):
    """Random responses of each API and version, encoded by kio; after the rewrite, kio reads back
    exactly the original with the front's addresses."""
    from hypothesis import HealthCheck
    from kio.static.primitive import Records

    st.register_type_strategy(Records, st.binary(max_size=48).map(Records))  # the record batches: opaque here
    cls = _kio_class(api, version)

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(cls))
    def roundtrip(response):
        _kio_roundtrip(api, version, response)

    roundtrip()


def _kio_roundtrip(api: int, version: int, response) -> None:
    """``response`` encoded by kio, through the front, read back by kio: what the front says."""
    import io

    from kio.serial import entity_reader, entity_writer

    cls = _kio_class(api, version)
    flexible = cls.__flexible__
    body = io.BytesIO()
    entity_writer(cls)(body, response)
    frame = Writer().int32(9).raw(b"\x00" if flexible else b"").raw(body.getvalue()).bytes()
    out = rewrite_response(api, version, frame, lambda node, host, port: ("127.0.0.1", _front_port(node)))
    assert out[:4] == frame[:4]
    body_out = out[5 if flexible else 4:]
    read, size = entity_reader(cls)(body_out, 0)
    assert size == len(body_out)  # every byte read, nothing left over
    assert read == _as_the_front_says(api, response)


@pytest.mark.parametrize("version", range(10, 14))
@pytest.mark.parametrize("endpoints", [False, True])
def test_produce_answer_with_a_log_append_time_in_a_repeated_hour(version, endpoints):
    """The shape Hypothesis found (v10-v13): one topic, four partitions with CurrentLeader, one
    appended at 00:00 on 28 October 3128 in Atlantic/Azores, the hour that clocks repeat when summer
    time ends; kio reads it back in UTC. Without, with NodeEndpoints."""
    import datetime
    import importlib
    import uuid
    import zoneinfo

    from kio.schema.errors import ErrorCode

    mod = importlib.import_module(f"kio.schema.produce.v{version}.response")
    leader = mod.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    azores = datetime.datetime(3128, 10, 28, 0, 0, tzinfo=zoneinfo.ZoneInfo("Atlantic/Azores"))
    assert azores != azores.astimezone(datetime.timezone.utc)  # the fold: same instant, not ==
    partitions = tuple(mod.PartitionProduceResponse(
        index=0, error_code=ErrorCode.unknown_server_error, base_offset=0, log_append_time=t,
        log_start_offset=-1, record_errors=(), error_message=None, current_leader=leader)
        for t in (None, None, None, azores))
    topic = (mod.TopicProduceResponse(topic_id=uuid.UUID(int=7), partition_responses=partitions) if version >= 13
             else mod.TopicProduceResponse(name="", partition_responses=partitions))
    nodes = (mod.NodeEndpoint(node_id=2, host="broker-2", port=9092, rack=None),) if endpoints else ()
    _kio_roundtrip(0, version, mod.ProduceResponse(responses=(topic,), throttle_time=datetime.timedelta(0),
                                                   node_endpoints=nodes))
