"""Clock faults on a real broker (faults/kinds/clock.py): the broker's own stamps follow the
moved clock (a LogAppendTime record, through the clock probe), heal sets it true, and Kafka acts
on it: a transaction that a clock bump ages past its timeout is aborted by its coordinator."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaException, Producer

from kchaos.clusters.clients import create_topic, quiet
from kchaos.clusters.clock_probe import measure_broker_clocks
from kchaos.faults.base import FaultContext
from kchaos.faults.kinds import make_fault
from kchaos.faults.schedule import ScheduledFault
from kchaos.protocol.raw_init import CoordinatorConnection
from kchaos.waiting import wait_until
from kchaos.workloads.spec import WorkloadSpec

from .conftest import start_local

TOLERANCE_MS = 1500  # the probe's round trip and the library's one-second re-read


@pytest.fixture(scope="module")
def one_broker(tmp_path_factory):
    cluster = start_local(tmp_path_factory.mktemp("clock"), nodes=1, clock_control=True, proxy_clients=False,
                          proxy_internal=False)
    yield cluster
    cluster.stop()


_USED: list = []  # the broker, once a test had it


@pytest.fixture
def clock_cluster(one_broker):
    """The module's broker, restarted before every test but its first: a clock that was ahead
    leaves the broker's connection stamps in the future, which cut it from its controller until the
    true clock reaches them (F9; in CI the next test's topic creation timed out while the broker
    was fenced), and a new JVM starts without them."""
    if _USED:
        one_broker.nodes[0].restart()
        one_broker.wait_healthy(120)
    _USED.append(one_broker)
    return one_broker


def _fault(kind, ctx, params, target="random"):
    return make_fault(ScheduledFault(0, 0.0, kind, target, 5.0, 1, params), ctx)


def _offset_ms(cluster) -> float:
    return measure_broker_clocks(cluster, samples=3)["brokers"]["1"]["offset_ms"]


def _measured(result) -> float:
    assert result["measured_offset_ms"]["applied"], result
    return result["measured_offset_ms"]["1"]["offset_ms"]


def test_a_bump_moves_the_brokers_own_stamps_and_heal_sets_them_true(clock_cluster):
    ctx = FaultContext(clock_cluster)
    assert abs(_offset_ms(clock_cluster)) < TOLERANCE_MS
    fault = _fault("clock-bump", ctx, {"offset_s": 3600})
    assert abs(_measured(fault.invoke()["detail"]) - 3_600_000) < TOLERANCE_MS
    healed = fault.heal()
    assert healed["offset_range_s"] == [3600.0, 3600.0]
    assert abs(_measured(healed)) < TOLERANCE_MS
    back = _fault("clock-bump", ctx, {"offset_s": -120})  # and backwards
    assert abs(_measured(back.invoke()["detail"]) + 120_000) < TOLERANCE_MS
    assert abs(_measured(back.heal())) < TOLERANCE_MS


def test_strobe_flips_and_drift_gains(clock_cluster):
    ctx = FaultContext(clock_cluster)
    strobe = _fault("clock-strobe", ctx, {"delta_s": -30, "period_s": 3.0})
    assert strobe.invoke()["detail"]["measured_offset_ms"]["applied"]  # its off half seen on the broker
    seen = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not {"off", "true"} <= set(seen):
        offset = _offset_ms(clock_cluster)
        seen.append("off" if abs(offset + 30_000) < TOLERANCE_MS else "true" if abs(offset) < TOLERANCE_MS else
                    f"{offset:.0f}")  # a probe across a flip
    strobe.heal()
    assert {"off", "true"} <= set(seen), seen
    drift = _fault("clock-drift", ctx, {"rate": 2.0})
    measured = drift.invoke()["detail"]["measured_offset_ms"]
    assert measured["applied"], measured  # under way: at least half a second ahead
    first = measured["1"]["offset_ms"]
    # gaining two seconds a second, in one-second steps that the broker reads up to ~3 s late
    # under load: wait for it to gain three more, not a fixed time
    seen: list[float] = []
    wait_until(lambda: seen.append(_offset_ms(clock_cluster)) or seen[-1] > first + 3000, 30, 0.5,
               f"the drifting clock did not gain 3 s on {first:.0f} ms: {seen}")
    assert drift.heal()["offset_range_s"][1] >= seen[-1] / 1000 - 1


def test_a_bump_on_the_coordinator_times_its_open_transaction_out(clock_cluster):
    tag = uuid.uuid4().hex[:6]
    spec = WorkloadSpec(input_topic=f"in-{tag}", output_topics=(f"out-{tag}",), group_id=f"g-{tag}", workers=1,
                        input_partitions=1)
    create_topic(clock_cluster, spec.output_topics[0], 1, 1)
    ctx = FaultContext(clock_cluster, SimpleNamespace(spec=spec, txid_prefix=f"tx-{tag}", pool=None))
    txid = spec.transactional_ids(f"tx-{tag}")[0]
    producer = Producer(quiet({**clock_cluster.client_config(), "transactional.id": txid,
                               "transaction.timeout.ms": 60_000}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(spec.output_topics[0], b"v")
    producer.flush(10)
    fault = _fault("clock-bump", ctx, {"offset_s": 600}, target="txn-coordinator")
    fault.invoke()
    try:
        # the coordinator now sees a transaction 10 minutes old: its next sweep (every 5 s here)
        # aborts it, which DescribeTransactions shows
        broker = clock_cluster.admin().list_topics(timeout=10).brokers[1]
        with CoordinatorConnection(broker.host, broker.port) as coordinator:
            assert coordinator.describe(txid)[1] == "Ongoing"
            wait_until(lambda: coordinator.describe(txid)[1] in ("PrepareAbort", "CompleteAbort"), 30, 0.2,
                       "the coordinator did not time the transaction out after its clock moved 10 minutes on")
        with pytest.raises(KafkaException) as failed:
            producer.commit_transaction(20)
        text = str(failed.value)
        assert any(word in text for word in ("fenced", "Fenced", "epoch", "abort", "INVALID")), text
    finally:
        fault.heal()
