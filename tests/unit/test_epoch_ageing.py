"""Epoch ageing on hand-made data: the InitProducerId and FindCoordinator frames read back by the
message proxy's own decoder (kchaos/protocol/api.py, written from the schemas separately),
hand-encoded responses parsed, the staggered targets, and which workloads may be aged."""

from __future__ import annotations

import struct

import pytest
from pydantic import ValidationError

from kchaos.protocol.api import describe_request, error_response, parse_request_header
from kchaos.protocol.raw_init import (find_coordinator_request, init_producer_id_request, parse_find_coordinator_response,
                                      parse_init_producer_id_response)
from kchaos.protocol.wire import Writer
from kchaos.workloads.epoch_ageing import EXHAUSTED_EPOCH, staggered_targets, target_epoch
from kchaos.workloads.spec import WorkloadSpec


def _body(frame: bytes) -> bytes:
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    return frame[4:]


def test_the_init_producer_id_frame_reads_back_through_the_proxys_decoder():
    body = _body(init_producer_id_request(9, "kchaos-ab-w0", 6000))
    header = parse_request_header(body)
    assert (header.api, header.api_version, header.correlation_id, header.client_id) == (
        "InitProducerId", 2, 9, "kchaos-epoch-ageing")
    assert describe_request(body, header) == {"transactional_id": "kchaos-ab-w0", "transaction_timeout_ms": 6000}


def test_an_init_producer_id_response_gives_the_producer_id_and_epoch():
    answer = (Writer().int32(9).no_tagged_fields().int32(0).int16(0).int64(4242).int16(32706)
              .no_tagged_fields().bytes())
    assert parse_init_producer_id_response(answer) == (9, "NONE", 4242, 32706)
    # an error response, as the proxy forges one for the same request version
    header = parse_request_header(_body(init_producer_id_request(3, "t", 1000)))
    assert parse_init_producer_id_response(error_response(header, "CONCURRENT_TRANSACTIONS")) == (
        3, "CONCURRENT_TRANSACTIONS", -1, -1)


def test_find_coordinator_asks_for_a_transactional_id_and_reads_the_node():
    body = _body(find_coordinator_request(1, "kchaos-ab-w1"))
    header = parse_request_header(body)
    assert (header.api, header.api_version) == ("FindCoordinator", 3)
    tail = body[header.body_at:]
    assert tail == Writer().compact_string("kchaos-ab-w1").int8(1).no_tagged_fields().bytes()  # key type 1: transaction
    answer = (Writer().int32(1).no_tagged_fields().int32(0).int16(0).compact_string(None).int32(3)
              .compact_string("127.0.0.1").int32(46393).no_tagged_fields().bytes())
    assert parse_find_coordinator_response(answer) == ("NONE", 3, "127.0.0.1", 46393)
    refused = (Writer().int32(1).no_tagged_fields().int32(0).int16(15).compact_string("loading").int32(-1)
               .compact_string("").int32(-1).no_tagged_fields().bytes())
    assert parse_find_coordinator_response(refused)[0] == "COORDINATOR_NOT_AVAILABLE"


def test_ids_are_left_one_two_three_times_the_bumps_so_they_cross_one_after_another():
    assert target_epoch(60) == EXHAUSTED_EPOCH - 60 == 32706
    assert staggered_targets(3, 60) == [32706, 32646, 32586]
    assert staggered_targets(2, 0) == [EXHAUSTED_EPOCH, EXHAUSTED_EPOCH]  # at the boundary: the first end rotates
    assert staggered_targets(3, 20_000) == [12766, 0, 0]  # never below epoch 0


def test_the_aged_ids_are_the_ones_the_workers_use():
    spec = WorkloadSpec(workers=2, epochs_before_rollover=60)
    assert spec.transactional_ids("kchaos-ab") == ["kchaos-ab-w0", "kchaos-ab-w1"]
    per_partition = WorkloadSpec(input_partitions=2, transactional_id_strategy="per-partition", input_topic="in")
    assert per_partition.transactional_ids("p") == ["p-in-0", "p-in-1"]


@pytest.mark.parametrize("fields", [
    {"client": "streams"}, {"kind": "share"}, {"delivery": "at-least-once"}, {"external_command": ["app"]},
])
def test_only_kchaos_own_transactional_workers_can_be_aged(fields):
    with pytest.raises(ValidationError, match="epochs_before_rollover ages kchaos' own workers"):
        WorkloadSpec(epochs_before_rollover=60, **fields)


def test_an_epoch_jump_takes_whole_numbers_in_range():
    from kchaos.faults.kinds import KINDS

    kind = KINDS["epoch-jump"]
    assert kind.check_params({}).epochs_before_rollover == 1 and kind.check_params({}).catch_within_ms == 20_000
    for bad in ({"epochs_before_rollover": 1.5}, {"epochs_before_rollover": 40_000.0}, {"catch_within_ms": -1.0}):
        with pytest.raises(ValueError, match="must be a whole number"):
            kind.check_params(bad)
    with pytest.raises(ValueError, match="has no parameter"):
        kind.check_params({"epoch": 3.0})


def test_describe_transactions_asks_for_one_id_and_reads_its_state():
    from kchaos.protocol.raw_init import describe_transactions_request, parse_describe_transactions_response

    body = _body(describe_transactions_request(4, "kchaos-ab-w0"))
    header = parse_request_header(body)
    assert (header.api_key, header.api_version, header.correlation_id) == (65, 0, 4)
    assert body[header.body_at:] == Writer().uvarint(2).compact_string("kchaos-ab-w0").no_tagged_fields().bytes()
    answer = (Writer().int32(4).no_tagged_fields().int32(0).uvarint(2).int16(0).compact_string("kchaos-ab-w0")
              .compact_string("Ongoing").int32(6000).int64(1795640000000).int64(2000).int16(32766)
              .uvarint(1).no_tagged_fields().no_tagged_fields().bytes())
    assert parse_describe_transactions_response(answer) == (4, "NONE", "Ongoing", 2000, 32766)


def test_ctrl_c_during_the_ageing_stops_its_threads_instead_of_waiting_for_them(tmp_path):
    """A first Ctrl-C during setup aborts the run; the ageing's threads must stop with it, not
    keep the run waiting until every id is aged (minutes). The brokers here answer nothing (a
    closed port), so without the stop each thread would retry until its 120 s deadline."""
    import os
    import signal
    import socket
    import threading
    import time

    import pytest

    from kchaos.workloads.epoch_ageing import age_transactional_ids
    from kchaos.workloads.history import HistoryWriter

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    history = HistoryWriter(tmp_path / "harness.jsonl", "harness")
    # Python's own Ctrl-C (KeyboardInterrupt), as during a run's setup: not whatever handler an
    # earlier test of this process left behind (one made the signal set a flag, and the ageing
    # then ran to its deadline)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()  # a real signal, as Ctrl-C sends
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            age_transactional_ids([("127.0.0.1", closed)], ["tx-a", "tx-b"], 100, 1000, history, timeout_s=120)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 60
    assert not [t for t in threading.enumerate() if t.name.startswith("kchaos-age")]
