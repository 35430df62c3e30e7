"""A hanging transaction on a real broker, on purpose (the ``orphan-transaction`` fault,
faults/kinds/transactions.py): a transactional batch no coordinator knows, written to an output
partition's leader, pins the partition's last stable offset as a Produce delayed past its
transaction's end does (KIP-664, KAFKA-9144). The hanging-transaction check names it with the
producer the leader tracks, and KIP-664's recovery (``faults.recover_hanging``) aborts it so the
partition and its readers move on. Partition verification (KIP-890 part 1) must be off for the
batch to land: with it on, as on the shared cluster, the leader refuses it."""

from __future__ import annotations

import json

import pytest

from kchaos.faults.base import FaultContext
from kchaos.faults.kinds import make_fault
from kchaos.faults.schedule import ScheduledFault
from kchaos.reports.run_report import render_run_report
from kchaos.workloads.spec import ObserverSpec

from .conftest import restore, start_local
from .test_workload import Harness, _spec, committed, wait_for_history


def _orphan(cluster, workload, seed: int = 1):
    return make_fault(ScheduledFault(0, 0.0, "orphan-transaction", "leader-output", 1.0, seed, {}),
                      FaultContext(cluster, workload))


@pytest.fixture(scope="module")
def unverified(tmp_path_factory):
    cluster = start_local(tmp_path_factory.mktemp("unverified"), nodes=1,
                          broker={"transaction.partition.verification.enable": "false"})
    yield cluster
    cluster.stop()


def test_an_orphan_transaction_hangs_a_partition_is_named_and_recovered(unverified, tmp_path):
    spec = _spec(records=400, rate=1000, transaction_timeout_ms=5000)
    h = Harness(unverified, tmp_path, spec, observers=ObserverSpec(count=1, catch_up_s=30))
    try:
        wait_for_history(h, "w*", committed)
        orphan = _orphan(unverified, h.workload).invoke()
        assert orphan["detail"]["answer"] == "NONE" and orphan["detail"]["offset"] >= 0, orphan
        results = h.finish(liveness_timeout_s=15, recover_hanging=True)
    finally:
        h.workload.close()
    partition = f"{orphan['detail']['topic']}-{orphan['detail']['partition']}"
    assert results["verdict"] == "invalid" and results["anomaly_types"] == ["hanging-transaction"], \
        json.dumps(results["checks"], indent=1)
    [case] = results["anomalies"]["hanging-transaction"]
    assert case["partition"] == partition and case["lso"] == orphan["detail"]["offset"]
    # what the leader tracks: the workers' producers, none open, and the orphan, open since its offset
    [producer] = [p for p in case["partition_producers"] if p["CurrentTransactionStartOffset"].isdigit()]
    assert int(producer["ProducerId"]) == orphan["detail"]["producer_id"]
    assert int(producer["CurrentTransactionStartOffset"]) == orphan["detail"]["offset"]
    assert [(a["start_offset"], a["outcome"]) for a in case["recovery"]] == [(orphan["detail"]["offset"], "aborted")]
    assert case["recovered"] is True
    final = h.run.read_json("final.json")
    assert final["recovery"]["recovered"] is True and final["liveness"]["stable"] is False
    # after the abort, the pipeline's outputs behind the orphan are readable again: the observer
    # got to the end, and every committed record was read once, in order
    assert final["observers"]["observers"][0]["caught_up"] is True
    assert {results["checks"][name]["verdict"] for name in ("unseen", "poll-skip", "lost-write")} == {"valid"}
    html = render_run_report(h.run.path).read_text()
    assert 'id="recovery"' in html and "the pinned partitions moved on" in html


def test_partition_verification_refuses_the_orphan(cluster3, tmp_path):
    """KIP-890 part 1 on (the default): the leader asks the coordinator, which knows no such
    producer, and refuses the batch: INVALID_PRODUCER_ID_MAPPING (the coordinator had no such
    transactional id), or NOT_ENOUGH_REPLICAS (what Produce v3 gets when the coordinator could not
    answer yet: the leader maps coordinator errors to a retriable one old clients know). Both
    seen on this cluster; either way nothing is appended."""
    restore(cluster3)
    spec = _spec(records=10)
    h = Harness(cluster3, tmp_path, spec)
    try:
        orphan = _orphan(cluster3, h.workload).invoke()
    finally:
        h.workload.close()
    assert orphan["detail"]["answer"] in ("INVALID_PRODUCER_ID_MAPPING", "NOT_ENOUGH_REPLICAS"), orphan
    assert orphan["detail"]["offset"] == -1
