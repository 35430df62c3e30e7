"""Mutations on real topic data: a clean run, then exactly one anomaly written into the real
topics (or the group's offsets), re-read, and the checker must name that anomaly and no other.

(lost-write, zombie-write and invalid-txn-transition need a lying client history or a corrupted
coordinator log, which a correct cluster cannot be made to produce; they are injected on
hand-made data in tests/unit/test_pychecker.py.)
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kchaos.clusters.clients import quiet
from kchaos.waiting import wait_until
from kchaos.workloads.lineage import Lineage, input_id, input_value

from .conftest import FAST_ISR, restore, start_local
from .test_workload import Harness, _spec


@pytest.fixture(scope="module")
def _mutations_cluster(tmp_path_factory):
    """A 3-node cluster of this module's own, so that its tests run in the other pytest worker
    than the shared cluster's (tests/conftest.py): that worker was the longer half of `make test`
    (2026-12-02), and a cluster's start costs less than these tests there."""
    cluster = start_local(tmp_path_factory.mktemp("mutations"), nodes=3, broker=FAST_ISR)
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster3(_mutations_cluster):
    """The module's cluster, healthy at the start of each test (as the shared one is)."""
    restore(_mutations_cluster)
    return _mutations_cluster


def _clean_run(cluster, tmp_path):
    h = Harness(cluster, tmp_path, _spec(records=400, rate=2000, abort_fraction=0.0))
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    return h


def _recheck(h, liveness_timeout_s: float | None = None, engine: str = "python") -> dict:
    """Re-read every topic and the group's offsets after a mutation, then check again. With
    ``engine="spark"`` the Spark job re-reads the topics through Kafka and the Python checker
    must agree. The mutations here use the Python checker: the Spark engine names every anomaly
    on hand-made data (test_checkers_spark.py) and on a stored real run's corruptions
    (test_corruptions.py), and reads real topics through Kafka in test_cli's end-to-end run; a
    Spark job costs ~20 s more a test here."""
    final = h.workload.final_reads(liveness_timeout_s)
    final["drained"] = True
    h.run.write_json("final.json", final)
    h.verify(engine)
    results = h.run.read_json("results.json")
    assert results["checker"] == engine
    if engine == "spark":
        assert results["cross_check"]["agrees"], results.get("cross_check")
    return results


def _txn_producer(cluster, txid):
    p = Producer(quiet({**cluster.client_config(), "transactional.id": txid}))
    p.init_transactions(60)
    return p


def _seed_input(cluster, h, index: int, commit: bool = True) -> tuple[int, int]:
    """Write one more input (index beyond the seeded ones); returns its (partition, offset)."""
    p = _txn_producer(cluster, f"{h.workload.txid_prefix}-mutator-in")
    where = []
    p.begin_transaction()
    p.produce(h.workload.spec.input_topic, key=input_id(99, index).encode(), value=input_value(99, index), partition=0,
              on_delivery=lambda err, msg: where.append((msg.partition(), msg.offset())))
    p.flush(30)
    (p.commit_transaction if commit else p.abort_transaction)(60)
    return where[0]


def _write_outputs(cluster, h, partition: int, offset: int, slots: list[int], index: int) -> None:
    """Outputs of the input ``_seed_input`` wrote as its ``index``-th (their lineage names its id)."""
    spec = h.workload.spec
    p = _txn_producer(cluster, f"{h.workload.txid_prefix}-mutator-out")
    p.begin_transaction()
    for slot in slots:
        lineage = Lineage(input_id(99, index), spec.input_topic, partition, offset, slot, spec.outputs_per_input,
                          "mutator", 1, f"{h.workload.txid_prefix}-mutator-out", 1)
        p.produce(spec.output_topics[slot % len(spec.output_topics)], key=b"mut", value=lineage.encode())
    p.commit_transaction(60)


def _commit_group_offset(cluster, h, partition: int, offset: int) -> None:
    """Commit as a simple (member-less) consumer, which the coordinator accepts only once the
    group is empty. A worker's LeaveGroup can miss a coordinator that just moved (a preferred
    leader election on the shared cluster): that member then lingers until its session times
    out, and a commit made meanwhile is refused (CI: UNKNOWN_MEMBER_ID)."""
    group = h.workload.spec.group_id
    admin = cluster.admin()
    wait_until(lambda: not admin.describe_consumer_groups([group])[group].result(10).members, 60, 0.5,
               f"group {group} still had members", retry_on=(KafkaException,))
    c = Consumer(quiet({**cluster.client_config(), "group.id": group}))
    try:
        done = c.commit(offsets=[TopicPartition(h.workload.spec.input_topic, partition, offset)], asynchronous=False)
    finally:
        c.close()
    assert [tp.error for tp in done] == [None], done


def _only(results: dict, anomaly: str, committed: tuple[int, int] | None = None) -> None:
    """``anomaly`` alone; with ``committed``, the (partition, offset) the test committed for the
    group itself, which no transaction of the history sent: stray-offset-commit names it too.
    (Where the mutator also wrote outputs, its process has no history, so what it may have sent
    is not known: stray-offset-commit is not checked, a gap.)"""
    assert results["verdict"] == "invalid", json.dumps(results["checks"], indent=1)
    expected = sorted([anomaly, "stray-offset-commit"]) if committed else [anomaly]
    assert results["anomaly_types"] == expected, json.dumps(results["checks"], indent=1)
    if committed:
        [stray] = results["anomalies"]["stray-offset-commit"]
        p, o = committed
        assert f"/{p} at {o}, an offset no transaction of the history sent" in stray["explanation"], stray


def test_duplicate_output_is_named(cluster3, tmp_path):
    h = _clean_run(cluster3, tmp_path)
    spec = h.workload.spec
    # copy one committed output record, committed again in a transaction of its own
    reader = Consumer(quiet({**cluster3.client_config(), "group.id": "mut-reader", "isolation.level": "read_committed",
                             "auto.offset.reset": "earliest"}))
    reader.assign([TopicPartition(spec.output_topics[0], 0, 0)])
    msg = None
    while msg is None or msg.error():
        msg = reader.poll(5)
    reader.close()
    p = _txn_producer(cluster3, f"{h.workload.txid_prefix}-mutator-dup")
    p.begin_transaction()
    p.produce(spec.output_topics[0], key=msg.key(), value=msg.value())
    p.commit_transaction(60)
    results = _recheck(h)
    _only(results, "duplicate")
    assert results["anomalies"]["duplicate"][0]["records"][0]["in_offset"] == json.loads(msg.value())["in_offset"]


def test_output_pair_missing_one_slot_is_a_torn_transaction(cluster3, tmp_path):
    h = _clean_run(cluster3, tmp_path)
    p, o = _seed_input(cluster3, h, 10_000)
    _write_outputs(cluster3, h, p, o, slots=[0], index=10_000)  # slot 1 of 2 never written
    _commit_group_offset(cluster3, h, p, o + 1)   # the pipeline moved past it
    _only(_recheck(h), "torn-transaction")


def test_offset_committed_past_unprocessed_input_is_offsets_ahead(cluster3, tmp_path):
    h = _clean_run(cluster3, tmp_path)
    p, o = _seed_input(cluster3, h, 10_001)
    _commit_group_offset(cluster3, h, p, o + 1)
    results = _recheck(h)
    _only(results, "offsets-ahead", (p, o + 1))
    assert results["anomalies"]["offsets-ahead"][0]["input"]["offset"] == o


def test_output_of_an_aborted_input_is_an_aborted_read(cluster3, tmp_path):
    h = _clean_run(cluster3, tmp_path)
    p, o = _seed_input(cluster3, h, 10_002, commit=False)  # in the raw view only
    _write_outputs(cluster3, h, p, o, slots=[0, 1], index=10_002)
    _commit_group_offset(cluster3, h, p, o + 1)
    results = _recheck(h)
    _only(results, "aborted-read")
    assert results["anomalies"]["aborted-read"][0]["input"]["offset"] == o


def test_group_offset_moved_back_is_offsets_behind_and_backwards(cluster3, tmp_path):
    """The final offset is behind committed outputs, and the offsets log shows the move itself."""
    h = _clean_run(cluster3, tmp_path)
    committed = h.workload.committed_offsets()
    partition = max(committed, key=lambda k: committed[k])
    _commit_group_offset(cluster3, h, partition, committed[partition] - 5)
    results = _recheck(h)
    # no transaction sent that offset: stray-offset-commit names the move too
    assert results["anomaly_types"] == ["offsets-backwards", "offsets-behind", "stray-offset-commit"], \
        json.dumps(results["checks"], indent=1)
    assert (f"moved back from {committed[partition]} to {committed[partition] - 5}"
            in results["anomalies"]["offsets-backwards"][0]["explanation"])


def test_transaction_left_open_is_a_hanging_transaction(cluster3, tmp_path):
    h = _clean_run(cluster3, tmp_path)
    p = Producer(quiet({**cluster3.client_config(), "transactional.id": f"{h.workload.txid_prefix}-mutator-open",
                        "transaction.timeout.ms": 120000}))
    p.init_transactions(60)
    spec = h.workload.spec
    lineage = Lineage("open", spec.input_topic, 0, 0, 0, spec.outputs_per_input, "mutator", 1,
                      f"{h.workload.txid_prefix}-mutator-open", 1)
    p.begin_transaction()
    p.produce(spec.output_topics[0], key=b"open", value=lineage.encode(), partition=0)
    p.flush(30)
    try:
        results = _recheck(h, liveness_timeout_s=3)  # judge after 3 s instead of 2 x the timeout + 30 s
    finally:
        p.abort_transaction(60)
    _only(results, "hanging-transaction")
    case = results["anomalies"]["hanging-transaction"][0]
    assert case["lso"] < case["high"]
    assert any(t["transactional_id"].endswith("mutator-open") for t in case["open_transactions"])
    # the brokers' own view: the coordinator lists it as ongoing, the partition leader tracks
    # the open producer (KIP-664 list / describe-producers)
    assert any(t["TransactionalId"].endswith("mutator-open") and t["TransactionState"] == "Ongoing"
               for t in case["broker_transactions"]), case["broker_transactions"]
    assert isinstance(case["partition_producers"], list) and case["partition_producers"], case["partition_producers"]


def test_outputs_committed_out_of_input_order_are_nonmonotonic(cluster3, tmp_path):
    h = _clean_run(cluster3, tmp_path)
    first = _seed_input(cluster3, h, 10_003)
    second = _seed_input(cluster3, h, 10_004)
    assert first[0] == second[0] and second[1] > first[1]
    # both inputs fully processed, offsets committed past them, but the later input's outputs
    # were committed first: same output partitions (same key), first appearance out of order
    _write_outputs(cluster3, h, *second, slots=[0, 1], index=10_004)
    _write_outputs(cluster3, h, *first, slots=[0, 1], index=10_003)
    _commit_group_offset(cluster3, h, second[0], second[1] + 1)
    results = _recheck(h)
    _only(results, "nonmonotonic")
    case = results["anomalies"]["nonmonotonic"][0]
    assert [r["in_offset"] for r in case["records"]] == [second[1], first[1]]
