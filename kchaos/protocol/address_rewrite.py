"""Broker addresses in Kafka responses, rewritten so that clients of a cluster kchaos did not start
keep talking to the front (the message proxy in front mode, clusters/proxy/front.py), never to a
broker directly.

Every response that carries a broker's host and port (../shared/design/reach.md, section 2):

=====================  ========  ===========================================================
API (key)              versions  where
=====================  ========  ===========================================================
Metadata (3)           0-13      ``Brokers``
FindCoordinator (10)   0-6       the coordinator (v0-3), ``Coordinators`` (v4+, KIP-699)
DescribeCluster (60)   0-2       ``Brokers`` when ``EndpointType`` is brokers (controllers pass)
Produce (0)            10-13     top-level tagged field 0, ``NodeEndpoints`` (KIP-951)
Fetch (1)              16-18     top-level tagged field 0, ``NodeEndpoints`` (KIP-951)
ShareFetch (78)        1-2       ``NodeEndpoints`` (KIP-932)
ShareAcknowledge (79)  1-2       ``NodeEndpoints`` (KIP-932)
=====================  ========  ===========================================================

Layouts from the message schemas of Kafka 4.4.0 (its generated ``*ResponseData`` classes). A
version above these is capped in the ApiVersions answer (:func:`cap_api_versions`), so a client
never uses a layout the front cannot read; the share APIs' early-access version 0 is taken out.
A response that does not parse is an error (the front closes that connection: a client that
reconnects asks again), never passed on with an address in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kchaos.protocol.wire import DecodeError, Reader, Writer

METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER, PRODUCE, FETCH, SHARE_FETCH, SHARE_ACK, API_VERSIONS = (
    3, 10, 60, 0, 1, 78, 79, 18)
#: API key -> (lowest, highest) version the front reads; ApiVersions is capped to these
READABLE: dict[int, tuple[int, int]] = {METADATA: (0, 13), FIND_COORDINATOR: (0, 6), DESCRIBE_CLUSTER: (0, 2),
                                        PRODUCE: (0, 13), FETCH: (0, 18), SHARE_FETCH: (1, 2), SHARE_ACK: (1, 2)}
#: first flexible version (compact strings, tagged fields) of each API the front reads
FLEXIBLE_FROM = {METADATA: 9, FIND_COORDINATOR: 3, DESCRIBE_CLUSTER: 0, PRODUCE: 9, FETCH: 12, SHARE_FETCH: 0,
                 SHARE_ACK: 0, API_VERSIONS: 3}

#: (node id, broker host, broker port) -> the (host, port) a client is told instead
Advertise = Callable[[int, str, int], tuple[str, int]]


class RewriteError(ValueError):
    pass


@dataclass
class _Endpoint:
    node_id: int
    host: str
    port: int
    at: int   # where its host field starts in the frame
    end: int  # where its port field ends


def carries_addresses(api_key: int, version: int) -> bool:
    return (api_key in (METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER, SHARE_FETCH, SHARE_ACK)
            or (api_key == PRODUCE and version >= 10) or (api_key == FETCH and version >= 16))


def rewrite_response(api_key: int, version: int, frame: bytes, advertise: Advertise) -> bytes:
    """``frame`` (a response without its size prefix) with every broker address replaced by what
    ``advertise`` says; unchanged when the API carries none."""
    if not carries_addresses(api_key, version):
        return frame
    low, high = READABLE[api_key]
    if not low <= version <= high:
        raise RewriteError(f"api {api_key} version {version} is beyond what the front reads ({low}-{high})")
    flexible = version >= FLEXIBLE_FROM[api_key]
    r = Reader(frame)
    try:
        r.int32()  # correlation id
        if flexible:
            _skip_tags(r)
        if api_key in (PRODUCE, FETCH):
            return _rewrite_tagged_endpoints(frame, r, api_key, version, advertise)
        return _splice(frame, _endpoints(r, api_key, version, flexible), flexible, advertise)
    except DecodeError as exc:
        raise RewriteError(f"api {api_key} v{version}: {exc}") from None


def _cs(r: Reader, flexible: bool) -> str | None:
    return r.compact_string() if flexible else r.string()


def _array(r: Reader, flexible: bool) -> int:
    return r.uvarint() - 1 if flexible else r.int32()


def _skip_tags(r: Reader) -> None:
    r.tagged_fields()


def _node(r: Reader, flexible: bool, node_id: int | None = None) -> _Endpoint:
    """node id (unless given), host, port: where the host and port lie."""
    nid = r.int32() if node_id is None else node_id
    at = r.pos
    host = _cs(r, flexible) or ""
    port = r.int32()
    return _Endpoint(nid, host, port, at, r.pos)


def _endpoints(r: Reader, api_key: int, version: int, flexible: bool) -> list[_Endpoint]:
    """Where the host and port of each broker lie in a Metadata, FindCoordinator, DescribeCluster,
    ShareFetch or ShareAcknowledge response (the reader is past the response header)."""
    out: list[_Endpoint] = []
    if api_key == METADATA:
        if version >= 3:
            r.int32()  # throttle
        for _ in range(_array(r, flexible)):
            out.append(_node(r, flexible))
            if version >= 1:
                _cs(r, flexible)  # rack
            if flexible:
                _skip_tags(r)
    elif api_key == FIND_COORDINATOR:
        if version >= 4:
            r.int32()  # throttle
            for _ in range(_array(r, flexible)):
                r.compact_string()  # key
                nid = r.int32()
                out.append(_node(r, flexible, node_id=nid))
                r.int16()
                r.compact_string()
                _skip_tags(r)
        else:
            if version >= 1:
                r.int32()  # throttle
            r.int16()  # error
            if version >= 1:
                _cs(r, flexible)  # error message
            out.append(_node(r, flexible))
    elif api_key == DESCRIBE_CLUSTER:
        r.int32(), r.int16(), r.compact_string()  # throttle, error, message
        endpoint_type = r.int8() if version >= 1 else 1
        r.compact_string(), r.int32()  # cluster id, controller id
        for _ in range(_array(r, True)):
            node = _node(r, True)
            r.compact_string()  # rack
            if version >= 2:
                r.int8()  # is fenced
            _skip_tags(r)
            if endpoint_type == 1:  # brokers; controllers' endpoints (KIP-919) are not the clients' path
                out.append(node)
    else:  # ShareFetch, ShareAcknowledge: the endpoints follow the responses
        r.int32(), r.int16(), r.compact_string()  # throttle, error, message
        if api_key == SHARE_FETCH or version >= 2:
            r.int32()  # acquisition lock timeout
        for _ in range(_array(r, True)):
            r._take(16)  # topic id
            for _ in range(_array(r, True)):
                r.int32(), r.int16(), r.compact_string()
                if api_key == SHARE_FETCH:
                    r.int16(), r.compact_string()  # acknowledge error
                r.int32(), r.int32()  # current leader
                _skip_tags(r)
                if api_key == SHARE_FETCH:
                    _skip_bytes(r)  # records
                    for _ in range(_array(r, True)):
                        r.int64(), r.int64(), r.int16()
                        _skip_tags(r)
                _skip_tags(r)
            _skip_tags(r)
        out += _node_endpoints(r)
    return out


def _node_endpoints(r: Reader) -> list[_Endpoint]:
    out = []
    for _ in range(_array(r, True)):
        out.append(_node(r, True))
        r.compact_string()
        _skip_tags(r)
    return out


def _skip_bytes(r: Reader) -> None:
    n = r.uvarint() - 1
    if n > 0:
        r._take(n)


def _splice(frame: bytes, endpoints: list[_Endpoint], flexible: bool, advertise: Advertise) -> bytes:
    parts, last = [], 0
    for ep in endpoints:
        if ep.node_id < 0:  # "no coordinator yet": nothing to reach
            continue
        host, port = advertise(ep.node_id, ep.host, ep.port)
        w = Writer()
        (w.compact_string(host) if flexible else w.string(host)).int32(port)
        parts += [frame[last:ep.at], w.bytes()]
        last = ep.end
    parts.append(frame[last:])
    return b"".join(parts)


def _rewrite_tagged_endpoints(frame: bytes, r: Reader, api_key: int, version: int, advertise: Advertise) -> bytes:
    """Produce v10+ and Fetch v16+: the endpoints are tagged field 0 of the top-level tagged fields,
    at the very end of the response; walk to it, rewrite it, keep every other tag as it was."""
    if api_key == PRODUCE:
        for _ in range(_array(r, True)):
            if version >= 13:
                r._take(16)
            else:
                r.compact_string()
            for _ in range(_array(r, True)):
                r.int32(), r.int16(), r.int64(), r.int64(), r.int64()
                for _ in range(_array(r, True)):
                    r.int32(), r.compact_string()
                    _skip_tags(r)
                r.compact_string()
                _skip_tags(r)
            _skip_tags(r)
        r.int32()  # throttle
    else:
        r.int32(), r.int16(), r.int32()  # throttle, error, session
        for _ in range(_array(r, True)):
            r._take(16)  # topic id (v13+)
            for _ in range(_array(r, True)):
                r.int32(), r.int16(), r.int64(), r.int64(), r.int64()
                for _ in range(_array(r, True)):  # aborted transactions (null: -1)
                    r.int64(), r.int64()
                    _skip_tags(r)
                r.int32()  # preferred read replica
                _skip_bytes(r)  # records
                _skip_tags(r)
            _skip_tags(r)
    start = r.pos
    tags = r.tagged_fields()
    if not r.done():
        raise RewriteError(f"api {api_key} v{version}: {len(frame) - r.pos} bytes after the tagged fields")
    if 0 not in tags:
        return frame
    inner = Reader(tags[0])
    endpoints = _node_endpoints(inner)
    tags[0] = _splice(tags[0], endpoints, True, advertise)
    w = Writer().uvarint(len(tags))
    for tag in sorted(tags):
        w.uvarint(tag).uvarint(len(tags[tag])).raw(tags[tag])
    return frame[:start] + w.bytes()


def cap_api_versions(frame: bytes, version: int) -> bytes:
    """An ApiVersions answer (response header v0 always) with each rewritten API capped to the
    versions the front reads; an API none of whose versions it reads is taken out."""
    flexible = version >= FLEXIBLE_FROM[API_VERSIONS]
    r = Reader(frame)
    try:
        r.int32()
        if r.int16() != 0:  # an error (an unsupported version): the client asks again, lower
            return frame
        at = r.pos
        kept = []
        for _ in range(_array(r, flexible)):
            key, low, high = r.int16(), r.int16(), r.int16()
            tags = r.data[r.pos:r.pos] if not flexible else _raw_tags(r)
            if key in READABLE:
                low, high = max(low, READABLE[key][0]), min(high, READABLE[key][1])
                if low > high:
                    continue
            kept.append((key, low, high, tags))
        end = r.pos
    except DecodeError:
        return frame
    w = Writer()
    w.uvarint(len(kept) + 1) if flexible else w.int32(len(kept))
    for key, low, high, tags in kept:
        w.int16(key).int16(low).int16(high).raw(tags)
    return frame[:at] + w.bytes() + frame[end:]


def _raw_tags(r: Reader) -> bytes:
    start = r.pos
    r.tagged_fields()
    return r.data[start:r.pos]
