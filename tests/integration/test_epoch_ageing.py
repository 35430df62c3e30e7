"""Epoch ageing against real brokers: InitProducerId bumps an id's epoch to its target, and an id
aged to the boundary moves to a new producer id with epoch 0, which the verifier's rules read
from the coordinator's own log as one legal rotation."""

from __future__ import annotations

import json
import uuid

import pyarrow.parquet as pq
import pytest

from kchaos.protocol.decoders import decode_transaction_record
from kchaos.protocol.raw_init import CoordinatorConnection, find_coordinator
from kchaos.verifier.coordinator_log import coordinator_records
from kchaos.verifier.producer_ids import judge_producer_ids, producer_id_candidates
from kchaos.workloads.dump import dump_topic
from kchaos.workloads.epoch_ageing import EXHAUSTED_EPOCH, age_transactional_ids
from kchaos.workloads.history import HistoryWriter
from tests.integration.conftest import start_local


def _brokers(cluster) -> list[tuple[str, int]]:
    return [(b.host, b.port) for b in cluster.admin().list_topics(timeout=30).brokers.values()]


def _init_once(cluster, txid: str) -> tuple[str, int, int]:
    host, port = _brokers(cluster)[0]
    error, _, host, port = find_coordinator(host, port, txid)
    assert error == "NONE"
    with CoordinatorConnection(host, port) as conn:
        return conn.init(txid, 6000)


def test_ageing_bumps_each_id_to_its_staggered_target_and_records_it(cluster3, tmp_path):
    txids = [f"age-{uuid.uuid4().hex[:6]}-w{i}" for i in range(2)]
    history = HistoryWriter(tmp_path / "harness.jsonl", "harness")
    reached = age_transactional_ids(_brokers(cluster3), txids, 32_000, 6000, history)
    history.close()
    # the first id left 32000 bumps (epoch 766), the second 64000: as far back as epoch 0 goes
    assert [(r["txid"], r["epoch"]) for r in reached] == [(txids[0], 766), (txids[1], 0)]
    assert reached[0]["inits"] >= 767 and reached[1]["inits"] >= 1  # requests, a retried one included
    ops = [json.loads(line) for line in (tmp_path / "harness.jsonl").read_text().splitlines()]
    assert [(o["f"], o["type"]) for o in ops].count(("age-epoch", "ok")) == 2
    done = {o["value"]["txid"]: o["value"] for o in ops if o["type"] == "ok"}
    assert done[txids[0]]["producer_id"] == reached[0]["producer_id"] and done[txids[0]]["target_epoch"] == 766
    # the coordinator kept it: the next InitProducerId bumps once more, on the same producer id
    assert _init_once(cluster3, txids[0]) == ("NONE", reached[0]["producer_id"], 767)


@pytest.mark.long  # 32,767 InitProducerIds (about 40 s here) on a cluster of its own, not the shared one
def test_an_id_aged_to_the_boundary_rotates_and_the_verifier_counts_one_rotation(tmp_path):
    cluster = start_local(tmp_path / "cluster", nodes=3)
    try:
        txid = f"age-{uuid.uuid4().hex[:6]}-w0"
        history = HistoryWriter(tmp_path / "harness.jsonl", "harness")
        (reached,) = age_transactional_ids(_brokers(cluster), [txid], 0, 6000, history)
        history.close()
        assert reached["epoch"] == EXHAUSTED_EPOCH
        error, producer_id, epoch = _init_once(cluster, txid)
        assert (error, epoch) == ("NONE", 0) and producer_id != reached["producer_id"]
        dump_topic(cluster.client_config(), cluster.admin(), "__transaction_state", "raw", tmp_path)
        rows = pq.read_table(tmp_path / "__transaction_state.raw.parquet").to_pylist()
        decoded = [{"partition": r["partition"], "offset": r["offset"],
                    "entry": decode_transaction_record(r["key"], r["value"])} for r in rows]
        records = [r for r in coordinator_records([d for d in decoded if d["entry"] is not None])
                   if r["transactional_id"] == txid]
        assert len(records) == EXHAUSTED_EPOCH + 2  # one Empty record per InitProducerId
        cases, facts = judge_producer_ids(*producer_id_candidates(records))
        assert cases == []
        assert facts["epoch_rollovers"] == 1 and facts["max_epoch"] == EXHAUSTED_EPOCH
        (rotation,) = facts["rotations"]
        assert (rotation["from_pid"], rotation["to_pid"], rotation["via"]) == (
            reached["producer_id"], producer_id, "Empty -> Empty")
    finally:
        cluster.stop()


def test_an_epoch_jump_catches_the_next_transaction_and_initialises_during_it(cluster3):
    """The epoch-jump fault (faults/kinds/transactions.py) on a real broker: its first
    InitProducerId meets an open transaction (the coordinator fences and aborts it) and the jump
    goes on to its target; then a new instance of the producer begins a transaction, and the
    fault, watching the coordinator, sends one more InitProducerId while it is ongoing: that
    transaction cannot commit."""
    import threading
    from types import SimpleNamespace

    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import NewTopic

    from kchaos.faults.base import FaultContext
    from kchaos.faults.kinds import make_fault
    from kchaos.faults.schedule import ScheduledFault
    from kchaos.waiting import wait_until
    from kchaos.workloads.spec import WorkloadSpec

    prefix = f"jump-{uuid.uuid4().hex[:6]}"
    topic, txid = f"{prefix}-out", f"{prefix}-w0"
    cluster3.admin().create_topics([NewTopic(topic, 1, 3)])[topic].result()

    def producer() -> Producer:
        p = Producer({"bootstrap.servers": cluster3.bootstrap_servers, "transactional.id": txid, "log_level": 0})
        p.init_transactions(30)
        return p

    first = producer()
    first.begin_transaction()
    first.produce(topic, b"open while the epoch jumps")
    first.flush(10)
    workload = SimpleNamespace(spec=WorkloadSpec(workers=1, transaction_timeout_ms=20_000), txid_prefix=prefix)
    fault = make_fault(ScheduledFault(0, 0.0, "epoch-jump", "random-worker", 5.0, 1,
                                      {"epochs_before_rollover": 32_000.0, "catch_within_ms": 60_000.0}),
                       FaultContext(cluster3, workload))
    resolved: dict = {}
    jumper = threading.Thread(target=lambda: resolved.update(fault.invoke()))
    jumper.start()
    host, port = _brokers(cluster3)[0]
    _, _, host, port = find_coordinator(host, port, txid)
    with CoordinatorConnection(host, port) as conn:  # the jump done: the id idle at epoch 766
        wait_until(lambda: conn.describe(txid)[1:4:2] == ("Empty", 766), 30, 0.05, "the jump to epoch 766")
    second = producer()  # a new instance: epoch 767
    second.begin_transaction()
    second.produce(topic, b"begun at the new epoch")
    try:  # the fault acts the moment the transaction is Ongoing, which can be before this produce lands
        second.flush(10)
    except KafkaException as fenced:
        assert fenced.args[0].code() == KafkaError._FENCED, fenced
    jumper.join(90)
    assert resolved, "the fault did not finish within 90 s"
    detail = resolved["detail"]
    assert detail["transactional_id"] == txid and detail["epoch"] == 766, detail
    assert detail["then_init"]["during"]["state"] == "Ongoing" and detail["then_init"]["during"]["epoch"] == 767, detail
    assert detail["then_init"]["error"] in ("NONE", "CONCURRENT_TRANSACTIONS"), detail
    with pytest.raises(KafkaException):
        second.commit_transaction(30)  # its transaction was fenced under it
    with pytest.raises(KafkaException):
        first.commit_transaction(10)  # fenced by the jump
