"""InitProducerId straight to a transaction coordinator, over one connection, as fast as the
coordinator answers: how kchaos ages a transactional id's producer epoch towards the TV2
boundary (KIP-890: at ``Short.MAX_VALUE - 1`` the coordinator moves the id to a new producer id
with epoch 0) without running 32,767 transactions.

Each InitProducerId for an id with no open transaction bumps its epoch by one and writes one
``Empty`` record to ``__transaction_state``; at an exhausted epoch it rotates the producer id.
A client library cannot be used for this: every ``init_transactions`` costs a new producer
(connections, metadata), about a hundred times slower.

The encoding: InitProducerId v2 (the first flexible version; request header v2, response header
v1), as clients/src/main/resources/common/message/InitProducerId{Request,Response}.json
describe. The coordinator is found with FindCoordinator v3 (single key, flexible), which also
creates ``__transaction_state`` on a cluster that never had a transaction.
"""

from __future__ import annotations

import socket
import struct

from kchaos.protocol.api import API_KEYS, ERROR_NAMES
from kchaos.protocol.wire import Reader, Writer, read_frame

INIT_PRODUCER_ID_V2 = (API_KEYS["InitProducerId"], 2)
FIND_COORDINATOR_V3 = (API_KEYS["FindCoordinator"], 3)
DESCRIBE_TRANSACTIONS_V0 = (API_KEYS["DescribeTransactions"], 0)  # KIP-664
TRANSACTION_KEY = 1  # FindCoordinator's key type for a transactional id


def find_coordinator_request(correlation_id: int, transactional_id: str,
                             client_id: str = "kchaos-epoch-ageing") -> bytes:
    key, version = FIND_COORDINATOR_V3
    frame = (Writer().int16(key).int16(version).int32(correlation_id).string(client_id).no_tagged_fields()
             .compact_string(transactional_id).int8(TRANSACTION_KEY).no_tagged_fields().bytes())
    return struct.pack(">i", len(frame)) + frame


def parse_find_coordinator_response(frame: bytes) -> tuple[str, int, str, int]:
    """``(error name, node_id, host, port)`` of a v3 response."""
    r = Reader(frame)
    r.int32()  # correlation id
    r.tagged_fields()
    r.int32()  # throttle time
    error = r.int16()
    r.compact_string()  # error message
    node_id = r.int32()
    host = r.compact_string() or ""
    return ERROR_NAMES.get(error, str(error)), node_id, host, r.int32()


def find_coordinator(host: str, port: int, transactional_id: str, timeout_s: float = 30.0) -> tuple[str, int, str, int]:
    """Ask the broker at ``host:port`` which broker coordinates ``transactional_id``."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(find_coordinator_request(1, transactional_id))
        return parse_find_coordinator_response(read_frame(sock))


def init_producer_id_request(correlation_id: int, transactional_id: str, timeout_ms: int,
                             client_id: str = "kchaos-epoch-ageing") -> bytes:
    key, version = INIT_PRODUCER_ID_V2
    frame = (Writer().int16(key).int16(version).int32(correlation_id).string(client_id).no_tagged_fields()
             .compact_string(transactional_id).int32(timeout_ms).no_tagged_fields().bytes())
    return struct.pack(">i", len(frame)) + frame


def parse_init_producer_id_response(frame: bytes) -> tuple[int, str, int, int]:
    """``(correlation_id, error name, producer_id, producer_epoch)`` of a v2 response."""
    r = Reader(frame)
    correlation_id = r.int32()
    r.tagged_fields()
    r.int32()  # throttle time
    error = r.int16()
    producer_id, epoch = r.int64(), r.int16()
    return correlation_id, ERROR_NAMES.get(error, str(error)), producer_id, epoch


def describe_transactions_request(correlation_id: int, transactional_id: str,
                                  client_id: str = "kchaos-epoch-ageing") -> bytes:
    key, version = DESCRIBE_TRANSACTIONS_V0
    frame = (Writer().int16(key).int16(version).int32(correlation_id).string(client_id).no_tagged_fields()
             .uvarint(2).compact_string(transactional_id).no_tagged_fields().bytes())
    return struct.pack(">i", len(frame)) + frame


def parse_describe_transactions_response(frame: bytes) -> tuple[int, str, str, int, int]:
    """``(correlation_id, error name, state, producer_id, producer_epoch)`` of the first
    transactional id in a v0 response (DescribeTransactionsResponse.json)."""
    r = Reader(frame)
    correlation_id = r.int32()
    r.tagged_fields()
    r.int32()  # throttle time
    if r.uvarint() - 1 < 1:
        return correlation_id, "no transactional id in the answer", "", -1, -1
    error = r.int16()
    r.compact_string()  # transactional id
    state = r.compact_string() or ""
    r.int32(), r.int64()  # timeout, start time
    return correlation_id, ERROR_NAMES.get(error, str(error)), state, r.int64(), r.int16()


class CoordinatorConnection:
    """One connection to a transaction coordinator, one request in flight: InitProducerId after
    InitProducerId, or DescribeTransactions (what the coordinator holds for an id now)."""

    def __init__(self, host: str, port: int, timeout_s: float = 30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.correlation_id = 0

    def init(self, transactional_id: str, timeout_ms: int) -> tuple[str, int, int]:
        """``(error name, producer_id, producer_epoch)``; NONE on success."""
        self.correlation_id += 1
        self.sock.sendall(init_producer_id_request(self.correlation_id, transactional_id, timeout_ms))
        correlation_id, error, producer_id, epoch = parse_init_producer_id_response(read_frame(self.sock))
        if correlation_id != self.correlation_id:
            raise ConnectionError(f"response {correlation_id} to request {self.correlation_id}")
        return error, producer_id, epoch

    def describe(self, transactional_id: str) -> tuple[str, str, int, int]:
        """``(error name, state, producer_id, producer_epoch)`` the coordinator holds now."""
        self.correlation_id += 1
        self.sock.sendall(describe_transactions_request(self.correlation_id, transactional_id))
        correlation_id, error, state, producer_id, epoch = parse_describe_transactions_response(read_frame(self.sock))
        if correlation_id != self.correlation_id:
            raise ConnectionError(f"response {correlation_id} to request {self.correlation_id}")
        return error, state, producer_id, epoch

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "CoordinatorConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
