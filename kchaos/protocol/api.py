"""The slice of Kafka's protocol the message proxy reads and writes.

Every request frame is ``int32 size`` + header + body. The header (v1, or v2 when the API
version is flexible) is ``api_key int16, api_version int16, correlation_id int32, client_id
nullable string`` (+ tagged fields in v2; the client id stays a classic string). A response
frame is ``int32 size`` + ``correlation_id`` (+ tagged fields when the request version is
flexible, except for ApiVersions) + body. Layouts come from the message schemas in
apache/kafka (``clients/src/main/resources/common/message``).

The proxy needs the header of every request (to match a fault), the producer id and epoch of
the transactional requests (the evidence a message fault records), the error code of a few
responses (what the broker answered to a late message), and, for the ``error`` fault, the
encoding of the transactional answers: one top-level error code (EndTxn, AddOffsetsToTxn,
InitProducerId), or the request's partitions echoed back, each with the error (Produce,
AddPartitionsToTxn, TxnOffsetCommit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kchaos.protocol.wire import DecodeError, Reader, Writer

#: API name -> key, for the APIs a message fault may aim at (and those seen most in the logs)
API_KEYS: dict[str, int] = {
    "Produce": 0, "Fetch": 1, "ListOffsets": 2, "Metadata": 3, "OffsetCommit": 8, "OffsetFetch": 9,
    "FindCoordinator": 10, "JoinGroup": 11, "Heartbeat": 12, "LeaveGroup": 13, "SyncGroup": 14,
    "ApiVersions": 18, "InitProducerId": 22, "AddPartitionsToTxn": 24, "AddOffsetsToTxn": 25,
    "EndTxn": 26, "WriteTxnMarkers": 27, "TxnOffsetCommit": 28, "DescribeCluster": 60, "DescribeTransactions": 65,
    "ConsumerGroupHeartbeat": 68,
    # KIP-932 share groups: the workers' requests, then the share partition leaders' persister
    # requests to the share coordinator (between brokers)
    "ShareGroupHeartbeat": 76, "ShareFetch": 78, "ShareAcknowledge": 79, "InitializeShareGroupState": 83,
    "ReadShareGroupState": 84, "WriteShareGroupState": 85,
    # KIP-1071's streams group: a Streams client's heartbeat carries its epoch and owned tasks,
    # the answer its new epoch and (only when the coordinator thinks they changed) its tasks
    "StreamsGroupHeartbeat": 88,
}
API_NAMES: dict[int, str] = {v: k for k, v in API_KEYS.items()}

#: first flexible version of each API's request (and response), from the schemas (KIP-932's are
#: flexible from v0, which only 4.0's early access spoke)
FLEXIBLE_FROM: dict[int, int] = {
    0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 18: 3, 22: 2, 24: 3, 25: 3,
    26: 3, 27: 1, 28: 3, 60: 0, 65: 0, 68: 0, 76: 0, 78: 0, 79: 0, 83: 0, 84: 0, 85: 0, 88: 0,
}

#: error names a message fault may answer with (Kafka's Errors enum)
ERROR_CODES: dict[str, int] = {
    "UNKNOWN_SERVER_ERROR": -1, "NOT_LEADER_OR_FOLLOWER": 6, "REQUEST_TIMED_OUT": 7,
    "NETWORK_EXCEPTION": 13, "COORDINATOR_LOAD_IN_PROGRESS": 14, "COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR": 16, "NOT_ENOUGH_REPLICAS": 19, "INVALID_PRODUCER_EPOCH": 47,
    "INVALID_TXN_STATE": 48, "INVALID_PRODUCER_ID_MAPPING": 49, "CONCURRENT_TRANSACTIONS": 51,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 45, "DUPLICATE_SEQUENCE_NUMBER": 46,
    "TRANSACTION_COORDINATOR_FENCED": 52, "UNKNOWN_PRODUCER_ID": 59, "PRODUCER_FENCED": 90,
    "TRANSACTION_ABORTABLE": 120,
    # how a group coordinator refuses a late TxnOffsetCommit
    "UNKNOWN_MEMBER_ID": 25, "ILLEGAL_GENERATION": 22, "FENCED_INSTANCE_ID": 82, "STALE_MEMBER_EPOCH": 113,
    "GROUP_ID_NOT_FOUND": 69, "REBALANCE_IN_PROGRESS": 27,
    # KIP-932's, as the share coordinator answers a stale state write
    "FENCED_LEADER_EPOCH": 74, "INVALID_RECORD_STATE": 121, "FENCED_STATE_EPOCH": 124,
}
#: error names only read in answers (a fault never answers with them): a share partition
#: leader's answers to ShareFetch and ShareAcknowledge (Kafka's Errors enum, read from 4.4.0's jar)
READ_ONLY_ERRORS: dict[str, int] = {
    "UNKNOWN_TOPIC_OR_PARTITION": 3, "LEADER_NOT_AVAILABLE": 5, "UNKNOWN_TOPIC_ID": 100,
    "SHARE_SESSION_NOT_FOUND": 122, "INVALID_SHARE_SESSION_EPOCH": 123, "SHARE_SESSION_LIMIT_REACHED": 133,
}
ERROR_NAMES: dict[int, str] = {0: "NONE", **{v: k for k, v in {**READ_ONLY_ERRORS, **ERROR_CODES}.items()}}

#: APIs whose response the proxy can forge (the ``error`` fault). EndTxn, AddOffsetsToTxn and
#: InitProducerId answer with one top-level error code; Produce, AddPartitionsToTxn and
#: TxnOffsetCommit answer per partition: the forged answer echoes the request's topics and
#: partitions, every one with the error (PER_PARTITION_FORGEABLE: the versions forged)
FORGEABLE_APIS: tuple[str, ...] = ("EndTxn", "AddOffsetsToTxn", "InitProducerId", "AddPartitionsToTxn",
                                   "TxnOffsetCommit", "Produce")
#: the versions of the per-partition answers kchaos can write, from Kafka's message schemas (a
#: later version's layout is unknown: that request is not forged, and passes). Produce: the
#: versions Kafka 4.x brokers accept, v13 naming topics by id; AddPartitionsToTxn: a client's
#: v0-3 and the brokers' batched v4-5 (KIP-890's verification, ``link = "inter-broker"``);
#: TxnOffsetCommit: v6 (Kafka 4.4's clients) names topics by id
PER_PARTITION_FORGEABLE: dict[str, range] = {"Produce": range(3, 14), "AddPartitionsToTxn": range(0, 6),
                                             "TxnOffsetCommit": range(0, 7)}


class NotForgeable(ValueError):
    """An answer the proxy cannot forge for this request: its API or version, a body that does
    not parse, or a request that gets no answer (a Produce with acks=0)."""


def is_flexible(api_key: int, api_version: int) -> bool:
    first = FLEXIBLE_FROM.get(api_key)
    return first is not None and api_version >= first


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_at: int  # offset of the body in the frame (after the header's tagged fields)

    @property
    def api(self) -> str:
        return API_NAMES.get(self.api_key, f"api-{self.api_key}")


def parse_request_header(frame: bytes) -> RequestHeader:
    """The header of a request frame (without its size prefix)."""
    r = Reader(frame)
    api_key, api_version, correlation_id = r.int16(), r.int16(), r.int32()
    client_id = r.string()
    # ApiVersions' request header is v2 from version 3, as for any flexible version; an
    # unknown API's flexibility is unknown, so its body is never read
    if is_flexible(api_key, api_version):
        r.tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id, r.pos)


def response_correlation_id(frame: bytes) -> int:
    return Reader(frame[:4]).int32()


def _string(r: Reader, flexible: bool) -> str | None:
    return r.compact_string() if flexible else r.string()


def _array_len(r: Reader, flexible: bool) -> int:
    return r.uvarint() - 1 if flexible else r.int32()


def _bytes_len(r: Reader, flexible: bool) -> int:
    return r.uvarint() - 1 if flexible else r.int32()


def _write_string(w: Writer, flexible: bool, value: str | None) -> Writer:
    return w.compact_string(value) if flexible else w.string(value)


def _write_array_len(w: Writer, flexible: bool, n: int) -> Writer:
    return w.uvarint(n + 1) if flexible else w.int32(n)


def _batch_producer(records: bytes) -> dict[str, Any]:
    """Producer id, epoch, base sequence and record count of the first record batch (magic 2)."""
    if len(records) < 61:
        return {}
    r = Reader(records)
    r.int64(), r.int32(), r.int32()  # base offset, batch length, partition leader epoch
    if r.int8() != 2:
        return {}
    r.int32()  # crc
    attributes = r.int16()
    r.int32(), r.int64(), r.int64()  # last offset delta, base and max timestamp
    pid, epoch, base_seq, count = r.int64(), r.int16(), r.int32(), r.int32()
    return {"producer_id": pid, "producer_epoch": epoch, "base_sequence": base_seq, "records": count,
            "transactional": bool(attributes & 0x10)}


def _topic_partitions(r: Reader, flexible: bool) -> list[str]:
    """A ``[]{topic, []int32 partitions}`` array (AddPartitionsToTxn v0-3, WriteTxnMarkers) as
    ``topic-partition`` names."""
    partitions: list[str] = []
    for _ in range(_array_len(r, flexible)):
        topic = _string(r, flexible)
        partitions += [f"{topic}-{r.int32()}" for _ in range(_array_len(r, flexible))]
        if flexible:
            r.tagged_fields()
    return partitions


def _owned(r: Reader, read_id: Callable[[], str | None]) -> list[str] | None:
    """A nullable ``[]{id, []int32 partitions}`` array of a group heartbeat as ``id-partition``
    names: KIP-1071's TaskIds (``read_id``: the subtopology's compact string) and KIP-848's
    TopicPartitions (the topic's uuid). None when null: for an answer, "unchanged"."""
    count = r.uvarint() - 1
    if count < 0:
        return None
    names: list[str] = []
    for _ in range(count):
        owner = read_id()
        names += [f"{owner}-{r.int32()}" for _ in range(r.uvarint() - 1)]
        r.tagged_fields()
    return sorted(names)


def _heartbeat_request_head(r: Reader) -> dict[str, Any]:
    """What KIP-848's and KIP-1071's group heartbeats begin with: group, member, member epoch."""
    return {"group_id": r.compact_string(), "member_id": r.compact_string(), "member_epoch": r.int32()}


def _heartbeat_answer_head(r: Reader) -> dict[str, Any]:
    """What both group heartbeats' answers begin with (after the header): error, member, epoch,
    and the heartbeat interval (skipped)."""
    r.int32()  # throttle
    code = r.int16()
    r.compact_string()  # error message
    head = {"error": ERROR_NAMES.get(code, str(code)), "member_id": r.compact_string(), "member_epoch": r.int32()}
    r.int32()  # heartbeat interval
    return head


def describe_request(frame: bytes, header: RequestHeader) -> dict[str, Any]:
    """What a transactional request says about its producer: transactional id, producer id and
    epoch, and what it does (commit or abort, group, partitions). Empty for other APIs; a body
    that does not parse gives ``{"parse_error": ...}`` rather than an exception, since the
    proxy forwards every frame whatever it can read of it."""
    flexible = is_flexible(header.api_key, header.api_version)
    r = Reader(frame)
    r.pos = header.body_at
    v = header.api_version
    try:
        if header.api_key == API_KEYS["EndTxn"]:
            return {"transactional_id": _string(r, flexible), "producer_id": r.int64(),
                    "producer_epoch": r.int16(), "committed": bool(r.int8())}
        if header.api_key == API_KEYS["AddOffsetsToTxn"]:
            return {"transactional_id": _string(r, flexible), "producer_id": r.int64(),
                    "producer_epoch": r.int16(), "group_id": _string(r, flexible)}
        if header.api_key == API_KEYS["InitProducerId"]:
            out: dict[str, Any] = {"transactional_id": _string(r, flexible), "transaction_timeout_ms": r.int32()}
            if v >= 3:
                out.update(producer_id=r.int64(), producer_epoch=r.int16())
            return out
        if header.api_key == API_KEYS["TxnOffsetCommit"]:
            out = {"transactional_id": _string(r, flexible), "group_id": _string(r, flexible),
                   "producer_id": r.int64(), "producer_epoch": r.int16()}
            if v >= 3:
                out["generation_id"] = r.int32()
                out["member_id"] = _string(r, flexible)
                _string(r, flexible)  # group instance id
            offsets = []
            for _ in range(_array_len(r, flexible)):
                # v6 (Kafka 4.4's clients) names the topic by its id instead of its name
                topic = {"topic_id": r.uuid()} if v >= 6 else {"topic": _string(r, flexible)}
                for _ in range(_array_len(r, flexible)):
                    partition, offset = r.int32(), r.int64()
                    if v >= 2:
                        r.int32()
                    _string(r, flexible)
                    if flexible:
                        r.tagged_fields()
                    offsets.append({**topic, "partition": partition, "offset": offset})
                if flexible:
                    r.tagged_fields()
            out["offsets"] = offsets
            return out
        if header.api_key == API_KEYS["WriteTxnMarkers"]:  # coordinator -> partition leader
            markers = []
            for _ in range(_array_len(r, flexible)):
                marker: dict[str, Any] = {"producer_id": r.int64(), "producer_epoch": r.int16(),
                                          "committed": bool(r.int8())}
                marker["partitions"] = _topic_partitions(r, flexible)
                marker["coordinator_epoch"] = r.int32()
                if v >= 2:
                    marker["transaction_version"] = r.int8()
                if flexible:
                    r.tagged_fields()
                markers.append(marker)
            first = markers[0] if markers else {}
            return {"producer_id": first.get("producer_id"), "producer_epoch": first.get("producer_epoch"),
                    "committed": first.get("committed"), "markers": markers}
        if header.api_key == API_KEYS["WriteShareGroupState"]:  # share partition leader -> share coordinator
            out = {"group_id": _string(r, flexible), "writes": []}
            for _ in range(_array_len(r, flexible)):
                topic_id = r.uuid()
                for _ in range(_array_len(r, flexible)):
                    write: dict[str, Any] = {"topic_id": topic_id, "partition": r.int32(), "state_epoch": r.int32(),
                                             "leader_epoch": r.int32(), "start_offset": r.int64()}
                    if v >= 1:
                        write["delivery_complete_count"] = r.int32()
                    batches = []
                    for _ in range(_array_len(r, flexible)):
                        batches.append([r.int64(), r.int64(), r.int8(), r.int16()])  # first, last, state, count
                        r.tagged_fields()
                    write["batches"] = batches[:20]
                    write["batch_count"] = len(batches)
                    r.tagged_fields()
                    out["writes"].append(write)
                r.tagged_fields()
            first = out["writes"][0] if out["writes"] else {}
            out.update(partition=first.get("partition"), leader_epoch=first.get("leader_epoch"))
            return out
        if header.api_key == API_KEYS["ShareFetch"]:  # share consumer -> share partition leader (flexible, v1+)
            out = {"group_id": r.compact_string(), "member_id": r.compact_string(), "share_session_epoch": r.int32(),
                   "max_wait_ms": r.int32()}
            r.int32(), r.int32()  # min and max bytes
            if v >= 1:
                out["max_records"] = r.int32()
                r.int32()  # batch size
            if v >= 2:
                r.int8(), r.int8()  # acquire mode, renew acknowledgement
            fetch, acks = [], {}
            for _ in range(r.uvarint() - 1):
                topic_id = r.uuid()
                for _ in range(r.uvarint() - 1):
                    name = f"{topic_id}-{r.int32()}"
                    if v == 0:
                        r.int32()  # partition max bytes
                    fetch.append(name)
                    _acknowledgement_batches(r, name, acks)  # piggybacked on the fetch
                    r.tagged_fields()
                r.tagged_fields()
            return {**out, "partitions": fetch, "acknowledgements": acks}
        if header.api_key == API_KEYS["ShareAcknowledge"]:  # share consumer -> share partition leader (v1+)
            out = {"group_id": r.compact_string(), "member_id": r.compact_string(), "share_session_epoch": r.int32()}
            if v >= 2:
                r.int8()  # renew acknowledgement
            acks = {}
            for _ in range(r.uvarint() - 1):
                topic_id = r.uuid()
                for _ in range(r.uvarint() - 1):
                    _acknowledgement_batches(r, f"{topic_id}-{r.int32()}", acks)
                    r.tagged_fields()
                r.tagged_fields()
            return {**out, "acknowledgements": acks}
        if header.api_key == API_KEYS["ConsumerGroupHeartbeat"]:
            out = _heartbeat_request_head(r)
            r.compact_string(), r.compact_string(), r.int32()  # instance id, rack id, rebalance timeout
            for _ in range(r.uvarint() - 1):  # subscribed topic names
                r.compact_string()
            if v >= 1:
                r.compact_string()  # subscribed topic regex
            r.compact_string()  # server assignor
            return {**out, "owned_partitions": _owned(r, r.uuid)}
        if header.api_key == API_KEYS["StreamsGroupHeartbeat"]:
            out = _heartbeat_request_head(r)
            r.int32()  # endpoint information epoch
            r.compact_string(), r.compact_string(), r.int32()  # instance id, rack id, rebalance timeout
            if r.int8() >= 0:  # a topology: only a joining member sends one; its owned tasks are not read
                return {**out, "topology": True}
            return {**out, "owned_active_tasks": _owned(r, r.compact_string)}
        if header.api_key == API_KEYS["AddPartitionsToTxn"] and v <= 3:
            out = {"transactional_id": _string(r, flexible), "producer_id": r.int64(), "producer_epoch": r.int16()}
            out["partitions"] = _topic_partitions(r, flexible)
            return out
        if header.api_key == API_KEYS["AddPartitionsToTxn"]:  # v4+: a partition leader's verification (flexible)
            transactions = []
            for _ in range(r.uvarint() - 1):
                transaction = {"transactional_id": r.compact_string(), "producer_id": r.int64(),
                               "producer_epoch": r.int16(), "verify_only": bool(r.int8()),
                               "partitions": _topic_partitions(r, True)}
                r.tagged_fields()
                transactions.append(transaction)
            first = transactions[0] if transactions else {}
            return {"transactional_id": first.get("transactional_id"), "producer_id": first.get("producer_id"),
                    "producer_epoch": first.get("producer_epoch"), "transactions": transactions}
        if header.api_key == API_KEYS["Produce"]:
            out = {"transactional_id": _string(r, flexible) if v >= 3 else None}
            out["acks"] = r.int16()
            r.int32()  # timeout
            batches = []
            for _ in range(_array_len(r, flexible)):
                topic = r.uuid() if v >= 13 else _string(r, flexible)
                for _ in range(_array_len(r, flexible)):
                    partition = r.int32()
                    size = _bytes_len(r, flexible)
                    records = r._take(size) if size > 0 else b""
                    if flexible:
                        r.tagged_fields()
                    batches.append({"topic": topic, "partition": partition, **_batch_producer(records)})
                if flexible:
                    r.tagged_fields()
            first = next((b for b in batches if "producer_id" in b), {})
            out.update(producer_id=first.get("producer_id"), producer_epoch=first.get("producer_epoch"),
                       batches=batches)
            return out
    except DecodeError as exc:
        return {"parse_error": str(exc)}
    return {}


def _partition_errors(r: Reader, flexible: bool, by_topic_id: bool) -> dict[str, str]:
    """A ``[]{topic (name or id), []{partition, error_code}}`` answer (WriteTxnMarkers' per
    marker, TxnOffsetCommit's) as ``topic-partition -> error name``."""
    errors = {}
    for _ in range(_array_len(r, flexible)):
        topic = r.uuid() if by_topic_id else _string(r, flexible)
        for _ in range(_array_len(r, flexible)):
            partition, code = r.int32(), r.int16()
            errors[f"{topic}-{partition}"] = ERROR_NAMES.get(code, str(code))
            if flexible:
                r.tagged_fields()
        if flexible:
            r.tagged_fields()
    return errors


def _answer_of(errors: dict[str, str]) -> dict[str, Any]:
    """A per-partition answer: its first error by name (NONE if every partition took it), and each."""
    failed = sorted({e for e in errors.values() if e != "NONE"})
    return {"error": failed[0] if failed else "NONE", "errors": errors}


def _acknowledgement_batches(r: Reader, partition: str, into: dict[str, list[Any]]) -> None:
    """A share request's ``[]{first, last, []int8 types}`` for ``partition``, appended to
    ``into[partition]`` as ``[first, last, type]`` (1 accept, 2 release, 3 reject, 0 gap), or
    the list of types when they differ within the range. Every range is kept: the records a
    member acquired bound them."""
    for _ in range(r.uvarint() - 1):
        first, last = r.int64(), r.int64()
        types = [r.int8() for _ in range(r.uvarint() - 1)]
        r.tagged_fields()
        into.setdefault(partition, []).append([first, last, types[0] if len(set(types)) == 1 else types])


def _share_acknowledge_answer(r: Reader, version: int) -> dict[str, Any]:
    """Whether a share partition leader took a member's acknowledgements: the top-level error
    (a share session it does not know, for one), and each partition's."""
    r.int32()  # throttle
    code = r.int16()
    r.compact_string()
    top = ERROR_NAMES.get(code, str(code))
    if version >= 2:
        r.int32()  # acquisition lock timeout
    errors = {}
    for _ in range(r.uvarint() - 1):
        topic_id = r.uuid()
        for _ in range(r.uvarint() - 1):
            name, partition_code = f"{topic_id}-{r.int32()}", r.int16()
            r.compact_string()
            r.int32(), r.int32(), r.tagged_fields()  # current leader id, epoch
            r.tagged_fields()
            errors[name] = ERROR_NAMES.get(partition_code, str(partition_code))
        r.tagged_fields()
    answer = _answer_of(errors)
    if top != "NONE":
        answer["error"] = top
    answer["top_error"] = top
    return answer


def _share_fetch_answer(r: Reader, version: int) -> dict[str, Any]:
    """What a share partition leader gave a share consumer: per partition, its fetch and
    acknowledgement errors, the leader it names, and the ranges of records it acquired for the
    member (first, last, delivery count); the record bytes are skipped. An answer with no
    acquired range and no error is a fetch that found nothing to give."""
    r.int32()  # throttle
    code = r.int16()
    r.compact_string()  # error message
    answer: dict[str, Any] = {"error": ERROR_NAMES.get(code, str(code))}
    if version >= 1:
        answer["lock_timeout_ms"] = r.int32()
    partitions: dict[str, Any] = {}
    for _ in range(r.uvarint() - 1):
        topic_id = r.uuid()
        for _ in range(r.uvarint() - 1):
            name = f"{topic_id}-{r.int32()}"
            fetch_error = r.int16()
            r.compact_string()
            ack_error = r.int16()
            r.compact_string()
            leader = [r.int32(), r.int32()]  # id, epoch
            r.tagged_fields()
            size = r.uvarint() - 1
            if size > 0:
                r._take(size)  # the records themselves: the workers' histories say what they were given
            acquired = []
            for _ in range(r.uvarint() - 1):
                acquired.append([r.int64(), r.int64(), r.int16()])
                r.tagged_fields()
            r.tagged_fields()
            part: dict[str, Any] = {"error": ERROR_NAMES.get(fetch_error, str(fetch_error)), "leader": leader,
                                    "acquired": acquired,
                                    "acquired_records": sum(last - first + 1 for first, last, _ in acquired)}
            if ack_error:
                part["ack_error"] = ERROR_NAMES.get(ack_error, str(ack_error))
            partitions[name] = part
        r.tagged_fields()
    answer["partitions"] = partitions
    answer["acquired_records"] = sum(p["acquired_records"] for p in partitions.values())
    if answer["error"] == "NONE":
        failed = sorted({p["error"] for p in partitions.values() if p["error"] != "NONE"})
        answer["error"] = failed[0] if failed else "NONE"
    return answer


def _produce_answer(r: Reader, version: int, flexible: bool) -> dict[str, Any]:
    """Each partition's error, and the first partition's topic, index and base offset (the
    offset a late batch was written at). Empty when no partition is answered."""
    errors: dict[str, str] = {}
    first: dict[str, Any] = {}
    for _ in range(_array_len(r, flexible)):
        topic = r.uuid() if version >= 13 else _string(r, flexible)
        for _ in range(_array_len(r, flexible)):
            partition, code, base_offset = r.int32(), r.int16(), r.int64()
            if version >= 2:
                r.int64()  # log append time
            if version >= 5:
                r.int64()  # log start offset
            if version >= 8:
                for _ in range(_array_len(r, flexible)):  # record errors
                    r.int32(), _string(r, flexible)
                    if flexible:
                        r.tagged_fields()
                _string(r, flexible)  # error message
            if flexible:
                r.tagged_fields()  # current leader (v10+)
            errors[f"{topic}-{partition}"] = ERROR_NAMES.get(code, str(code))
            first = first or {"topic": topic, "partition": partition, "base_offset": base_offset}
        if flexible:
            r.tagged_fields()
    return {**_answer_of(errors), **first} if first else {}


def parse_response(frame: bytes, header: RequestHeader) -> dict[str, Any]:
    """The broker's answer to a request, as far as the evidence needs it: the error code (for
    Produce the first partition's error and base offset, for InitProducerId the producer id and
    epoch granted, for TxnOffsetCommit and the per-partition APIs the first error and each
    partition's). Empty when not understood."""
    flexible = is_flexible(header.api_key, header.api_version)
    r = Reader(frame)
    try:
        r.int32()
        if flexible and header.api_key != API_KEYS["ApiVersions"]:
            r.tagged_fields()
        if header.api_key in (API_KEYS["EndTxn"], API_KEYS["AddOffsetsToTxn"], API_KEYS["InitProducerId"]):
            r.int32()  # throttle
            code = r.int16()
            if header.api_key == API_KEYS["InitProducerId"] and code == 0:  # the producer id and epoch granted
                return {"error": "NONE", "producer_id": r.int64(), "producer_epoch": r.int16()}
            return {"error": ERROR_NAMES.get(code, str(code))}
        if header.api_key == API_KEYS["WriteTxnMarkers"]:
            errors = {}
            for _ in range(_array_len(r, flexible)):
                r.int64()  # producer id
                errors.update(_partition_errors(r, flexible, by_topic_id=False))
                if flexible:
                    r.tagged_fields()
            return _answer_of(errors)
        if header.api_key == API_KEYS["TxnOffsetCommit"]:  # whether a late offset commit was taken
            r.int32()  # throttle
            return _answer_of(_partition_errors(r, flexible, by_topic_id=header.api_version >= 6))
        if header.api_key == API_KEYS["AddPartitionsToTxn"] and header.api_version <= 3:
            r.int32()  # throttle
            return _answer_of(_partition_errors(r, flexible, by_topic_id=False))
        if header.api_key == API_KEYS["AddPartitionsToTxn"]:  # v4+: per transaction, and a top-level error
            r.int32()  # throttle
            code = r.int16()
            by_transaction: dict[str, dict[str, str]] = {}
            for _ in range(r.uvarint() - 1):
                transactional_id = r.compact_string() or ""  # read before its errors
                by_transaction[transactional_id] = _partition_errors(r, True, by_topic_id=False)
                r.tagged_fields()
            answer = _answer_of({k: v for errors in by_transaction.values() for k, v in errors.items()})
            top = ERROR_NAMES.get(code, str(code))
            if top != "NONE":
                answer["error"] = top
            return {**answer, "top_error": top, "transactions": by_transaction}
        if header.api_key == API_KEYS["WriteShareGroupState"]:
            errors = {}
            for _ in range(_array_len(r, flexible)):
                topic_id = r.uuid()
                for _ in range(_array_len(r, flexible)):
                    partition, code = r.int32(), r.int16()
                    _string(r, flexible)  # error message
                    r.tagged_fields()
                    errors[f"{topic_id}-{partition}"] = ERROR_NAMES.get(code, str(code))
                r.tagged_fields()
            return _answer_of(errors)
        if header.api_key == API_KEYS["ShareFetch"]:
            return _share_fetch_answer(r, header.api_version)
        if header.api_key == API_KEYS["ShareAcknowledge"]:
            return _share_acknowledge_answer(r, header.api_version)
        if header.api_key == API_KEYS["ConsumerGroupHeartbeat"]:
            answer = _heartbeat_answer_head(r)
            # null: unchanged since the last answer (a full request always gets it)
            answer["assignment"] = _owned(r, r.uuid) if r.int8() >= 0 else None
            return answer
        if header.api_key == API_KEYS["StreamsGroupHeartbeat"]:
            answer = _heartbeat_answer_head(r)
            if header.api_version == 0:
                r.int32(), r.int32()  # acceptable recovery lag (int32 in v0), task offset interval
            else:
                r.int32(), r.int64()  # task offset interval, acceptable recovery lag (int64 from v1)
            for _ in range(r.uvarint() - 1):  # status
                r.int8(), r.compact_string(), r.tagged_fields()
            # null: the coordinator thinks the member's tasks did not change since its last answer
            answer["assignment"] = _owned(r, r.compact_string)
            return answer
        if header.api_key == API_KEYS["Produce"]:
            return _produce_answer(r, header.api_version, flexible)
    except DecodeError:
        return {}
    return {}


def expects_answer(frame: bytes, header: RequestHeader) -> bool:
    """Whether the broker answers this request: every request but a Produce with acks=0 (read
    cheaply: the proxy asks it of every Produce it forwards)."""
    if header.api_key != API_KEYS["Produce"]:
        return True
    r = Reader(frame)
    r.pos = header.body_at
    try:
        if header.api_version >= 3:
            _string(r, is_flexible(header.api_key, header.api_version))  # transactional id
        return r.int16() != 0
    except DecodeError:
        return True


def _grouped(pairs: list[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    """``(topic, partition)`` pairs as the request's topics, each with its partitions, in order."""
    topics: list[tuple[str, list[int]]] = []
    for topic, partition in pairs:
        if not topics or topics[-1][0] != topic:
            topics.append((topic, []))
        topics[-1][1].append(partition)
    return topics


def _names(names: list[str]) -> list[tuple[str, int]]:
    """``topic-partition`` names back as pairs (the partition is the part after the last dash)."""
    return [(name.rsplit("-", 1)[0], int(name.rsplit("-", 1)[1])) for name in names]


def _write_partition_errors(w: Writer, flexible: bool, topics: list[tuple[str, list[int]]], code: int,
                            write_topic: Callable[[Writer, str], Any]) -> None:
    """A ``[]{topic, []{partition, error_code}}`` answer: every partition with ``code``."""
    _write_array_len(w, flexible, len(topics))
    for topic, partitions in topics:
        write_topic(w, topic)
        _write_array_len(w, flexible, len(partitions))
        for partition in partitions:
            w.int32(partition).int16(code)
            if flexible:
                w.no_tagged_fields()
        if flexible:
            w.no_tagged_fields()


def _forged_partitions(w: Writer, frame: bytes, header: RequestHeader, code: int) -> None:
    """The body of a per-partition answer (after the header): the request's topics and
    partitions echoed back, every partition with ``code``."""
    api, v = header.api, header.api_version
    if v not in PER_PARTITION_FORGEABLE[api]:
        known = PER_PARTITION_FORGEABLE[api]
        raise NotForgeable(f"cannot forge a {api} v{v} response: kchaos knows its layout for "
                           f"v{known.start}-v{known.stop - 1}")
    described = describe_request(frame, header)
    if "parse_error" in described:
        raise NotForgeable(f"cannot forge a {api} v{v} response: the request did not parse "
                           f"({described['parse_error']})")
    flexible = is_flexible(header.api_key, v)

    def name(writer: Writer, topic: str) -> Writer:
        return _write_string(writer, flexible, topic)

    if api == "Produce":
        if described.get("acks") == 0:
            raise NotForgeable("cannot forge a Produce response: acks=0, the client expects no answer")
        topics = _grouped([(b["topic"], b["partition"]) for b in described["batches"]])
        _write_array_len(w, flexible, len(topics))
        for topic, partitions in topics:
            w.uuid(topic) if v >= 13 else name(w, topic)
            _write_array_len(w, flexible, len(partitions))
            for partition in partitions:
                w.int32(partition).int16(code).int64(-1).int64(-1)  # base offset, log append time
                if v >= 5:
                    w.int64(-1)  # log start offset
                if v >= 8:
                    _write_array_len(w, flexible, 0)  # record errors
                    _write_string(w, flexible, None)  # error message
                if flexible:
                    w.no_tagged_fields()  # current leader (v10+): unknown, as a broker's default (-1, -1)
            if flexible:
                w.no_tagged_fields()
        w.int32(0)  # throttle
    elif api == "TxnOffsetCommit":
        w.int32(0)  # throttle
        pairs = [(o.get("topic_id") or o.get("topic") or "", o["partition"]) for o in described["offsets"]]
        _write_partition_errors(w, flexible, _grouped(pairs), code, Writer.uuid if v >= 6 else name)
    elif v <= 3:  # AddPartitionsToTxn as a client sends it
        w.int32(0)  # throttle
        _write_partition_errors(w, flexible, _grouped(_names(described["partitions"])), code, name)
    else:  # AddPartitionsToTxn v4+, a partition leader's verification: the error per partition, none on top
        w.int32(0).int16(0)  # throttle, top-level error
        _write_array_len(w, True, len(described["transactions"]))
        for transaction in described["transactions"]:
            w.compact_string(transaction["transactional_id"])
            _write_partition_errors(w, True, _grouped(_names(transaction["partitions"])), code, name)
            w.no_tagged_fields()


def error_response(header: RequestHeader, error: str, frame: bytes | None = None) -> bytes:
    """A response frame body (without its size prefix) answering ``header``'s request with
    ``error``, as the broker would encode it for that API version. The per-partition answers
    need the request ``frame`` (its partitions are echoed back, each with ``error``). Raises
    :class:`NotForgeable` for a request that cannot be answered so (the proxy then lets it pass)."""
    api = header.api
    if api not in FORGEABLE_APIS:
        raise NotForgeable(f"cannot forge a {api} response; forgeable: {', '.join(FORGEABLE_APIS)}")
    flexible = is_flexible(header.api_key, header.api_version)
    code = ERROR_CODES[error] if error != "NONE" else 0
    w = Writer().int32(header.correlation_id)
    if flexible:
        w.no_tagged_fields()
    if api in PER_PARTITION_FORGEABLE:
        if frame is None:
            raise NotForgeable(f"cannot forge a {api} response without its request: its partitions are echoed")
        _forged_partitions(w, frame, header, code)
    else:
        w.int32(0).int16(code)  # throttle, error
        if api == "InitProducerId":
            w.int64(-1).int16(-1)
            if header.api_version >= 6:
                w.int64(-1).int16(-1)
        elif api == "EndTxn" and header.api_version >= 5:
            w.int64(-1).int16(-1)
    if flexible:
        w.no_tagged_fields()
    return w.bytes()
